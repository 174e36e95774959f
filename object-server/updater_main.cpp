// apus-object-updater CONFIG [--once]: delivers async pendings, like swift-object-updater.
#include <atomic>
#include <cstdio>
#include <cstring>

#include "common/config/config.h"
#include "common/process.h"
#include "common/io/fs.h"
#include "common/log/log.h"
#include "object-server/updater.h"
#include "ring/ring_reloader.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s CONFIG_FILE [--once]\n", argv[0]);
    return 2;
  }
  bool once = argc > 2 && std::strcmp(argv[2], "--once") == 0;
  apus::common::block_stop_signals();
  auto config = apus::common::load_daemon<apus::object::UpdaterConfig>(
      argv[1], "object-updater", apus::object::UpdaterConfig::from_config);
  if (!config.ok()) {
    std::fprintf(stderr, "%s\n", config.status().message().c_str());
    return 1;
  }
  // Kept current by the reloader's thread, so the updater's lookups never reload.
  apus::ring::RingOptions ring_options;
  ring_options.reloader = apus::ring::RingReloader::shared();
  auto ring = apus::ring::Ring::open(
      config->swift_dir + "/container.ring.gz",
      {config->swift.hash_path_prefix, config->swift.hash_path_suffix}, std::move(ring_options));
  if (!ring.ok()) {
    std::fprintf(stderr, "cannot load the container ring: %s\n",
                 ring.status().to_string().c_str());
    return 1;
  }
  apus::object::ObjectUpdater updater(*config, apus::common::io::default_fs(), std::move(*ring));
  if (once) {
    (void)updater.run_once();
    return 0;
  }
  char cadence[32];
  std::snprintf(cadence, sizeof cadence, "%g", config->interval);
  apus::common::run_until_stopped(
      std::string("object-updater started: a pass every ") + cadence + " s",
      [&](const std::atomic<bool>& stop) { updater.run_forever(stop); });
  return 0;
}
