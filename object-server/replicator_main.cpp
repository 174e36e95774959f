// apus-object-replicator CONFIG [--once] [--devices d1,d2] [--partitions p1,p2]: object
// replication with SSYNC, like swift-object-replicator with sync_method = ssync.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>

#include "common/config/config.h"
#include "common/io/fs.h"
#include "common/log/log.h"
#include "common/process.h"
#include "object-server/replicator.h"
#include "ring/ring_reloader.h"

int main(int argc, char** argv) {
  auto args = apus::common::parse_daemon_args(argc, argv, /*with_partitions=*/true);
  if (!args) return 2;
  apus::object::PassFilter filter{args->devices, args->partitions};
  apus::common::block_stop_signals();
  auto config = apus::common::load_daemon<apus::object::ReplicatorConfig>(
      args->config.c_str(), "object-replicator", apus::object::ReplicatorConfig::from_config);
  if (!config.ok()) {
    std::fprintf(stderr, "%s\n", config.status().message().c_str());
    return 1;
  }
  // One ring per policy, kept current by a reloader's thread that checks the files every
  // ring_check_interval (one stat per ring; a read only when one changed). A pass in progress
  // takes the new ring for the partitions it has not reached yet (Swift's replicator aborts
  // the pass instead).
  auto reloader = std::make_shared<apus::ring::RingReloader>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(
          std::chrono::duration<double>(config->ring_check_interval)));
  std::map<int, std::unique_ptr<apus::ring::Ring>> rings;
  for (const auto& policy : config->swift.policies.all()) {
    apus::ring::RingOptions ring_options;
    ring_options.reloader = reloader;
    std::string name = policy.index == 0 ? "object" : "object-" + std::to_string(policy.index);
    auto ring = apus::ring::Ring::open(
        config->swift_dir + "/" + name + ".ring.gz",
        {config->swift.hash_path_prefix, config->swift.hash_path_suffix}, std::move(ring_options));
    if (!ring.ok()) {
      std::fprintf(stderr, "cannot load the %s ring: %s\n", name.c_str(),
                   ring.status().to_string().c_str());
      return 1;
    }
    rings.emplace(policy.index, std::move(*ring));
  }
  apus::object::ObjectReplicator replicator(*config, apus::common::io::default_fs(),
                                            std::move(rings));
  if (args->once) {
    (void)replicator.run_once(filter);  // failures are logged; the exit status is 0, as Swift's
    return 0;
  }
  char cadence[32];
  std::snprintf(cadence, sizeof cadence, "%g", config->interval);
  apus::common::run_until_stopped(
      std::string("object-replicator started: a pass every ") + cadence + " s",
      [&](const std::atomic<bool>& stop) { replicator.run_forever(stop); });
  return 0;
}
