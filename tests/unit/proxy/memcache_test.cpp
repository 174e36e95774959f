// memcache_servers as Swift reads it (parse_socket_string with memcached's default port):
// host names resolve at start, a missing port is 11211, IPv6 goes in brackets, and a bad entry
// is refused with its text (issue 12: a host name or a missing port threw on the first request,
// inside a detached coroutine, and the client got no answer).
#include "proxy/memcache.h"

#include <doctest/doctest.h>

#include <string>
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

}  // namespace
}  // namespace apus::proxy
