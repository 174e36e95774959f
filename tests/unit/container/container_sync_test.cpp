#include "container-server/container_sync.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <utility>

#include <boost/asio/awaitable.hpp>
#include <doctest/doctest.h>

#include "common/io/fs.h"
#include "ring/ring_data.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_server.h"

using apus::common::http::HeaderMap;
using apus::container::parse_http_url;
using apus::container::sync_put_headers;
using apus::container::sync_row_owner;

TEST_CASE("sync_row_owner splits rows as Swift's hash_path ordinal does") {
  // Values from Swift 2.30.1: unpack_from('>I', hash_path('AUTH_test', 'src', name,
  // raw_digest=True))[0] with prefix 'pre' and suffix 'suf'.
  apus::common::HashPathConfig hash{"pre", "suf"};
  CHECK(sync_row_owner(hash, "AUTH_test", "src", "o1", 1000) == 3668754048u % 1000);
  CHECK(sync_row_owner(hash, "AUTH_test", "src", "obj with space", 1000) == 547493663u % 1000);
  CHECK(sync_row_owner(hash, "AUTH_test", "src", "\xc3\xa9t\xc3\xa9/x", 1000) ==
        2789966532u % 1000);
  CHECK(sync_row_owner(hash, "AUTH_test", "src", "a", 3) == 2);
  CHECK(sync_row_owner(hash, "AUTH_test", "src", "a", 4) == 3);
  CHECK(sync_row_owner(hash, "AUTH_test", "src", "o1", 3) == 0);
  CHECK(sync_row_owner(hash, "AUTH_test", "src", "a", 1) == 0);
}

TEST_CASE("sync_put_headers keeps the object's headers and drops the GET's own") {
  HeaderMap in;
  in.set("Content-Type", "text/plain;charset=utf-8; swift_bytes=12");
  in.set("Etag", "\"d41d8cd98f00b204e9800998ecf8427e\"");
  in.set("X-Timestamp", "1700000000.12345");
  in.set("Last-Modified", "Tue, 14 Nov 2023 22:13:21 GMT");
  in.set("Date", "Tue, 14 Nov 2023 22:13:22 GMT");
  in.set("Content-Length", "12");
  in.set("X-Object-Meta-Color", "blue");
  in.set("X-Object-Sysmeta-Crypto-Body-Meta", "secret");
  in.set("X-Object-Transient-Sysmeta-Crypto-Meta", "secret");
  in.set("X-Backend-Timestamp", "1700000000.12345");
  in.set("X-Backend-Data-Timestamp", "1700000000.12345");
  in.set("Content-Disposition", "inline");
  in.set("X-Delete-At", "9999999999");
  in.set("Connection", "keep-alive");
  HeaderMap out = sync_put_headers(in);
  CHECK(out.get_or("Content-Type", "") == "text/plain;charset=utf-8");
  CHECK(out.get_or("Etag", "") == "d41d8cd98f00b204e9800998ecf8427e");
  CHECK(out.get_or("X-Timestamp", "") == "1700000000.12345");
  CHECK(out.get_or("X-Object-Meta-Color", "") == "blue");
  CHECK(out.get_or("Content-Disposition", "") == "inline");
  CHECK(out.get_or("X-Delete-At", "") == "9999999999");
  for (const char* gone :
       {"Last-Modified", "Date", "Content-Length", "Connection",
        "X-Object-Sysmeta-Crypto-Body-Meta", "X-Object-Transient-Sysmeta-Crypto-Meta",
        "X-Backend-Timestamp", "X-Backend-Data-Timestamp"}) {
    CHECK_MESSAGE(!out.contains(gone), gone);
  }
}

TEST_CASE("sync_put_headers cleans only a last swift_bytes parameter") {
  // Swift's clean_content_type().
  HeaderMap in;
  in.set("Content-Type", "a;b=1;swift_bytes=1;c=2");
  CHECK(sync_put_headers(in).get_or("Content-Type", "") == "a;b=1;swift_bytes=1;c=2");
  in.set("Content-Type", "application/octet-stream");
  CHECK(sync_put_headers(in).get_or("Content-Type", "") == "application/octet-stream");
}

TEST_CASE("sync_put_headers shows symlink sysmeta as the X-Symlink headers") {
  HeaderMap in;
  in.set("Content-Type", "application/symlink");
  in.set("X-Object-Sysmeta-Symlink-Target", "tgt/obj%20x");
  in.set("X-Object-Sysmeta-Symlink-Target-Account", "AUTH_other");
  in.set("X-Object-Sysmeta-Symlink-Target-Etag", "abc");
  in.set("X-Object-Sysmeta-Symlink-Target-Bytes", "3");
  HeaderMap out = sync_put_headers(in);
  CHECK(out.get_or("X-Symlink-Target", "") == "tgt/obj%20x");
  CHECK(out.get_or("X-Symlink-Target-Account", "") == "AUTH_other");
  CHECK(out.get_or("X-Symlink-Target-Etag", "") == "abc");
  CHECK(out.get_or("X-Symlink-Target-Bytes", "") == "3");
  CHECK_FALSE(out.contains("X-Object-Sysmeta-Symlink-Target"));
}

TEST_CASE("parse_http_url splits sync endpoints") {
  auto u = parse_http_url("http://127.0.0.1:8080/v1/AUTH_a/c");
  REQUIRE(u.ok());
  CHECK_FALSE(u->https);
  CHECK(u->host == "127.0.0.1");
  CHECK(u->port == 8080);
  CHECK(u->authority == "127.0.0.1:8080");
  CHECK(u->path == "/v1/AUTH_a/c");
  auto plain = parse_http_url("http://example.com");
  REQUIRE(plain.ok());
  CHECK(plain->port == 80);
  CHECK(plain->path.empty());
  auto tls = parse_http_url("https://[::1]/v1/");
  REQUIRE(tls.ok());
  CHECK(tls->https);
  CHECK(tls->host == "::1");
  CHECK(tls->port == 443);
  CHECK_FALSE(parse_http_url("ftp://x/").ok());
  CHECK_FALSE(parse_http_url("http://h:99999/").ok());
  CHECK_FALSE(parse_http_url("http:///v1").ok());
}

TEST_CASE("local_ips is the bind address, or every interface's for 0.0.0.0") {
  CHECK(apus::ring::local_ips("127.0.0.2") == std::vector<std::string>{"127.0.0.2"});
  auto all = apus::ring::local_ips("0.0.0.0");
  CHECK(std::find(all.begin(), all.end(), "127.0.0.1") != all.end());
}

// ---- whole passes against a scripted remote ---------------------------------------------------

namespace {

namespace net = boost::asio;
using apus::common::Result;
using apus::container::ContainerSync;
using apus::container::ContainerSyncConfig;
using apus::container::DbDevices;
using apus::container::DbInfo;
using apus::container::DbServerConfig;
using apus::container::ObjectRecord;

// A container server's sync on one device (sd0, the only device of a 1-replica container ring
// that names this server), its realm's cluster a TestServer that records every request and
// answers 401 to the names in `refuse`, 204 (or 404 to HEAD) otherwise.
struct SyncFixture {
  struct Seen {
    std::string method, path;
    HeaderMap headers;
  };
  apus::test::TempDir dir{"apus_container_sync"};
  DbServerConfig config;
  std::unique_ptr<DbDevices> devices;
  std::mutex mu;
  std::vector<Seen> seen;        // guarded by mu
  std::set<std::string> refuse;  // guarded by mu
  apus::test::TestServer remote{[this](apus::common::http::Exchange& ex) -> net::awaitable<void> {
    const auto& r = ex.request();
    apus::common::http::Response resp;
    {
      std::lock_guard lock(mu);
      seen.push_back({r.method, std::string(r.path()), r.headers});
      resp.status = refuse.count(std::string(r.path())) ? 401 : r.method == "HEAD" ? 404 : 204;
    }
    co_return co_await ex.reply(std::move(resp));
  }};
  std::unique_ptr<ContainerSync> sync;

  explicit SyncFixture(std::vector<std::string> sync_proxies = {}) {
    std::filesystem::create_directory(dir.path("sd0"));
    config.devices = dir.root();
    config.mount_check = false;
    config.threads_per_disk = 1;
    config.sync_writes = false;
    config.server.bind_ip = "127.0.0.1";
    config.server.bind_port = 6201;
    config.swift.hash_path_prefix = "pre";
    config.swift.hash_path_suffix = "suf";
    config.swift_dir = dir.root();
    devices = std::make_unique<DbDevices>(config, apus::common::io::default_fs(), nullptr);
    // With sync_proxy set, the cluster's own address is never connected to.
    std::ofstream(dir.path("container-sync-realms.conf"))
        << "[realm1]\nkey = realmkey\ncluster_c1 = http://"
        << (sync_proxies.empty() ? "127.0.0.1:" + std::to_string(remote.port())
                                 : std::string("127.0.0.9:1"))
        << "/v1/\n";
    for (auto& proxy : sync_proxies) {
      proxy = "http://127.0.0.1:" + std::to_string(remote.port()) + proxy;
    }
    apus::ring::RingData ring;
    apus::ring::Device dev;
    dev.ip = dev.replication_ip = "127.0.0.1";
    dev.port = dev.replication_port = 6201;
    dev.device = "sd0";
    dev.weight = 1;
    ring.devs.push_back(dev);
    ring.replica2part2dev = {{0}};
    ring.part_shift = 32;
    ContainerSyncConfig sc;
    sc.swift_dir = dir.root();
    sc.sync_proxies = sync_proxies;
    sync = std::make_unique<ContainerSync>(
        sc, config, *devices,
        std::make_shared<apus::common::ContainerSyncRealms>(dir.path("container-sync-realms.conf")),
        apus::ring::Ring::from_data(ring, {"pre", "suf"}).value());
  }

  apus::container::ListingStore& store() {
    REQUIRE(devices->check_device("sd0").ok());
    return *devices->store("sd0").value();
  }
  void create(const std::string& sync_to) {
    REQUIRE(store()
                .update_info("db",
                             [&](std::optional<DbInfo>& info) -> Result<bool> {
                               info.emplace();
                               info->account = "AUTH_a";
                               info->container = "src";
                               info->put_timestamp = "1700000000.00000";
                               info->policy_stats[0];
                               info->metadata["X-Container-Sync-To"] = {sync_to, "1"};
                               info->metadata["X-Container-Sync-Key"] = {"userkey", "1"};
                               return true;
                             })
                .ok());
  }
  // A deleted row: a sync sends a DELETE for it, with no local object to read.
  void tombstone(const std::string& name, const std::string& ts) {
    ObjectRecord r;
    r.name = name;
    r.created_at = ts;
    r.content_type = "application/deleted";
    r.etag = "noetag";
    r.deleted = true;
    REQUIRE(store().merge_objects("db", {r}).ok());
  }
  DbInfo info() { return store().get_info("db").value().value(); }
  std::vector<Seen> take() {
    std::lock_guard lock(mu);
    return std::exchange(seen, {});
  }
};

}  // namespace

TEST_CASE_FIXTURE(SyncFixture, "a pass sends DELETEs signed for the realm and moves the points") {
  create("//realm1/c1/AUTH_b/dst");
  tombstone("o1", "1700000001.00000");
  tombstone("n\xc3\xa4me two", "1700000002.00000");
  auto stats = sync->run_once();
  CHECK(stats.syncs == 1);
  CHECK(stats.deletes == 2);
  CHECK(stats.failures == 0);
  auto first = take();
  REQUIRE(first.size() == 2);  // the only primary: every new row is its share
  CHECK(first[0].method == "DELETE");
  CHECK(first[0].path == "/v1/AUTH_b/dst/o1");
  CHECK(first[1].path == "/v1/AUTH_b/dst/n%C3%A4me%20two");
  CHECK(first[1].headers.get_or("X-Timestamp", "") == "1700000002.00000");
  // X-Container-Sync-Auth: "<realm> <nonce> <sig>", the sig over the path as sent.
  std::string auth(first[1].headers.get_or("X-Container-Sync-Auth", ""));
  REQUIRE(std::count(auth.begin(), auth.end(), ' ') == 2);
  std::string nonce = auth.substr(7, auth.rfind(' ') - 7);
  CHECK(auth.starts_with("REALM1 "));
  CHECK(nonce.size() == 32);
  CHECK(auth.substr(auth.rfind(' ') + 1) ==
        apus::common::container_sync_sig("DELETE", "/v1/AUTH_b/dst/n%C3%A4me%20two",
                                         "1700000002.00000", nonce, "realmkey", "userkey"));
  CHECK(info().x_container_sync_point1 == 2);
  CHECK(info().x_container_sync_point2 == -1);

  // The next pass sends the rows between the points again (the other nodes' share, in a
  // cluster with more), one of them refused: sync_point2 stays before it.
  tombstone("o3", "1700000003.00000");
  {
    std::lock_guard lock(mu);
    refuse.insert("/v1/AUTH_b/dst/n%C3%A4me%20two");
  }
  stats = sync->run_once();
  CHECK(stats.failures == 1);
  auto second = take();
  REQUIRE(second.size() == 3);
  CHECK(second[0].path == "/v1/AUTH_b/dst/o1");
  CHECK(second[2].path == "/v1/AUTH_b/dst/o3");
  CHECK(info().x_container_sync_point1 == 3);
  CHECK(info().x_container_sync_point2 == 1);

  {
    std::lock_guard lock(mu);
    refuse.clear();
  }
  stats = sync->run_once();
  CHECK(stats.failures == 0);
  auto third = take();
  REQUIRE(third.size() == 2);  // rows 2 and 3
  CHECK(third[0].path == "/v1/AUTH_b/dst/n%C3%A4me%20two");
  CHECK(info().x_container_sync_point2 == 3);
  sync->run_once();
  CHECK(take().empty());  // both points at the last row: nothing to send
}

TEST_CASE_FIXTURE(SyncFixture, "containers that cannot sync send nothing") {
  SUBCASE("an unknown cluster is a failure") {
    create("//realm1/nosuch/AUTH_b/dst");
    tombstone("o1", "1700000001.00000");
    auto stats = sync->run_once();
    CHECK(stats.failures == 1);
    CHECK(stats.syncs == 0);
  }
  SUBCASE("an https endpoint is a failure") {
    create("https://127.0.0.1/v1/AUTH_b/dst");
    tombstone("o1", "1700000001.00000");
    auto stats = sync->run_once();
    CHECK(stats.failures == 1);
  }
  SUBCASE("versioning sysmeta is a skip") {
    create("//realm1/c1/AUTH_b/dst");
    REQUIRE(store()
                .update_info("db",
                             [](std::optional<DbInfo>& i) -> Result<bool> {
                               i->metadata["X-Container-Sysmeta-Versions-Container"] = {"v", "1"};
                               return true;
                             })
                .ok());
    tombstone("o1", "1700000001.00000");
    auto stats = sync->run_once();
    CHECK(stats.skips == 1);
    CHECK(stats.failures == 0);
  }
  CHECK(take().empty());
  CHECK(info().x_container_sync_point1 == -1);
}

namespace {
struct ProxiedSyncFixture : SyncFixture {
  ProxiedSyncFixture() : SyncFixture({""}) {}
};
}  // namespace

TEST_CASE_FIXTURE(ProxiedSyncFixture, "sync_proxy gets the absolute URL") {
  create("//realm1/c1/AUTH_b/dst");
  tombstone("o 1", "1700000001.00000");
  auto stats = sync->run_once();
  CHECK(stats.deletes == 1);
  auto seen_now = take();
  REQUIRE(seen_now.size() == 1);
  CHECK(seen_now[0].path == "http://127.0.0.9:1/v1/AUTH_b/dst/o%201");
  CHECK(seen_now[0].headers.get_or("Host", "") == "127.0.0.9:1");
  std::string auth(seen_now[0].headers.get_or("X-Container-Sync-Auth", ""));
  std::string nonce = auth.substr(7, 32);
  // The signature covers the path only, as the remote proxy sees it.
  CHECK(auth.substr(auth.rfind(' ') + 1) ==
        apus::common::container_sync_sig("DELETE", "/v1/AUTH_b/dst/o%201", "1700000001.00000",
                                         nonce, "realmkey", "userkey"));
}
