// Container sync's realms (Swift's container-sync-realms.conf) and the checks both ends of a
// sync make with them.
//
// The file names realms, each a section with two shared secrets (`key`, `key2`) and the
// clusters in it (`cluster_<name> = <endpoint URL>`); names compare upper-cased, as Swift
// stores them. A container syncs to `//<realm>/<cluster>/<account>/<container>` (or, where
// allowed, to a full URL), and each request the sync sends carries
// `X-Container-Sync-Auth: <realm> <nonce> <sig>`, an HMAC-SHA1 over the request under the
// realm's key and the container's own X-Container-Sync-Key.
//
// ContainerSyncRealms rereads the file when its mtime changed, looking at most every
// `mtime_check_interval` seconds ([DEFAULT], 300 by default), as Swift does; a file that
// cannot be read or parsed leaves the realms it had. Thread-safe: every method may be called
// from any thread (one mutex, held for a stat and a pointer copy).
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/thread_annotations.h"

namespace apus::common {

class ContainerSyncRealms {
 public:
  struct Realm {
    std::string key;
    std::string key2;
    std::map<std::string, std::string> clusters;  // upper-cased name -> endpoint URL
  };
  using Realms = std::map<std::string, Realm>;  // upper-cased name -> realm

  // Reads `conf_path` now (a missing file is no realms).
  explicit ContainerSyncRealms(std::string conf_path);

  // The realms as of the latest look at the file.
  std::shared_ptr<const Realms> realms();
  // The realm's keys (nullopt when the realm is unknown or the key unset or empty) and a
  // cluster's endpoint; `realm` and `cluster` in any case.
  std::optional<std::string> key(std::string_view realm);
  std::optional<std::string> key2(std::string_view realm);
  std::optional<std::string> endpoint(std::string_view realm, std::string_view cluster);

 private:
  void reload_if_due() APUS_REQUIRES(mutex_);

  const std::string path_;
  Mutex mutex_;
  std::shared_ptr<const Realms> realms_ APUS_GUARDED_BY(mutex_);
  std::chrono::steady_clock::time_point next_check_ APUS_GUARDED_BY(mutex_);
  double check_interval_ APUS_GUARDED_BY(mutex_) = 300;
  int64_t mtime_ns_ APUS_GUARDED_BY(mutex_) = 0;
};

// Swift's get_sig(): the hex HMAC-SHA1 under `realm_key` of
// "<method>\n<path>\n<x_timestamp>\n<nonce>\n<user_key>", `path` url-encoded as sent.
std::string container_sync_sig(std::string_view method, std::string_view path,
                               std::string_view x_timestamp, std::string_view nonce,
                               std::string_view realm_key, std::string_view user_key);

// Where an X-Container-Sync-To value says to sync to.
struct SyncTarget {
  std::string endpoint;   // "<cluster endpoint>/<account>/<container>", or the full URL
  std::string realm;      // upper-cased; empty for a full URL
  std::string realm_key;  // empty for a full URL
};
struct SyncToCheck {
  std::optional<std::string> error;  // Swift's message when the value is not allowed
  std::optional<SyncTarget> target;  // nullopt for an empty value (no sync), or on error
};
// Swift's validate_sync_to(): a realm form resolved through `realms`, or a full http(s) URL
// whose host is in `allowed_hosts` (without params, query or fragment). A realm form with no
// `realms` at all is neither an error nor a target, as in Swift.
SyncToCheck validate_sync_to(std::string_view value, const std::vector<std::string>& allowed_hosts,
                             ContainerSyncRealms* realms);

// Python's repr() of a str, for the messages Swift formats with %r.
std::string py_repr(std::string_view s);

}  // namespace apus::common
