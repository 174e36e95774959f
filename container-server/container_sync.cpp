#include "container-server/container_sync.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <random>

#include <arpa/inet.h>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <unistd.h>

#include "common/assert.h"
#include "common/async.h"
#include "common/crypto/random.h"
#include "common/http/client.h"
#include "common/http/range.h"
#include "common/http/url.h"
#include "common/log/log.h"
#include "common/metrics/metrics.h"
#include "common/timestamp.h"
#include "ring/ring_reloader.h"

namespace apus::container {

namespace net = boost::asio;
using common::Result;
using common::Status;
using common::Timestamp;
using common::http::HeaderMap;
using Clock = std::chrono::steady_clock;

namespace {

constexpr size_t kInfoPage = 1000;            // database infos read per store walk step
constexpr size_t kRowPage = 100;              // rows read per objects_since call
constexpr int64_t kPointFlushRows = 100;      // rows between two writes of a sync point
constexpr size_t kChunk = 64 * 1024;          // body bytes per read/write of a streamed copy
constexpr size_t kMaxRemoteBody = 64 * 1024;  // a remote answer's body, read to reuse the socket
// Swift's SimpleClient: PUT and DELETE are tried again this many times after a 5xx or a
// network error, waiting 1, 2, 4, 5, 5 seconds; HEAD is not.
constexpr int kRemoteRetries = 5;
constexpr double kFirstBackoff = 1, kMaxBackoff = 5;

Clock::duration seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

std::optional<std::string> metadata_value(const DbInfo& info, std::string_view key) {
  for (const auto& [name, item] : info.metadata) {
    if (item.value.empty()) continue;
    if (name.size() == key.size() &&
        std::equal(name.begin(), name.end(), key.begin(), [](char a, char b) {
          return std::tolower(static_cast<unsigned char>(a)) ==
                 std::tolower(static_cast<unsigned char>(b));
        })) {
      return item.value;
    }
  }
  return std::nullopt;
}

bool is_2xx(int status) { return status >= 200 && status < 300; }

}  // namespace

// ---- configuration ---------------------------------------------------------------------------

Result<ContainerSyncConfig> ContainerSyncConfig::from_config(const common::Config& conf) {
  ContainerSyncConfig c;
  common::Section s = conf.section("container-sync");
  APUS_ASSIGN_OR_RETURN(c.enabled, s.get_bool("enabled", true));
  APUS_ASSIGN_OR_RETURN(c.interval, s.get_double("interval", 300));
  APUS_ASSIGN_OR_RETURN(c.container_time, s.get_double("container_time", 60));
  APUS_ASSIGN_OR_RETURN(c.conn_timeout, s.get_double("conn_timeout", 5));
  int64_t tries = 3;
  if (!s.get_string("request_tries", "").empty()) {  // Swift: int(value or 3)
    APUS_ASSIGN_OR_RETURN(tries, s.get_int("request_tries", 3));
  }
  c.request_tries = static_cast<int>(std::clamp<int64_t>(tries, 1, 100));
  c.sync_proxies = s.get_list("sync_proxy", "");
  for (const std::string& proxy : c.sync_proxies) {
    auto url = parse_http_url(proxy);
    if (!url.ok() || url->https) {
      return s.invalid("sync_proxy", "not an http:// URL: " + proxy);
    }
  }
  c.swift_dir = s.get_string("swift_dir", "/etc/swift");
  std::string ic_path = s.get_string("internal_client_conf_path", "");
  if (ic_path.empty()) {
    // Swift warns here; inside the container server that would be a warning at every start.
    APUS_LOG_INFO(
        "container sync: no internal_client_conf_path, local object reads use "
        "conn_timeout 0.5 and node_timeout 10");
  } else {
    auto loaded = common::Config::load(ic_path);
    if (!loaded.ok()) {
      return Status::invalid_argument("Unable to load internal client from config: " + ic_path +
                                      " (" + loaded.status().to_string() + ")");
    }
    common::Section proxy = loaded->section("app:proxy-server");
    APUS_ASSIGN_OR_RETURN(c.local_conn_timeout, proxy.get_double("conn_timeout", 0.5));
    APUS_ASSIGN_OR_RETURN(c.local_node_timeout, proxy.get_double("node_timeout", 10));
  }
  return c;
}

// ---- pieces ----------------------------------------------------------------------------------

size_t sync_row_owner(const common::HashPathConfig& hash, std::string_view account,
                      std::string_view container, std::string_view name, size_t node_count) {
  auto digest = common::hash_path(hash, account, container, name);
  APUS_CHECK(digest.ok() && node_count > 0);
  const auto& d = *digest;
  uint32_t first =
      (uint32_t{d[0]} << 24) | (uint32_t{d[1]} << 16) | (uint32_t{d[2]} << 8) | uint32_t{d[3]};
  return first % node_count;
}

HeaderMap sync_put_headers(const HeaderMap& object_headers) {
  // Symlink sysmeta shown the way Swift's symlink middleware shows it on ?symlink=get.
  static constexpr std::pair<std::string_view, std::string_view> kSymlink[] = {
      {"X-Object-Sysmeta-Symlink-Target", "X-Symlink-Target"},
      {"X-Object-Sysmeta-Symlink-Target-Account", "X-Symlink-Target-Account"},
      {"X-Object-Sysmeta-Symlink-Target-Etag", "X-Symlink-Target-Etag"},
      {"X-Object-Sysmeta-Symlink-Target-Bytes", "X-Symlink-Target-Bytes"},
  };
  // Hop-by-hop and per-answer headers that describe the GET, not the object.
  static constexpr std::string_view kDropped[] = {
      "Date",          "Last-Modified", "Content-Length",
      "Connection",    "Keep-Alive",    "Transfer-Encoding",
      "Server",        "X-Trans-Id",    "X-Openstack-Request-Id",
      "Accept-Ranges", "Content-Range"};
  HeaderMap out;
  for (const auto& [name, value] : object_headers) out.add(name, value);
  for (const auto& [sysmeta, user] : kSymlink) {
    if (auto v = object_headers.get(sysmeta)) out.set(user, *v);
  }
  for (std::string_view name : kDropped) out.erase(name);
  out.erase_prefix("X-Object-Sysmeta-");
  out.erase_prefix("X-Object-Transient-Sysmeta-");
  out.erase_prefix("X-Backend-");
  if (auto etag = object_headers.get("Etag")) {
    out.set("Etag", common::http::normalize_etag(*etag));
  }
  if (auto ctype = object_headers.get("Content-Type")) {
    // Swift's clean_content_type(): only a last ";swift_bytes=" parameter goes.
    std::string_view v = *ctype;
    size_t semi = v.rfind(';');
    if (semi != std::string_view::npos) {
      std::string_view right = v.substr(semi + 1);
      while (!right.empty() && (right.front() == ' ' || right.front() == '\t')) {
        right.remove_prefix(1);
      }
      if (right.starts_with("swift_bytes=")) out.set("Content-Type", v.substr(0, semi));
    }
  }
  return out;
}

Result<HttpUrl> parse_http_url(std::string_view url) {
  HttpUrl out;
  std::string_view rest;
  if (url.starts_with("http://")) {
    rest = url.substr(7);
  } else if (url.starts_with("https://")) {
    out.https = true;
    out.port = 443;
    rest = url.substr(8);
  } else {
    return Status::invalid_argument("not an http(s) URL");
  }
  size_t slash = rest.find_first_of("/?#");
  std::string_view authority = rest.substr(0, slash);
  out.path = slash == std::string_view::npos ? "" : std::string(rest.substr(slash));
  if (size_t at = authority.rfind('@'); at != std::string_view::npos) {
    authority.remove_prefix(at + 1);  // no credentials are sent
  }
  out.authority = std::string(authority);
  std::string_view host = authority, port;
  if (authority.starts_with("[")) {
    size_t close = authority.find(']');
    if (close == std::string_view::npos) return Status::invalid_argument("bad IPv6 host");
    host = authority.substr(1, close - 1);
    std::string_view after = authority.substr(close + 1);
    if (after.starts_with(":")) port = after.substr(1);
  } else if (size_t colon = authority.rfind(':'); colon != std::string_view::npos) {
    host = authority.substr(0, colon);
    port = authority.substr(colon + 1);
  }
  if (host.empty()) return Status::invalid_argument("no host");
  out.host = std::string(host);
  if (!port.empty()) {
    auto n = parse_int(port);
    if (!n || *n <= 0 || *n > 65535) return Status::invalid_argument("bad port");
    out.port = static_cast<uint16_t>(*n);
  }
  return out;
}

namespace {

// An IP address for `host` (itself when it is one). Blocking: the sync thread only.
std::optional<std::string> resolve(const std::string& host) {
  struct addrinfo hints = {};
  hints.ai_socktype = SOCK_STREAM;
  struct addrinfo* res = nullptr;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0 || !res) return std::nullopt;
  char buf[INET6_ADDRSTRLEN] = {};
  std::optional<std::string> out;
  if (res->ai_family == AF_INET) {
    auto* a = reinterpret_cast<struct sockaddr_in*>(res->ai_addr);
    if (::inet_ntop(AF_INET, &a->sin_addr, buf, sizeof buf)) out = buf;
  } else if (res->ai_family == AF_INET6) {
    auto* a = reinterpret_cast<struct sockaddr_in6*>(res->ai_addr);
    if (::inet_ntop(AF_INET6, &a->sin6_addr, buf, sizeof buf)) out = buf;
  }
  ::freeaddrinfo(res);
  return out;
}

// What one container's pass works with.
struct SyncJob {
  std::string device, db;
  DbInfo info;
  std::string sync_to;   // the stored X-Container-Sync-To value
  std::string user_key;  // X-Container-Sync-Key
  std::string endpoint;  // the URL rows go under
  HttpUrl url;           // `endpoint`, split
  std::string realm, realm_key;
};

// The outcome of a remote request: the status, or 0 for a network error.
struct RemoteAnswer {
  int status = 0;
  HeaderMap headers;
  std::string error;  // for the log, when status is 0
};

// A local object GET's winner, its body not read yet.
struct LocalObject {
  int status = 0;  // 200, 404, or 0 when no node answered
  common::http::ClientResponse head;
  std::unique_ptr<common::http::ClientConnection> conn;
};

}  // namespace

struct ContainerSync::Impl {
  ContainerSyncConfig config;
  const DbServerConfig& server;
  DbDevices& devices;
  std::shared_ptr<common::ContainerSyncRealms> realms;
  std::unique_ptr<ring::Ring> container_ring;
  std::map<int, std::unique_ptr<ring::Ring>> object_rings;  // sync thread only
  std::vector<std::string> my_ips;
  int my_port;
  ContainerSyncStats stats;
  std::atomic<bool> cancelled{false};  // stop(): end the pass early
  std::mt19937_64 rng{std::random_device{}()};
  common::http::ConnectionPool* pool = nullptr;  // during a pass
  std::string user_agent;
  // apus_container_sync_total{result}, apus_container_sync_bytes_total; no-ops without metrics.
  common::CounterHandle m_syncs, m_puts, m_deletes, m_skips, m_failures, m_bytes;

  Impl(ContainerSyncConfig c, const DbServerConfig& s, DbDevices& d,
       std::shared_ptr<common::ContainerSyncRealms> r, std::unique_ptr<ring::Ring> ring)
      : config(std::move(c)),
        server(s),
        devices(d),
        realms(std::move(r)),
        container_ring(std::move(ring)),
        my_ips(ring::local_ips(s.server.bind_ip)),
        my_port(s.server.bind_port),
        user_agent("container-sync " + std::to_string(::getpid())) {
    if (auto* m = devices.metrics()) {
      auto result = [&](const char* name) {
        return m->counter("apus_container_sync_total",
                          "Container sync outcomes (Swift's container-sync counters)",
                          {{"result", name}});
      };
      m_syncs = result("syncs");
      m_puts = result("puts");
      m_deletes = result("deletes");
      m_skips = result("skips");
      m_failures = result("failures");
      m_bytes =
          m->counter("apus_container_sync_bytes_total", "Object bytes container sync sent", {});
    }
  }

  void fail() {
    ++stats.failures;
    m_failures.inc();
  }
  ring::Ring* object_ring(int policy);
  net::awaitable<void> sync_device(const std::string& device);
  net::awaitable<void> sync_container(const std::string& device, const std::string& db,
                                      DbInfo info);
  net::awaitable<bool> sync_row(const SyncJob& job, const ObjectRecord& row);
  net::awaitable<LocalObject> local_get(const SyncJob& job, const std::string& name);
  // Sends one request to the remote container; `body` (nullable) streams `length` bytes.
  net::awaitable<RemoteAnswer> remote(const SyncJob& job, const std::string& method,
                                      const std::string& name, HeaderMap headers, LocalObject* body,
                                      uint64_t length);
  void add_auth(const SyncJob& job, const std::string& method, const std::string& name,
                HeaderMap& headers);
  // Waits `s` seconds unless stop() comes first; false when stopped.
  net::awaitable<bool> sleep(double s);
  // Writes the sync points; false when the container's Sync-To changed (stop syncing it).
  net::awaitable<bool> save_points(const SyncJob& job, std::optional<int64_t> p1,
                                   std::optional<int64_t> p2);
};

ring::Ring* ContainerSync::Impl::object_ring(int policy) {
  auto it = object_rings.find(policy);
  if (it != object_rings.end()) return it->second.get();
  if (!server.swift.policies.by_index(policy)) return nullptr;
  std::string name = policy == 0 ? "object" : "object-" + std::to_string(policy);
  // Reloaded by the shared reloader's thread when the file changes, as the container ring.
  ring::RingOptions options;
  options.reloader = ring::RingReloader::shared();
  auto r = ring::Ring::open(config.swift_dir + "/" + name + ".ring.gz",
                            {server.swift.hash_path_prefix, server.swift.hash_path_suffix},
                            std::move(options));
  if (!r.ok()) {
    APUS_LOG_ERROR("container sync: cannot load the ring of policy " + std::to_string(policy) +
                   ": " + r.status().to_string());
    return nullptr;
  }
  return object_rings.emplace(policy, std::move(*r)).first->second.get();
}

net::awaitable<bool> ContainerSync::Impl::sleep(double s) {
  net::steady_timer timer(co_await net::this_coro::executor);
  auto until = Clock::now() + seconds(s);
  while (Clock::now() < until) {
    if (cancelled.load()) co_return false;
    timer.expires_after(
        std::min<Clock::duration>(until - Clock::now(), std::chrono::milliseconds(100)));
    auto [ec] = co_await timer.async_wait(net::as_tuple(net::use_awaitable));
    (void)ec;
  }
  co_return !cancelled.load();
}

net::awaitable<bool> ContainerSync::Impl::save_points(const SyncJob& job, std::optional<int64_t> p1,
                                                      std::optional<int64_t> p2) {
  Status s = co_await devices.pool(job.device).call([&] {
    auto store = devices.store(job.device);
    if (!store.ok()) return store.status();
    return (*store)->set_sync_points(job.db, job.sync_to, p1, p2);
  });
  if (s.code() == Status::Code::kConflict) {
    APUS_LOG_DEBUG("container sync: X-Container-Sync-To of " + job.info.account + "/" +
                   job.info.container + " changed during the pass");
    co_return false;
  }
  if (!s.ok()) {
    APUS_LOG_ERROR("container sync: cannot save the sync points of " + job.db + ": " +
                   s.to_string());
    co_return false;
  }
  co_return true;
}

void ContainerSync::Impl::add_auth(const SyncJob& job, const std::string& method,
                                   const std::string& name, HeaderMap& headers) {
  if (!job.realm.empty() && !job.realm_key.empty()) {
    std::string nonce = common::crypto::uuid4_hex();
    std::string path = job.url.path + "/" + common::http::quote(name);
    std::string sig = common::container_sync_sig(method, path, headers.get_or("X-Timestamp", "0"),
                                                 nonce, job.realm_key, job.user_key);
    headers.set("X-Container-Sync-Auth", job.realm + " " + nonce + " " + sig);
  } else {
    headers.set("X-Container-Sync-Key", job.user_key);
  }
}

net::awaitable<RemoteAnswer> ContainerSync::Impl::remote(const SyncJob& job,
                                                         const std::string& method,
                                                         const std::string& name, HeaderMap headers,
                                                         LocalObject* body, uint64_t length) {
  RemoteAnswer out;
  // Swift's SimpleClient: the endpoint with its trailing slashes dropped, then the quoted name.
  std::string base = job.endpoint;
  while (!base.empty() && base.back() == '/') base.pop_back();
  std::string path = job.url.path;
  while (!path.empty() && path.back() == '/') path.pop_back();
  common::http::ClientRequest r;
  r.method = method;
  std::string host = job.url.host;
  uint16_t port = job.url.port;
  if (!config.sync_proxies.empty()) {
    // Through a forward proxy: connect to it and name the absolute URL.
    std::uniform_int_distribution<size_t> pick(0, config.sync_proxies.size() - 1);
    auto proxy = parse_http_url(config.sync_proxies[pick(rng)]);
    if (!proxy.ok()) {
      out.error = "bad sync_proxy";
      co_return out;
    }
    host = proxy->host;
    port = proxy->port;
    r.target = base + "/" + common::http::quote(name);
  } else {
    r.target = path + "/" + common::http::quote(name);
  }
  auto ip = resolve(host);
  if (!ip) {
    out.error = "cannot resolve " + host;
    co_return out;
  }
  headers.set("Host", job.url.authority);
  headers.set("User-Agent", user_agent);
  r.headers = std::move(headers);
  if (body) {
    r.content_length = length;
    // The remote's refusal (401, 404...) comes before any body byte; not through a forward
    // proxy, which may not pass 100-continue on.
    r.expect_continue = length > 0 && config.sync_proxies.empty();
  } else if (method != "HEAD" && method != "GET") {
    r.content_length = 0;
  }
  common::http::ClientOptions options{.conn_timeout = config.conn_timeout,
                                      .node_timeout = config.conn_timeout};
  auto started = co_await common::http::start_request(*pool, options, *ip, port, r);
  if (!started.ok()) {
    out.error = started.status().to_string();
    co_return out;
  }
  auto& conn = started->conn;
  bool send_body = body && (r.expect_continue ? started->status == 100 : true);
  if (send_body) {
    std::vector<char> buf(kChunk);
    uint64_t sent = 0;
    while (sent < length) {
      if (cancelled.load()) {  // the server stops: a cut body stores nothing remotely
        out.error = "stopping";
        co_return out;
      }
      auto n = co_await body->conn->read_body(
          std::span<char>(buf.data(), std::min<uint64_t>(buf.size(), length - sent)));
      if (!n.ok() || *n == 0) {
        // The local copy ended short: leave the remote with a cut body (it stores nothing).
        out.error = "local object body ended after " + std::to_string(sent) + " of " +
                    std::to_string(length) + " bytes";
        co_return out;
      }
      Status w = co_await conn->write_body(std::string_view(buf.data(), *n));
      if (!w.ok()) {
        out.error = "remote write: " + w.to_string();
        co_return out;
      }
      sent += *n;
    }
    Status f = co_await conn->finish_body();
    if (!f.ok()) {
      out.error = "remote write: " + f.to_string();
      co_return out;
    }
  }
  auto head = co_await conn->read_response_head();
  if (!head.ok()) {
    out.error = "remote answer: " + head.status().to_string();
    co_return out;
  }
  out.status = head->status;
  out.headers = head->headers;
  if (method != "HEAD") {
    auto rest = co_await conn->read_body_all(kMaxRemoteBody);
    if (!rest.ok()) co_return out;  // the connection is not reused
  }
  pool->release(std::move(conn));
  co_return out;
}

net::awaitable<LocalObject> ContainerSync::Impl::local_get(const SyncJob& job,
                                                           const std::string& name) {
  LocalObject best;
  ring::Ring* ring = object_ring(job.info.storage_policy_index);
  if (!ring) co_return best;
  common::http::ClientOptions options{.conn_timeout = config.local_conn_timeout,
                                      .node_timeout = config.local_node_timeout};
  for (int attempt = 0; attempt < config.request_tries; ++attempt) {
    auto nodes = ring->get_nodes(job.info.account, job.info.container, name);
    if (!nodes.ok()) co_return best;
    const size_t replicas = nodes->nodes.size();
    auto handoffs = ring->get_more_nodes(nodes->partition);
    std::optional<Timestamp> best_ts, newest_tombstone;
    size_t answered = 0, asked = 0;
    // Every primary is asked; a handoff stands in for each one that errs (Swift's X-Newest).
    std::vector<ring::Node> order = nodes->nodes;
    for (size_t i = 0; i < order.size() && answered < replicas && asked < 2 * replicas; ++i) {
      const ring::Device& dev = *order[i].device;
      ++asked;
      common::http::ClientRequest r;
      r.method = "GET";
      r.target =
          "/" + common::http::quote(dev.device) + "/" + std::to_string(nodes->partition) +
          common::http::quote("/" + job.info.account + "/" + job.info.container + "/" + name);
      r.headers.set("X-Backend-Storage-Policy-Index",
                    std::to_string(job.info.storage_policy_index));
      r.headers.set("X-Newest", "true");
      r.headers.set("User-Agent", user_agent);
      auto started = co_await common::http::start_request(
          *pool, options, dev.replication_ip, static_cast<uint16_t>(dev.replication_port), r);
      std::optional<common::http::ClientResponse> head;
      if (started.ok()) {
        auto h = co_await started->conn->read_response_head();
        if (h.ok()) head = std::move(*h);
      }
      int status = head ? head->status : 0;
      if (status == 0 || status >= 500) {
        ring::Node extra;
        if (handoffs.next(&extra)) order.push_back(extra);
        continue;
      }
      ++answered;
      if (is_2xx(status)) {
        auto ts = Timestamp::parse(head->headers.get_or("X-Timestamp", "0"));
        if (ts.ok() && (!best_ts || *ts > *best_ts)) {
          best_ts = *ts;
          best.status = 200;
          best.head = std::move(*head);
          best.conn = std::move(started->conn);  // the previous best's socket is dropped
        }
      } else if (status == 404) {
        auto ts = Timestamp::parse(head->headers.get_or("X-Backend-Timestamp", "0"));
        if (ts.ok() && (!newest_tombstone || *ts > *newest_tombstone)) newest_tombstone = *ts;
      }
    }
    if (best.status == 200) {
      if (newest_tombstone && *newest_tombstone > *best_ts) {
        best = LocalObject{};  // deleted since: the newest answer is the tombstone
        best.status = 404;
      }
      co_return best;
    }
    if (answered > 0) {
      best.status = 404;
      co_return best;
    }
  }
  co_return best;
}

net::awaitable<bool> ContainerSync::Impl::sync_row(const SyncJob& job, const ObjectRecord& row) {
  const std::string where = job.info.account + "/" + job.info.container + " " + row.name;
  auto failed = [&](int status, const std::string& what) {
    if (status == 401) {
      APUS_LOG_INFO("Unauth " + common::http::quote(job.info.account) + "/" +
                    common::http::quote(job.info.container) + " => " + job.endpoint);
    } else if (status == 404) {
      APUS_LOG_INFO("Not found " + common::http::quote(job.info.account) + "/" +
                    common::http::quote(job.info.container) + " => " + job.endpoint + " - object " +
                    common::py_repr(row.name));
    } else {
      APUS_LOG_ERROR("ERROR Syncing " + job.db + " row " + std::to_string(row.rowid) + " (" +
                     where + "): " + what);
    }
    fail();
    return false;
  };
  auto ts = common::decode_timestamps(row.created_at);
  if (!ts.ok()) co_return failed(0, "bad created_at " + row.created_at);
  const Timestamp ts_data = ts->t1;
  const Timestamp ts_meta = ts->t3.value_or(ts->t2.value_or(ts->t1));

  if (row.deleted) {
    // The tombstone's own timestamp, so the remote keeps whichever is newer.
    RemoteAnswer a;
    double backoff = kFirstBackoff;
    for (int attempt = 0;; ++attempt) {
      HeaderMap h;
      h.set("X-Timestamp", ts_data.internal());
      add_auth(job, "DELETE", row.name, h);
      a = co_await remote(job, "DELETE", row.name, std::move(h), nullptr, 0);
      bool retry = a.status == 0 || a.status >= 500;
      if (!retry || attempt >= kRemoteRetries) break;
      if (!co_await sleep(backoff)) break;
      backoff = std::min(backoff * 2, kMaxBackoff);
    }
    if (!is_2xx(a.status) && a.status != 404 && a.status != 409) {
      co_return failed(a.status, "DELETE: " + (a.status ? std::to_string(a.status) : a.error));
    }
    ++stats.deletes;
    m_deletes.inc();
    APUS_LOG_DEBUG("container sync: DELETE " + where + " " + std::to_string(a.status));
    co_return true;
  }

  // Whether the remote has it already (HEAD with the time it was last changed, PUT or POST).
  {
    HeaderMap h;
    h.set("X-Timestamp", ts_meta.internal());
    add_auth(job, "HEAD", row.name, h);
    RemoteAnswer a = co_await remote(job, "HEAD", row.name, std::move(h), nullptr, 0);
    if (is_2xx(a.status)) {
      auto remote_ts = Timestamp::parse(a.headers.get_or("X-Timestamp", "0"));
      if (remote_ts.ok() && ts_meta <= *remote_ts) {
        APUS_LOG_DEBUG("container sync: " + where + " already at the remote");
        co_return true;
      }
    } else if (a.status != 404) {
      co_return failed(a.status, "HEAD: " + (a.status ? std::to_string(a.status) : a.error));
    }
  }

  RemoteAnswer a;
  double backoff = kFirstBackoff;
  for (int attempt = 0;; ++attempt) {
    LocalObject local = co_await local_get(job, row.name);
    if (local.status == 200 && local.head.headers.get("X-Object-Sysmeta-Versions-Symlink")) {
      APUS_LOG_INFO("Skipping versioning symlink " + job.info.account + "/" + job.info.container +
                    "/" + row.name);
      co_return true;
    }
    auto local_ts = Timestamp::parse(local.head.headers.get_or("X-Timestamp", "0"));
    if (local.status != 200 || !local_ts.ok() || *local_ts < ts_meta) {
      co_return failed(0, "Unknown exception trying to GET: " + common::py_repr(job.info.account) +
                              " " + common::py_repr(job.info.container) + " " +
                              common::py_repr(row.name));
    }
    if (!local.head.content_length) co_return failed(0, "local GET without Content-Length");
    uint64_t length = *local.head.content_length;
    HeaderMap h = sync_put_headers(local.head.headers);
    add_auth(job, "PUT", row.name, h);
    a = co_await remote(job, "PUT", row.name, std::move(h), &local, length);
    bool retry = a.status == 0 || a.status >= 500;
    if (!retry || attempt >= kRemoteRetries) break;
    if (!co_await sleep(backoff)) break;
    backoff = std::min(backoff * 2, kMaxBackoff);
  }
  if (!is_2xx(a.status)) {
    co_return failed(a.status, "PUT: " + (a.status ? std::to_string(a.status) : a.error));
  }
  ++stats.puts;
  m_puts.inc();
  stats.bytes += static_cast<uint64_t>(std::max<int64_t>(row.size, 0));
  m_bytes.inc(static_cast<double>(std::max<int64_t>(row.size, 0)));
  APUS_LOG_DEBUG("container sync: PUT " + where + " " + std::to_string(a.status));
  co_return true;
}

net::awaitable<void> ContainerSync::Impl::sync_container(const std::string& device,
                                                         const std::string& db, DbInfo info) {
  const std::string name = info.account + "/" + info.container;
  auto nodes = container_ring->get_nodes(info.account, info.container);
  if (!nodes.ok()) co_return;
  std::optional<size_t> ordinal;
  for (size_t i = 0; i < nodes->nodes.size(); ++i) {
    const ring::Device& dev = *nodes->nodes[i].device;
    if (dev.port == my_port && dev.device == device &&
        std::find(my_ips.begin(), my_ips.end(), dev.ip) != my_ips.end()) {
      ordinal = i;
      break;
    }
  }
  if (!ordinal) co_return;  // not a primary here (a handoff copy)
  if (metadata_value(info, "X-Container-Sysmeta-Versions-Container")) {
    ++stats.skips;
    m_skips.inc();
    APUS_LOG_WARNING("Skipping container " + name + " with object versioning configured");
    co_return;
  }
  SyncJob job;
  job.device = device;
  job.db = db;
  job.sync_to = metadata_value(info, "X-Container-Sync-To").value_or("");
  job.user_key = metadata_value(info, "X-Container-Sync-Key").value_or("");
  if (job.sync_to.empty() || job.user_key.empty()) {
    ++stats.skips;
    m_skips.inc();
    co_return;
  }
  auto check = common::validate_sync_to(job.sync_to, server.allowed_sync_hosts, realms.get());
  if (check.error || !check.target) {
    APUS_LOG_INFO("ERROR " + db + " (" + name +
                  "): " + check.error.value_or("no realms configured for " + job.sync_to));
    fail();
    co_return;
  }
  job.endpoint = check.target->endpoint;
  job.realm = check.target->realm;
  job.realm_key = check.target->realm_key;
  auto url = parse_http_url(job.endpoint);
  if (!url.ok() || url->https) {
    APUS_LOG_ERROR("ERROR " + db + " (" + name + "): cannot sync to " + job.endpoint +
                   (url.ok() ? ": https is not supported" : ": not an http URL"));
    fail();
    co_return;
  }
  job.url = std::move(*url);
  job.info = std::move(info);
  const DbInfo& in = job.info;
  auto& disk = devices.pool(device);
  auto rows_after = [&](int64_t rowid) -> net::awaitable<Result<std::vector<ObjectRecord>>> {
    co_return co_await disk.call([&]() -> Result<std::vector<ObjectRecord>> {
      auto store = devices.store(device);
      if (!store.ok()) return store.status();
      return (*store)->objects_since(db, rowid, kRowPage);
    });
  };

  const ContainerSyncStats before = stats;
  const auto start = Clock::now();
  const auto stop_at = start + seconds(config.container_time);
  int64_t point1 = in.x_container_sync_point1, point2 = in.x_container_sync_point2;
  std::optional<int64_t> next_point;  // sync_point2 stays before the first failed row
  bool ok = true;
  auto stage_time = start;
  // Stage 1: every row between the two points (what the other nodes were to send).
  int64_t unsaved = 0;
  bool done = false;
  while (!done && ok && Clock::now() < stop_at && point2 < point1 && !cancelled.load()) {
    auto rows = co_await rows_after(point2);
    if (!rows.ok()) {
      APUS_LOG_ERROR("ERROR Syncing " + db + ": " + rows.status().to_string());
      fail();
      co_return;
    }
    if (rows->empty()) break;
    for (const ObjectRecord& row : *rows) {
      if (row.rowid > point1 || Clock::now() >= stop_at || cancelled.load()) {
        done = true;
        break;
      }
      if (!co_await sync_row(job, row) && !next_point) next_point = point2;
      point2 = row.rowid;
      if (++unsaved >= kPointFlushRows) {
        unsaved = 0;
        ok = co_await save_points(job, std::nullopt, next_point.value_or(point2));
        if (!ok) break;
      }
    }
  }
  if (!next_point) next_point = point2;
  if (ok) ok = co_await save_points(job, std::nullopt, *next_point);
  stage_time = Clock::now();
  // Stage 2: the newer rows, this node's share of them.
  unsaved = 0;
  done = false;
  while (!done && ok && stage_time < stop_at && !cancelled.load()) {
    auto rows = co_await rows_after(point1);
    if (!rows.ok()) {
      APUS_LOG_ERROR("ERROR Syncing " + db + ": " + rows.status().to_string());
      fail();
      co_return;
    }
    if (rows->empty()) break;
    for (const ObjectRecord& row : *rows) {
      if (stage_time >= stop_at || cancelled.load()) {
        done = true;
        break;
      }
      if (sync_row_owner({server.swift.hash_path_prefix, server.swift.hash_path_suffix}, in.account,
                         in.container, row.name, nodes->nodes.size()) == *ordinal) {
        (void)co_await sync_row(job, row);
      }
      point1 = row.rowid;
      if (++unsaved >= kPointFlushRows) {
        unsaved = 0;
        ok = co_await save_points(job, point1, std::nullopt);
        if (!ok) break;
      }
      stage_time = Clock::now();
    }
  }
  if (ok && unsaved > 0) ok = co_await save_points(job, point1, std::nullopt);
  if (ok) {
    ++stats.syncs;
    m_syncs.inc();
  }
  auto secs = [](Clock::time_point t) {
    return std::to_string(std::chrono::duration<double>(t.time_since_epoch()).count());
  };
  APUS_LOG_DEBUG("Container sync report: " + name + ", time window start: " + secs(start) +
                 ", time window end: " + secs(stage_time) +
                 ", puts: " + std::to_string(stats.puts - before.puts) +
                 ", posts: 0, deletes: " + std::to_string(stats.deletes - before.deletes) +
                 ", bytes: " + std::to_string(stats.bytes - before.bytes) + ", sync_point1: " +
                 std::to_string(point1) + ", sync_point2: " + std::to_string(*next_point) +
                 ", total_rows: " + std::to_string(in.max_row));
}

net::awaitable<void> ContainerSync::Impl::sync_device(const std::string& device) {
  co_await walk_infos(devices, device, kInfoPage, "container sync",
                      [&](InfoPage& page) -> net::awaitable<bool> {
    for (auto& [db, info] : page) {
      if (cancelled.load()) co_return false;
      // Swift's sync store holds only live containers with both values set.
      if (info.is_deleted(DbType::kContainer) || !metadata_value(info, "X-Container-Sync-To") ||
          !metadata_value(info, "X-Container-Sync-Key")) {
        continue;
      }
      co_await sync_container(device, db, std::move(info));
    }
    co_return !cancelled.load();
  });
}

ContainerSync::ContainerSync(ContainerSyncConfig config, const DbServerConfig& server,
                             DbDevices& devices,
                             std::shared_ptr<common::ContainerSyncRealms> realms,
                             std::unique_ptr<ring::Ring> container_ring)
    : impl_(std::make_unique<Impl>(std::move(config), server, devices, std::move(realms),
                                   std::move(container_ring))),
      thread_(impl_->config.interval, /*spread_start=*/true, [this] { (void)run_once(); }) {}

ContainerSync::~ContainerSync() { stop(); }

void ContainerSync::start() { thread_.start(); }

void ContainerSync::stop() {
  impl_->cancelled = true;  // a pass under way ends early
  thread_.stop();
}

ContainerSyncStats ContainerSync::run_once() {
  Impl& impl = *impl_;
  impl.stats = ContainerSyncStats();
  auto start = Clock::now();
  auto listed = impl.devices.fs().list_dir(impl.server.devices);
  if (!listed.ok()) {
    APUS_LOG_ERROR("cannot list " + impl.server.devices + ": " + listed.status().to_string());
    return impl.stats;
  }
  net::io_context ioc(1);
  {
    common::http::ConnectionPool pool(
        {.conn_timeout = impl.config.conn_timeout, .node_timeout = impl.config.conn_timeout});
    impl.pool = &pool;
    common::spawn_logged(
        ioc.get_executor(),
        [&]() -> net::awaitable<void> {
          for (const auto& device : *listed) co_await impl.sync_device(device);
        },
        "container sync pass");
    ioc.run();
    impl.pool = nullptr;
  }
  double secs = std::chrono::duration<double>(Clock::now() - start).count();
  const ContainerSyncStats& s = impl.stats;
  APUS_LOG_INFO("Container sync pass completed: " + std::to_string(secs) + "s, " +
                std::to_string(s.syncs) + " synced [" + std::to_string(s.deletes) + " deletes, " +
                std::to_string(s.puts) + " puts], " + std::to_string(s.skips) + " skipped, " +
                std::to_string(s.failures) + " failed");
  return impl.stats;
}

}  // namespace apus::container
