// apus-object-auditor CONFIG [--once] [--zero-byte-only] [--devices d1,d2]: quarantines
// objects whose bytes or metadata went bad, like swift-object-auditor.
#include <atomic>
#include <cstdio>
#include <set>
#include <string>

#include "common/config/config.h"
#include "common/io/fs.h"
#include "common/log/log.h"
#include "common/process.h"
#include "object-server/auditor.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s CONFIG_FILE [--once] [--zero-byte-only] [--devices D,...]\n",
                 argv[0]);
    return 2;
  }
  bool once = false;
  bool zero_byte = false;
  std::set<std::string> devices;
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--once" || arg == "-o") {
      once = true;
    } else if (arg == "--zero-byte-only" || arg == "-z") {
      zero_byte = true;
    } else if ((arg == "--devices" || arg == "-d") && i + 1 < argc) {
      for (auto& d : apus::common::list_from_csv(argv[++i])) devices.insert(d);
    } else {
      std::fprintf(stderr, "unknown argument %s\n", arg.c_str());
      return 2;
    }
  }
  apus::common::block_stop_signals();
  auto config = apus::common::load_daemon<apus::object::AuditorConfig>(
      argv[1], "object-auditor", apus::object::AuditorConfig::from_config);
  if (!config.ok()) {
    std::fprintf(stderr, "%s\n", config.status().message().c_str());
    return 1;
  }
  apus::object::ObjectAuditor auditor(*config, apus::common::io::default_fs());
  if (once) {
    (void)auditor.run_once(zero_byte ? apus::object::AuditMode::kZeroByte
                                     : apus::object::AuditMode::kAll,
                           devices);
    return 0;
  }
  char cadence[32];
  std::snprintf(cadence, sizeof cadence, "%g", config->interval);
  apus::common::run_until_stopped(
      std::string("object-auditor started: a pass every ") + cadence + " s, ZBF and ALL in turn",
      [&](const std::atomic<bool>& stop) { auditor.run_forever(stop); });
  return 0;
}
