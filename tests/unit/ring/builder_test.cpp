#include "ring/builder.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <stdlib.h>

#include "common/io/fs.h"
#include "ring/builder_cli.h"
#include "ring/internal/builder_util.h"
#include "ring/ring_data.h"
#include "tests/support/temp_dir.h"

// Test-only: checks a Status is OK and prints it when it is not.
#define APUS_REQUIRE_OK(expr)                           \
  do {                                                  \
    const ::apus::common::Status apus_s_ = (expr);      \
    REQUIRE_MESSAGE(apus_s_.ok(), apus_s_.to_string()); \
  } while (0)

namespace apus::ring {
namespace {

using common::Status;
using Code = common::Status::Code;

class TempDir : public apus::test::TempDir {
 public:
  TempDir() : apus::test::TempDir("apus_builder_test") {}
};

std::string read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

Device make_dev(int region, int zone, const std::string& ip, const std::string& name, double weight,
                int port = 6200) {
  Device d;
  d.region = region;
  d.zone = zone;
  d.ip = ip;
  d.port = port;
  d.device = name;
  d.weight = weight;
  return d;
}

// regions x zones x servers x disks devices of the given weight.
RingBuilder make_builder(int part_power, double replicas, int regions, int zones, int servers,
                         int disks, double weight = 100.0, int min_part_hours = 0) {
  auto b = RingBuilder::create(part_power, replicas, min_part_hours);
  REQUIRE(b.ok());
  for (int r = 1; r <= regions; ++r) {
    for (int z = 1; z <= zones; ++z) {
      for (int s = 1; s <= servers; ++s) {
        for (int d = 0; d < disks; ++d) {
          const std::string ip =
              "10." + std::to_string(r) + "." + std::to_string(z) + "." + std::to_string(s);
          REQUIRE(
              b->add_dev(make_dev(r, z, ip, "sd" + std::string(1, char('a' + d)), weight)).ok());
        }
      }
    }
  }
  return std::move(*b);
}

RebalanceResult rebalance_ok(RingBuilder& b, double now = 1.7e9, std::string seed = "1") {
  auto r = b.rebalance(RebalanceOptions{seed, now});
  REQUIRE_MESSAGE(r.ok(), r.status().to_string());
  return *r;
}

// Every partition has its whole number of replicas on distinct live devices, and the device part
// counts add up to the assignment.
void check_assignment(const RingBuilder& b) {
  APUS_REQUIRE_OK(b.validate());
  const auto& rows = b.state().replica2part2dev;
  const int64_t parts = b.parts();
  double whole = 0;
  const double frac = std::modf(b.replicas(), &whole);
  REQUIRE(rows.size() == static_cast<std::size_t>(whole) + (frac > 0 ? 1 : 0));
  for (std::size_t r = 0; r < static_cast<std::size_t>(whole); ++r) {
    REQUIRE(static_cast<int64_t>(rows[r].size()) == parts);
  }
  if (frac > 0)
    REQUIRE(static_cast<int64_t>(rows.back().size()) == static_cast<int64_t>(parts * frac));
  std::vector<int64_t> counted(b.devs().size(), 0);
  for (int64_t p = 0; p < parts; ++p) {
    std::set<int> seen;
    std::size_t n = 0;
    for (const auto& row : rows) {
      if (p >= static_cast<int64_t>(row.size())) continue;
      REQUIRE(row[p] < b.devs().size());
      REQUIRE(b.devs()[row[p]].has_value());
      seen.insert(row[p]);
      ++counted[row[p]];
      ++n;
    }
    REQUIRE(seen.size() == n);
  }
  for (const auto& d : b.devs()) {
    if (d) CHECK(d->parts == counted[d->id]);
  }
}

// Largest number of replicas of one partition inside one tier of the given depth (1 region,
// 2 zone, 3 server).
int max_replicas_in_tier(const RingBuilder& b, int depth) {
  int worst = 0;
  for (int64_t p = 0; p < b.parts(); ++p) {
    std::vector<std::string> keys;
    for (const auto& row : b.state().replica2part2dev) {
      if (p >= static_cast<int64_t>(row.size())) continue;
      const BuilderDevice& d = *b.devs()[row[p]];
      std::string key = std::to_string(d.region);
      if (depth >= 2) key += "/" + std::to_string(d.zone);
      if (depth >= 3) key += "/" + d.ip;
      keys.push_back(key);
    }
    for (const auto& k : keys)
      worst = std::max<int>(worst, static_cast<int>(std::count(keys.begin(), keys.end(), k)));
  }
  return worst;
}

int64_t moved_between(const std::vector<std::vector<uint16_t>>& a,
                      const std::vector<std::vector<uint16_t>>& b) {
  int64_t moved = 0;
  for (std::size_t r = 0; r < std::max(a.size(), b.size()); ++r) {
    const std::size_t n = std::max(r < a.size() ? a[r].size() : 0, r < b.size() ? b[r].size() : 0);
    for (std::size_t p = 0; p < n; ++p) {
      const bool in_a = r < a.size() && p < a[r].size();
      const bool in_b = r < b.size() && p < b[r].size();
      if (in_a != in_b || (in_a && a[r][p] != b[r][p])) ++moved;
    }
  }
  return moved;
}

TEST_CASE("builder: PyRandom draws the numbers Python's random module draws") {
  internal::PyRandom rng;
  rng.seed_str("42");
  CHECK(rng.getrandbits(32) == 2034351728u);
  CHECK(rng.getrandbits(32) == 1957669590u);
  CHECK(rng.getrandbits(32) == 2719510229u);
  rng.seed_str("apus");
  CHECK(rng.randint(0, 0xFFFF) == 13097);
  CHECK(rng.randint(0, 0xFFFF) == 1544);
  CHECK(rng.randint(0, 0xFFFF) == 64227);
  CHECK(rng.randint(0, 512) == 311);
  rng.seed_int(7);
  std::vector<int> v = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  rng.shuffle(v);
  CHECK(v == std::vector<int>{8, 3, 1, 4, 7, 0, 9, 6, 2, 5});
  rng.seed_int(12345678901234ull);
  CHECK(rng.getrandbits(32) == 107551873u);
  CHECK(rng.getrandbits(32) == 2403399316u);
}

TEST_CASE("builder: py_float_repr prints floats as Python's repr does") {
  CHECK(internal::py_float_repr(100.0) == "100.0");
  CHECK(internal::py_float_repr(0.5) == "0.5");
  CHECK(internal::py_float_repr(50.5) == "50.5");
  CHECK(internal::py_float_repr(1e-05) == "1e-05");
  CHECK(internal::py_float_repr(0.0001) == "0.0001");
  CHECK(internal::py_float_repr(1e16) == "1e+16");
  CHECK(internal::py_float_repr(123456789012345.0) == "123456789012345.0");
  CHECK(internal::py_float_repr(-2.5) == "-2.5");
  CHECK(internal::py_float_repr(0.1 + 0.2) == "0.30000000000000004");
}

TEST_CASE("builder: create refuses out-of-range parameters") {
  CHECK(RingBuilder::create(33, 3, 1).status().code() == Code::kInvalidArgument);
  CHECK(RingBuilder::create(-1, 3, 1).status().code() == Code::kInvalidArgument);
  CHECK(RingBuilder::create(8, 0.99, 1).status().code() == Code::kInvalidArgument);
  CHECK(RingBuilder::create(8, NAN, 1).status().code() == Code::kInvalidArgument);
  CHECK(RingBuilder::create(8, 3, -1).status().code() == Code::kInvalidArgument);
  auto b = RingBuilder::create(8, 2.5, 0);
  REQUIRE(b.ok());
  CHECK(b->parts() == 256);
  CHECK_FALSE(b->ever_rebalanced());
}

TEST_CASE(
    "builder: add_dev reuses holes and refuses bad or duplicate devices, leaving the builder as it "
    "was") {
  auto b = RingBuilder::create(6, 1, 0);
  REQUIRE(b.ok());
  for (int i = 0; i < 3; ++i) {
    auto id = b->add_dev(make_dev(1, i + 1, "10.0.0." + std::to_string(i + 1), "sda", 100));
    REQUIRE(id.ok());
    CHECK(*id == i);
  }
  const int64_t version = b->state().version;
  CHECK(b->add_dev(make_dev(1, 1, "10.0.0.1", "sda", 10)).status().code() == Code::kConflict);
  CHECK(b->add_dev(make_dev(1, 1, "10.0.0.9", "sda", -1)).status().code() ==
        Code::kInvalidArgument);
  CHECK(b->add_dev(make_dev(1, 1, "10.0.0.9", "sda", INFINITY)).status().code() ==
        Code::kInvalidArgument);
  CHECK(b->add_dev(make_dev(1, 1, "10.0.0.9", "", 1)).status().code() == Code::kInvalidArgument);
  CHECK(b->add_dev(make_dev(1, 1, "10.0.0.9", " sda", 1)).status().code() ==
        Code::kInvalidArgument);
  CHECK(b->add_dev(make_dev(1, 1, "10.0.0.9", "sda", 1, 70000)).status().code() ==
        Code::kInvalidArgument);
  CHECK(b->add_dev(make_dev(1, 1, "10.0.0.9", "sda", 1), 0).status().code() ==
        Code::kInvalidArgument);
  CHECK(b->state().version == version);
  CHECK(b->devs().size() == 3);

  // Replication address defaults to the client one; a same ip:port with another name is fine.
  auto id = b->add_dev(make_dev(1, 1, "10.0.0.1", "sdb", 100));
  REQUIRE(id.ok());
  CHECK(b->devs()[*id]->replication_ip == "10.0.0.1");
  CHECK(b->devs()[*id]->replication_port == 6200);

  // A removed device's id becomes a hole after the rebalance and is reused first.
  rebalance_ok(*b);
  APUS_REQUIRE_OK(b->remove_dev(1));
  CHECK(b->marked_for_removal(1));
  CHECK(b->set_weight(1, 5).code() == Code::kInvalidArgument);  // being removed
  auto r = rebalance_ok(*b, 1.7e9 + 7200);
  CHECK(r.removed_devices == 1);
  CHECK_FALSE(b->devs()[1].has_value());
  auto reused = b->add_dev(make_dev(1, 2, "10.0.0.7", "sda", 100));
  REQUIRE(reused.ok());
  CHECK(*reused == 1);
  CHECK(b->remove_dev(42).code() == Code::kNotFound);
  CHECK(b->set_weight(42, 1).code() == Code::kNotFound);
  CHECK(b->set_weight(0, -1).code() == Code::kInvalidArgument);
}

TEST_CASE("builder: rebalance needs enough weighted devices") {
  auto b = RingBuilder::create(4, 3, 0);
  REQUIRE(b.ok());
  REQUIRE(b->add_dev(make_dev(1, 1, "10.0.0.1", "sda", 1)).ok());
  REQUIRE(b->add_dev(make_dev(1, 2, "10.0.0.2", "sda", 1)).ok());
  REQUIRE(b->add_dev(make_dev(1, 3, "10.0.0.3", "sda", 0)).ok());
  auto r = b->rebalance();
  CHECK(r.status().code() == Code::kInvalidArgument);
  CHECK(r.status().message() == "Replica count of 3.0 requires more than 2 devices");
  CHECK_FALSE(b->ever_rebalanced());  // a failed rebalance changes nothing
  CHECK(b->balance().ok());
  auto empty = RingBuilder::create(4, 1, 0);
  CHECK(empty->balance().status().message() ==
        "There are no devices in this ring, or all devices have been deleted");
}

TEST_CASE("builder: rebalance spreads replicas over zones and balances equal weights") {
  RingBuilder b = make_builder(10, 3, 1, 4, 2, 3);
  auto r = rebalance_ok(b);
  CHECK(r.changed_parts == 3 * 1024);
  check_assignment(b);
  CHECK(max_replicas_in_tier(b, 2) == 1);  // never two replicas in one zone
  CHECK(*b.balance() < 1.0);
  CHECK(*b.state().dispersion == 0.0);
  CHECK(b.state().version == 25);  // 24 adds + the rebalance
  CHECK_FALSE(b.state().devs_changed);
}

TEST_CASE("builder: rebalance across two regions keeps a replica in each region") {
  RingBuilder b = make_builder(10, 3, 2, 2, 2, 2);
  rebalance_ok(b);
  check_assignment(b);
  CHECK(max_replicas_in_tier(b, 1) == 2);
  CHECK(max_replicas_in_tier(b, 2) == 1);
  CHECK(*b.balance() < 1.0);
  auto report = b.dispersion_report("", true);
  REQUIRE(report.ok());
  CHECK(report->max_dispersion == 0.0);
  CHECK(report->worst_tier.empty());
  REQUIRE_FALSE(report->graph.empty());
  CHECK(report->graph[0].name == "r1");
  CHECK(report->graph[0].max_replicas == 2);
  auto zones = b.dispersion_report(R"(r\d+z\d+$)", true);
  REQUIRE(zones.ok());
  CHECK(zones->graph.size() == 4);
  CHECK(b.dispersion_report("(", true).status().code() == Code::kInvalidArgument);
}

TEST_CASE("builder: rebalance follows unequal weights") {
  auto b = RingBuilder::create(12, 3, 0);
  REQUIRE(b.ok());
  int n = 0;
  for (int z = 1; z <= 4; ++z) {
    for (int d = 0; d < 4; ++d, ++n) {
      REQUIRE(b->add_dev(make_dev(1, z, "10.0.0." + std::to_string(z), "d" + std::to_string(d),
                                  100 + 50 * (n % 3)))
                  .ok());
    }
  }
  rebalance_ok(*b);
  check_assignment(*b);
  CHECK(*b->balance() < 2.0);
  CHECK(max_replicas_in_tier(*b, 2) == 1);
  // A heavier device holds proportionally more.
  const auto& devs = b->devs();
  CHECK(std::abs(static_cast<double>(devs[2]->parts) / devs[0]->parts - 2.0) < 0.05);
}

TEST_CASE("builder: fractional replicas: the last row covers its share, all replicas distinct") {
  RingBuilder b = make_builder(8, 2.5, 1, 3, 1, 2);
  rebalance_ok(b);
  check_assignment(b);
  CHECK(b.state().replica2part2dev[2].size() == 128);
  CHECK(*b.balance() < 2.0);
  // Changing the replica count regrows the rows.
  APUS_REQUIRE_OK(b.set_replicas(3));
  CHECK(b.state().devs_changed);
  b.pretend_min_part_hours_passed();
  rebalance_ok(b, 1.7e9 + 10);
  check_assignment(b);
  CHECK(b.state().replica2part2dev.size() == 3);
  APUS_REQUIRE_OK(b.set_replicas(2));
  rebalance_ok(b, 1.7e9 + 20);
  check_assignment(b);
  CHECK(b.set_replicas(0.5).code() == Code::kInvalidArgument);
}

TEST_CASE("builder: adding devices moves about their share and no more") {
  // One new device per zone keeps the zones equal: the moves are what the new devices take.
  RingBuilder b = make_builder(12, 3, 1, 4, 2, 2);
  rebalance_ok(b);
  const auto before = b.state().replica2part2dev;
  std::vector<int> added;
  for (int z = 1; z <= 4; ++z) {
    auto id = b.add_dev(make_dev(1, z, "10.0.9." + std::to_string(z), "sdz", 100));
    REQUIRE(id.ok());
    added.push_back(*id);
  }
  b.pretend_min_part_hours_passed();
  auto r = rebalance_ok(b, 1.7e9 + 3600);
  check_assignment(b);
  const int64_t fair_share = 3 * 4096 / 20;
  int64_t gained = 0;
  for (int id : added) {
    CHECK(std::abs(b.devs()[id]->parts - fair_share) <= 2);
    gained += b.devs()[id]->parts;
  }
  CHECK(r.changed_parts == moved_between(before, b.state().replica2part2dev));
  CHECK(r.changed_parts <= gained + 4);
  CHECK(*b.balance() < 1.0);

  // One device into one of six zones: it gets most of its share at once, for a bounded cost.
  RingBuilder c = make_builder(12, 3, 1, 6, 2, 2);
  rebalance_ok(c);
  auto id = c.add_dev(make_dev(1, 1, "10.0.9.9", "sdz", 100));
  REQUIRE(id.ok());
  c.pretend_min_part_hours_passed();
  r = rebalance_ok(c, 1.7e9 + 3600);
  check_assignment(c);
  const int64_t share = 3 * 4096 / 25;
  CHECK(c.devs()[*id]->parts >= share * 9 / 10);
  CHECK(r.changed_parts <= share * 3 / 2);
}

TEST_CASE("builder: min_part_hours keeps recently moved partitions, except off removed devices") {
  RingBuilder b = make_builder(8, 3, 1, 4, 1, 2, 100.0, 24);
  const double t0 = 1.7e9;
  rebalance_ok(b, t0);
  CHECK(b.min_part_seconds_left(t0) == 24 * 3600);
  CHECK(b.min_part_seconds_left(t0 + 3600) == 23 * 3600);

  // A new device gets nothing while every partition moved within the last day.
  const auto before = b.state().replica2part2dev;
  auto id = b.add_dev(make_dev(1, 1, "10.0.9.9", "sdz", 100));
  REQUIRE(id.ok());
  auto r = rebalance_ok(b, t0 + 3600);
  CHECK(r.changed_parts == 0);
  CHECK(b.devs()[*id]->parts == 0);

  // A removed device is emptied at once anyway.
  APUS_REQUIRE_OK(b.remove_dev(0));
  const int64_t held = b.devs()[0]->parts;
  REQUIRE(held > 0);
  r = rebalance_ok(b, t0 + 7200);
  CHECK(r.removed_devices == 1);
  CHECK(r.changed_parts == held);
  CHECK_FALSE(b.devs()[0].has_value());
  check_assignment(b);
  const auto& after = b.state().replica2part2dev;
  for (std::size_t row = 0; row < after.size(); ++row) {
    for (std::size_t p = 0; p < after[row].size(); ++p) {
      // Only the removed device's replicas moved.
      if (before[row][p] != 0) CHECK(after[row][p] == before[row][p]);
    }
  }
  // A day later a reweight takes effect.
  APUS_REQUIRE_OK(b.set_weight(*id, 300));
  r = rebalance_ok(b, t0 + 12 * 3600);
  CHECK(r.changed_parts == 0);
  r = rebalance_ok(b, t0 + 27 * 3600);
  CHECK(r.changed_parts > 0);
  check_assignment(b);

  // pretend_min_part_hours_passed lifts the restriction immediately.
  APUS_REQUIRE_OK(b.set_weight(*id, 100));
  b.pretend_min_part_hours_passed();
  CHECK(b.min_part_seconds_left(t0 + 27 * 3600) == 0);
  r = rebalance_ok(b, t0 + 27 * 3600 + 1);
  CHECK(r.changed_parts > 0);
}

TEST_CASE("builder: reweighting a device shifts partitions toward it") {
  RingBuilder b = make_builder(10, 3, 1, 4, 1, 2);
  rebalance_ok(b);
  const int64_t before = b.devs()[0]->parts;
  APUS_REQUIRE_OK(b.set_weight(0, 150));
  b.pretend_min_part_hours_passed();
  rebalance_ok(b, 1.7e9 + 10);
  check_assignment(b);
  CHECK(b.devs()[0]->parts > before);
  APUS_REQUIRE_OK(b.set_weight(0, 0));
  b.pretend_min_part_hours_passed();
  rebalance_ok(b, 1.7e9 + 20);
  check_assignment(b);
  CHECK(b.devs()[0]->parts == 0);
}

TEST_CASE("builder: a seeded rebalance is repeatable, and unseeded ones are too") {
  RingBuilder a = make_builder(9, 3, 1, 3, 2, 2);
  RingBuilder b = a;
  rebalance_ok(a, 1.7e9, "7");
  rebalance_ok(b, 1.7e9, "7");
  CHECK(a.state().replica2part2dev == b.state().replica2part2dev);
  RingBuilder c = make_builder(9, 3, 1, 3, 2, 2);
  RingBuilder d = c;
  REQUIRE(c.rebalance(RebalanceOptions{std::nullopt, 1.7e9}).ok());
  REQUIRE(d.rebalance(RebalanceOptions{std::nullopt, 1.7e9}).ok());
  CHECK(c.state().replica2part2dev == d.state().replica2part2dev);
}

TEST_CASE("builder: overload lets a small zone take more than its weight for dispersion") {
  // Three zones, one of them a quarter the weight: without overload, weight wins.
  auto make = [] {
    auto b = RingBuilder::create(10, 3, 0);
    REQUIRE(b->add_dev(make_dev(1, 1, "10.0.0.1", "sda", 100)).ok());
    REQUIRE(b->add_dev(make_dev(1, 2, "10.0.0.2", "sda", 100)).ok());
    REQUIRE(b->add_dev(make_dev(1, 3, "10.0.0.3", "sda", 25)).ok());
    REQUIRE(b->add_dev(make_dev(1, 3, "10.0.0.3", "sdb", 25)).ok());
    REQUIRE(b->add_dev(make_dev(1, 1, "10.0.0.1", "sdb", 100)).ok());
    return std::move(*b);
  };
  RingBuilder plain = make();
  rebalance_ok(plain);
  check_assignment(plain);
  CHECK(*plain.state().dispersion > 0);
  auto req = plain.required_overload();
  REQUIRE(req.ok());
  CHECK(*req > 0);
  RingBuilder over = make();
  APUS_REQUIRE_OK(over.set_overload(*req + 0.01));
  rebalance_ok(over);
  check_assignment(over);
  CHECK(*over.state().dispersion < *plain.state().dispersion);
  CHECK(over.set_overload(-1).code() == Code::kInvalidArgument);
}

TEST_CASE("builder: validate reports a partition on one device twice") {
  RingBuilder b = make_builder(4, 2, 1, 2, 1, 1);
  rebalance_ok(b);
  APUS_REQUIRE_OK(b.validate());
  BuilderState s = b.state();
  s.replica2part2dev[1][3] = s.replica2part2dev[0][3];
  auto broken = RingBuilder::from_state(s);
  REQUIRE(broken.ok());
  const Status v = broken->validate();
  CHECK(v.code() == Code::kInvalidArgument);
  CHECK(v.message().find("The partition 3 has been assigned to duplicate devices") == 0);
  // And a rebalance repairs it.
  broken->pretend_min_part_hours_passed();
  rebalance_ok(*broken, 1.7e9 + 1);
  check_assignment(*broken);
  auto never = RingBuilder::create(4, 1, 0);
  CHECK(never->validate().message() == "_replica2part2dev empty; did you forget to rebalance?");
}

TEST_CASE("builder: from_state refuses inconsistent states") {
  RingBuilder b = make_builder(4, 2, 1, 2, 1, 1);
  rebalance_ok(b);
  BuilderState s = b.state();
  s.replica2part2dev[0][0] = 9;
  CHECK(RingBuilder::from_state(s).status().code() == Code::kCorruption);
  s = b.state();
  s.devs[1]->id = 5;
  CHECK(RingBuilder::from_state(s).status().code() == Code::kCorruption);
  s = b.state();
  s.remove_devs = {7};
  CHECK(RingBuilder::from_state(s).status().code() == Code::kCorruption);
  s = b.state();
  s.replicas = 0;
  CHECK(RingBuilder::from_state(s).status().code() == Code::kCorruption);
}

TEST_CASE("builder: ring_data and from_ring_data round trip the assignment") {
  RingBuilder b = make_builder(6, 2.5, 1, 3, 1, 1);
  b.ensure_id();
  rebalance_ok(b);
  RingData ring = b.ring_data();
  CHECK(ring.part_shift == 26);
  CHECK(ring.version == b.state().version);
  CHECK(ring.replica2part2dev == b.state().replica2part2dev);
  REQUIRE(ring.devs.size() == 3);
  CHECK(ring.devs[2]->ip == "10.1.3.1");
  auto back = RingBuilder::from_ring_data(ring, 5);
  REQUIRE(back.ok());
  CHECK(back->state().min_part_hours == 5);
  CHECK(back->replicas() == 2.5);
  CHECK(back->state().replica2part2dev == b.state().replica2part2dev);
  for (const auto& d : b.devs()) CHECK(back->devs()[d->id]->parts == d->parts);
  CHECK_FALSE(back->state().dispersion.has_value());
  APUS_REQUIRE_OK(back->validate());
}

TEST_CASE("builder: search_devs matches Swift's search values") {
  RingBuilder b = make_builder(4, 1, 1, 2, 1, 2);
  DeviceSearch q;
  q.zone = 2;
  CHECK(b.search_devs(q) == std::vector<int>{2, 3});
  q.device = "sdb";
  CHECK(b.search_devs(q) == std::vector<int>{3});
  DeviceSearch ip;
  ip.ip = "10.1.1.1";
  CHECK(b.search_devs(ip) == std::vector<int>{0, 1});
  DeviceSearch meta;
  meta.meta = "";
  CHECK(b.search_devs(meta).size() == 4);
}

// --- The builder file.

TEST_CASE_FIXTURE(TempDir, "builder: builder files round trip every field") {
  RingBuilder b = make_builder(8, 2.5, 2, 2, 1, 2);
  APUS_REQUIRE_OK(b.set_overload(0.125));
  rebalance_ok(b);
  APUS_REQUIRE_OK(b.remove_dev(3));
  auto id = b.add_dev(make_dev(2, 2, "2001:db8::1", "weird \"name\"\\", 7.25, 6300));
  REQUIRE(id.ok());
  const std::string path = this->path("x.builder");
  APUS_REQUIRE_OK(save_builder_file(b, path));
  CHECK(b.state().id.size() == 32);
  auto loaded = load_builder_file(path);
  REQUIRE_MESSAGE(loaded.ok(), loaded.status().to_string());
  const BuilderState& x = b.state();
  const BuilderState& y = loaded->state();
  CHECK(y.part_power == x.part_power);
  CHECK(y.replicas == x.replicas);
  CHECK(y.min_part_hours == x.min_part_hours);
  CHECK(y.overload == x.overload);
  CHECK(y.version == x.version);
  CHECK(y.id == x.id);
  CHECK(y.devs_changed == x.devs_changed);
  CHECK(y.dispersion == x.dispersion);
  CHECK(y.remove_devs == x.remove_devs);
  CHECK(y.replica2part2dev == x.replica2part2dev);
  CHECK(y.last_part_moves == x.last_part_moves);
  CHECK(y.last_part_moves_epoch == x.last_part_moves_epoch);
  CHECK(y.last_part_gather_start == x.last_part_gather_start);
  REQUIRE(y.devs.size() == x.devs.size());
  for (std::size_t i = 0; i < x.devs.size(); ++i) {
    REQUIRE(y.devs[i].has_value() == x.devs[i].has_value());
    if (!x.devs[i]) continue;
    CHECK(y.devs[i]->device == x.devs[i]->device);
    CHECK(y.devs[i]->ip == x.devs[i]->ip);
    CHECK(y.devs[i]->weight == x.devs[i]->weight);
    CHECK(y.devs[i]->parts == x.devs[i]->parts);
    CHECK(y.devs[i]->replication_port == x.devs[i]->replication_port);
  }
  // The same rebalance follows from the original and the reloaded builder.
  RingBuilder again = std::move(*loaded);
  rebalance_ok(b, 1.7e9 + 9000, "3");
  rebalance_ok(again, 1.7e9 + 9000, "3");
  CHECK(again.state().replica2part2dev == b.state().replica2part2dev);
  CHECK((std::filesystem::status(path).permissions() & std::filesystem::perms::all) ==
        (std::filesystem::perms::owner_read | std::filesystem::perms::owner_write |
         std::filesystem::perms::group_read | std::filesystem::perms::others_read));
}

TEST_CASE("builder: damaged builder files give clear errors") {
  RingBuilder b = make_builder(5, 3, 1, 3, 1, 1);
  rebalance_ok(b);
  const std::string good = encode_builder(b.state());
  REQUIRE(decode_builder(good).ok());

  CHECK(decode_builder("").status().code() == Code::kCorruption);
  CHECK(decode_builder("hello world").status().message() ==
        "not a ring builder file (unknown magic)");
  auto truncated = decode_builder(good.substr(0, good.size() / 2));
  CHECK(truncated.status().code() == Code::kCorruption);
  CHECK(truncated.status().message().find("truncated") != std::string::npos);
  std::string flipped = good;
  flipped[flipped.size() / 2] ^= 0x40;
  CHECK(decode_builder(flipped).status().code() == Code::kCorruption);

  // Unpacked images: checksum, version, header.
  std::string raw(std::string("APUSBLDR") + std::string("\x02\x00\x00\x00", 4) +
                  std::string(12, '\0'));
  auto v2 = decode_builder(raw);
  CHECK(v2.status().message().find("unsupported builder file format version 2") !=
        std::string::npos);
  std::string junk_json = std::string("APUSBLDR") + std::string("\x01\x00\x00\x00", 4) +
                          std::string("\x02\x00\x00\x00", 4) + "{]" + std::string(4, '\0');
  CHECK(decode_builder(junk_json).status().code() == Code::kCorruption);
}

TEST_CASE_FIXTURE(TempDir, "builder: a failed save leaves the old builder file and no temp file") {
  RingBuilder b = make_builder(6, 3, 1, 3, 1, 1);
  const std::string path = this->path("y.builder");
  APUS_REQUIRE_OK(save_builder_file(b, path));
  const std::string before = read_all(path);
  rebalance_ok(b);
  common::io::FaultInjectingFs faulty(common::io::default_fs());
  using Op = common::io::FaultInjectingFs::Op;
  for (Op op : {Op::kCreateTemp, Op::kWrite, Op::kFsync, Op::kRename}) {
    faulty.fail_next(op, op == Op::kWrite ? ENOSPC : EIO);
    CHECK_FALSE(save_builder_file(b, path, faulty).ok());
    CHECK(read_all(path) == before);
    std::size_t files = 0;
    for (const auto& e : std::filesystem::directory_iterator(root_)) {
      (void)e;
      ++files;
    }
    CHECK(files == 1);
  }
  faulty.fail_writes_after_bytes(10);
  CHECK(save_builder_file(b, path, faulty).code() == Code::kInsufficientStorage);
  CHECK(read_all(path) == before);
  faulty.clear_faults();
  APUS_REQUIRE_OK(save_builder_file(b, path, faulty));
  auto loaded = load_builder_file(path, faulty);
  REQUIRE(loaded.ok());
  CHECK(loaded->ever_rebalanced());
  CHECK(load_builder_file(this->path("missing.builder")).status().code() == Code::kNotFound);
}

// A builder written by swift-ring-builder 2.30.1 (create 3 2 1; add three devices; rebalance 1;
// remove d2): a protocol-2 pickle.
const char* const kSwiftPickleHex =
    "80027d710028580a000000706172745f706f77657271014b03580f0000006e6578745f706172745f706f7765727102"
    "4e"
    "58080000007265706c696361737103474000000000000000580e0000006d696e5f706172745f686f75727371044b01"
    "58"
    "05000000706172747371054b0858040000006465767371065d7107287d7108285806000000726567696f6e71094b01"
    "58"
    "040000007a6f6e65710a4b0158020000006970710b580800000031302e302e302e31710c5804000000706f7274710d"
    "4d"
    "38185806000000646576696365710e5803000000736461710f580e0000007265706c69636174696f6e5f6970711068"
    "0c"
    "58100000007265706c69636174696f6e5f706f727471114d381858040000006d657461711258000000007113580600"
    "00"
    "0077656967687471144740590000000000005802000000696471154b005805000000706172747371164b06580c0000"
    "00"
    "70617274735f77616e74656471174b00757d71182868094b01680a4b02680b580800000031302e302e302e32711968"
    "0d"
    "4d3818680e5803000000736461711a6810681968114d381868126813681447405900000000000068154b0168164b06"
    "68"
    "174b00757d711b2868094b01680a4b03680b580800000031302e302e302e33711c680d4d3818680e58030000007364"
    "61"
    "711d6810681c68114d3818681258010000006d711e68144b0068154b0268164b0468174b007565580c000000646576"
    "73"
    "5f6368616e676564711f88580700000076657273696f6e71204b0558080000006f7665726c6f616471214700000000"
    "00"
    "00000058110000005f7265706c69636132706172743264657671225d7123286361727261790a61727261790a712458"
    "01"
    "0000004871255d7126284b014b024b004b014b004b024b004b0065867127527128682468255d7129284b024b004b01"
    "4b"
    "024b014b004b014b016586712a52712b6558160000005f6c6173745f706172745f6d6f7665735f65706f6368712c4a"
    "9d"
    "bd0c6b58100000005f6c6173745f706172745f6d6f766573712d6824580100000042712e5d712f284b004b004b004b"
    "00"
    "4b004b004b004b006586713052713158170000005f6c6173745f706172745f6761746865725f737461727471324b05"
    "58"
    "110000005f64697370657273696f6e5f677261706871337d7134284b018571355d7136284b004b004b08654b014b02"
    "86"
    "71375d7138284b024b064b00654b014b0268198771395d713a284b024b064b0065284b014b0268194b0174713b5d71"
    "3c"
    "284b024b064b00654b014b0386713d5d713e284b044b044b00654b014b03681c87713f5d7140284b044b044b006528"
    "4b"
    "014b03681c4b027471415d7142284b044b044b00654b014b018671435d7144284b024b064b00654b014b01680c8771"
    "45"
    "5d7146284b024b064b0065284b014b01680c4b007471475d7148284b024b064b006575580a00000064697370657273"
    "69"
    "6f6e7149470000000000000000580c0000005f72656d6f76655f64657673714a5d714b681b6158020000006964714c"
    "58"
    "200000003330353165313362366434333432663439346462663438333565313134643137714d752e";

std::string unhex(const char* hex) {
  std::string out;
  for (const char* p = hex; p[0] && p[1]; p += 2) {
    out.push_back(static_cast<char>(std::stoi(std::string(p, 2), nullptr, 16)));
  }
  return out;
}

TEST_CASE("builder: a stock Swift pickle builder imports") {
  const std::string bytes = unhex(kSwiftPickleHex);
  CHECK(is_swift_pickle_builder(bytes));
  auto b = decode_builder(bytes);
  REQUIRE_MESSAGE(b.ok(), b.status().to_string());
  const BuilderState& s = b->state();
  CHECK(s.part_power == 3);
  CHECK(s.replicas == 2.0);
  CHECK(s.min_part_hours == 1);
  CHECK(s.version == 5);
  CHECK(s.id == "3051e13b6d4342f494dbf4835e114d17");
  CHECK(s.dispersion == 0.0);
  CHECK(s.last_part_moves_epoch == 1795997085);
  CHECK(s.remove_devs == std::vector<int>{2});
  REQUIRE(s.devs.size() == 3);
  CHECK(s.devs[2]->meta == "m");
  CHECK(s.devs[2]->weight == 0.0);
  CHECK(s.devs[0]->ip == "10.0.0.1");
  CHECK(s.replica2part2dev ==
        std::vector<std::vector<uint16_t>>{{1, 2, 0, 1, 0, 2, 0, 0}, {2, 0, 1, 2, 1, 0, 1, 1}});
  CHECK(b->devs()[0]->parts == 6);
  APUS_REQUIRE_OK(b->validate());
  // Truncated pickles are refused cleanly.
  for (std::size_t cut : {std::size_t{3}, bytes.size() / 3, bytes.size() - 1}) {
    CHECK(decode_builder(bytes.substr(0, cut)).status().code() == Code::kCorruption);
  }
}

TEST_CASE("builder: damaged files never crash the decoders") {
  // Every byte of a Swift pickle and of an unpacked Apus image flipped in a few ways, and every
  // truncation: each decode returns a builder or an error.
  RingBuilder b = make_builder(3, 2, 1, 2, 1, 1);
  rebalance_ok(b);
  std::vector<std::string> images = {unhex(kSwiftPickleHex), encode_builder(b.state())};
  int failures = 0;
  for (const std::string& image : images) {
    for (std::size_t i = 0; i < image.size(); ++i) {
      for (unsigned char flip : {0x01, 0x20, 0x80, 0xff}) {
        std::string m = image;
        m[i] = static_cast<char>(m[i] ^ flip);
        if (!decode_builder(m).ok()) ++failures;
      }
      if (!decode_builder(image.substr(0, i)).ok()) ++failures;
    }
  }
  CHECK(failures > 0);
}

// --- The command line.

struct CliResult {
  int code;
  std::string out, err;
};

CliResult run_cli(std::vector<std::string> args, const std::string& input = "") {
  args.insert(args.begin(), "apus-ring-builder");
  std::ostringstream out, err;
  std::istringstream in(input);
  const int code = run_ring_builder(args, out, err, in);
  return {code, out.str(), err.str()};
}

TEST_CASE_FIXTURE(TempDir, "apus-ring-builder: create, add, rebalance, listing") {
  const std::string f = path("object.builder");
  CliResult r = run_cli({f, "create", "6", "3", "1"});
  REQUIRE(r.code == 0);
  CHECK(std::filesystem::exists(f));
  CHECK(std::filesystem::is_directory(path("backups")));
  r = run_cli({f, "add", "r1z1-127.0.0.1:6200/sdb1", "100", "r1z2-127.0.0.2:6200/sdb1", "100",
               "z3-127.0.0.3:6200R10.0.0.3:6300/sdc1_meta1", "100"});
  CHECK(r.code == 0);
  CHECK(r.out ==
        "Device d0r1z1-127.0.0.1:6200R127.0.0.1:6200/sdb1_\"\" with 100.0 weight got id 0\n"
        "Device d1r1z2-127.0.0.2:6200R127.0.0.2:6200/sdb1_\"\" with 100.0 weight got id 1\n"
        "Device d2r1z3-127.0.0.3:6200R10.0.0.3:6300/sdc1_\"meta1\" with 100.0 weight got id 2\n");
  CHECK(r.err ==
        "WARNING: No region specified for z3-127.0.0.3:6200R10.0.0.3:6300/sdc1_meta1. "
        "Defaulting to region 1.\n");
  r = run_cli({f, "add", "--region", "1", "--zone", "4", "--ip", "10.0.0.9", "--port=6200",
               "--device", "sdd", "--weight", "50.5", "--meta", "hello"});
  CHECK(r.code == 0);
  CHECK(r.out ==
        "Device d3r1z4-10.0.0.9:6200R10.0.0.9:6200/sdd_\"hello\" with 50.5 weight got id 3\n");

  r = run_cli({f, "rebalance", "3"});
  CHECK(r.code == 0);
  CHECK(r.out.find("Reassigned 192 (300.00%) partitions. Balance is now ") == 0);
  CHECK(std::filesystem::exists(path("object.ring.gz")));
  auto ring = load_ring_file(path("object.ring.gz"));
  REQUIRE(ring.ok());
  CHECK(ring->replica2part2dev.size() == 3);

  // The backup ring is the ring as Swift would write it under the backup's own name.
  bool backup_checked = false;
  for (const auto& e : std::filesystem::directory_iterator(path("backups"))) {
    const std::string name = e.path().filename().string();
    if (name.size() < 8 || name.compare(name.size() - 8, 8, ".ring.gz") != 0) continue;
    auto image = encode_ring(*ring, name);
    REQUIRE(image.ok());
    CHECK(read_all(e.path().string()) == *image);
    CHECK(read_all(e.path().string()) != read_all(path("object.ring.gz")));
    backup_checked = true;
  }
  CHECK(backup_checked);

  r = run_cli({f, "rebalance"});
  CHECK(r.code == 1);
  CHECK(r.out.find("No partitions could be reassigned.\nThe time between rebalances must be at "
                   "least min_part_hours: 1 hours (") == 0);

  r = run_cli({f});
  CHECK(r.code == 0);
  CHECK(r.out.find(f + ", build version 5, id ") == 0);
  CHECK(r.out.find("64 partitions, 3.000000 replicas, 1 regions, 4 zones, 4 devices, ") !=
        std::string::npos);
  CHECK(r.out.find("The overload factor is 0.00% (0.000000)\n") != std::string::npos);
  CHECK(r.out.find("Ring file " + path("object.ring.gz") + " is up-to-date\n") !=
        std::string::npos);
  CHECK(r.out.find("Devices:   id region zone ip address:port replication ip:port  name weight "
                   "partitions balance flags meta\n") != std::string::npos);
  CHECK(r.out.find("            3      1    4   10.0.0.9:6200       10.0.0.9:6200   sdd  "
                   "50.50 ") != std::string::npos);

  r = run_cli({f, "validate"});
  CHECK(r.code == 0);
  r = run_cli({f, "dispersion", "-v"});
  CHECK(r.code == 0);
  CHECK(r.out.find("Dispersion is 0.000000, Balance is ") == 0);
  CHECK(
      r.out.find("Tier                           Parts      %    Max     0     1     2     3\n") !=
      std::string::npos);
  r = run_cli({f, "write_ring"});
  CHECK(r.code == 0);
  r = run_cli({f, "pretend_min_part_hours_passed"});
  CHECK(r.code == 0);
  r = run_cli({f, "search", "d3"});
  CHECK(r.code == 0);
  CHECK(r.out.find("10.0.0.9") != std::string::npos);
  r = run_cli({f, "list_parts", "d3"});
  CHECK(r.code == 0);
  CHECK(r.out.find("Partition   Matches\n") == 0);
}

TEST_CASE_FIXTURE(TempDir, "apus-ring-builder: bad input exits 2 and leaves the builder file") {
  const std::string f = path("t.builder");
  REQUIRE(run_cli({f, "create", "4", "2", "0"}).code == 0);
  REQUIRE(run_cli({f, "add", "r1z1-10.0.0.1:6200/sda", "1", "r1z2-10.0.0.2:6200/sda", "1",
                   "r1z2-10.0.0.2:6200/sdb", "1"})
              .code == 0);
  const std::string before = read_all(f);
  struct Case {
    std::vector<std::string> args;
    std::string out_starts;
  };
  const std::vector<Case> cases = {
      {{"add", "r1z1-10.0.0.1:6200/sda", "1"},
       "Device 0 already uses 10.0.0.1:6200/sda.\nThe on-disk ring builder is unchanged.\n"},
      {{"add", "r1z1-10.0.0.1:62x00/sda", "1"}, "Invalid port :62x00 in add value\n"},
      {{"add", "r1z1-10.0.0/sda", "1"}, "Invalid port in add value\n"},
      {{"add", "r1z1-10.0.0:6200/sda", "1"}, "Invalid ip 10.0.0\n"},
      {{"add", "r1z1-10.0.0.7:6200/sda", "abc"}, "could not convert string to float: 'abc'\n"},
      {{"add", "r1z1-10.0.0.7:6200/", "1"}, "Invalid device name\n"},
      {{"add", "rz1-10.0.0.7:6200/a", "1"}, "invalid literal for int() with base 10: ''\n"},
      {{"add", "x1-10.0.0.7:6200/a", "1"}, "Invalid add value: x1-10.0.0.7:6200/a\n"},
      {{"add", "r1z1-10.0.0.7:6200/a", "1", "r1z1-10.0.0.7:6200/a", "1"},
       "Device d3r1z1-10.0.0.7:6200R10.0.0.7:6200/a_\"\" with 1.0 weight got id 3\n"
       "Device 3 already uses 10.0.0.7:6200/a."},
      {{"add", "--region", "1", "--zone", "1", "--ip", "1.1.1.1", "--device", "x", "--weight", "3"},
       "Required argument -p/--port not specified.\n"},
      {{"add", "--region", "1", "--zone", "1", "--ip", "bad_host", "--port", "1", "--device", "x",
        "--weight", "3"},
       "Invalid address bad_host\n"},
      {{"add", "--region", "1", "--zone", "1", "--ip", "1.1.1.1", "--port", "1", "--device", "x",
        "--weight=-3"},
       "Invalid weight value: -3\n"},
      {{"set_weight", "d9", "5"}, "Search value matched 0 devices.\n"},
      {{"set_weight", "d1", "5x"}, "could not convert string to float: '5x'\n"},
      {{"set_weight", "d1", "--", "-5"}, "Invalid weight value: -5.0\n"},
      {{"set_weight", "dx", "5"}, "invalid literal for int() with base 10: ''\n"},
      {{"set_weight", "z2", "5"}, "Matched more than one device:\n"},
      {{"remove", "d7"}, "Search value matched 0 devices.\n"},
      {{"remove", "q!"}, "Invalid <search-value>: 'q!'\n"},
      {{"remove", "z2"}, "Matched more than one device:\n"},
      {{"dispersion"}, "Specified builder file \""},
      {{"validate"}, "_replica2part2dev empty; did you forget to rebalance?\n"},
      {{"frobnicate"}, "Unknown command: frobnicate\n"},
      {{"create", "40", "3", "1"}, "part_power must be at most 32 (was 40)\n"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = {f};
    args.insert(args.end(), c.args.begin(), c.args.end());
    CliResult r = run_cli(args, "n\n");
    CAPTURE(c.args);
    CAPTURE(r.out);
    CHECK(r.code == 2);
    CHECK(r.out.compare(0, c.out_starts.size(), c.out_starts) == 0);
    CHECK(read_all(f) == before);
  }
  CliResult opt = run_cli({f, "add", "--bogus", "3"});
  CHECK(opt.code == 2);
  CHECK(opt.err.find("error: no such option: --bogus") != std::string::npos);
  CHECK(read_all(f) == before);
  CliResult missing = run_cli({path("nope.builder")});
  CHECK(missing.code == 2);
  CHECK(missing.out == "Ring Builder file does not exist: " + path("nope.builder") + "\n");
  std::ofstream(path("junk.builder")) << "junk";
  CliResult junk = run_cli({path("junk.builder")});
  CHECK(junk.code == 2);
  CHECK(junk.out.find("Ring Builder file is invalid: ") == 0);

  // Too few devices for the replica count: an error block, nothing saved.
  const std::string g = path("g.builder");
  REQUIRE(run_cli({g, "create", "4", "3", "0"}).code == 0);
  REQUIRE(run_cli({g, "add", "r1z1-10.0.0.1:6200/sda", "1"}).code == 0);
  const std::string g_before = read_all(g);
  CliResult few = run_cli({g, "rebalance"});
  CHECK(few.code == 2);
  CHECK(few.out.find("Replica count of 3.0 requires more than 1 devices") != std::string::npos);
  CHECK(read_all(g) == g_before);
  CHECK_FALSE(std::filesystem::exists(path("g.ring.gz")));

  // Confirmed, a multi-device change goes through.
  CliResult yes = run_cli({f, "set_weight", "z2", "5"}, "y\n");
  CHECK(yes.code == 0);
  CHECK(yes.out.find("d1r1z2-10.0.0.2:6200R10.0.0.2:6200/sda_\"\" weight set to 5.0\n") !=
        std::string::npos);
  CHECK(read_all(f) != before);
}

TEST_CASE_FIXTURE(TempDir, "apus-ring-builder: remove, write_builder and a Swift pickle") {
  const std::string f = path("c.builder");
  REQUIRE(run_cli({f, "create", "5", "2", "0"}).code == 0);
  REQUIRE(run_cli({f, "add", "r1z1-10.0.0.1:6200/sda", "1", "r1z2-10.0.0.2:6200/sda", "1",
                   "r1z3-10.0.0.3:6200/sda", "1"})
              .code == 0);
  REQUIRE(run_cli({f, "rebalance"}).code == 0);
  CliResult r = run_cli({f, "remove", "d2"});
  CHECK(r.code == 0);
  CHECK(r.out ==
        "d2r1z3-10.0.0.3:6200R10.0.0.3:6200/sda_\"\" marked for removal and will be "
        "removed next rebalance.\n");
  r = run_cli({f});
  CHECK(r.out.find(" DEL ") != std::string::npos);
  r = run_cli({f, "rebalance"});
  CHECK(r.code == 0);
  auto b = load_builder_file(f);
  REQUIRE(b.ok());
  CHECK_FALSE(b->devs()[2].has_value());

  // write_builder: from c.ring.gz to a new builder (refusing to overwrite).
  std::filesystem::create_directory(path("copy"));
  std::filesystem::copy_file(path("c.ring.gz"), path("copy/d.ring.gz"));
  r = run_cli({path("copy/d.ring.gz"), "write_builder", "3"});
  CHECK(r.code == 0);
  CHECK(r.out == "Note: using " + path("copy/d.builder") + " instead of " + path("copy/d.ring.gz") +
                     " as builder file\n");
  auto rebuilt = load_builder_file(path("copy/d.builder"));
  REQUIRE(rebuilt.ok());
  CHECK(rebuilt->state().replica2part2dev == b->state().replica2part2dev);
  CHECK(rebuilt->state().min_part_hours == 3);
  r = run_cli({path("copy/d.ring.gz"), "write_builder"});
  CHECK(r.code == 2);
  CHECK(r.out.find("Cowardly refusing to overwrite existing Ring Builder file") !=
        std::string::npos);

  // A Swift pickle loads; saving over it keeps the original in backups/.
  const std::string p = path("p.builder");
  std::ofstream(p, std::ios::binary) << unhex(kSwiftPickleHex);
  r = run_cli({p});
  CHECK(r.code == 0);
  CHECK(r.out.find("p.builder, build version 5, id 3051e13b6d4342f494dbf4835e114d17\n") !=
        std::string::npos);
  r = run_cli({p, "set_weight", "d1", "50"});
  CHECK(r.code == 0);
  CHECK(r.err.find("was a Swift (pickle) builder file") != std::string::npos);
  bool kept = false;
  for (const auto& e : std::filesystem::directory_iterator(path("backups"))) {
    if (e.path().string().find("p.builder.swift-pickle") != std::string::npos) {
      kept = read_all(e.path().string()) == unhex(kSwiftPickleHex);
    }
  }
  CHECK(kept);
  auto converted = load_builder_file(p);
  REQUIRE(converted.ok());
  CHECK(converted->devs()[1]->weight == 50.0);
  CHECK_FALSE(is_swift_pickle_builder(read_all(p)));
}

}  // namespace
}  // namespace apus::ring
