#include "container-server/account_reaper.h"

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <random>
#include <thread>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>

#include "common/async.h"
#include "common/crypto/md5.h"
#include "common/http/client.h"
#include "common/http/url.h"
#include "common/io/device.h"
#include "common/log/log.h"
#include "common/timestamp.h"
#include "common/process.h"
#include "container-server/listing_db.h"

namespace apus::container {

namespace net = boost::asio;
using common::Result;
using common::Status;
using common::Timestamp;
using common::http::HeaderMap;

namespace {

// The most an object listing page's JSON may hold: the container server's default page of
// 10000 rows (Swift's direct_get_container asks for no limit), names up to 1024 bytes that
// JSON escaping can make 6 times longer.
constexpr size_t kMaxListingBody = 64u << 20;
// Account infos read per page of a device walk, and containers per listing page per primary.
constexpr size_t kInfoPage = 1000;
constexpr int64_t kContainerPage = 1000;

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Runs `work(i)` for i in [0, count), at most `width` at a time, and returns when all are done.
template <class Work>
net::awaitable<void> run_bounded(size_t count, int width, Work work) {
  if (count == 0) co_return;
  auto executor = co_await net::this_coro::executor;
  size_t next = 0;
  int running = 0;
  net::steady_timer all_done(executor, net::steady_timer::time_point::max());
  for (int w = 0; w < width && static_cast<size_t>(w) < count; ++w) {
    ++running;
    common::spawn_logged(
        executor,
        [&]() -> net::awaitable<void> {
          while (next < count) co_await work(next++);
          if (--running == 0) all_done.cancel();
        },
        "account reaper worker", [&] {
          if (--running == 0) all_done.cancel();
        });
  }
  if (running > 0) (void)co_await all_done.async_wait(net::as_tuple(net::use_awaitable));
}

}  // namespace

size_t reaper_container_shard(std::string_view container, size_t node_count) {
  // The digest read as one big-endian number, reduced a byte at a time.
  size_t shard = 0;
  for (uint8_t byte : common::crypto::md5(container)) shard = (shard * 256 + byte) % node_count;
  return shard;
}

// ---- configuration ---------------------------------------------------------------------------

Result<ReaperConfig> ReaperConfig::from_config(const common::Config& conf) {
  ReaperConfig c;
  common::Section s = conf.section("account-reaper");
  c.devices = s.get_string("devices", "/srv/node");
  APUS_ASSIGN_OR_RETURN(c.mount_check, s.get_bool("mount_check", true));
  c.swift_dir = s.get_string("swift_dir", "/etc/swift");
  c.bind_ip = s.get_string("bind_ip", "0.0.0.0");
  int64_t n = 0;
  APUS_ASSIGN_OR_RETURN(n, s.get_int("bind_port", 6202));
  c.bind_port = static_cast<int>(n);
  APUS_ASSIGN_OR_RETURN(c.interval, s.get_double("interval", 3600));
  APUS_ASSIGN_OR_RETURN(c.node_timeout, s.get_double("node_timeout", 10));
  APUS_ASSIGN_OR_RETURN(c.conn_timeout, s.get_double("conn_timeout", 0.5));
  APUS_ASSIGN_OR_RETURN(n, s.get_int("concurrency", 25));
  if (n < 1) return s.invalid("concurrency", "must be at least 1");
  c.concurrency = static_cast<int>(std::min<int64_t>(n, 10000));
  // Swift: int(value or 0) and float(value or 30 days): an empty value is the default.
  if (!s.get_string("delay_reaping", "").empty()) {
    APUS_ASSIGN_OR_RETURN(n, s.get_int("delay_reaping", 0));
    c.delay_reaping = static_cast<double>(n);
  }
  if (!s.get_string("reap_warn_after", "").empty()) {
    APUS_ASSIGN_OR_RETURN(c.reap_warn_after, s.get_double("reap_warn_after", 2592000));
  }
  if (c.interval <= 0) return s.invalid("interval", "must be positive");
  c.log_name = s.get_string("log_name", "account-reaper");
  auto swift = common::load_swift_conf(c.swift_dir + "/swift.conf");
  if (!swift.ok()) return swift.status();
  c.swift = std::move(*swift);
  return c;
}

// ---- the reaper ------------------------------------------------------------------------------

struct AccountReaper::Impl {
  ReaperConfig config;
  common::io::Fs& fs;
  std::unique_ptr<ring::Ring> account_ring, container_ring;
  std::map<int, std::unique_ptr<ring::Ring>> object_rings;
  std::vector<std::string> my_ips;
  int width;  // sqrt(concurrency): containers at a time, and objects at a time per container
  std::string user_agent;
  FollowedStores stores;  // the account stores of this node's devices
  std::unique_ptr<common::http::ConnectionPool> pool;
  ReaperStats stats;  // this pass's

  Impl(ReaperConfig c, common::io::Fs& f, std::unique_ptr<ring::Ring> a,
       std::unique_ptr<ring::Ring> co, std::map<int, std::unique_ptr<ring::Ring>> o)
      : config(std::move(c)),
        fs(f),
        account_ring(std::move(a)),
        container_ring(std::move(co)),
        object_rings(std::move(o)),
        my_ips(ring::local_ips(config.bind_ip)),
        width(std::max(1, static_cast<int>(std::sqrt(static_cast<double>(config.concurrency))))),
        user_agent("account-reaper " + std::to_string(::getpid())),
        stores(config.devices, DbType::kAccount, fs) {}

  common::http::ClientOptions timeouts() const {
    return {.conn_timeout = config.conn_timeout, .node_timeout = config.node_timeout};
  }

  void count_status(int status) {
    ++stats.return_codes[status / 100];
    config.statsd.increment("return_codes." + std::to_string(status / 100));
  }
  // One more of a pass's stat, also sent to StatsD under Swift's name for it.
  void count(uint64_t ReaperStats::*stat, std::string_view name) {
    ++(stats.*stat);
    config.statsd.increment(name);
  }
  // Adds one container's or object's deletion to Swift's tally: more successes than failures
  // deleted it, no success left it, anything else possibly left it.
  void tally(int successes, int failures, bool container) {
    if (successes > failures) {
      count(container ? &ReaperStats::containers_deleted : &ReaperStats::objects_deleted,
            container ? "containers_deleted" : "objects_deleted");
    } else if (successes == 0) {
      count(container ? &ReaperStats::containers_remaining : &ReaperStats::objects_remaining,
            container ? "containers_remaining" : "objects_remaining");
    } else {
      count(container ? &ReaperStats::containers_possibly_remaining
                      : &ReaperStats::objects_possibly_remaining,
            container ? "containers_possibly_remaining" : "objects_possibly_remaining");
    }
  }

  // This device's index among the partition's primaries, or -1 when it is not one.
  int primary_index(const std::vector<ring::Node>& nodes, const std::string& device) const;

  net::awaitable<void> reap_device(const std::string& device);
  net::awaitable<void> reap_account(ListingStore& store, const std::string& db,
                                    const DbInfo& info, const std::vector<ring::Node>& nodes, int shard);
  net::awaitable<void> reap_container(const std::string& account, uint32_t account_part,
                                      const std::vector<ring::Node>& account_nodes,
                                      const std::string& container);
  net::awaitable<void> reap_object(const std::string& account, const std::string& container,
                                   uint32_t container_part,
                                   const std::vector<ring::Node>& container_nodes,
                                   const std::string& object, int policy);
  // A DELETE of `path` on `dev`: whether it answered 2xx (its status class counted, a timeout
  // logged, as Swift's reaper does).
  net::awaitable<bool> delete_on(const ring::Device& dev, uint32_t part, const std::string& path,
                                 HeaderMap headers);
  // One backend request to `dev`'s replication address.
  net::awaitable<Result<common::http::SimpleResponse>> send(const ring::Device& dev,
                                                            const std::string& method,
                                                            uint32_t part,
                                                            const std::string& path,
                                                            const std::string& query,
                                                            HeaderMap headers);
};

int AccountReaper::Impl::primary_index(const std::vector<ring::Node>& nodes,
                                       const std::string& device) const {
  for (size_t i = 0; i < nodes.size(); ++i) {
    const ring::Device& dev = *nodes[i].device;
    bool mine = std::find(my_ips.begin(), my_ips.end(), dev.ip) != my_ips.end() &&
                (config.bind_port == 0 || config.bind_port == dev.port) && dev.device == device;
    if (mine) return static_cast<int>(i);
  }
  return -1;
}

net::awaitable<Result<common::http::SimpleResponse>> AccountReaper::Impl::send(
    const ring::Device& dev, const std::string& method, uint32_t part, const std::string& path,
    const std::string& query, HeaderMap headers) {
  common::http::ClientRequest request;
  request.method = method;
  request.target = "/" + common::http::quote(dev.device) + "/" + std::to_string(part) +
                   common::http::quote(path) + query;
  headers.set("User-Agent", user_agent);
  headers.set("X-Backend-Use-Replication-Network", "true");
  // Containers and objects of reserved names (versions, segments: "\x00...") are the account's
  // too, and listed and deleted like the others.
  headers.set("X-Backend-Allow-Reserved-Names", "true");
  request.headers = std::move(headers);
  co_return co_await common::http::simple_request(*pool, timeouts(), dev.replication_ip,
                                                  static_cast<uint16_t>(dev.replication_port),
                                                  std::move(request), {}, kMaxListingBody);
}

net::awaitable<bool> AccountReaper::Impl::delete_on(const ring::Device& dev, uint32_t part,
                                                   const std::string& path, HeaderMap headers) {
  auto r = co_await send(dev, "DELETE", part, path, "", std::move(headers));
  if (!r.ok()) {
    APUS_LOG_ERROR("Timeout Exception with " + dev.ip + ":" + std::to_string(dev.port) + "/" +
                   dev.device);
    co_return false;
  }
  count_status(r->head.status);
  co_return r->head.status >= 200 && r->head.status < 300;
}

net::awaitable<void> AccountReaper::Impl::reap_device(const std::string& device) {
  ListingStore* store = stores.follow(device);
  if (!store) co_return;
  std::string after;
  for (;;) {
    auto page = store->list_infos(after, kInfoPage);
    if (!page.ok()) {
      APUS_LOG_ERROR("cannot walk the account store of " + device + ": " +
                     page.status().to_string());
      co_return;
    }
    if (page->empty()) co_return;
    after = page->back().first;
    for (const auto& [db, info] : *page) {
      if (!info.is_status_deleted() || info.container_count == 0) continue;
      char* end = nullptr;
      unsigned long part = std::strtoul(info.partition.c_str(), &end, 10);
      if (info.partition.empty() || *end != '\0') continue;
      ring::NodeList nodes = account_ring->get_part_nodes(static_cast<uint32_t>(part));
      int shard = primary_index(nodes.nodes, device);
      if (shard < 0) continue;  // a handoff copy: its primaries reap the account
      co_await reap_account(*store, db, info, nodes.nodes, shard);
    }
  }
}

net::awaitable<void> AccountReaper::Impl::reap_account(ListingStore& store, const std::string& db,
                                                       const DbInfo& info,
                                                       const std::vector<ring::Node>& nodes, int shard) {
  auto deleted_at = Timestamp::parse(info.delete_timestamp);
  const double deleted_seconds = deleted_at.ok() ? deleted_at->seconds() : 0.0;
  const double begin = now_seconds();
  if (begin - deleted_seconds <= config.delay_reaping) co_return;
  const auto began = std::chrono::steady_clock::now();
  const std::string& account = info.account;
  APUS_LOG_INFO("Beginning pass on account " + account);
  ++stats.accounts_reaped;
  const ReaperStats before = stats;
  const uint32_t part = static_cast<uint32_t>(std::strtoul(info.partition.c_str(), nullptr, 10));
  ListingQuery query;
  query.limit = kContainerPage * static_cast<int64_t>(nodes.size());
  query.allow_reserved = true;
  bool complete = true;
  for (;;) {
    auto page = store.list_containers(db, query);
    if (!page.ok()) {
      APUS_LOG_ERROR("Exception with account " + account + ": " + page.status().to_string());
      complete = false;
      break;
    }
    if (page->empty()) break;
    std::vector<std::string> mine;
    for (const ContainerEntry& entry : *page) {
      if (entry.subdir) continue;
      if (reaper_container_shard(entry.row.name, nodes.size()) == static_cast<size_t>(shard)) {
        mine.push_back(entry.row.name);
      }
    }
    co_await run_bounded(mine.size(), width, [&](size_t i) {
      return reap_container(account, part, nodes, mine[i]);
    });
    query.marker = page->back().row.name;
  }
  // Swift's summary line, with this account's share of the counters.
  std::string line = (complete ? "Completed pass on account " : "Incomplete pass on account ") +
                     account;
  auto add = [&](uint64_t now, uint64_t was, const char* what) {
    if (now > was) line += ", " + std::to_string(now - was) + " " + what;
  };
  add(stats.containers_deleted, before.containers_deleted, "containers deleted");
  add(stats.objects_deleted, before.objects_deleted, "objects deleted");
  add(stats.containers_remaining, before.containers_remaining, "containers remaining");
  add(stats.objects_remaining, before.objects_remaining, "objects remaining");
  add(stats.containers_possibly_remaining, before.containers_possibly_remaining,
      "containers possibly remaining");
  add(stats.objects_possibly_remaining, before.objects_possibly_remaining,
      "objects possibly remaining");
  std::string codes;
  for (const auto& [code, count] : stats.return_codes) {
    auto was = before.return_codes.find(code);
    uint64_t delta = count - (was == before.return_codes.end() ? 0 : was->second);
    if (delta == 0) continue;
    codes += (codes.empty() ? "" : ", ") + std::to_string(delta) + " " + std::to_string(code) +
             "xxs";
  }
  if (!codes.empty()) line += ", return codes: " + codes;
  config.statsd.timing_since("timing", began);
  char elapsed[32];
  std::snprintf(elapsed, sizeof elapsed, ", elapsed: %.02fs", now_seconds() - begin);
  APUS_LOG_INFO(line + elapsed);
  if (stats.containers_remaining > before.containers_remaining &&
      begin - deleted_seconds >= config.reap_warn_after + config.delay_reaping) {
    APUS_LOG_WARNING("Account " + account + " has not been reaped since " +
                     (deleted_at.ok() ? deleted_at->isoformat() : info.delete_timestamp));
  }
}

net::awaitable<void> AccountReaper::Impl::reap_container(const std::string& account,
                                                         uint32_t account_part,
                                                         const std::vector<ring::Node>& account_nodes,
                                                         const std::string& container) {
  auto located = container_ring->get_nodes(account, container);
  if (!located.ok() || located->nodes.empty()) {
    count(&ReaperStats::containers_remaining, "containers_remaining");
    co_return;
  }
  const std::vector<ring::Node>& nodes = located->nodes;
  const std::string path = "/" + account + "/" + container;
  // The objects, page by page, from the container's last primary.
  std::string marker;
  for (;;) {
    HeaderMap h;
    auto r = co_await send(*nodes.back().device, "GET", located->partition, path,
                           "?format=json&marker=" + common::http::quote(marker, ""), h);
    if (!r.ok()) {
      APUS_LOG_ERROR("Timeout Exception with " + nodes.back().device->ip + ":" +
                     std::to_string(nodes.back().device->port) + "/" +
                     nodes.back().device->device);
      break;
    }
    count_status(r->head.status);
    if (r->head.status < 200 || r->head.status >= 300) break;
    boost::system::error_code ec;
    boost::json::value parsed = boost::json::parse(r->body, ec);
    std::vector<std::string> objects;
    if (!ec && parsed.is_array()) {
      for (const auto& v : parsed.as_array()) {
        const auto* o = v.if_object();
        const auto* name = o ? o->if_contains("name") : nullptr;
        if (name && name->is_string()) objects.emplace_back(name->as_string());
      }
    }
    if (objects.empty()) break;
    const std::string policy_text(r->head.headers.get_or("X-Backend-Storage-Policy-Index", "0"));
    char* end = nullptr;
    long policy = std::strtol(policy_text.c_str(), &end, 10);
    if (*end != '\0' || !config.swift.policies.by_index(static_cast<int>(policy))) {
      // A peer's header: logged cut short.
      APUS_LOG_ERROR("ERROR: invalid storage policy index: " + policy_text.substr(0, 32));
    }
    co_await run_bounded(objects.size(), width, [&](size_t i) {
      return reap_object(account, container, located->partition, nodes, objects[i],
                         static_cast<int>(policy));
    });
    marker = objects.back();
  }
  // The container itself, on each primary; each updates one of the account's primaries.
  int successes = 0, failures = 0;
  const std::string timestamp = Timestamp::now().internal();
  for (size_t i = 0; i < nodes.size(); ++i) {
    // Swift pops the account's nodes from the end.
    const ring::Device& anode = *account_nodes[account_nodes.size() - 1 - i % account_nodes.size()]
                                     .device;
    HeaderMap h;
    h.set("X-Account-Host", anode.ip + ":" + std::to_string(anode.port));
    h.set("X-Account-Partition", std::to_string(account_part));
    h.set("X-Account-Device", anode.device);
    h.set("X-Account-Override-Deleted", "yes");
    h.set("X-Timestamp", timestamp);
    if (co_await delete_on(*nodes[i].device, located->partition, path, std::move(h))) {
      ++successes;
    } else {
      ++failures;
      config.statsd.increment("containers_failures");
    }
  }
  tally(successes, failures, /*container=*/true);
}

net::awaitable<void> AccountReaper::Impl::reap_object(const std::string& account,
                                                      const std::string& container,
                                                      uint32_t container_part,
                                                      const std::vector<ring::Node>& container_nodes,
                                                      const std::string& object, int policy) {
  auto ring = object_rings.find(policy);
  if (ring == object_rings.end()) {
    count(&ReaperStats::objects_remaining, "objects_remaining");
    co_return;
  }
  auto located = ring->second->get_nodes(account, container, object);
  if (!located.ok()) {
    count(&ReaperStats::objects_remaining, "objects_remaining");
    co_return;
  }
  int successes = 0, failures = 0;
  const std::string timestamp = Timestamp::now().internal();
  const std::string path = "/" + account + "/" + container + "/" + object;
  for (size_t i = 0; i < located->nodes.size(); ++i) {
    const ring::Device& cnode = *container_nodes[i % container_nodes.size()].device;
    const ring::Device& node = *located->nodes[i].device;
    HeaderMap h;
    h.set("X-Container-Host", cnode.ip + ":" + std::to_string(cnode.port));
    h.set("X-Container-Partition", std::to_string(container_part));
    h.set("X-Container-Device", cnode.device);
    h.set("X-Backend-Storage-Policy-Index", std::to_string(policy));
    h.set("X-Timestamp", timestamp);
    if (co_await delete_on(node, located->partition, path, std::move(h))) {
      ++successes;
    } else {
      ++failures;
      config.statsd.increment("objects_failures");
    }
  }
  // Counted once per object (Swift 2.30 counts once per replica, inside its loop).
  tally(successes, failures, /*container=*/false);
}

AccountReaper::AccountReaper(ReaperConfig config, common::io::Fs& fs,
                             std::unique_ptr<ring::Ring> account_ring,
                             std::unique_ptr<ring::Ring> container_ring,
                             std::map<int, std::unique_ptr<ring::Ring>> object_rings)
    : impl_(std::make_unique<Impl>(std::move(config), fs, std::move(account_ring),
                                   std::move(container_ring), std::move(object_rings))) {}

AccountReaper::~AccountReaper() = default;

ReaperStats AccountReaper::run_once() {
  Impl& impl = *impl_;
  impl.stats = ReaperStats();
  const double begin = now_seconds();
  APUS_LOG_DEBUG("Begin devices pass: " + impl.config.devices);
  auto devices = impl.fs.list_dir(impl.config.devices);
  if (!devices.ok()) {
    APUS_LOG_ERROR("Exception in top-level account reaper loop: " +
                   devices.status().to_string());
    return impl.stats;
  }
  std::sort(devices->begin(), devices->end());
  net::io_context ioc(1);
  // The pool's sockets belong to `ioc`: it goes before the io_context does.
  impl.pool = std::make_unique<common::http::ConnectionPool>(impl.timeouts());
  common::spawn_logged(ioc.get_executor(), [&]() -> net::awaitable<void> {
    for (const std::string& device : *devices) {
      Status mounted =
          common::io::check_device(impl.fs, impl.config.devices, device, impl.config.mount_check);
      if (!mounted.ok()) {
        APUS_LOG_DEBUG("Skipping: " + mounted.to_string());
        continue;
      }
      co_await impl.reap_device(device);
    }
  }, "account reaper pass");
  ioc.run();
  impl.pool.reset();
  char elapsed[64];
  std::snprintf(elapsed, sizeof elapsed, "Devices pass completed: %.02fs", now_seconds() - begin);
  APUS_LOG_INFO(elapsed);
  return impl.stats;
}

void AccountReaper::run_forever(const std::atomic<bool>& stop) {
  std::mt19937_64 random(std::random_device{}());
  std::uniform_real_distribution<double> fraction(0.0, 1.0);
  const double interval = impl_->config.interval;
  common::sleep_until_or_stopped(common::seconds_from_now(fraction(random) * interval), stop);
  common::run_passes(interval, stop, [this] { (void)run_once(); });
}

}  // namespace apus::container
