// Node order as Swift's proxy has it: sort_nodes (shuffle, timing, affinity), the write-affinity
// iterator (iter_nodes_local_first) and the affinity strings of proxy-server.conf.
#include <doctest/doctest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "common/config/config.h"
#include "proxy/backend.h"
#include "ring/ring.h"

namespace apus::proxy {
namespace {

// Six devices: 0-2 in region 1 (zones 1-3), 3-5 in region 2 (zones 1-3). Four partitions,
// three replicas; partition 0 lives on devices 0 (r1), 3 (r2) and 1 (r1).
std::unique_ptr<ring::Ring> two_region_ring() {
  ring::RingData data;
  for (int id = 0; id < 6; ++id) {
    ring::Device d;
    d.id = id;
    d.region = id < 3 ? 1 : 2;
    d.zone = id % 3 + 1;
    d.ip = "127.0.0." + std::to_string(id + 1);
    d.port = 6000;
    d.replication_ip = d.ip;
    d.replication_port = d.port;
    d.device = "sd" + std::string(1, static_cast<char>('a' + id));
    d.weight = 1;
    data.devs.push_back(d);
  }
  data.part_shift = 30;
  data.replica2part2dev = {{0, 1, 2, 3}, {3, 4, 5, 0}, {1, 5, 4, 2}};
  auto r = ring::Ring::from_data(std::move(data), {"", "suffix"});
  REQUIRE(r.ok());
  return std::move(*r);
}

NodeOrder order_from(const std::string& text) {
  auto conf = common::Config::parse("[app:proxy-server]\n" + text);
  REQUIRE(conf.ok());
  auto order = NodeOrder::from_config(conf->section("app:proxy-server"), NodeOrder{});
  REQUIRE_MESSAGE(order.ok(), order.status().to_string());
  return *order;
}

std::vector<NodeRef> all_nodes(NodeIter it) {
  std::vector<NodeRef> out;
  NodeRef n;
  while (it.next(&n)) out.push_back(n);
  return out;
}

}  // namespace

TEST_CASE("affinity strings parse as Swift's, sorted by priority, and junk is refused") {
  auto read = parse_affinity(" r2z1=200, r1=100 ,r3=100", true);
  REQUIRE(read.ok());
  REQUIRE(read->size() == 3);
  CHECK((*read)[0].region == 1);
  CHECK((*read)[1].region == 3);  // equal priorities keep their order
  CHECK((*read)[2].region == 2);
  CHECK((*read)[2].zone == 1);
  CHECK(parse_affinity("   ", true)->empty());
  auto write = parse_affinity("r1, r2z2", false);
  REQUIRE(write.ok());
  CHECK(write->size() == 2);
  for (const char* bad : {"r1", "r1z=1", "z1=1", "r1=x", "r1=1 r2=2", "1=1"}) {
    CHECK_MESSAGE(!parse_affinity(bad, true).ok(), bad);
  }
  for (const char* bad : {"r1=1", "r", "r1z", "region1"}) {
    CHECK_MESSAGE(!parse_affinity(bad, false).ok(), bad);
  }
}

TEST_CASE("bad node-order options are refused naming the option") {
  auto conf = common::Config::parse(
      "[a]\nsorting_method = fastest\n[b]\nwrite_affinity_node_count = 2 * nodes\n"
      "[c]\nread_affinity = r1\n[d]\nwrite_affinity_handoff_delete_count = some\n");
  REQUIRE(conf.ok());
  for (const char* section : {"a", "b", "c", "d"}) {
    auto order = NodeOrder::from_config(conf->section(section), NodeOrder{});
    REQUIRE_FALSE(order.ok());
    CHECK(order.status().message().find(conf->section(section).items()[0].first) !=
          std::string::npos);
  }
  NodeOrder o = order_from("write_affinity_node_count = 5\nwrite_affinity = r1\n");
  CHECK(o.local_node_count(3) == 5);
  CHECK(order_from("write_affinity = r1\n").local_node_count(3) == 6);  // 2 * replicas
  CHECK(order_from("write_affinity_handoff_delete_count = 2\n").write_affinity_handoff_delete_count == 2);
}

TEST_CASE("reads try the primaries first, in read-affinity order, then the handoffs") {
  auto ring = two_region_ring();
  NodeHealth health(10, 60);
  NodeOrder order = order_from("sorting_method = affinity\nread_affinity = r2=1, r1z2=2\n");
  for (int round = 0; round < 20; ++round) {
    auto nodes = all_nodes(NodeIter(*ring, 0, 100, health, order));
    REQUIRE(nodes.size() == 6);
    CHECK(nodes[0].device->id == 3);  // the only region-2 primary
    CHECK(nodes[1].device->id == 1);  // r1z2
    CHECK(nodes[2].device->id == 0);  // everything else
    std::set<int> handoffs;
    for (size_t i = 3; i < nodes.size(); ++i) {
      CHECK_FALSE(nodes[i].primary);
      handoffs.insert(nodes[i].device->id);
    }
    CHECK(handoffs == std::set<int>{2, 4, 5});
  }
}

TEST_CASE("shuffle spreads reads over the primaries, and error-limited nodes are skipped") {
  auto ring = two_region_ring();
  NodeHealth health(0, 60);
  NodeOrder order;
  std::set<int> firsts;
  for (int round = 0; round < 200; ++round) {
    firsts.insert(all_nodes(NodeIter(*ring, 0, 3, health, order))[0].device->id);
  }
  CHECK(firsts == std::set<int>{0, 1, 3});
  health.record_error(*ring->get_part_nodes(0).nodes[1].device);  // device 3, limit 0
  auto nodes = all_nodes(NodeIter(*ring, 0, 100, health, order));
  CHECK(nodes.size() == 5);
  for (const auto& n : nodes) CHECK(n.device->id != 3);
}

TEST_CASE("timing sorts the primaries by their last timing, unknown ones first") {
  auto ring = two_region_ring();
  NodeHealth health(10, 60, 300, true);
  NodeOrder order = order_from("sorting_method = timing\n");
  auto primaries = ring->get_part_nodes(0);
  health.record_timing(*primaries.nodes[0].device, 0.020);  // device 0
  health.record_timing(*primaries.nodes[2].device, 0.005);  // device 1
  for (int round = 0; round < 20; ++round) {
    auto nodes = all_nodes(NodeIter(*ring, 0, 3, health, order));
    REQUIRE(nodes.size() == 3);
    CHECK(nodes[0].device->id == 3);
    CHECK(nodes[1].device->id == 1);
    CHECK(nodes[2].device->id == 0);
  }
  NodeHealth forgetful(10, 60, 300, false);
  forgetful.record_timing(*primaries.nodes[0].device, 0.5);
  CHECK(forgetful.timing(*primaries.nodes[0].device) == -1);
}

TEST_CASE("write affinity sends writes to local nodes first, primaries or handoffs") {
  auto ring = two_region_ring();
  NodeHealth health(10, 60);
  NodeOrder order = order_from("write_affinity = r1\nwrite_affinity_node_count = 3\n");
  for (int round = 0; round < 20; ++round) {
    auto nodes = all_nodes(NodeIter(*ring, 0, 100, health, order, NodeIter::Purpose::kWrite));
    REQUIRE(nodes.size() == 6);
    std::set<int> first{nodes[0].device->id, nodes[1].device->id, nodes[2].device->id};
    CHECK(first == std::set<int>{0, 1, 2});  // region 1: two primaries and a handoff
    std::set<int> seen;
    for (const auto& n : nodes) seen.insert(n.device->id);
    CHECK(seen.size() == 6);  // nobody twice, nobody left out
    for (const auto& n : nodes) CHECK(n.primary == (n.device->id == 0 || n.device->id == 1 ||
                                                    n.device->id == 3));
  }
  // Reads ignore write affinity.
  auto reads = all_nodes(NodeIter(*ring, 0, 3, health, order));
  std::set<int> read_set;
  for (const auto& n : reads) read_set.insert(n.device->id);
  CHECK(read_set == std::set<int>{0, 1, 3});
}

TEST_CASE("a DELETE under write affinity also goes to a local handoff per remote primary") {
  auto ring = two_region_ring();
  NodeHealth health(10, 60);
  NodeIter it(*ring, 0, 100, health, order_from("write_affinity = r1\n"),
              NodeIter::Purpose::kDelete);
  CHECK(it.request_count() == 4);  // three primaries, one of them remote: one local handoff
  CHECK(it.primary_count() == 3);
  auto nodes = all_nodes(std::move(it));
  std::set<int> first;
  for (size_t i = 0; i < 3; ++i) first.insert(nodes[i].device->id);
  CHECK(first == std::set<int>{0, 1, 3});
  CHECK(nodes[3].device->id == 2);
  CHECK(nodes.size() == 6);
  NodeIter counted(*ring, 0, 100, health,
                   order_from("write_affinity = r1\nwrite_affinity_handoff_delete_count = 0\n"),
                   NodeIter::Purpose::kDelete);
  CHECK(counted.request_count() == 3);
}

namespace {
const ring::Device& device(const ring::Ring& ring, int id) {
  return *ring.state()->devs()[static_cast<size_t>(id)];
}

struct HandoffRecord final : HandoffLog {
  std::vector<std::pair<size_t, bool>> calls;
  void extra_handoff(size_t handoffs, bool all_primaries) override {
    calls.emplace_back(handoffs, all_primaries);
  }
};
}  // namespace

TEST_CASE("handoffs beyond the node count's plan are logged, as Swift's log_handoffs") {
  auto ring = two_region_ring();
  NodeOrder order;
  SUBCASE("all primaries up: 2 * replicas nodes use the 3 planned handoffs, nothing logged") {
    NodeHealth health(10, 60);
    HandoffRecord log;
    CHECK(all_nodes(NodeIter(*ring, 0, 6, health, order, NodeIter::Purpose::kRead, &log))
              .size() == 6);
    CHECK(log.calls.empty());
  }
  SUBCASE("a limited primary: with 5 nodes, the third handoff is one more than planned") {
    NodeHealth health(0, 60);  // one error limits a node
    health.record_error(device(*ring, 0));
    HandoffRecord log;
    auto nodes = all_nodes(NodeIter(*ring, 0, 5, health, order, NodeIter::Purpose::kRead, &log));
    CHECK(nodes.size() == 5);  // 2 primaries and the 3 other devices
    REQUIRE(log.calls.size() == 1);
    CHECK(log.calls[0] == std::pair<size_t, bool>(3, false));
  }
  SUBCASE("with request_node_count = replicas every handoff is unplanned; all primaries down") {
    NodeHealth health(0, 60);
    for (int id : {0, 1, 3}) health.record_error(device(*ring, id));
    HandoffRecord log;
    auto nodes = all_nodes(NodeIter(*ring, 0, 3, health, order, NodeIter::Purpose::kRead, &log));
    REQUIRE(nodes.size() == 3);
    for (const NodeRef& n : nodes) CHECK_FALSE(n.primary);
    REQUIRE(log.calls.size() == 3);
    CHECK(log.calls[0] == std::pair<size_t, bool>(1, false));
    CHECK(log.calls[1] == std::pair<size_t, bool>(2, false));
    CHECK(log.calls[2] == std::pair<size_t, bool>(3, true));
  }
}

TEST_CASE("a node error-limited while in use gives its place to another, as in Swift") {
  auto ring = two_region_ring();
  NodeOrder order;
  NodeHealth health(0, 60);
  HandoffRecord log;
  NodeIter it(*ring, 0, 3, health, order, NodeIter::Purpose::kRead, &log);
  NodeRef n;
  std::vector<NodeRef> given;
  while (it.next(&n)) {
    given.push_back(n);
    if (given.size() == 1) health.record_error(*n.device);  // the first one fails
  }
  // Three places: the failed primary's went to a fourth node, a handoff.
  REQUIRE(given.size() == 4);
  CHECK_FALSE(given[3].primary);
  CHECK(log.calls.size() == 1);
}

}  // namespace apus::proxy
