// apus-object-expirer CONFIG [--once] [--processes N] [--process I]: deletes objects whose
// X-Delete-At has come, like swift-object-expirer. CONFIG is an object-expirer.conf (Swift's
// legacy layout) or an object-server.conf with an [object-expirer] section.
#include <atomic>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>

#include "common/config/config.h"
#include "common/log/log.h"
#include "common/process.h"
#include "object-server/expirer.h"

namespace {

int usage(const char* program) {
  std::fprintf(stderr, "usage: %s CONFIG_FILE [--once] [--processes N] [--process I]\n", program);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') return usage(argv[0]);
  bool once = false;
  std::optional<int64_t> processes, process;
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i];
    std::optional<int64_t>* target = nullptr;
    if (arg == "--once" || arg == "-o") {
      once = true;
      continue;
    }
    if (arg == "--processes") target = &processes;
    if (arg == "--process") target = &process;
    if (!target || i + 1 >= argc) return usage(argv[0]);
    *target = apus::common::parse_python_int(argv[++i]);
    if (!*target) return usage(argv[0]);
  }
  apus::common::block_stop_signals();
  auto conf = apus::common::load_program_config(argv[1]);
  if (!conf.ok()) {
    std::fprintf(stderr, "%s\n", conf.status().message().c_str());
    return 1;
  }
  auto config = apus::object::ExpirerConfig::from_config(*conf, argv[1]);
  apus::common::Status ready = config.ok() ? config->set_processes(processes, process)
                                           : config.status();
  if (ready.ok()) {
    ready = apus::common::configure_logging(conf->section("object-expirer"), config->log_name);
  }
  if (ready.ok()) {
    auto statsd = apus::common::StatsdHandle::from_section(conf->section("object-expirer"),
                                                           config->log_name);
    ready = statsd.status();
    if (statsd.ok()) config->statsd = std::move(*statsd);
  }
  if (!ready.ok()) {
    std::fprintf(stderr, "%s\n", ready.message().c_str());
    return 1;
  }
  apus::object::ObjectExpirer expirer(*config);
  if (once) {
    (void)expirer.run_once();
    return 0;
  }
  char cadence[32];
  std::snprintf(cadence, sizeof cadence, "%g", config->interval);
  apus::common::run_until_stopped(
      std::string("object-expirer started: a pass within every ") + cadence +
          " s (a random part of it after each pass)",
      [&](const std::atomic<bool>& stop) { expirer.run_forever(stop); });
  return 0;
}
