// Recon: Swift's recon middleware (`egg:swift#recon` in a storage server's pipeline), so that
// Swift's swift-recon works against Apus's object, container and account servers unchanged.
// GET (or any method) on /recon/<check>[/<type>] answers with JSON, as Swift 2.30.1's:
//   mem, load, sockstat, mounted, time, version     the host (/proc, the clock)
//   devices, unmounted, diskusage, quarantined      the `devices` directory and its mounts
//   ringmd5, swiftconfmd5                           MD5s of the rings and swift.conf
//   async, replication[/account|container|object], updater/container|object,
//   auditor/account|container|object, expirer/object, reconstruction/object, sharding,
//   driveaudit, relinker                            keys of the daemons' recon cache files
//                                                   (common/recon_cache.h) in recon_cache_path
// Anything else under /recon/ is a 404 "Invalid path: <path>"; a check whose data cannot be
// read answers null values (recon cache) or a 500, as Swift.
//
// swiftconfmd5 answers under the name swift-recon looks up (/etc/swift/swift.conf) with the sum
// of the swift.conf this server reads (in swift_dir).
//
// Safer than Swift: a quarantine directory of an unknown kind is left out (Swift answers 500),
// and /proc lines of an unexpected shape are skipped instead of failing the whole answer.
//
// Thread-safe: answer() only reads files; it blocks (call it off the event loop).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/config/config.h"
#include "common/http/server.h"
#include "common/status.h"

namespace apus::common {

struct ReconConfig {
  std::string devices = "/srv/node";
  std::string swift_dir = "/etc/swift";
  std::string recon_cache_path = "/var/cache/swift";
  std::vector<std::string> ring_files;  // account, container and every policy's object ring
  std::string version;                  // what /recon/version says

  // The recon filter of a storage server's config: nullopt when [pipeline:main] has no filter
  // whose `use` is egg:swift#recon. Its options come from that filter's section (DEFAULT
  // inherited), the ring names from swift.conf's policies. `version` is the Swift version the
  // server speaks.
  static Result<std::optional<ReconConfig>> from_config(const Config& conf, std::string version);
};

// A storage server's request handler with recon in front (Swift's pipeline `recon <app>`):
// /recon/ requests are answered on a one-thread blocking pool of recon's own, any other goes to
// `inner`. Without a recon filter (`recon` nullopt), `inner` itself.
http::Handler with_recon(std::optional<ReconConfig> recon, http::Handler inner);

class Recon {
 public:
  explicit Recon(ReconConfig config) : config_(std::move(config)) {}

  // Whether the request is recon's (its decoded path starts with /recon/).
  static bool is_recon_path(std::string_view path) { return path.starts_with("/recon/"); }

  // The answer to `path` (decoded, starting with /recon/). Blocking.
  http::Response answer(std::string_view path) const;

 private:
  ReconConfig config_;
};

}  // namespace apus::common
