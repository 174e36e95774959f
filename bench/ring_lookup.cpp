// apus-ring-lookup: lookups per second of the Apus ring (get_nodes plus the first few handoffs),
// for bench/ring_lookup_bench.sh, which runs Swift's Python Ring on the same names beside it.
//
//   apus-ring-lookup <ring.gz> <swift.conf> [count [handoffs [threads]]]
//
// Names are "AUTH_<i % 1000>/c<i % 97>/o<i>" for i in [0, count), built before timing. Each
// lookup is Ring::get_nodes (hash, partition, primaries) and the first `handoffs` handoffs
// (default 3) through a HandoffIterator: what a proxy does per request. Prints one JSON line:
// {"impl": "apus", "lookups": N, "threads": T, "seconds": S, "per_second": R, "checksum": C}
// where checksum is the sum of all device ids returned, to compare answers with Swift's run.

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "common/config/swift_conf.h"
#include "ring/ring.h"

namespace {

struct Name {
  std::string account, container, object;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3 || argc > 6) {
    std::fprintf(stderr,
                 "usage: apus-ring-lookup <ring.gz> <swift.conf> [count [handoffs [threads]]]\n");
    return 2;
  }
  const size_t count = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 200000;
  const size_t handoffs = argc > 4 ? std::strtoull(argv[4], nullptr, 10) : 3;
  const size_t threads = argc > 5 ? std::strtoull(argv[5], nullptr, 10) : 1;
  auto conf = apus::common::load_swift_conf(argv[2]);
  if (!conf.ok()) {
    std::fprintf(stderr, "%s\n", conf.status().to_string().c_str());
    return 2;
  }
  auto ring = apus::ring::Ring::open(argv[1], {conf->hash_path_prefix, conf->hash_path_suffix});
  if (!ring.ok()) {
    std::fprintf(stderr, "%s\n", ring.status().to_string().c_str());
    return 2;
  }
  std::vector<Name> names(count);
  for (size_t i = 0; i < count; ++i) {
    names[i] = {"AUTH_" + std::to_string(i % 1000), "c" + std::to_string(i % 97),
                "o" + std::to_string(i)};
  }

  std::vector<uint64_t> sums(threads, 0);
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> workers;
  for (size_t t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      uint64_t sum = 0;
      apus::ring::Node node;
      for (size_t i = t; i < count; i += threads) {
        const Name& n = names[i];
        auto nodes = (*ring)->get_nodes(n.account, n.container, n.object);
        if (!nodes.ok()) std::abort();
        for (const auto& p : nodes->nodes) sum += static_cast<uint64_t>(p.id());
        apus::ring::HandoffIterator it = nodes->state->get_more_nodes(nodes->partition);
        for (size_t h = 0; h < handoffs && it.next(&node); ++h) {
          sum += static_cast<uint64_t>(node.id());
        }
      }
      sums[t] = sum;
    });
  }
  for (auto& w : workers) w.join();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  uint64_t checksum = 0;
  for (const uint64_t s : sums) checksum += s;
  std::printf(
      "{\"impl\": \"apus\", \"lookups\": %zu, \"threads\": %zu, \"seconds\": %.4f, "
      "\"per_second\": %.0f, \"checksum\": %llu}\n",
      count, threads, secs, static_cast<double>(count) / secs,
      static_cast<unsigned long long>(checksum));
  return 0;
}
