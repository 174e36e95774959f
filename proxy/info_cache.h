// InfoCache: account and container info as Swift's proxies cache it (get_account_info(),
// get_container_info(), set_info_cache()). With memcached, the entries live there under
// "account/<a>" and "container/<a>/<c>" as Swift's JSON info dicts, so every proxy (Apus or
// Swift) on the same memcached sees them, and a container PUT, POST or DELETE at one proxy is
// seen by all at once. Without memcached they live in this process, at most `max_entries` of
// them: the least recently used goes first (anonymous requests for random names would
// otherwise grow the cache without bound), and an expired entry goes when it is next looked
// up.
//
// With memcached, this process also keeps what it read or wrote there for `local_ttl` seconds
// (a second by default, Apus's local_info_cache_ttl), so a hot container costs no memcached
// round trip per request. What that adds to Swift's contract: a change made through another
// proxy process (a container POST there, a DELETE) is seen here up to local_ttl later, where
// Swift's proxies see it at their next memcached read. Swift already serves infos up to
// recheck_*_existence (60 s) old for changes that bypass the proxies (object counts, a
// replica's view), so a one-second window stays well inside what clients can rely on. This
// process's own writes forget the local entry at once, as they forget the memcached one.
//
// Thread-safe. Private to proxy/.
#pragma once

#include <algorithm>
#include <cstdint>
#include <list>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <boost/asio/awaitable.hpp>

#include "common/config/swift_conf.h"
#include "common/thread_annotations.h"
#include "proxy/proxy_server.h"

namespace apus::proxy {

class Memcache;

enum class InfoKind { kAccount, kContainer };

// Swift's headers_to_account_info() / headers_to_container_info(): the JSON of the info dict
// of a HEAD answer.
std::string info_to_json(const CachedInfo& info, InfoKind kind,
                         const common::StoragePolicies& policies);
// The reverse, as the headers Apus reads (status, counts, ACLs, policy, metadata, sysmeta);
// nullopt when `json` is not an info dict.
std::optional<CachedInfo> info_from_json(std::string_view json, InfoKind kind,
                                         const common::StoragePolicies& policies);

// Swift's swift.infocache: the infos one client request and its subrequests have looked up, so
// that a middleware's lookup and the app's of the same account or container cost one cache
// round trip, not one each (s3api with s3_acl reads the bucket's info before the GET does).
// Writes through the proxy forget their entry here as in the shared cache. Only authoritative
// answers (2xx, 404, 410) are kept, for the request's lifetime, as Swift keeps them; at most
// kMaxEntries, the oldest going first (a bulk request touches one container after another).
//
// Thread-safe (a request's subrequests may run side by side).
class RequestInfoMemo {
 public:
  static constexpr size_t kMaxEntries = 8;

  std::optional<CachedInfo> find(std::string_view key) const APUS_EXCLUDES(mutex_);
  void put(std::string_view key, const CachedInfo& info) APUS_EXCLUDES(mutex_);
  void forget(std::string_view key) APUS_EXCLUDES(mutex_);

 private:
  mutable common::Mutex mutex_;
  std::vector<std::pair<std::string, CachedInfo>> entries_ APUS_GUARDED_BY(mutex_);  // oldest first
};

class InfoCache {
 public:
  // Entries kept in this process when there is no memcached. An entry is at most a few KiB
  // (Swift caps metadata at 4 KiB a name, ACLs and counts add little), so this bounds the cache
  // to a few tens of MiB while a proxy's working set of accounts and containers fits.
  static constexpr size_t kDefaultMaxEntries = 4096;

  // local_info_cache_ttl's default, in seconds.
  static constexpr double kDefaultLocalTtl = 1.0;

  // `local_ttl`: how long an entry read from or written to memcached is also kept here (0:
  // every lookup asks memcached).
  explicit InfoCache(const common::StoragePolicies& policies,
                     size_t max_entries = kDefaultMaxEntries, double local_ttl = kDefaultLocalTtl)
      : policies_(policies),
        max_entries_(std::max<size_t>(1, max_entries)),
        local_ttl_(std::max(0.0, local_ttl)) {}

  // The cached info under `key`, from memcached when `mc` is set, else from this process.
  boost::asio::awaitable<std::optional<CachedInfo>> get(std::string key, InfoKind kind,
                                                        Memcache* mc);
  // Caches a backend answer for `ttl` seconds (a tenth of it for 404 and 410, as Swift does);
  // other failures are not cached.
  boost::asio::awaitable<void> set(std::string key, InfoKind kind, CachedInfo info, double ttl,
                                   Memcache* mc);
  // Drops the entry (Swift's clear_info_cache()), in memcached too.
  boost::asio::awaitable<void> forget(std::string key, Memcache* mc);

  // The in-process entries now (expired ones not yet looked up included).
  size_t local_size() APUS_EXCLUDES(mutex_);

 private:
  using Lru = std::list<std::pair<std::string, CachedInfo>>;  // most recently used first

  std::optional<CachedInfo> local_get(const std::string& key) APUS_EXCLUDES(mutex_);
  // Keeps `info` here for `ttl` seconds; when `unless_forgotten_since` is set, only if no entry
  // was forgotten since forgets_ had that value (a memcached read that a write overtook must
  // not bring the old info back for local_ttl).
  void local_set(std::string key, CachedInfo info, double ttl,
                 std::optional<uint64_t> unless_forgotten_since = std::nullopt)
      APUS_EXCLUDES(mutex_);
  uint64_t forgets() APUS_EXCLUDES(mutex_);
  void local_forget(const std::string& key) APUS_EXCLUDES(mutex_);

  const common::StoragePolicies& policies_;
  const size_t max_entries_;
  const double local_ttl_;
  common::Mutex mutex_;
  Lru lru_ APUS_GUARDED_BY(mutex_);
  std::unordered_map<std::string, Lru::iterator> local_ APUS_GUARDED_BY(mutex_);  // into lru_
  uint64_t forgets_ APUS_GUARDED_BY(mutex_) = 0;  // local_forget() calls so far
};

}  // namespace apus::proxy
