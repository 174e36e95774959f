// The expirer's queue naming (common/expiring_queue.h) and the spreading of container and
// queue updates over object requests (common/update_plan.h), against values computed by
// Swift 2.30.1 (swift.common.utils.get_expirer_container, swift.obj.expirer's build_task_obj,
// parse_task_obj and hash_mod, swift.proxy.controllers.obj's _backend_requests).
#include "common/expiring_queue.h"

#include <doctest/doctest.h>

#include "common/hash_path.h"
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

}  // namespace
}  // namespace apus::common
