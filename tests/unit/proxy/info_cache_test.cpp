// The proxy's in-process info cache (no memcached): entries expire after their TTL, and at
// most max_entries stay, the least recently used going first (issue 12: anonymous requests
// for random account names grew it without bound).
#include "proxy/info_cache.h"

#include <doctest/doctest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <string>
#include <thread>

#include "proxy/memcache.h"

namespace apus::proxy {
namespace {

namespace net = boost::asio;

// Runs one InfoCache call to completion on a private io_context.
template <class Awaitable>
auto run(Awaitable a) {
  net::io_context ioc;
  auto f = net::co_spawn(ioc, std::move(a), net::use_future);
  ioc.run();
  return f.get();
}

CachedInfo found(std::string marker) {
  CachedInfo info;
  info.status = 204;
  info.headers.set("X-Account-Meta-Marker", std::move(marker));
  return info;
}

bool cached(InfoCache& cache, const std::string& key) {
  return run(cache.get(key, InfoKind::kAccount, nullptr)).has_value();
}

void put(InfoCache& cache, const std::string& key, double ttl = 60) {
  run(cache.set(key, InfoKind::kAccount, found(key), ttl, nullptr));
}

TEST_CASE("info cache: at most max_entries, the least recently used evicted first") {
  common::StoragePolicies policies;
  InfoCache cache(policies, 3);
  put(cache, "account/a");
  put(cache, "account/b");
  put(cache, "account/c");
  CHECK(cached(cache, "account/a"));  // a is now the most recently used
  put(cache, "account/d");            // evicts b, the least recently used
  CHECK(cache.local_size() == 3);
  CHECK_FALSE(cached(cache, "account/b"));
  CHECK(cached(cache, "account/a"));
  CHECK(cached(cache, "account/c"));
  CHECK(cached(cache, "account/d"));
  auto hit = run(cache.get("account/d", InfoKind::kAccount, nullptr));
  REQUIRE(hit);
  CHECK(hit->headers.get_or("X-Account-Meta-Marker", "") == "account/d");
}

TEST_CASE("info cache: random names never grow it past its bound") {
  common::StoragePolicies policies;
  InfoCache cache(policies, 100);
  for (int i = 0; i < 5000; ++i) {
    CachedInfo missing;
    missing.status = 404;  // what an anonymous request for a random account caches
    run(cache.set("account/AUTH_" + std::to_string(i), InfoKind::kAccount, missing, 60,
                  nullptr));
  }
  CHECK(cache.local_size() == 100);
  CHECK(cached(cache, "account/AUTH_4999"));
  CHECK_FALSE(cached(cache, "account/AUTH_0"));
}

TEST_CASE("info cache: an expired entry is gone and its room freed") {
  common::StoragePolicies policies;
  InfoCache cache(policies, 10);
  put(cache, "account/old", -1);  // already expired
  put(cache, "account/new", 60);
  CHECK(cache.local_size() == 2);
  CHECK_FALSE(cached(cache, "account/old"));
  CHECK(cache.local_size() == 1);
  CHECK(cached(cache, "account/new"));
}

TEST_CASE("info cache: forget drops the entry and a new set replaces it") {
  common::StoragePolicies policies;
  InfoCache cache(policies, 10);
  put(cache, "container/a/c");
  run(cache.forget("container/a/c", nullptr));
  CHECK_FALSE(cached(cache, "container/a/c"));
  CHECK(cache.local_size() == 0);
  put(cache, "account/x");
  put(cache, "account/x");
  CHECK(cache.local_size() == 1);
}

TEST_CASE("info cache: the default bound is a named constant") {
  common::StoragePolicies policies;
  InfoCache cache(policies);
  for (size_t i = 0; i < InfoCache::kDefaultMaxEntries + 10; ++i) {
    put(cache, "account/AUTH_" + std::to_string(i));
  }
  CHECK(cache.local_size() == InfoCache::kDefaultMaxEntries);
}

// A memcached that refuses every connection: what InfoCache answers then comes from this
// process alone, so these tests see exactly what the local copy holds.
Memcache unreachable_memcached() {
  return Memcache({MemcacheServer{"127.0.0.1:1", "127.0.0.1", 1}});
}

TEST_CASE("info cache with memcached: a write is kept here for local_ttl, then asked again") {
  common::StoragePolicies policies;
  Memcache mc = unreachable_memcached();
  InfoCache cache(policies, 10, 0.3);
  run(cache.set("container/a/c", InfoKind::kContainer, found("one"), 60, &mc));
  auto hit = run(cache.get("container/a/c", InfoKind::kContainer, &mc));
  REQUIRE(hit);
  CHECK(hit->headers.get_or("X-Account-Meta-Marker", "") == "one");
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  CHECK_FALSE(run(cache.get("container/a/c", InfoKind::kContainer, &mc)));
}

TEST_CASE("info cache with memcached: forget drops the local copy at once") {
  common::StoragePolicies policies;
  Memcache mc = unreachable_memcached();
  InfoCache cache(policies, 10, 60);
  run(cache.set("account/a", InfoKind::kAccount, found("x"), 60, &mc));
  run(cache.forget("account/a", &mc));
  CHECK_FALSE(run(cache.get("account/a", InfoKind::kAccount, &mc)));
}

TEST_CASE("info cache with memcached: a 404 stays here no longer than memcached keeps it") {
  common::StoragePolicies policies;
  Memcache mc = unreachable_memcached();
  InfoCache cache(policies, 10, 60);
  CachedInfo missing;
  missing.status = 404;
  run(cache.set("account/gone", InfoKind::kAccount, missing, 2, &mc));  // 404s: a tenth, 0.2 s
  CHECK(run(cache.get("account/gone", InfoKind::kAccount, &mc)));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  CHECK_FALSE(run(cache.get("account/gone", InfoKind::kAccount, &mc)));
}

TEST_CASE("info cache with memcached: local_ttl 0 keeps nothing here") {
  common::StoragePolicies policies;
  Memcache mc = unreachable_memcached();
  InfoCache cache(policies, 10, 0);
  run(cache.set("account/a", InfoKind::kAccount, found("x"), 60, &mc));
  CHECK_FALSE(run(cache.get("account/a", InfoKind::kAccount, &mc)));
  CHECK(cache.local_size() == 0);
}

TEST_CASE("request info memo: keeps authoritative answers, forgets on write, bounded") {
  RequestInfoMemo memo;
  CachedInfo found;
  found.status = 204;
  found.headers.set("X-Container-Object-Count", "3");
  CachedInfo missing;
  missing.status = 404;
  CachedInfo trouble;
  trouble.status = 503;
  memo.put("container/a/c", found);
  memo.put("container/a/gone", missing);
  memo.put("container/a/busy", trouble);
  REQUIRE(memo.find("container/a/c"));
  CHECK(memo.find("container/a/c")->headers.get_or("X-Container-Object-Count", "") == "3");
  CHECK(memo.find("container/a/gone")->status == 404);
  CHECK_FALSE(memo.find("container/a/busy"));  // asked again next time
  memo.forget("container/a/c");
  CHECK_FALSE(memo.find("container/a/c"));
  found.headers.set("X-Container-Object-Count", "4");
  memo.put("container/a/gone", found);  // replaces
  CHECK(memo.find("container/a/gone")->status == 204);
  for (size_t i = 0; i < RequestInfoMemo::kMaxEntries; ++i) {
    memo.put("account/AUTH_" + std::to_string(i), found);
  }
  CHECK_FALSE(memo.find("container/a/gone"));  // the oldest went
  CHECK(memo.find("account/AUTH_0"));
  CHECK(memo.find("account/AUTH_" + std::to_string(RequestInfoMemo::kMaxEntries - 1)));
}

}  // namespace
}  // namespace apus::proxy
