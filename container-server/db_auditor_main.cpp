// apus-container-auditor / apus-account-auditor CONFIG [--once] [--devices D,...]: database
// audits like swift-container-auditor and swift-account-auditor (container-server/db_auditor.h),
// reading [container-auditor] or [account-auditor] of the server's config.
// APUS_DB_AUDITOR_TYPE (0 containers, 1 accounts) picks the program.
#include <atomic>
#include <cstdio>
#include <set>
#include <string>

#include "common/config/config.h"
#include "common/io/fs.h"
#include "common/process.h"
#include "container-server/db_auditor.h"

int main(int argc, char** argv) {
  constexpr auto kType = APUS_DB_AUDITOR_TYPE == 0 ? apus::container::DbType::kContainer
                                                   : apus::container::DbType::kAccount;
  const std::string kind = kType == apus::container::DbType::kContainer ? "container" : "account";
  auto args = apus::common::parse_daemon_args(argc, argv, /*with_partitions=*/false);
  if (!args) return 2;
  apus::common::block_stop_signals();
  auto config = apus::common::load_daemon<apus::container::DbAuditorConfig>(
      args->config.c_str(), kind + "-auditor", [&](const apus::common::Config& conf) {
        return apus::container::DbAuditorConfig::from_config(conf, kType);
      });
  if (!config.ok()) {
    std::fprintf(stderr, "%s\n", config.status().message().c_str());
    return 1;
  }
  apus::container::DbAuditor auditor(*config, apus::common::io::default_fs());
  if (args->once) {
    (void)auditor.run_once(args->devices);  // failures are logged; exit status 0, as Swift's
    return 0;
  }
  char cadence[32];
  std::snprintf(cadence, sizeof cadence, "%g", config->interval);
  apus::common::run_until_stopped(
      kind + "-auditor started: a pass every " + cadence + " s",
      [&](const std::atomic<bool>& stop) { auditor.run_forever(stop); });
  return 0;
}
