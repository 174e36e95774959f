// memcache_servers as Swift reads it (parse_socket_string with memcached's default port):
// host names resolve at start, a missing port is 11211, IPv6 goes in brackets, and a bad entry
// is refused with its text (issue 12: a host name or a missing port threw on the first request,
// inside a detached coroutine, and the client got no answer).
#include "proxy/memcache.h"

#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <string>
#include <thread>
#include <vector>

namespace apus::proxy {
namespace {

MemcacheServer one(const std::string& entry) {
  auto parsed = Memcache::parse_servers({entry});
  INFO(entry, ": ", parsed.ok() ? std::string() : parsed.status().to_string());
  REQUIRE(parsed.ok());
  REQUIRE(parsed->size() == 1);
  return parsed->front();
}

bool refused(const std::string& entry) {
  auto parsed = Memcache::parse_servers({entry});
  if (parsed.ok()) return false;
  CHECK(parsed.status().message().find(entry) != std::string::npos);
  return true;
}

TEST_CASE("memcache_servers: address and port") {
  MemcacheServer s = one("127.0.0.1:11311");
  CHECK(s.name == "127.0.0.1:11311");
  CHECK(s.address == "127.0.0.1");
  CHECK(s.port == 11311);
}

TEST_CASE("memcache_servers: no port means 11211") {
  MemcacheServer s = one("127.0.0.1");
  CHECK(s.port == kDefaultMemcachedPort);
  CHECK(s.port == 11211);
  CHECK(s.name == "127.0.0.1");
}

TEST_CASE("memcache_servers: a host name resolves at start") {
  MemcacheServer s = one("localhost:11311");
  CHECK((s.address == "127.0.0.1" || s.address == "::1"));
  CHECK(s.port == 11311);
  CHECK(s.name == "localhost:11311");  // keys are placed by the configured text, as Swift does
  CHECK(one("localhost").port == 11211);
}

TEST_CASE("memcache_servers: IPv6 in brackets, with or without a port") {
  MemcacheServer s = one("[::1]:11311");
  CHECK(s.address == "::1");
  CHECK(s.port == 11311);
  CHECK(one("[::1]").port == 11211);
}

TEST_CASE("memcache_servers: bad entries are refused, naming the entry") {
  CHECK(refused("::1"));               // IPv6 without brackets
  CHECK(refused("::1:11211"));
  CHECK(refused("[::1"));              // no closing bracket
  CHECK(refused("[::1]11211"));
  CHECK(refused("[::1]:"));
  CHECK(refused("127.0.0.1:abc"));
  CHECK(refused("127.0.0.1:"));
  CHECK(refused("127.0.0.1:0"));
  CHECK(refused("127.0.0.1:70000"));
  CHECK(refused("127.0.0.1:99999999999999999999"));
  CHECK(refused(":11211"));
  CHECK(refused("no-such-host.invalid"));
}

TEST_CASE("memcache_servers: several entries keep their order") {
  auto parsed = Memcache::parse_servers({"127.0.0.1:1", "localhost", "[::1]:3"});
  REQUIRE(parsed.ok());
  REQUIRE(parsed->size() == 3);
  CHECK((*parsed)[0].port == 1);
  CHECK((*parsed)[1].port == 11211);
  CHECK((*parsed)[2].port == 3);
}

TEST_CASE("memcache: keys are placed by the configured names") {
  auto parsed = Memcache::parse_servers({"127.0.0.1:11211", "127.0.0.2:11211"});
  REQUIRE(parsed.ok());
  Memcache mc(std::move(*parsed));
  auto servers = mc.servers_for(Memcache::hashed("account/AUTH_test"));
  REQUIRE(servers.size() == 2);
  CHECK(((servers[0] == "127.0.0.1:11211" && servers[1] == "127.0.0.2:11211") ||
         (servers[0] == "127.0.0.2:11211" && servers[1] == "127.0.0.1:11211")));
}

// A memcached that answers every request line with "END" (a miss), on a port of its own,
// counting the connections it takes; or nothing on that port while stopped.
class FakeMemcached {
 public:
  FakeMemcached() {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    socklen_t len = sizeof a;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    ::close(fd);  // nothing listens until start()
  }
  ~FakeMemcached() { stop(); }
  uint16_t port() const { return port_; }
  int accepted() const { return accepted_.load(); }
  void start() {
    listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    ::setsockopt(listener_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(port_);
    REQUIRE(::bind(listener_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(::listen(listener_, 8) == 0);
    thread_ = std::thread([this] {
      for (;;) {
        int c = ::accept(listener_, nullptr, nullptr);
        if (c < 0) return;
        ++accepted_;
        client_ = c;
        char buf[512];
        while (::read(c, buf, sizeof buf) > 0) {
          if (::write(c, "END\r\n", 5) != 5) break;
        }
        ::close(c);
      }
    });
  }
  void stop() {
    if (listener_ < 0) return;
    ::shutdown(listener_, SHUT_RDWR);
    if (int c = client_.exchange(-1); c >= 0) ::shutdown(c, SHUT_RDWR);
    ::close(listener_);
    listener_ = -1;
    thread_.join();
  }

 private:
  uint16_t port_ = 0;
  int listener_ = -1;
  std::atomic<int> accepted_{0};
  std::atomic<int> client_{-1};
  std::thread thread_;
};

TEST_CASE("memcache: one failure does not turn a server off (Swift's error limiting)") {
  FakeMemcached server;
  auto parsed = Memcache::parse_servers({"127.0.0.1:" + std::to_string(server.port())});
  REQUIRE(parsed.ok());
  Memcache mc(std::move(*parsed), MemcacheErrorLimit{.count = 2, .interval = 60});
  // One io_context and thread throughout: the client keeps idle connections per thread.
  boost::asio::io_context ioc;
  auto steps = [&]() -> boost::asio::awaitable<void> {
    CHECK(!co_await mc.get("k"));  // refused: memcached is (re)starting; failure 1
    server.start();
    CHECK(!co_await mc.get("k"));
    CHECK(server.accepted() == 1);  // tried again at once
    server.stop();
    CHECK(!co_await mc.get("k"));  // its idle connection is gone: failure 2
    CHECK(!co_await mc.get("k"));  // refused: failure 3, more than 2 within the interval
    server.start();
    CHECK(!co_await mc.get("k"));
    CHECK(server.accepted() == 1);  // now skipped for the interval
  };
  auto done = boost::asio::co_spawn(ioc, steps(), boost::asio::use_future);
  ioc.run();
  done.get();
}

}  // namespace
}  // namespace apus::proxy
