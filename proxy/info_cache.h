// InfoCache: account and container info as Swift's proxies cache it (get_account_info(),
// get_container_info(), set_info_cache()). With memcached, the entries live there under
// "account/<a>" and "container/<a>/<c>" as Swift's JSON info dicts, so every proxy (Apus or
// Swift) on the same memcached sees them, and a container PUT, POST or DELETE at one proxy is
// seen by all at once. Without memcached they live in this process.
//
// Thread-safe. Private to proxy/.
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include <boost/asio/awaitable.hpp>

#include "common/config/swift_conf.h"
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

class InfoCache {
 public:
  explicit InfoCache(const common::StoragePolicies& policies) : policies_(policies) {}

  // The cached info under `key`, from memcached when `mc` is set, else from this process.
  boost::asio::awaitable<std::optional<CachedInfo>> get(std::string key, InfoKind kind,
                                                        Memcache* mc);
  // Caches a backend answer for `ttl` seconds (a tenth of it for 404 and 410, as Swift does);
  // other failures are not cached.
  boost::asio::awaitable<void> set(std::string key, InfoKind kind, CachedInfo info, double ttl,
                                   Memcache* mc);
  // Drops the entry (Swift's clear_info_cache()), in memcached too.
  boost::asio::awaitable<void> forget(std::string key, Memcache* mc);

 private:
  const common::StoragePolicies& policies_;
  std::mutex mutex_;
  std::map<std::string, CachedInfo> local_;  // GUARDED_BY(mutex_)
};

}  // namespace apus::proxy
