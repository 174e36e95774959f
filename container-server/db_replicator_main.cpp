// apus-container-replicator / apus-account-replicator CONFIG [--once] [--devices D,...]
// [--partitions P,...]: database replication like swift-container-replicator and
// swift-account-replicator, reading [container-replicator] or [account-replicator] of the
// server's config. APUS_DB_REPLICATOR_TYPE (0 containers, 1 accounts) picks the program.
#include <atomic>
#include <cstdio>
#include <string>

#include "common/config/config.h"
#include "common/io/fs.h"
#include "common/process.h"
#include "container-server/db_replicator.h"
#include "ring/ring_reloader.h"

int main(int argc, char** argv) {
  constexpr auto kType = APUS_DB_REPLICATOR_TYPE == 0 ? apus::container::DbType::kContainer
                                                      : apus::container::DbType::kAccount;
  const std::string kind = kType == apus::container::DbType::kContainer ? "container" : "account";
  auto args = apus::common::parse_daemon_args(argc, argv, /*with_partitions=*/true);
  if (!args) return 2;
  apus::container::DbPassFilter filter{args->devices, args->partitions};
  apus::common::block_stop_signals();
  auto config = apus::common::load_daemon<apus::container::DbReplicatorConfig>(
      args->config.c_str(), kind + "-replicator", [&](const apus::common::Config& conf) {
        return apus::container::DbReplicatorConfig::from_config(conf, kType);
      });
  if (!config.ok()) {
    std::fprintf(stderr, "%s\n", config.status().message().c_str());
    return 1;
  }
  apus::ring::RingOptions ring_options;
  ring_options.reloader = apus::ring::RingReloader::shared();
  auto ring = apus::ring::Ring::open(config->swift_dir + "/" + kind + ".ring.gz",
                                     {config->swift.hash_path_prefix,
                                      config->swift.hash_path_suffix},
                                     std::move(ring_options));
  if (!ring.ok()) {
    std::fprintf(stderr, "cannot load the %s ring: %s\n", kind.c_str(),
                 ring.status().to_string().c_str());
    return 1;
  }
  apus::container::DbReplicator replicator(*config, apus::common::io::default_fs(),
                                           std::move(*ring));
  if (args->once) {
    (void)replicator.run_once(filter);  // failures are logged; the exit status is 0, as Swift's
    return 0;
  }
  char cadence[32];
  std::snprintf(cadence, sizeof cadence, "%g", config->interval);
  apus::common::run_until_stopped(
      kind + "-replicator started: a pass every " + cadence + " s",
      [&](const std::atomic<bool>& stop) { replicator.run_forever(stop); });
  return 0;
}
