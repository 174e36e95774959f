// healthcheck_server: the bare Apus runtime (acceptor, hand-off queue, workers, session) serving
// GET /healthcheck, for the runtime micro-benchmark against nginx.
//
//   healthcheck_server --port P [--workers N]
//
// Runs until SIGTERM or SIGINT. Anything but /healthcheck and /metrics is 404.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "common/http/server.h"
#include "common/metrics/metrics.h"
#include "common/process.h"

namespace net = boost::asio;
using apus::common::http::Exchange;
using apus::common::http::Response;

int main(int argc, char** argv) {
  apus::common::http::ServerOptions options;
  options.bind_ip = "127.0.0.1";
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--port") options.bind_port = static_cast<uint16_t>(std::atoi(argv[i + 1]));
    else if (flag == "--workers") options.workers = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: healthcheck_server --port P [--workers N]\n");
      return 2;
    }
  }
  apus::common::block_stop_signals();
  apus::common::Metrics metrics("bench");
  apus::common::http::Server server(
      options,
      [](Exchange& ex) -> net::awaitable<void> {
        Response r;
        r.status = 404;
        (void)co_await ex.respond(std::move(r));
      },
      &metrics);
  if (auto s = server.start(); !s.ok()) {
    std::fprintf(stderr, "cannot start: %s\n", s.to_string().c_str());
    return 1;
  }
  std::printf("listening on 127.0.0.1:%u\n", server.port());
  std::fflush(stdout);
  server.run_until_signal();
  return 0;
}
