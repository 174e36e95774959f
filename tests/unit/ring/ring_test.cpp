#include "ring/ring.h"

#include <atomic>
#include <chrono>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "common/crypto/md5.h"
#include "common/hash_path.h"
#include "common/io/fs.h"
#include "ring/ring_reloader.h"
#include "tests/unit/ring/ring_test_support.h"

namespace apus::ring {
namespace {

using Code = common::Status::Code;
using testing::make_device;
using testing::random_ring;
using testing::TempDir;
using namespace std::chrono_literals;

const common::HashPathConfig kHash{"pre", "suf"};

// --- A plain re-statement of swift-protocol.md §2.2-2.3, written for clarity rather than
// speed, to check the optimised iterator against.

std::vector<int> ref_primaries(const RingData& ring, uint32_t part) {
  std::vector<int> ids;
  for (const auto& row : ring.replica2part2dev) {
    if (part >= row.size()) continue;
    const int id = row[part];
    if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
  }
  return ids;
}

std::vector<int> ref_handoffs(const RingData& ring, uint32_t part) {
  using Zone = std::pair<int, int>;
  using Ip = std::tuple<int, int, std::string>;
  const auto& rows = ring.replica2part2dev;
  if (rows.empty()) return {};
  std::set<int> assigned;
  for (const auto& row : rows) assigned.insert(row.begin(), row.end());
  std::set<int> all_regions;
  std::set<Zone> all_zones;
  std::set<Ip> all_ips;
  for (const int id : assigned) {
    const Device& d = *ring.devs[static_cast<size_t>(id)];
    all_regions.insert(d.region);
    all_zones.insert({d.region, d.zone});
    all_ips.insert({d.region, d.zone, d.ip});
  }
  std::set<int> used;
  std::set<int> regions;
  std::set<Zone> zones;
  std::set<Ip> ips;
  for (const int id : ref_primaries(ring, part)) {
    const Device& d = *ring.devs[static_cast<size_t>(id)];
    used.insert(id);
    regions.insert(d.region);
    zones.insert({d.region, d.zone});
    ips.insert({d.region, d.zone, d.ip});
  }
  const uint64_t parts = rows[0].size();
  const common::crypto::Md5Digest h = common::crypto::md5(std::to_string(part));
  const uint64_t top =
      (uint64_t{h[0]} << 24) | (uint64_t{h[1]} << 16) | (uint64_t{h[2]} << 8) | h[3];
  const uint64_t start = top >> ring.part_shift;
  const uint64_t inc = parts / 65536 == 0 ? 1 : parts / 65536;
  std::vector<uint64_t> order;
  for (uint64_t p = start; p < parts; p += inc) order.push_back(p);
  for (uint64_t p = inc - ((parts - start) % inc); p < start; p += inc) order.push_back(p);

  std::vector<int> out;
  // kind 0: new region, 1: new zone, 2: new ip, 3: unused device.
  for (int kind = 0; kind < 4; ++kind) {
    auto done = [&] {
      switch (kind) {
        case 0:
          return regions.size() == all_regions.size();
        case 1:
          return zones.size() == all_zones.size();
        case 2:
          return ips.size() == all_ips.size();
        default:
          return used.size() == assigned.size();
      }
    };
    for (const uint64_t p : order) {
      if (done()) break;
      for (const auto& row : rows) {
        if (p >= row.size()) continue;
        const int id = row[p];
        const Device& d = *ring.devs[static_cast<size_t>(id)];
        const Zone z{d.region, d.zone};
        const Ip ip{d.region, d.zone, d.ip};
        bool fresh = !used.count(id);
        if (kind == 0) fresh = fresh && !regions.count(d.region);
        if (kind == 1) fresh = fresh && !zones.count(z);
        if (kind == 2) fresh = fresh && !ips.count(ip);
        if (!fresh) continue;
        out.push_back(id);
        used.insert(id);
        if (kind == 0) regions.insert(d.region);
        if (kind <= 1) zones.insert(z);
        if (kind <= 2) ips.insert(ip);
        if (done()) break;
      }
    }
  }
  return out;
}

std::vector<int> ids_of(const std::vector<Node>& nodes) {
  std::vector<int> ids;
  for (const Node& n : nodes) ids.push_back(n.id());
  return ids;
}

std::vector<int> all_handoffs(const RingState& state, uint32_t part) {
  std::vector<int> ids;
  HandoffIterator it = state.get_more_nodes(part);
  Node n;
  uint32_t expect_index = 0;
  while (it.next(&n)) {
    CHECK(n.index == expect_index++);
    ids.push_back(n.id());
  }
  CHECK_FALSE(it.next(&n));  // stays exhausted
  return ids;
}

std::shared_ptr<const RingState> make_state(RingData data) {
  common::Result<std::shared_ptr<const RingState>> s = RingState::create(std::move(data));
  REQUIRE_MESSAGE(s.ok(), s.status().to_string());
  return *s;
}

// Three devices in two regions; partition 1 has the same device twice; the third row is short.
RingData small_ring() {
  RingData ring;
  ring.part_shift = 30;  // 4 partitions
  ring.devs.emplace_back(make_device(0, 1, 1, "10.0.0.1", "sda"));
  ring.devs.emplace_back(make_device(1, 1, 2, "10.0.0.2", "sda"));
  ring.devs.emplace_back(std::nullopt);
  ring.devs.emplace_back(make_device(3, 2, 1, "10.0.1.1", "sda"));
  ring.replica2part2dev = {{0, 1, 3, 0}, {1, 1, 0, 3}, {3, 0}};
  return ring;
}

TEST_CASE("primaries: each device once, index is the position, short rows are skipped") {
  auto state = make_state(small_ring());
  CHECK(state->partition_count() == 4);
  CHECK(state->part_power() == 2);
  CHECK(state->replica_count() == doctest::Approx(2.5));
  CHECK(state->device_count() == 3);
  CHECK(state->assigned_device_count() == 3);
  CHECK(state->weighted_device_count() == 3);
  std::vector<Node> nodes;
  state->get_part_nodes(0, &nodes);
  CHECK(ids_of(nodes) == std::vector<int>{0, 1, 3});
  for (size_t i = 0; i < nodes.size(); ++i) CHECK(nodes[i].index == i);
  state->get_part_nodes(1, &nodes);
  CHECK(ids_of(nodes) == std::vector<int>{1, 0});  // device 1 holds two replicas
  state->get_part_nodes(2, &nodes);
  CHECK(ids_of(nodes) == std::vector<int>{3, 0});  // the short row has no partition 2
  state->get_part_nodes(99, &nodes);
  CHECK(nodes.empty());
  CHECK(nodes.capacity() > 0);  // the vector was reused, not replaced
  CHECK(nodes.size() == 0);
  state->get_part_nodes(3, &nodes);
  CHECK(nodes[1].device->region == 2);
  CHECK(nodes[1].device->ip == "10.0.1.1");
}

TEST_CASE("get_part is hash_path's partition, an object needs a container") {
  auto ring = Ring::from_data(small_ring(), kHash);
  REQUIRE(ring.ok());
  for (const char* name : {"a", "b", "AUTH_test", "\xc3\xa9"}) {
    common::Result<uint32_t> part = (*ring)->get_part(name, "c", "o/with/slash");
    REQUIRE(part.ok());
    CHECK(*part == common::partition_of(*common::hash_path(kHash, name, "c", "o/with/slash"), 2));
  }
  common::Result<uint32_t> bad = (*ring)->get_part("a", "", "o");
  CHECK(bad.status().code() == Code::kInvalidArgument);
  common::Result<NodeList> nodes = (*ring)->get_nodes("a", "c");
  REQUIRE(nodes.ok());
  CHECK(nodes->partition == *(*ring)->get_part("a", "c"));
  CHECK(ids_of(nodes->nodes) == ref_primaries(small_ring(), nodes->partition));
  CHECK((*ring)->get_nodes("a", "", "o").status().code() == Code::kInvalidArgument);
  CHECK((*ring)->partition_count() == 4);
  CHECK((*ring)->part_power() == 2);
}

TEST_CASE("handoffs follow Swift's order exactly on random rings") {
  // Layouts from one server to many regions, fractional replicas, unassigned and null devices.
  struct Layout {
    int power;
    double replicas;
    int devs, regions, zones, servers;
  };
  const Layout layouts[] = {
      {0, 1.0, 3, 1, 1, 1},   {1, 2.0, 2, 1, 1, 1},  {4, 3.0, 12, 2, 2, 2},
      {6, 2.5, 30, 3, 3, 4},  {8, 3.0, 60, 4, 3, 3}, {8, 1.25, 10, 1, 1, 2},
      {10, 4.0, 25, 1, 5, 2}, {5, 3.0, 4, 1, 1, 1},  {7, 2.75, 200, 5, 4, 5},
  };
  uint32_t seed = 100;
  for (const Layout& l : layouts) {
    for (int variant = 0; variant < 3; ++variant) {
      const RingData data =
          random_ring(++seed, l.power, l.replicas, l.devs, l.regions, l.zones, l.servers);
      auto state = make_state(data);
      const uint32_t parts = 1u << l.power;
      std::vector<Node> nodes;
      for (uint32_t part = 0; part < parts; ++part) {
        state->get_part_nodes(part, &nodes);
        REQUIRE(ids_of(nodes) == ref_primaries(data, part));
        const std::vector<int> got = all_handoffs(*state, part);
        const std::vector<int> want = ref_handoffs(data, part);
        REQUIRE_MESSAGE(got == want, "seed " << seed << " partition " << part);
        // Never a primary, never twice.
        std::set<int> seen(got.begin(), got.end());
        CHECK(seen.size() == got.size());
        for (const Node& n : nodes) CHECK_FALSE(seen.count(n.id()));
      }
      // A partition the ring does not have: no primaries, handoffs still well defined.
      CHECK(all_handoffs(*state, parts + 5) == ref_handoffs(data, parts + 5));
    }
  }
}

TEST_CASE("handoffs of a large ring (a step between candidates, big device ids)") {
  // 2^18 partitions: candidates step by 4; 1500 device slots: the iterator's sets leave their
  // inline storage.
  const RingData data = random_ring(7, 18, 3.0, 1500, 4, 6, 20);
  auto state = make_state(data);
  for (uint32_t part : {0u, 1u, 4u, 12345u, 99999u, (1u << 18) - 1}) {
    REQUIRE(all_handoffs(*state, part) == ref_handoffs(data, part));
  }
}

TEST_CASE("take() and get_handoffs() give the prefix of the full order") {
  const RingData data = random_ring(5, 8, 3.0, 40, 3, 3, 3);
  auto state = make_state(data);
  const std::vector<int> full = all_handoffs(*state, 17);
  REQUIRE(full.size() > 10);
  std::vector<Node> some;
  state->get_handoffs(17, 3, &some);
  CHECK(ids_of(some) == std::vector<int>(full.begin(), full.begin() + 3));
  HandoffIterator it = state->get_more_nodes(17);
  std::vector<Node> more;
  CHECK(it.take(4, &more) == 4);
  CHECK(it.take(3, &more) == 3);
  CHECK(ids_of(more) == std::vector<int>(full.begin(), full.begin() + 7));
  CHECK(more[6].index == 6);
  CHECK(it.take(1000, &more) == full.size() - 7);
  // A moved iterator carries on where it was.
  HandoffIterator a = state->get_more_nodes(17);
  Node n;
  REQUIRE(a.next(&n));
  HandoffIterator b = std::move(a);
  REQUIRE(b.next(&n));
  CHECK(n.id() == full[1]);
}

TEST_CASE("an empty ring has no nodes, a ring without any assignment is rejected cleanly") {
  RingData empty;
  empty.part_shift = 28;
  empty.devs.emplace_back(make_device(0, 1, 1, "1.1.1.1", "sda"));
  auto state = make_state(empty);
  std::vector<Node> nodes;
  state->get_part_nodes(3, &nodes);
  CHECK(nodes.empty());
  CHECK(all_handoffs(*state, 3).empty());
  CHECK(state->assigned_device_count() == 0);
  CHECK(state->partition_count() == 16);

  RingData bad = small_ring();
  bad.replica2part2dev[0][0] = 2;  // the null device
  CHECK(RingState::create(bad).status().code() == Code::kInvalidArgument);
  CHECK(Ring::from_data(bad, kHash).status().code() == Code::kInvalidArgument);
}

// --- Ring: files and reloads.

void set_mtime(const std::string& path, int64_t seconds) {
  const struct timespec times[2] = {{seconds, 0}, {seconds, 0}};
  REQUIRE(::utimensat(AT_FDCWD, path.c_str(), times, 0) == 0);
}

// Ring A (small_ring) and ring B (another layout) at `path`, with a chosen mtime.
void write_ring(const std::string& path, const RingData& data, int64_t mtime) {
  REQUIRE(write_ring_file(data, path).ok());
  set_mtime(path, mtime);
}

RingData ring_b() {
  RingData b = small_ring();
  b.replica2part2dev = {{3, 3, 3, 3}, {0, 0, 0, 0}};
  return b;
}

struct FakeClock {
  std::shared_ptr<std::atomic<int64_t>> ns = std::make_shared<std::atomic<int64_t>>(1'000'000);
  std::function<std::chrono::steady_clock::time_point()> fn() const {
    auto p = ns;
    return
        [p] { return std::chrono::steady_clock::time_point(std::chrono::nanoseconds(p->load())); };
  }
  void advance(std::chrono::nanoseconds d) const { ns->fetch_add(d.count()); }
};

TEST_CASE("Ring::open loads the file, a missing or bad file is an error") {
  TempDir dir;
  CHECK(Ring::open(dir.path("none.ring.gz"), kHash).status().code() == Code::kNotFound);
  testing::spit(dir.path("bad.ring.gz"), "junk");
  CHECK(Ring::open(dir.path("bad.ring.gz"), kHash).status().code() == Code::kCorruption);
  write_ring(dir.path("object.ring.gz"), small_ring(), 1000);
  auto ring = Ring::open(dir.path("object.ring.gz"), kHash);
  REQUIRE(ring.ok());
  CHECK((*ring)->path() == dir.path("object.ring.gz"));
  CHECK(ids_of((*ring)->get_part_nodes(0).nodes) == std::vector<int>{0, 1, 3});
  CHECK((*ring)->replica_count() == doctest::Approx(2.5));
}

TEST_CASE("reload when the mtime changes, checked at most every reload_time") {
  TempDir dir;
  const std::string path = dir.path("object.ring.gz");
  write_ring(path, small_ring(), 1000);
  FakeClock clock;
  common::io::FaultInjectingFs fs(common::io::default_fs());  // to count the file reads
  RingOptions options;
  options.clock = clock.fn();
  options.fs = &fs;
  auto ring = Ring::open(path, kHash, options);
  REQUIRE(ring.ok());
  const Ring& r = **ring;
  NodeList before = r.get_part_nodes(0);
  CHECK(ids_of(before.nodes) == std::vector<int>{0, 1, 3});

  write_ring(path, ring_b(), 2000);
  clock.advance(14s);
  CHECK(ids_of(r.get_part_nodes(0).nodes) == std::vector<int>{0, 1, 3});  // not yet checked
  clock.advance(2s);
  CHECK(ids_of(r.get_part_nodes(0).nodes) == std::vector<int>{3, 0});  // reloaded
  // The old result still holds its state; its devices are alive.
  CHECK(before.nodes[2].device->ip == "10.0.1.1");
  CHECK(before.state != r.state());

  SUBCASE("an unchanged mtime and size mean no re-read, as in Swift") {
    write_ring(path, ring_b(), 2000);  // rewritten, same mtime and size
    const uint64_t opens = fs.count(common::io::FaultInjectingFs::Op::kOpen);
    const uint64_t stats = fs.count(common::io::FaultInjectingFs::Op::kStat);
    clock.advance(20s);
    CHECK(ids_of(r.get_part_nodes(0).nodes) == std::vector<int>{3, 0});
    CHECK(fs.count(common::io::FaultInjectingFs::Op::kStat) == stats + 1);
    CHECK(fs.count(common::io::FaultInjectingFs::Op::kOpen) == opens);
    // Lookups between checks do not even stat.
    for (int i = 0; i < 10; ++i) CHECK(r.get_part_nodes(1).nodes.size() == 2);
    CHECK(fs.count(common::io::FaultInjectingFs::Op::kStat) == stats + 1);
  }
  SUBCASE("a bad new file keeps the loaded ring, and is retried") {
    testing::spit(path, "garbage");
    set_mtime(path, 3000);
    clock.advance(20s);
    CHECK(ids_of(r.get_part_nodes(0).nodes) == std::vector<int>{3, 0});
    CHECK((*ring)->check_reload(true).status().code() == Code::kCorruption);
    ::unlink(path.c_str());
    CHECK((*ring)->check_reload(true).status().code() == Code::kNotFound);
    write_ring(path, small_ring(), 4000);
    clock.advance(20s);
    CHECK(ids_of(r.get_part_nodes(0).nodes) == std::vector<int>{0, 1, 3});
  }
}

TEST_CASE("with reload_on_lookup off only check_reload() reloads") {
  TempDir dir;
  const std::string path = dir.path("object.ring.gz");
  write_ring(path, small_ring(), 1000);
  FakeClock clock;
  RingOptions options;
  options.clock = clock.fn();
  options.reload_on_lookup = false;
  auto ring = Ring::open(path, kHash, options);
  REQUIRE(ring.ok());
  write_ring(path, ring_b(), 2000);
  clock.advance(60s);
  CHECK(ids_of((*ring)->get_part_nodes(0).nodes) == std::vector<int>{0, 1, 3});
  common::Result<bool> r = (*ring)->check_reload();
  REQUIRE(r.ok());
  CHECK(*r);
  CHECK(ids_of((*ring)->get_part_nodes(0).nodes) == std::vector<int>{3, 0});
  // Not due again yet; forced, it finds nothing new.
  CHECK_FALSE(*(*ring)->check_reload());
  CHECK_FALSE(*(*ring)->check_reload(true));
}

TEST_CASE("readers keep going while reloads swap the ring") {
  TempDir dir;
  const std::string path = dir.path("object.ring.gz");
  write_ring(path, small_ring(), 1000);
  RingOptions options;
  options.reload_time = 0s;  // every lookup may reload
  auto opened = Ring::open(path, kHash, options);
  REQUIRE(opened.ok());
  const Ring& ring = **opened;
  std::atomic<bool> stop{false};
  std::atomic<int> lookups{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 3; ++t) {
    readers.emplace_back([&] {
      std::vector<Node> handoffs;
      while (!stop.load()) {
        common::Result<NodeList> nodes = ring.get_nodes("a", "c", "o");
        if (!nodes.ok() || nodes->nodes.empty()) continue;
        nodes->state->get_handoffs(nodes->partition, 3, &handoffs);
        // Whatever state answered, its devices are whole.
        for (const Node& n : nodes->nodes) {
          if (n.device->device != "sda") stop = true;
        }
        lookups.fetch_add(1);
      }
    });
  }
  for (int i = 0; i < 20; ++i) {
    write_ring(path, i % 2 ? small_ring() : ring_b(), 2000 + i);
    std::this_thread::sleep_for(2ms);
  }
  stop = true;
  for (auto& t : readers) t.join();
  CHECK(lookups.load() > 0);
}

// --- RingReloader (issue 12): servers reload from a thread of their own, never in lookups.

TEST_CASE("with a reloader, lookups never stat or reload the file") {
  TempDir dir;
  const std::string path = dir.path("object.ring.gz");
  write_ring(path, small_ring(), 1000);
  common::io::FaultInjectingFs fs(common::io::default_fs());
  auto reloader = std::make_shared<RingReloader>(1h);  // never due during the test
  RingOptions options;
  options.fs = &fs;
  options.reload_time = 0s;  // a lookup that could reload would do so every time
  options.reloader = reloader;
  auto ring = Ring::open(path, kHash, options);
  REQUIRE(ring.ok());
  const uint64_t stats = fs.count(common::io::FaultInjectingFs::Op::kStat);
  const uint64_t opens = fs.count(common::io::FaultInjectingFs::Op::kOpen);
  write_ring(path, ring_b(), 2000);
  for (int i = 0; i < 100; ++i) {
    CHECK(ids_of((*ring)->get_part_nodes(0).nodes) == std::vector<int>{0, 1, 3});
  }
  CHECK(fs.count(common::io::FaultInjectingFs::Op::kStat) == stats);
  CHECK(fs.count(common::io::FaultInjectingFs::Op::kOpen) == opens);
}

TEST_CASE("a ring file replaced on disk is picked up by the reloader within its interval") {
  TempDir dir;
  const std::string path = dir.path("object.ring.gz");
  write_ring(path, small_ring(), 1000);
  auto reloader = std::make_shared<RingReloader>(20ms);
  RingOptions options;
  options.reloader = reloader;
  auto ring = Ring::open(path, kHash, options);
  REQUIRE(ring.ok());
  write_ring(path, ring_b(), 2000);
  const auto start = std::chrono::steady_clock::now();
  bool swapped = false;
  while (!swapped && std::chrono::steady_clock::now() - start < 5s) {
    swapped = ids_of((*ring)->get_part_nodes(0).nodes) == std::vector<int>{3, 0};
    if (!swapped) std::this_thread::sleep_for(5ms);
  }
  CHECK(swapped);
  // Within a few intervals even on a loaded 2-core machine.
  CHECK(std::chrono::steady_clock::now() - start < 2s);

  SUBCASE("a bad file keeps the loaded ring") {
    testing::spit(path, "garbage");
    set_mtime(path, 3000);
    const uint64_t passes = reloader->passes();
    while (reloader->passes() < passes + 2) std::this_thread::sleep_for(5ms);
    CHECK(ids_of((*ring)->get_part_nodes(0).nodes) == std::vector<int>{3, 0});
  }
  SUBCASE("a ring may die before its reloader, which then leaves it alone") {
    ring->reset();
    const uint64_t passes = reloader->passes();
    while (reloader->passes() < passes + 2) std::this_thread::sleep_for(5ms);
  }
}

TEST_CASE("the shared reloader lives while some ring holds it") {
  std::shared_ptr<RingReloader> a = RingReloader::shared();
  CHECK(a == RingReloader::shared());
  CHECK(a->interval() == RingReloader::kDefaultInterval);
  std::weak_ptr<RingReloader> weak = a;
  a.reset();
  CHECK(weak.expired());  // its thread joined
  CHECK(RingReloader::shared() != nullptr);
}

}  // namespace
}  // namespace apus::ring
