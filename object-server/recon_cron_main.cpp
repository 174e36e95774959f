// apus-recon-cron CONFIG: counts the async pendings on this node's devices into object.recon
// (async_pending, async_pending_last), as swift-recon-cron does from an operator's crontab.
// The object updater writes the same after each of its passes, so an Apus node needs this only
// where its updater does not run. Reads devices and recon_cache_path of [filter:recon]
// (DEFAULT inherited), as Swift's does.
#include <cstdio>

#include "common/config/config.h"
#include "common/io/fs.h"
#include "common/log/log.h"
#include "common/process.h"
#include "object-server/updater.h"

int main(int argc, char** argv) {
  if (argc != 2 || argv[1][0] == '-') {
    std::fprintf(stderr, "usage: %s CONFIG_FILE\nex: %s /etc/swift/object-server.conf\n",
                 argv[0], argv[0]);
    return 1;
  }
  auto conf = apus::common::load_program_config(argv[1]);
  if (!conf.ok()) {
    std::fprintf(stderr, "%s\n", conf.status().message().c_str());
    return 1;
  }
  apus::common::Section recon = conf->section("filter:recon");
  apus::common::Status logging =
      apus::common::configure_logging(recon, "recon-cron");
  apus::common::Status written =
      logging.ok() ? apus::object::write_async_pending_recon(
                         apus::common::io::default_fs(), recon.get_string("devices", "/srv/node"),
                         recon.get_string("recon_cache_path", "/var/cache/swift"))
                   : logging;
  if (!written.ok()) {
    std::fprintf(stderr, "Exception during recon-cron while accessing devices: %s\n",
                 written.message().c_str());
    return 1;
  }
  return 0;
}
