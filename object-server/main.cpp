// apus-object-server CONFIG [-v]: Swift's object server, started like swift-object-server.
#include <cstdio>
#include <string>

#include "common/config/config.h"
#include "common/http/server.h"
#include "common/io/fs.h"
#include "common/log/log.h"
#include "common/metrics/metrics.h"
#include "common/process.h"
#include "common/recon.h"
#include "common/statsd.h"
#include "object-server/object_server.h"

using apus::common::Status;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s CONFIG_FILE\n", argv[0]);
    return 2;
  }
  apus::common::tune_malloc(argv);
  apus::common::block_stop_signals();
  auto conf = apus::common::load_program_config(argv[1]);
  if (!conf.ok()) {
    std::fprintf(stderr, "%s\n", conf.status().message().c_str());
    return 1;
  }
  auto config = apus::object::ObjectServerConfig::from_config(*conf);
  Status logging = config.ok() ? apus::common::configure_logging(
                                     conf->section("app:object-server"), config->log_name)
                               : config.status();
  if (!logging.ok()) {
    std::fprintf(stderr, "%s\n", logging.message().c_str());
    return 1;
  }

  auto recon = apus::common::ReconConfig::from_config(*conf, APUS_SWIFT_VERSION);
  if (!recon.ok()) {
    std::fprintf(stderr, "%s\n", recon.status().message().c_str());
    return 1;
  }
  auto statsd = apus::common::StatsdClient::from_section(conf->section("app:object-server"),
                                                         config->log_name);
  if (!statsd.ok()) {
    std::fprintf(stderr, "%s\n", statsd.status().message().c_str());
    return 1;
  }
  apus::common::Metrics metrics("object");
  apus::object::ObjectServer server(*config, apus::common::io::default_fs(), &metrics);
  std::shared_ptr<apus::common::StatsdClient> statsd_client(std::move(*statsd));
  if (statsd_client) {
    server.disk().set_event_counter(
        [statsd_client](std::string_view name) { statsd_client->increment(name); });
  }
  apus::common::http::Server http(
      config->server,
      apus::common::with_recon(std::move(*recon), [&server](apus::common::http::Exchange& ex) {
        return server.handle(ex);
      }),
      &metrics,
      apus::common::with_request_timing(
          statsd_client, "object",
          config->log_requests ? apus::common::storage_access_logger()
                               : apus::common::http::AccessLogger()));
  if (auto s = http.start(); !s.ok()) {
    APUS_LOG_ERROR("cannot start: " + s.to_string());
    std::fprintf(stderr, "cannot start: %s\n", s.to_string().c_str());
    return 1;
  }
  APUS_LOG_INFO("object-server listening on " + config->server.bind_ip + ":" +
                std::to_string(http.port()) + " with " + std::to_string(config->server.workers) +
                " workers");
  http.run_until_signal();
  return 0;
}
