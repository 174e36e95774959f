// The expirer's queue naming (common/expiring_queue.h) and the spreading of container and
// queue updates over object requests (common/update_plan.h), against values computed by
// Swift 2.30.1 (swift.common.utils.get_expirer_container, swift.obj.expirer's build_task_obj,
// parse_task_obj and hash_mod, swift.proxy.controllers.obj's _backend_requests), and the
// container reconciler's queue (common/misplaced_queue.h, as swift.container.reconciler reads it).
#include "common/expiring_queue.h"

#include <tuple>
#include <vector>

#include <doctest/doctest.h>

#include "common/hash_path.h"
#include "common/misplaced_queue.h"
#include "common/update_plan.h"

namespace apus::common {
namespace {

// hash_path('AUTH_test', 'c', 'o') with prefix "pre" and suffix "suf".
constexpr std::string_view kHash = "c986cba3005b6c92e63df5b00b653be6";

TEST_CASE("the queue container is the delete-at's day less the object's shard, as Swift's") {
  auto hash = hash_path_hex({"pre", "suf"}, "AUTH_test", "c", "o");
  REQUIRE(hash.ok());
  CHECK(*hash == kHash);
  CHECK(expirer_shard(kHash) == 34);  // int(hash, 16) % 100
  CHECK(expirer_container_name(1700000123, 86400, kHash) == "1699919966");
  CHECK(expirer_container_name(1700000123, 3600, kHash) == "1699999166");
  // Below the first day the shard would go negative: Swift clamps the name to 0.
  CHECK(expirer_container_number(5, 86400, kHash) == -34);
  CHECK(expirer_container_name(5, 86400, kHash) == "0000000000");
  // Every delete-at of one day lands in the same container.
  CHECK(expirer_container_name(1699920000, 86400, kHash) ==
        expirer_container_name(1700006399, 86400, kHash));
  CHECK(expirer_container_name(1700006400, 86400, kHash) == "1700006366");
}

TEST_CASE("queue rows are named <delete-at>-<account>/<container>/<object>") {
  CHECK(expirer_task_name(1700000123, "AUTH_test", "c", "o/p") == "1700000123-AUTH_test/c/o/p");
  CHECK(expirer_task_name(12, "a", "c", "o") == "0000000012-a/c/o");
  auto task = parse_expirer_task("1700000123-AUTH_test/c/o/p");
  REQUIRE(task);
  CHECK(task->delete_at == *Timestamp::parse("1700000123"));
  CHECK(task->account == "AUTH_test");
  CHECK(task->container == "c");
  CHECK(task->object == "o/p");
  CHECK(task->target_path() == "AUTH_test/c/o/p");
  auto fractional = parse_expirer_task("1700000123.5-a/c/o");
  REQUIRE(fractional);
  CHECK(fractional->delete_at.normal() == "1700000123.50000");
}

TEST_CASE("rows Swift cannot parse are refused") {
  for (std::string_view bad : {"1700000123", "x-a/c/o", "1700000123-a/c", "1700000123-a//o",
                               "1700000123-/c/o", "1700000123-a/c/", "-a/c/o"}) {
    CAPTURE(bad);
    CHECK_FALSE(parse_expirer_task(bad));
  }
}

TEST_CASE("hash_mod splits the rows over the processes as Swift's does") {
  CHECK(expirer_hash_mod("1699948800/1700000123-AUTH_test/c/o", 3) == 0);
  CHECK(expirer_hash_mod("x", 7) == 5);
  CHECK(expirer_hash_mod("", 1000003) == 94608);
  CHECK(expirer_hash_mod("abc", 18446744073709551557ull) == 496471913503778008ull);
  CHECK(expirer_hash_mod("anything", 1) == 0);
}

TEST_CASE("num_container_updates: a container quorum survives failed object requests") {
  CHECK(num_container_updates(3, 2, 3, 2) == 3);
  CHECK(num_container_updates(1, 1, 3, 2) == 2);
  CHECK(num_container_updates(3, 2, 2, 1) == 3);
  CHECK(num_container_updates(5, 3, 3, 2) == 5);
  CHECK(num_container_updates(3, 2, 14, 11) == 5);  // an EC 10+4 write
}

TEST_CASE("plan_updates pairs containers in order and queue replicas in reverse, as Swift") {
  // 3 object replicas, 3 container replicas, a 3-replica queue container.
  UpdatePlan p = plan_updates(3, 3, 3, 2, 2);
  CHECK(p.container == std::vector<std::vector<size_t>>{{0}, {1}, {2}});
  CHECK(p.delete_at == std::vector<std::vector<size_t>>{{2}, {1}, {0}});
  // One container replica: two object servers carry its update (and a queue update each).
  p = plan_updates(3, 1, 1, 2, 1);
  CHECK(p.container == std::vector<std::vector<size_t>>{{0}, {0}, {}});
  CHECK(p.delete_at == std::vector<std::vector<size_t>>{{}, {0}, {0}});
  // Two object replicas, three container replicas: the first request names two.
  p = plan_updates(2, 3, 3, 1, 2);
  CHECK(p.container == std::vector<std::vector<size_t>>{{0, 2}, {1}});
  CHECK(p.delete_at == std::vector<std::vector<size_t>>{{1}, {0, 2}});
  // No X-Delete-At: no queue updates.
  p = plan_updates(3, 3, 0, 2, 2);
  CHECK(p.delete_at == std::vector<std::vector<size_t>>{{}, {}, {}});
}


// ---- the container reconciler's queue (common/misplaced_queue.h) ----------------------------

TEST_CASE("misplaced queue rows are named as Swift's reconciler names them") {
  auto t = Timestamp::parse("1700003599.99999_0000000000000003");
  REQUIRE(t.ok());
  CHECK(misplaced_container_name(*t) == "1700002800");
  CHECK(misplaced_entry_name(1, "AUTH_a", "c", "o/with/slashes") == "1:/AUTH_a/c/o/with/slashes");
}

TEST_CASE("parse_misplaced_entry reads Swift's queue rows and refuses what is not one") {
  auto e = parse_misplaced_entry("1:/AUTH_a/c/o/x", "application/x-put",
                                 "1700000000.12345", "2023-11-14T22:13:21.123450");
  REQUIRE(e.ok());
  CHECK(e->policy_index == 1);
  CHECK(e->account == "AUTH_a");
  CHECK(e->container == "c");
  CHECK(e->object == "o/x");
  CHECK(e->path() == "/AUTH_a/c/o/x");
  CHECK_FALSE(e->is_delete);
  CHECK(e->timestamp.internal() == "1700000000.12345");
  CHECK(e->queued_at.internal() == "1700000001.12345");
  // The etag holds encoded timestamps (content and meta times): the first is the write's.
  auto d = parse_misplaced_entry("0:/a/c/o", "application/x-delete",
                                 "1700000000.00000+186a0+0", "2023-11-14T22:13:20.000000");
  REQUIRE(d.ok());
  CHECK(d->is_delete);
  CHECK(d->timestamp.internal() == "1700000000.00000");
  for (const auto& row : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"/a/c/o", "application/x-put", "1700000000.00000"},       // no policy
           {"x:/a/c/o", "application/x-put", "1700000000.00000"},     // policy not a number
           {"1:a/c/o", "application/x-put", "1700000000.00000"},      // no leading '/'
           {"1:/a/c", "application/x-put", "1700000000.00000"},       // no object
           {"1:/a/c/", "application/x-put", "1700000000.00000"},      // empty object
           {"1://c/o", "application/x-put", "1700000000.00000"},      // empty account
           {"1:/a//o", "application/x-put", "1700000000.00000"},      // empty container
           {"1:/a/c/o", "text/plain", "1700000000.00000"},            // no operation
           {"1:/a/c/o", "application/x-put", "d41d8cd98f00b204e98"},  // etag no timestamp
       }) {
    const std::string& name = std::get<0>(row);
    CAPTURE(name);
    CHECK_FALSE(parse_misplaced_entry(name, std::get<1>(row), std::get<2>(row),
                                      "2023-11-14T22:13:20.000000").ok());
  }
  CHECK_FALSE(parse_misplaced_entry("1:/a/c/o", "application/x-put", "1700000000.00000",
                                    "yesterday").ok());
}

TEST_CASE("parse_last_modified reads a listing's date as Swift's strptime does") {
  CHECK(parse_last_modified("1970-01-01T00:00:00.000000")->internal() == "0000000000.00000");
  CHECK(parse_last_modified("2023-11-14T22:13:20.5")->internal() == "1700000000.50000");
  CHECK(parse_last_modified("2023-11-14T22:13:20.000014")->internal() == "1700000000.00001");
  CHECK(parse_last_modified("2024-02-29T00:00:00.000000").ok());
  for (const char* bad : {"", "2023-11-14T22:13:20", "2023-11-14 22:13:20.000000",
                          "2023-02-30T00:00:00.000000", "2023-13-01T00:00:00.000000",
                          "2023-11-14T24:00:00.000000", "2023-11-14T22:13:60.000000",
                          "2023-11-14T22:13:20.0000000",
                          "2023-11-14T22:13:20.", "1969-12-31T23:59:59.000000",
                          "2023-11-14T22:13:2x.000000"}) {
    CAPTURE(bad);
    CHECK_FALSE(parse_last_modified(bad).ok());
  }
}

TEST_CASE("hex_mod is Python's int(hex, 16) % divisor for digests of any length") {
  CHECK(hex_mod("", 7) == 0);
  CHECK(hex_mod("ff", 7) == 255 % 7);
  // int('ffffffffffffffffffffffffffffffff', 16) % 1000 == 455 (2**128 - 1 = ...211455).
  CHECK(hex_mod("ffffffffffffffffffffffffffffffff", 1000) == 455);
  CHECK(hex_mod("FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF", 1000) == 455);
  CHECK(hex_mod("0123456789abcdef0123456789abcdef", 1) == 0);
}

}  // namespace
}  // namespace apus::common
