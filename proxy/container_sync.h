// container_sync: the proxy's half of container sync (Swift's container_sync middleware).
//
// - It accepts the requests another cluster's (or this cluster's) container-sync daemon sends:
//   a request with `X-Container-Sync-Auth: <realm> <nonce> <sig>` is let through without a
//   token when <sig> is the HMAC-SHA1 (common/container_sync_realms.h) of its method, quoted
//   path, X-Timestamp and nonce under the realm's key (or key2) and the container's
//   X-Container-Sync-Key. Such a request keeps its X-Timestamp (which gatekeeper set aside as
//   X-Backend-Inbound-X-Timestamp), so what it writes carries the source's time; SLO takes its
//   manifest as it is and symlink trusts its static links' ETag and size (ProxyEnv's
//   slo_override and symlink_override), since the source already checked them. Anything else
//   with that header answers 401.
// - It refuses X-Container-Sync-To on a container with object versioning, and full URLs there
//   when allow_full_urls is false (400).
// - /info gets "container_sync": {"realms": {REALM: {"clusters": {CLUSTER: {}}}}}, read again
//   on every /info request, the current cluster (option `current`) marked "current": true.
//
// Options: swift_dir (the realms file is <swift_dir>/container-sync-realms.conf; default
// /etc/swift), allow_full_urls (default true), current (//REALM/CLUSTER; a value that is not two
// names, or names no cluster of the realms file, is logged as an error and marks nothing).
//
// Thread-safe: the middleware keeps its options and a ContainerSyncRealms, which is.
#pragma once

#include <memory>

#include "common/config/config.h"
#include "common/status.h"
#include "proxy/pipeline.h"

namespace apus::proxy {

common::Result<std::unique_ptr<Middleware>> make_container_sync(const common::Section& section,
                                                                const MiddlewareContext& context);

}  // namespace apus::proxy
