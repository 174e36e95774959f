// apus-object-updater CONFIG [--once]: delivers async pendings, like swift-object-updater.
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <thread>

#include "common/config/config.h"
#include "common/http/server.h"
#include "common/io/fs.h"
#include "common/log/log.h"
#include "object-server/updater.h"

namespace log = apus::common::log;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s CONFIG_FILE [--once]\n", argv[0]);
    return 2;
  }
  bool once = argc > 2 && std::strcmp(argv[2], "--once") == 0;
  apus::common::http::Server::block_signals();
  auto conf = apus::common::Config::load(argv[1]);
  if (!conf.ok()) {
    std::fprintf(stderr, "Error trying to load config from %s: %s\n", argv[1],
                 conf.status().message().c_str());
    return 1;
  }
  auto config = apus::object::UpdaterConfig::from_config(*conf);
  if (!config.ok()) {
    std::fprintf(stderr, "%s\n", config.status().message().c_str());
    return 1;
  }
  auto section = conf->section("object-updater");
  log::Options log_options;
  log_options.name = config->log_name;
  log_options.file = section.get_string("log_file", "");
  if (!log::parse_level(section.get_string("log_level", "INFO"), &log_options.level)) {
    std::fprintf(stderr, "%s: bad log_level\n", argv[1]);
    return 1;
  }
  log::configure(log_options);
  auto ring = apus::ring::Ring::open(
      config->swift_dir + "/container.ring.gz",
      {config->swift.hash_path_prefix, config->swift.hash_path_suffix});
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
  std::atomic<bool> stop{false};
  std::thread signals([&stop] {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    for (;;) {
      int sig = 0;
      if (sigwait(&set, &sig) != 0) continue;
      if (sig == SIGHUP) {
        log::reopen();
        continue;
      }
      stop = true;
      return;
    }
  });
  APUS_LOG_INFO("object-updater started: a pass every " + std::to_string(config->interval) + " s");
  updater.run_forever(stop);
  signals.join();
  return 0;
}
