// InfoCache: account and container info as Swift's proxies cache it (get_account_info(),
// get_container_info(), set_info_cache()). With memcached, the entries live there under
// "account/<a>" and "container/<a>/<c>" as Swift's JSON info dicts, so every proxy (Apus or
// Swift) on the same memcached sees them, and a container PUT, POST or DELETE at one proxy is
// seen by all at once. Without memcached they live in this process, at most `max_entries` of
// them: the least recently used goes first (anonymous requests for random names would
// otherwise grow the cache without bound), and an expired entry goes when it is next looked
// up.
//
// Thread-safe. Private to proxy/.
#pragma once

#include <algorithm>
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

  explicit InfoCache(const common::StoragePolicies& policies,
                     size_t max_entries = kDefaultMaxEntries)
      : policies_(policies), max_entries_(std::max<size_t>(1, max_entries)) {}

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
  void local_set(std::string key, CachedInfo info) APUS_EXCLUDES(mutex_);
  void local_forget(const std::string& key) APUS_EXCLUDES(mutex_);

  const common::StoragePolicies& policies_;
  const size_t max_entries_;
  common::Mutex mutex_;
  Lru lru_ APUS_GUARDED_BY(mutex_);
  std::unordered_map<std::string, Lru::iterator> local_ APUS_GUARDED_BY(mutex_);  // into lru_
};

}  // namespace apus::proxy
