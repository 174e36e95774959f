#include "object-server/container_update.h"

#include <doctest/doctest.h>

#include <limits>

#include "common/update_plan.h"

using apus::common::split_host_port;
using apus::common::Timestamp;
using apus::common::http::HeaderMap;
using apus::common::http::Request;
using apus::object::container_update_for;
using apus::object::delete_at_update_for;
using apus::object::ExpiringQueue;
using apus::object::Location;
using apus::object::make_update_request;

namespace {

Location loc() {
  Location l;
  l.device = "sda1";
  l.partition = "3";
  l.account = "AUTH_test";
  l.container = "c";
  l.object = "o bj";
  l.policy = 1;
  return l;
}

Request request(std::initializer_list<std::pair<const char*, const char*>> kv) {
  Request r;
  r.method = "PUT";
  r.target = "/sda1/3/AUTH_test/c/o%20bj";
  r.headers.set("Host", "127.0.0.1:6200");
  for (const auto& [k, v] : kv) r.headers.set(k, v);
  return r;
}

const Timestamp kTs = *Timestamp::parse("1700000001.00000");
// An all-zero object hash: shard 0 of the day's queue containers.
constexpr std::string_view kHash = "00000000000000000000000000000000";

}  // namespace

TEST_CASE("container_update: the replica request, shared with the updater") {
  HeaderMap h;
  h.set("X-Size", "3");
  auto r = make_update_request("PUT", "sd b", "5", "AUTH_t", "c", "caf\xc3\xa9/x", h);
  CHECK(r.method == "PUT");
  CHECK(r.target == "/sd%20b/5/AUTH_t/c/caf%C3%A9/x");
  CHECK(r.headers.get_or("X-Size", "") == "3");
  CHECK(split_host_port("10.0.0.1:6201") == std::make_pair(std::string("10.0.0.1"), uint16_t{6201}));
  CHECK_FALSE(split_host_port("10.0.0.1"));
  CHECK_FALSE(split_host_port("10.0.0.1:99999"));
  CHECK_FALSE(split_host_port("10.0.0.1:abc"));
}

TEST_CASE("container_update: container rows from X-Container-* headers") {
  auto u = container_update_for(request({{"X-Container-Host", "1.2.3.4:1, 1.2.3.5:2"},
                                         {"X-Container-Device", "d1,d2"},
                                         {"X-Container-Partition", "9"},
                                         {"X-Trans-Id", "tx1"}}),
                                loc(), "PUT", HeaderMap());
  REQUIRE(u);
  CHECK(u->targets.size() == 2);
  CHECK(u->targets[1] == std::make_pair(std::string("1.2.3.5:2"), std::string("d2")));
  CHECK(u->container_partition == "9");
  CHECK(u->headers.get_or("X-Backend-Storage-Policy-Index", "") == "1");
  CHECK(u->headers.get_or("X-Trans-Id", "") == "tx1");
  CHECK(u->device == "sda1");
  // Nobody to tell, or lists that do not pair up: no update.
  CHECK_FALSE(container_update_for(request({}), loc(), "PUT", HeaderMap()));
  CHECK_FALSE(container_update_for(request({{"X-Container-Host", "1.2.3.4:1"},
                                            {"X-Container-Device", "d1,d2"},
                                            {"X-Container-Partition", "9"}}),
                                   loc(), "PUT", HeaderMap()));
}

TEST_CASE("container_update: a shard container path sends the row there, kept when pending") {
  auto with = [](std::initializer_list<std::pair<const char*, const char*>> extra) {
    auto r = request({{"X-Container-Host", "1.2.3.4:1"},
                      {"X-Container-Device", "d1"},
                      {"X-Container-Partition", "9"}});
    for (const auto& [k, v] : extra) r.headers.set(k, v);
    return container_update_for(r, loc(), "PUT", HeaderMap());
  };
  auto quoted = with({{"X-Backend-Quoted-Container-Path", ".shards_AUTH_test/c-%C3%A9-1"},
                      {"X-Backend-Container-Path", "ignored/when-quoted-given"}});
  REQUIRE(quoted);
  CHECK(quoted->container_path == std::optional<std::string>(".shards_AUTH_test/c-\xc3\xa9-1"));
  CHECK(quoted->target_container() ==
        std::make_pair(std::string(".shards_AUTH_test"), std::string("c-\xc3\xa9-1")));
  CHECK(quoted->account == "AUTH_test");  // the row's names stay the root's
  CHECK(quoted->container == "c");
  auto pending = quoted->to_async_update();
  CHECK(pending.container_path == quoted->container_path);
  CHECK(pending.container == "c");

  auto old_header = with({{"X-Backend-Container-Path", ".shards_a/c-1"}});
  REQUIRE(old_header);
  CHECK(old_header->container_path == std::optional<std::string>(".shards_a/c-1"));
  // Not "account/container": the root gets the update, as in Swift.
  for (const char* bad : {"no-slash", "/c", "a/", "a/c/o"}) {
    auto u = with({{"X-Backend-Container-Path", bad}});
    REQUIRE(u);
    CHECK_FALSE(u->container_path);
    CHECK(u->target_container() == std::make_pair(std::string("AUTH_test"), std::string("c")));
  }
}

TEST_CASE("container_update: expiring-queue rows, a bad X-Delete-At-Container included") {
  ExpiringQueue queue{".expiring_objects", 86400};
  auto queued = [&](const char* container) {
    return delete_at_update_for(
        request({{"X-Delete-At-Host", "1.2.3.4:1"}, {"X-Delete-At-Device", "q1"},
                 {"X-Delete-At-Partition", "2"}, {"X-Delete-At-Container", container}}),
        loc(), kTs, "PUT", 1900000000, kHash, queue);
  };
  auto u = queued("1899964800");
  REQUIRE(u);
  CHECK(u->account == ".expiring_objects");
  CHECK(u->container == "1899964800");
  CHECK(u->object == "1900000000-AUTH_test/c/o bj");
  CHECK(u->headers.get_or("X-Backend-Storage-Policy-Index", "") == "0");
  CHECK(u->targets.size() == 1);
  // Not a number (std::stoll threw here and killed the session): Swift's best guess instead.
  auto guessed = queued("abc");
  REQUIRE(guessed);
  CHECK(guessed->container == "1899936000");  // 1900000000 // 86400 * 86400 - 0
  CHECK(queued("1.8999648e9")->container == "1899964800");  // float(), as Swift reads it
  // A delete-at beyond Swift's bound is bounded before its container is derived.
  auto far = delete_at_update_for(request({}), loc(), kTs, "DELETE",
                                  std::numeric_limits<int64_t>::max(), kHash, queue);
  REQUIRE(far);
  CHECK(far->object.starts_with("9999999999-"));
  CHECK(far->container == "9999936000");
  // Replication requests and PUTs without a queue host carry no row.
  CHECK_FALSE(delete_at_update_for(request({{"X-Backend-Replication", "True"}}), loc(), kTs,
                                   "DELETE", 1900000000, kHash, queue));
  CHECK_FALSE(delete_at_update_for(request({}), loc(), kTs, "PUT", 1900000000, kHash, queue));
}
