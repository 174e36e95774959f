#include "proxy/memcache.h"

#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <netdb.h>
#include <sys/socket.h>

#include <charconv>
#include <ctime>
#include <deque>
#include <thread>

#include "common/crypto/md5.h"
#include "common/log/log.h"
#include "common/thread_annotations.h"

namespace apus::proxy {

namespace net = boost::asio;
using net::ip::tcp;
using namespace net::experimental::awaitable_operators;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int kNodeWeight = 50;  // ring points per server, as Swift's NODE_WEIGHT
constexpr int kJsonFlag = 2;
constexpr auto kTuple = net::as_tuple(net::use_awaitable);

constexpr size_t kMaxIdlePerServer = 16;

// One connection to one server, owned by one worker thread and used by one request at a time.
struct Conn {
  std::unique_ptr<tcp::socket> socket;
  net::streambuf buf;
};

}  // namespace

struct Memcache::Impl {
  std::vector<std::string> servers;                  // names, as the ring and limits know them
  std::map<std::string, tcp::endpoint> endpoints;  // by name
  std::map<std::string, std::string> ring;  // md5("<server>-<i>") -> server
  std::chrono::nanoseconds connect_timeout, io_timeout;
  MemcacheErrorLimit error_limit;
  common::Mutex mutex;
  std::map<std::string, Clock::time_point> limited APUS_GUARDED_BY(mutex);  // server -> until
  // Each server's recent failures (at most error_limit.count + 1 of them are kept).
  std::map<std::string, std::deque<Clock::time_point>> errors APUS_GUARDED_BY(mutex);

  // Idle connections of this worker thread, by client and server. A request takes one (or
  // opens one) for its exchange, so concurrent requests never share a socket.
  static thread_local std::map<const Impl*, std::map<std::string, std::vector<std::unique_ptr<Conn>>>>
      idle;

  bool is_limited(const std::string& server) APUS_EXCLUDES(mutex) {
    common::MutexLock lock(&mutex);
    auto it = limited.find(server);
    return it != limited.end() && it->second > Clock::now();
  }
  // Swift's _exception_occurred: every failure is logged, and a server that failed more than
  // error_limit.count times within error_limit.interval is skipped for that long (a single
  // failure, such as a memcached restarting, does not turn caching off for a minute).
  void error_occurred(const std::string& server, const std::string& what) APUS_EXCLUDES(mutex) {
    APUS_LOG_ERROR(what + " memcached: " + server);
    if (error_limit.interval <= 0) return;
    const auto window = std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double>(error_limit.interval));
    common::MutexLock lock(&mutex);
    const auto now = Clock::now();
    auto& times = errors[server];
    times.push_back(now);
    while (!times.empty() && times.front() <= now - window) times.pop_front();
    if (times.size() > error_limit.count) {
      times.clear();
      limited[server] = now + window;
      APUS_LOG_ERROR("Error limiting server " + server);
    }
  }

  // Runs `op` on a connection to `server` of its own (an idle one, or a new one) within
  // io_timeout; the connection goes back to the idle ones unless something failed.
  template <class Op>
  net::awaitable<bool> with_conn(const std::string& server, Op op) {
    auto ex = co_await net::this_coro::executor;
    std::unique_ptr<Conn> c;
    {
      auto& spare = idle[this][server];
      if (!spare.empty()) {
        c = std::move(spare.back());
        spare.pop_back();
      }
    }
    if (!c) {
      c = std::make_unique<Conn>();
      auto where = endpoints.find(server);
      if (where == endpoints.end()) co_return false;
      const tcp::endpoint& ep = where->second;
      c->socket = std::make_unique<tcp::socket>(ex);
      net::steady_timer t(ex, connect_timeout);
      auto r = co_await (c->socket->async_connect(ep, kTuple) || t.async_wait(kTuple));
      if (r.index() != 0) {
        error_occurred(server, "Timeout connecting to");
        co_return false;
      }
      if (auto ec = std::get<0>(std::get<0>(r))) {
        error_occurred(server, "Error connecting to (" + ec.message() + ")");
        co_return false;
      }
      boost::system::error_code ignored;
      c->socket->set_option(tcp::no_delay(true), ignored);
    }
    net::steady_timer t(ex, io_timeout);
    auto r = co_await (op(*c) || t.async_wait(kTuple));
    if (r.index() != 0 || !std::get<0>(r)) {
      error_occurred(server, r.index() != 0 ? "Timeout talking to" : "Error talking to");
      co_return false;
    }
    auto& spare = idle[this][server];
    if (spare.size() < kMaxIdlePerServer) spare.push_back(std::move(c));
    co_return true;
  }
};

thread_local std::map<const Memcache::Impl*,
                      std::map<std::string, std::vector<std::unique_ptr<Conn>>>>
    Memcache::Impl::idle;

Memcache::Memcache(std::vector<MemcacheServer> servers, MemcacheErrorLimit error_limit,
                   double connect_timeout, double io_timeout)
    : impl_(std::make_unique<Impl>()) {
  impl_->error_limit = error_limit;
  for (const MemcacheServer& s : servers) {
    boost::system::error_code ec;
    auto address = net::ip::make_address(s.address, ec);
    if (ec) continue;  // parse_servers() gives addresses only
    impl_->servers.push_back(s.name);
    impl_->endpoints[s.name] = tcp::endpoint(address, s.port);
  }
  for (const auto& s : impl_->servers) {
    for (int i = 0; i < kNodeWeight; ++i) impl_->ring[hashed(s + "-" + std::to_string(i))] = s;
  }
  impl_->connect_timeout = std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::duration<double>(connect_timeout));
  impl_->io_timeout = std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::duration<double>(io_timeout));
}

Memcache::~Memcache() = default;

namespace {

// Swift's parse_socket_string(): host and port text of one entry; nullopt when malformed.
std::optional<std::pair<std::string, std::string>> split_host_port(std::string_view entry) {
  if (entry.starts_with('[')) {
    size_t close = entry.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    std::string_view rest = entry.substr(close + 1);
    std::string host(entry.substr(1, close - 1));
    if (rest.empty()) return std::pair{host, std::string()};
    if (rest.size() < 2 || rest[0] != ':' ||
        rest.substr(1).find_first_not_of("0123456789") != std::string_view::npos) {
      return std::nullopt;
    }
    return std::pair{host, std::string(rest.substr(1))};
  }
  size_t colon = entry.find(':');
  if (colon == std::string_view::npos) return std::pair{std::string(entry), std::string()};
  if (entry.find(':', colon + 1) != std::string_view::npos) return std::nullopt;  // bare IPv6
  // "host:" keeps its colon in the port text, so that it is refused as a port.
  return std::pair{std::string(entry.substr(0, colon)),
                   std::string(colon + 1 == entry.size() ? ":" : entry.substr(colon + 1))};
}

// The first address `host` resolves to (numeric addresses need no lookup), or nullopt.
std::optional<std::string> resolve(const std::string& host) {
  boost::system::error_code ec;
  auto numeric = net::ip::make_address(host, ec);
  if (!ec) return numeric.to_string();
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0 || !found) return std::nullopt;
  std::optional<std::string> out;
  char text[NI_MAXHOST];
  if (::getnameinfo(found->ai_addr, found->ai_addrlen, text, sizeof text, nullptr, 0,
                    NI_NUMERICHOST) == 0) {
    out = text;
  }
  ::freeaddrinfo(found);
  return out;
}

}  // namespace

common::Result<std::vector<MemcacheServer>> Memcache::parse_servers(
    const std::vector<std::string>& entries) {
  std::vector<MemcacheServer> out;
  for (const std::string& entry : entries) {
    auto bad = [&](std::string_view why) {
      return common::Status::invalid_argument("memcache server '" + entry + "': " +
                                              std::string(why));
    };
    auto parts = split_host_port(entry);
    if (!parts) {
      return bad(entry.starts_with('[') ? "invalid IPv6 address"
                                        : "IPv6 addresses must be between '[]'");
    }
    auto& [host, port_text] = *parts;
    if (host.empty()) return bad("no host");
    MemcacheServer server;
    server.name = entry;
    server.port = kDefaultMemcachedPort;
    if (!port_text.empty()) {
      unsigned port = 0;
      auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
      if (ec != std::errc() || end != port_text.data() + port_text.size() || port == 0 ||
          port > 65535) {
        return bad("invalid port");
      }
      server.port = static_cast<uint16_t>(port);
    }
    auto address = resolve(host);
    if (!address) return bad("host name does not resolve");
    server.address = std::move(*address);
    out.push_back(std::move(server));
  }
  return out;
}

std::string Memcache::hashed(std::string_view key) { return common::crypto::md5_hex(key); }

std::vector<std::string> Memcache::servers_for(const std::string& key) const {
  std::vector<std::string> out;
  if (impl_->ring.empty()) return out;
  // bisect_right over the sorted points, then the next point on (as Swift walks it).
  auto it = impl_->ring.upper_bound(key);
  size_t pos = static_cast<size_t>(std::distance(impl_->ring.begin(), it));
  const size_t n = impl_->ring.size();
  const size_t tries = std::min<size_t>(3, impl_->servers.size());
  for (size_t step = 0; step < n && out.size() < tries; ++step) {
    pos = (pos + 1) % n;
    const std::string& server = std::next(impl_->ring.begin(), static_cast<long>(pos))->second;
    if (std::find(out.begin(), out.end(), server) == out.end()) out.push_back(server);
  }
  return out;
}

net::awaitable<std::optional<std::string>> Memcache::get(std::string key) {
  std::string h = hashed(key);
  for (const auto& server : servers_for(h)) {
    if (impl_->is_limited(server)) continue;
    std::optional<std::string> value;
    bool ok = co_await impl_->with_conn(server, [&](Conn& c) -> net::awaitable<bool> {
      std::string req = "get " + h + "\r\n";
      auto [ec, n] = co_await net::async_write(*c.socket, net::buffer(req), kTuple);
      if (ec) co_return false;
      for (;;) {
        auto [ec2, len] = co_await net::async_read_until(*c.socket, c.buf, "\r\n", kTuple);
        if (ec2) co_return false;
        std::string line(static_cast<const char*>(c.buf.data().data()), len - 2);
        c.buf.consume(len);
        if (line == "END") co_return true;
        // VALUE <key> <flags> <bytes>
        char k[300];
        int flags = 0;
        unsigned long bytes = 0;
        if (std::sscanf(line.c_str(), "VALUE %299s %d %lu", k, &flags, &bytes) != 3) {
          co_return false;
        }
        if (c.buf.size() < bytes + 2) {
          auto [ec3, m] = co_await net::async_read(
              *c.socket, c.buf, net::transfer_exactly(bytes + 2 - c.buf.size()), kTuple);
          if (ec3) co_return false;
        }
        std::string data(static_cast<const char*>(c.buf.data().data()), bytes);
        c.buf.consume(bytes + 2);
        if (flags & kJsonFlag) value = std::move(data);
      }
    });
    if (ok) co_return value;
  }
  co_return std::nullopt;
}

net::awaitable<void> Memcache::set(std::string key, std::string json, double ttl) {
  co_await store(std::move(key), kJsonFlag, std::move(json), ttl);
}

net::awaitable<void> Memcache::set_raw(std::string key, std::string value, double ttl) {
  co_await store(std::move(key), 0, std::move(value), ttl);
}

namespace {

// Swift's sanitize_timeout: beyond 30 days memcached wants an absolute time.
int64_t memcached_expiry(double ttl) {
  return static_cast<int64_t>(ttl > 30 * 24 * 3600 ? ttl + static_cast<double>(std::time(nullptr))
                                                   : ttl);
}

}  // namespace

net::awaitable<std::optional<int64_t>> Memcache::incr(std::string key, int64_t delta, double ttl) {
  std::string h = hashed(key);
  const std::string command = delta < 0 ? "decr" : "incr";
  const std::string amount = std::to_string(delta < 0 ? -delta : delta);
  const std::string initial = delta < 0 ? "0" : amount;
  for (const auto& server : servers_for(h)) {
    if (impl_->is_limited(server)) continue;
    std::optional<int64_t> value;
    bool ok = co_await impl_->with_conn(server, [&](Conn& c) -> net::awaitable<bool> {
      auto line = [&]() -> net::awaitable<std::optional<std::string>> {
        auto [ec, len] = co_await net::async_read_until(*c.socket, c.buf, "\r\n", kTuple);
        if (ec) co_return std::nullopt;
        std::string text(static_cast<const char*>(c.buf.data().data()), len - 2);
        c.buf.consume(len);
        co_return text;
      };
      auto send = [&](const std::string& text) -> net::awaitable<bool> {
        auto [ec, n] = co_await net::async_write(*c.socket, net::buffer(text), kTuple);
        co_return !ec;
      };
      auto number = [](const std::string& text) -> std::optional<int64_t> {
        uint64_t v = 0;
        auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
        if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
          return std::nullopt;  // memcached's counters are unsigned 64-bit decimals
        }
        return static_cast<int64_t>(std::min<uint64_t>(v, INT64_MAX));
      };
      const std::string step = command + " " + h + " " + amount + "\r\n";
      if (!co_await send(step)) co_return false;
      auto answer = co_await line();
      if (!answer) co_return false;
      if (*answer == "NOT_FOUND") {
        // Missing: add it; if another client added it meanwhile, step once more.
        if (!co_await send("add " + h + " 0 " + std::to_string(memcached_expiry(ttl)) + " " +
                           std::to_string(initial.size()) + "\r\n" + initial + "\r\n")) {
          co_return false;
        }
        answer = co_await line();
        if (!answer) co_return false;
        if (*answer != "NOT_STORED") {
          value = number(initial);
          co_return true;
        }
        if (!co_await send(step)) co_return false;
        answer = co_await line();
        if (!answer) co_return false;
      }
      value = number(*answer);
      co_return value.has_value();
    });
    if (ok) co_return value;
  }
  co_return std::nullopt;
}

net::awaitable<void> Memcache::del(std::string key) {
  std::string h = hashed(key);
  (void)co_await one_line_command(h, "delete " + h + "\r\n");  // DELETED or NOT_FOUND
}

net::awaitable<void> Memcache::store(std::string key, int flags, std::string data, double ttl) {
  std::string h = hashed(key);
  auto reply = co_await one_line_command(
      h, "set " + h + " " + std::to_string(flags) + " " + std::to_string(memcached_expiry(ttl)) +
             " " + std::to_string(data.size()) + "\r\n" + data + "\r\n");
  if (reply && *reply != "STORED") APUS_LOG_ERROR("Error setting value in memcached: " + *reply);
}

net::awaitable<std::optional<std::string>> Memcache::one_line_command(std::string hashed_key,
                                                                      std::string request) {
  for (const auto& server : servers_for(hashed_key)) {
    if (impl_->is_limited(server)) continue;
    std::string line;
    bool ok = co_await impl_->with_conn(server, [&](Conn& c) -> net::awaitable<bool> {
      auto [ec, n] = co_await net::async_write(*c.socket, net::buffer(request), kTuple);
      if (ec) co_return false;
      auto [ec2, len] = co_await net::async_read_until(*c.socket, c.buf, "\r\n", kTuple);
      if (ec2) co_return false;
      line.assign(static_cast<const char*>(c.buf.data().data()), len - 2);
      c.buf.consume(len);
      co_return true;
    });
    if (ok) co_return line;
  }
  co_return std::nullopt;
}

}  // namespace apus::proxy
