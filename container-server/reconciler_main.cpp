// apus-container-reconciler CONFIG [--once]: moves objects written in a storage policy other
// than their container's into the container's, like swift-container-reconciler. CONFIG is a
// container-reconciler.conf: [container-reconciler] for the daemon, and the internal client's
// proxy pipeline ([pipeline:main], its filters, [app:proxy-server]) in the same file.
#include <atomic>
#include <cstdio>
#include <cstring>
#include <string>

#include "common/config/config.h"
#include "common/log/log.h"
#include "common/process.h"
#include "container-server/reconciler.h"

int main(int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') {
    std::fprintf(stderr, "usage: %s CONFIG_FILE [--once]\n", argv[0]);
    return 2;
  }
  bool once = false;
  for (int i = 2; i < argc; ++i) {
    if (std::strcmp(argv[i], "--once") == 0 || std::strcmp(argv[i], "-o") == 0) {
      once = true;
    } else if (std::strcmp(argv[i], "-v") != 0 && std::strcmp(argv[i], "--verbose") != 0) {
      std::fprintf(stderr, "usage: %s CONFIG_FILE [--once]\n", argv[0]);
      return 2;
    }
  }
  apus::common::block_stop_signals();
  auto conf = apus::common::load_program_config(argv[1]);
  if (!conf.ok()) {
    std::fprintf(stderr, "%s\n", conf.status().message().c_str());
    return 1;
  }
  auto config = apus::container::ReconcilerConfig::from_config(*conf, argv[1]);
  apus::common::Status ready = config.status();
  if (ready.ok()) {
    ready = apus::common::configure_logging(conf->section("container-reconciler"),
                                            config->log_name);
  }
  if (!ready.ok()) {
    std::fprintf(stderr, "%s\n", ready.message().c_str());
    return 1;
  }
  auto reconciler = apus::container::ContainerReconciler::create(*config, *conf);
  if (!reconciler.ok()) {
    std::fprintf(stderr, "%s\n", reconciler.status().to_string().c_str());
    return 1;
  }
  if (once) {
    (void)(*reconciler)->run_once();
    return 0;
  }
  char cadence[32];
  std::snprintf(cadence, sizeof cadence, "%g", config->interval);
  apus::common::run_until_stopped(
      std::string("container-reconciler started: a pass, then ") + cadence + " s of sleep",
      [&](const std::atomic<bool>& stop) { (*reconciler)->run_forever(stop); });
  return 0;
}
