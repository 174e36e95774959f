// apus-proxy-server CONFIG: Swift's proxy server, started like swift-proxy-server.
#include <cstdio>

#include "common/config/config.h"
#include "common/http/server.h"
#include "common/log/log.h"
#include "common/metrics/metrics.h"
#include "common/process.h"
#include "proxy/proxy_server.h"

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
  auto server = apus::proxy::ProxyServer::create(*conf);
  apus::common::Status logging = server.ok()
                                     ? apus::common::configure_logging(
                                           conf->section("app:proxy-server"),
                                           (*server)->config().log_name)
                                     : server.status();
  if (!logging.ok()) {
    std::fprintf(stderr, "%s\n", logging.message().c_str());
    return 1;
  }
  apus::common::Metrics metrics("proxy");
  apus::proxy::ProxyServer& proxy = **server;
  apus::common::http::Server http(
      proxy.config().server, [&proxy](apus::common::http::Exchange& ex) { return proxy.handle(ex); },
      &metrics);
  if (auto s = http.start(); !s.ok()) {
    std::fprintf(stderr, "cannot start: %s\n", s.to_string().c_str());
    return 1;
  }
  APUS_LOG_INFO("proxy-server listening on " + proxy.config().server.bind_ip + ":" +
                std::to_string(http.port()) + " with " +
                std::to_string(proxy.config().server.workers) + " workers");
  http.run_until_signal();
  return 0;
}
