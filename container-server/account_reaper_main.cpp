// apus-account-reaper CONFIG [--once]: deletes the contents of accounts marked deleted, like
// swift-account-reaper, reading [account-reaper] of an account-server.conf.
#include <atomic>
#include <cstdio>
#include <map>
#include <string>

#include "common/io/fs.h"
#include "common/process.h"
#include "container-server/account_reaper.h"
#include "ring/ring_reloader.h"

namespace {

apus::common::Result<std::unique_ptr<apus::ring::Ring>> open_ring(
    const apus::container::ReaperConfig& config, const std::string& name) {
  apus::ring::RingOptions options;
  options.reloader = apus::ring::RingReloader::shared();
  return apus::ring::Ring::open(config.swift_dir + "/" + name + ".ring.gz",
                                {config.swift.hash_path_prefix, config.swift.hash_path_suffix},
                                std::move(options));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s CONFIG_FILE [--once]\n", argv[0]);
    return 2;
  }
  bool once = false;
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--once" || arg == "-o" || arg == "once") {
      once = true;
    } else {
      std::fprintf(stderr, "unknown argument %s\n", arg.c_str());
      return 2;
    }
  }
  apus::common::block_stop_signals();
  auto config = apus::common::load_daemon<apus::container::ReaperConfig>(
      argv[1], "account-reaper", apus::container::ReaperConfig::from_config);
  if (!config.ok()) {
    std::fprintf(stderr, "%s\n", config.status().message().c_str());
    return 1;
  }
  // The rings stay current through the reloader's thread.
  std::unique_ptr<apus::ring::Ring> rings[2];
  const char* names[2] = {"account", "container"};
  for (int i = 0; i < 2; ++i) {
    auto ring = open_ring(*config, names[i]);
    if (!ring.ok()) {
      std::fprintf(stderr, "cannot load the %s ring: %s\n", names[i],
                   ring.status().to_string().c_str());
      return 1;
    }
    rings[i] = std::move(*ring);
  }
  std::map<int, std::unique_ptr<apus::ring::Ring>> object_rings;
  for (const auto& policy : config->swift.policies.all()) {
    std::string name = policy.index == 0 ? "object" : "object-" + std::to_string(policy.index);
    auto ring = open_ring(*config, name);
    if (!ring.ok()) {
      std::fprintf(stderr, "cannot load the %s ring: %s\n", name.c_str(),
                   ring.status().to_string().c_str());
      return 1;
    }
    object_rings.emplace(policy.index, std::move(*ring));
  }
  apus::container::AccountReaper reaper(*config, apus::common::io::default_fs(),
                                        std::move(rings[0]), std::move(rings[1]),
                                        std::move(object_rings));
  if (once) {
    (void)reaper.run_once();  // failures are logged; the exit status is 0, as Swift's
    return 0;
  }
  char cadence[32];
  std::snprintf(cadence, sizeof cadence, "%g", config->interval);
  apus::common::run_until_stopped(
      std::string("account-reaper started: a pass every ") + cadence + " s",
      [&](const std::atomic<bool>& stop) { reaper.run_forever(stop); });
  return 0;
}
