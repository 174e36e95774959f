#include "container-server/container_updater.h"

#include <unistd.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <map>
#include <random>

#include "common/async.h"
#include "common/http/client.h"
#include "common/http/url.h"
#include "common/log/log.h"
#include "common/recon_cache.h"
#include "container-server/swift_db.h"

namespace apus::container {

namespace net = boost::asio;
using common::Result;
using common::Status;
using Clock = std::chrono::steady_clock;

Result<ContainerUpdaterConfig> ContainerUpdaterConfig::from_config(const common::Config& conf) {
  ContainerUpdaterConfig c;
  common::Section s = conf.section("container-updater");
  APUS_ASSIGN_OR_RETURN(c.enabled, s.get_bool("enabled", true));
  APUS_ASSIGN_OR_RETURN(c.interval, s.get_double("interval", 300));
  int64_t concurrency = 4;
  APUS_ASSIGN_OR_RETURN(concurrency, s.get_int("concurrency", 4));
  c.concurrency = static_cast<int>(std::max<int64_t>(1, concurrency));
  APUS_ASSIGN_OR_RETURN(c.node_timeout, s.get_double("node_timeout", 3));
  APUS_ASSIGN_OR_RETURN(c.conn_timeout, s.get_double("conn_timeout", 0.5));
  APUS_ASSIGN_OR_RETURN(c.containers_per_second, s.get_double("containers_per_second", 50));
  APUS_ASSIGN_OR_RETURN(c.account_suppression_time, s.get_double("account_suppression_time", 60));
  c.recon_cache_path = s.get_string("recon_cache_path", "/var/cache/swift");
  APUS_ASSIGN_OR_RETURN(c.statsd, common::StatsdHandle::from_section(
                                      s, s.get_string("log_name", "container-updater")));
  return c;
}

namespace {

constexpr size_t kPage = 1000;  // infos read per store walk step

bool needs_report(const DbInfo& i) {
  auto put = common::Timestamp::parse(i.put_timestamp);
  if (!put.ok() || put->is_zero()) return false;  // auto-created: no real stats yet
  return i.put_timestamp > i.reported_put_timestamp ||
         i.delete_timestamp > i.reported_delete_timestamp ||
         i.container_objects() != i.reported_object_count ||
         i.container_bytes() != i.reported_bytes_used;
}

}  // namespace

struct ContainerUpdater::Impl {
  ContainerUpdaterConfig config;
  const DbServerConfig& server;
  DbDevices& devices;
  std::unique_ptr<ring::Ring> ring;
  ContainerUpdaterStats stats;
  std::map<std::string, Clock::time_point> suppressed;  // account -> until; sweep thread only
  std::atomic<bool> cancelled{false};                    // stop(): end the pass early

  Impl(ContainerUpdaterConfig c, const DbServerConfig& s, DbDevices& d,
       std::unique_ptr<ring::Ring> r)
      : config(c), server(s), devices(d), ring(std::move(r)) {}

  // Sends one container's report to its account replicas; records it on a majority.
  net::awaitable<void> report(const std::string& device, const std::string& db, DbInfo info,
                              common::http::ConnectionPool& pool);
  net::awaitable<void> sweep_device(const std::string& device);
};

net::awaitable<void> ContainerUpdater::Impl::report(const std::string& device,
                                                    const std::string& db, DbInfo info,
                                                    common::http::ConnectionPool& pool) {
  auto until = suppressed.find(info.account);
  if (until != suppressed.end() && until->second > Clock::now()) co_return;
  // The page was read up to containers_per_second x its length ago: read the container again
  // just before its report, as Swift's updater reads each database when it comes to it. A
  // report of what the container was before a DELETE would put it back in the account's
  // listing with its old object count.
  auto& disk = devices.pool(device);
  Result<std::optional<DbInfo>> fresh = co_await disk.call([&]() -> Result<std::optional<DbInfo>> {
    auto store = devices.store(device);
    if (!store.ok()) return store.status();
    return (*store)->get_info(db);
  });
  if (!fresh.ok() || !fresh->has_value() || !needs_report(**fresh)) co_return;
  info = std::move(**fresh);
  const auto began = std::chrono::steady_clock::now();
  auto nodes = ring->get_nodes(info.account);
  if (!nodes.ok()) co_return;
  std::string path =
      common::http::quote("/" + std::to_string(nodes->partition) + "/" + info.account + "/" +
                          info.container);
  size_t successes = 0, not_found = 0;
  for (const auto& node : nodes->nodes) {
    const ring::Device& dev = *node.device;
    common::http::ClientRequest r;
    r.method = "PUT";
    r.target = "/" + common::http::quote(dev.device) + path;
    r.headers.set("X-Put-Timestamp", info.put_timestamp);
    r.headers.set("X-Delete-Timestamp", info.delete_timestamp);
    r.headers.set("X-Object-Count", std::to_string(info.container_objects()));
    r.headers.set("X-Bytes-Used", std::to_string(info.container_bytes()));
    r.headers.set("X-Account-Override-Deleted", "yes");
    r.headers.set("X-Backend-Storage-Policy-Index", std::to_string(info.storage_policy_index));
    r.headers.set("User-Agent", "container-updater " + std::to_string(::getpid()));
    r.content_length = 0;
    auto resp = co_await common::http::simple_request(
        pool, dev.replication_ip, static_cast<uint16_t>(dev.replication_port), std::move(r));
    int status = resp.ok() ? resp->head.status : 500;
    if (status >= 200 && status < 300) ++successes;
    if (status == 404) ++not_found;
  }
  size_t n = nodes->nodes.size();
  config.statsd.timing_since("timing", began);
  if (successes >= n / 2 + 1) {
    ++stats.successes;
    config.statsd.increment("successes");
    Status s = co_await disk.call([&] {
      auto store = devices.store(device);
      if (!store.ok()) return store.status();
      return (*store)->update_info(db, [&](std::optional<DbInfo>& now) -> Result<bool> {
        if (!now) return false;
        now->reported_put_timestamp = info.put_timestamp;
        now->reported_delete_timestamp = info.delete_timestamp;
        now->reported_object_count = info.container_objects();
        now->reported_bytes_used = info.container_bytes();
        return true;
      });
    });
    if (!s.ok()) APUS_LOG_ERROR("cannot record report of " + db + ": " + s.to_string());
    APUS_LOG_DEBUG("Update report sent for /" + info.account + "/" + info.container);
  } else if (n > 0 && not_found == n) {
    // Every account replica says the account does not exist (a ring or hash prefix changed
    // under the cluster, an account wiped): the report can never land, so the container is
    // put aside where an operator can find it, as Swift's updater does, instead of being
    // retried every pass for ever.
    ++stats.failures;
    config.statsd.increment("failures");
    Result<std::string> moved = co_await disk.call([&]() -> Result<std::string> {
      auto store = devices.store(device);
      if (!store.ok()) return store.status();
      return quarantine_db(**store, devices.fs(), db, server.devices + "/" + device,
                           "no account replicas exist");
    });
    if (!moved.ok()) {
      APUS_LOG_WARNING("cannot quarantine /" + info.account + "/" + info.container +
                       ", which no account replica knows: " + moved.status().to_string());
    }
  } else {
    ++stats.failures;
    config.statsd.increment("failures");
    suppressed[info.account] =
        Clock::now() + std::chrono::duration_cast<Clock::duration>(
                           std::chrono::duration<double>(config.account_suppression_time));
  }
}

net::awaitable<void> ContainerUpdater::Impl::sweep_device(const std::string& device) {
  common::http::ConnectionPool pool(
      {.conn_timeout = config.conn_timeout, .node_timeout = config.node_timeout});
  auto executor = co_await net::this_coro::executor;
  double per_container = config.containers_per_second > 0 ? 1.0 / config.containers_per_second
                                                          : 0.0;
  auto pace_start = Clock::now();
  size_t paced = 0;
  co_await walk_infos(devices, device, kPage, "container update sweep",
                      [&](InfoPage& page) -> net::awaitable<bool> {
    if (cancelled.load()) co_return false;
    std::vector<std::pair<std::string, DbInfo>> todo;
    for (auto& entry : page) {
      if (needs_report(entry.second)) {
        todo.push_back(std::move(entry));
      } else {
        ++stats.no_changes;
        config.statsd.increment("no_changes");
      }
    }
    // `concurrency` reports in flight; containers_per_second paces the pass.
    size_t next = 0, running = 0;
    net::steady_timer all_done(executor, net::steady_timer::time_point::max());
    for (int w = 0; w < config.concurrency && next < todo.size(); ++w) {
      ++running;
      common::spawn_logged(
          executor,
          [&]() -> net::awaitable<void> {
            net::steady_timer pace(executor);
            while (next < todo.size() && !cancelled.load()) {
              size_t i = next++;
              if (per_container > 0) {
                pace.expires_at(pace_start + std::chrono::duration_cast<Clock::duration>(
                                                 std::chrono::duration<double>(
                                                     per_container * static_cast<double>(paced++))));
                co_await pace.async_wait(net::use_awaitable);
              }
              co_await report(device, todo[i].first, std::move(todo[i].second), pool);
            }
            if (--running == 0) all_done.cancel();
          },
          "container updater worker", [&] {
            if (--running == 0) all_done.cancel();
          });
    }
    if (running > 0) {
      auto [ec] = co_await all_done.async_wait(net::as_tuple(net::use_awaitable));
      (void)ec;
    }
    co_return true;
  });
}

ContainerUpdater::ContainerUpdater(ContainerUpdaterConfig config, const DbServerConfig& server,
                                   DbDevices& devices, std::unique_ptr<ring::Ring> account_ring)
    : impl_(std::make_unique<Impl>(config, server, devices, std::move(account_ring))),
      thread_(config.interval, /*spread_start=*/true, [this] { (void)run_once(); }) {}

ContainerUpdater::~ContainerUpdater() { stop(); }

void ContainerUpdater::start() { thread_.start(); }

void ContainerUpdater::stop() {
  impl_->cancelled = true;  // a pass under way ends early
  thread_.stop();
}

ContainerUpdaterStats ContainerUpdater::run_once() {
  Impl& impl = *impl_;
  impl.stats = ContainerUpdaterStats();
  APUS_LOG_INFO("Begin container update sweep");
  auto start = Clock::now();
  auto now = Clock::now();
  std::erase_if(impl.suppressed, [&](const auto& entry) { return entry.second < now; });
  auto listed = impl.devices.fs().list_dir(impl.server.devices);
  if (!listed.ok()) {
    APUS_LOG_ERROR("cannot list " + impl.server.devices + ": " + listed.status().to_string());
    return impl.stats;
  }
  net::io_context ioc(1);
  common::spawn_logged(
      ioc.get_executor(),
      [&]() -> net::awaitable<void> {
        for (const auto& device : *listed) co_await impl.sweep_device(device);
      },
      "container update sweep");
  ioc.run();
  double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  APUS_LOG_INFO("Container update sweep completed: " + std::to_string(seconds) + "s, " +
                std::to_string(impl.stats.successes) + " successes, " +
                std::to_string(impl.stats.failures) + " failures, " +
                std::to_string(impl.stats.no_changes) + " with no changes");
  common::write_recon_entry(impl.config.recon_cache_path + "/container.recon",
                            "container_updater_sweep", seconds);
  return impl.stats;
}



}  // namespace apus::container
