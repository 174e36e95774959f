// StatsdClient (common/statsd.h): Swift's datagrams, names and sampling, read back from a
// loopback UDP socket.
#include "common/statsd.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <string>
#include <vector>

#include <doctest/doctest.h>

namespace apus::common {
namespace {

// A UDP socket on 127.0.0.1 that gathers what the client sends.
struct Receiver {
  Receiver() {
    fd = ::socket(AF_INET, SOCK_DGRAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    socklen_t len = sizeof a;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
    timeval tv{0, 200000};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  ~Receiver() { ::close(fd); }
  // Every datagram until none came for 0.2 s.
  std::vector<std::string> received() const {
    std::vector<std::string> out;
    char buf[2048];
    for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) out.emplace_back(buf, n);
    return out;
  }
  int fd;
  int port;
};

std::unique_ptr<StatsdClient> client(const std::string& conf, const std::string& tail,
                                     std::string_view key_prefix = {}) {
  auto c = Config::parse("[app:x]\n" + conf);
  REQUIRE(c.ok());
  auto s = StatsdClient::from_section(c->section("app:x"), tail, key_prefix);
  REQUIRE(s.ok());
  return std::move(s).value();
}

TEST_CASE("no log_statsd_host: no client") {
  CHECK(client("log_statsd_port = 9\n", "object-server") == nullptr);
}

TEST_CASE("datagrams in Swift's format, with the metric prefix and the server's name") {
  Receiver r;
  auto c = client("log_statsd_host = 127.0.0.1\nlog_statsd_port = " + std::to_string(r.port) +
                      "\nlog_statsd_metric_prefix = site1\n",
                  "object-server");
  REQUIRE(c != nullptr);
  c->timing("PUT.timing", 12.5);
  c->increment("async_pendings");
  c->update_stats("xfer", 4096);
  CHECK(r.received() == std::vector<std::string>{"site1.object-server.PUT.timing:12.5|ms",
                                                 "site1.object-server.async_pendings:1|c",
                                                 "site1.object-server.xfer:4096|c"});
}

TEST_CASE("sampling: a rate below 1 is sent with it, a factor of 0 sends nothing") {
  Receiver r;
  const std::string target =
      "log_statsd_host = 127.0.0.1\nlog_statsd_port = " + std::to_string(r.port) + "\n";
  auto silent = client(target + "log_statsd_sample_rate_factor = 0\n", "");
  for (int i = 0; i < 50; ++i) silent->increment("x");
  CHECK(r.received().empty());

  auto half = client(target + "log_statsd_default_sample_rate = 0.5\n", "");
  for (int i = 0; i < 400; ++i) half->increment("x");
  auto got = r.received();
  // 400 draws at 0.5: fewer than 120 or more than 280 happens with odds below 1e-15.
  CHECK(got.size() > 120);
  CHECK(got.size() < 280);
  for (const auto& d : got) CHECK(d == "x:1|c|@0.5");

  // A rate given with the metric replaces the default; the factor multiplies it.
  auto scaled = client(target + "log_statsd_sample_rate_factor = 0.999999\n", "");
  scaled->timing("t", 1, 1.0);
  got = r.received();
  REQUIRE(got.size() <= 1);
  if (!got.empty()) CHECK(got[0] == "t:1.0|ms|@0.999999");  // Python str(1.0)
}

TEST_CASE("proxy_logging's access_log_statsd_* win over log_statsd_*") {
  Receiver r;
  auto c = client("log_statsd_host = 127.0.0.9\naccess_log_statsd_host = 127.0.0.1\n"
                  "access_log_statsd_port = " + std::to_string(r.port) +
                      "\naccess_log_statsd_metric_prefix = acc\n",
                  "proxy-server", "access_");
  c->timing("object.GET.200.timing", 3);
  CHECK(r.received() ==
        std::vector<std::string>{"acc.proxy-server.object.GET.200.timing:3.0|ms"});
}

TEST_CASE("bad values are refused") {
  for (const char* bad : {"log_statsd_host = 127.0.0.1\nlog_statsd_port = 70000\n",
                          "log_statsd_host = 127.0.0.1\nlog_statsd_default_sample_rate = x\n"}) {
    auto c = Config::parse(std::string("[app:x]\n") + bad);
    REQUIRE(c.ok());
    CHECK_FALSE(StatsdClient::from_section(c->section("app:x"), "").ok());
  }
}

}  // namespace
}  // namespace apus::common
