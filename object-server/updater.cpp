#include "object-server/updater.h"

#include <unistd.h>

#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>
#include <chrono>
#include <thread>

#include "common/async.h"
#include "common/http/client.h"
#include "common/http/url.h"
#include "common/io/blocking_pool.h"
#include "common/log/log.h"
#include "common/recon_cache.h"
#include "common/process.h"
#include "common/timestamp.h"
#include "object-server/async_pending.h"
#include "object-server/container_update.h"
#include "object-server/diskfile.h"

namespace apus::object {

namespace net = boost::asio;
using common::Result;
using common::Status;

Result<UpdaterConfig> UpdaterConfig::from_config(const common::Config& conf) {
  UpdaterConfig c;
  common::Section s = conf.section("object-updater");
  c.devices = s.get_string("devices", "/srv/node");
  APUS_ASSIGN_OR_RETURN(c.mount_check, s.get_bool("mount_check", true));
  c.swift_dir = s.get_string("swift_dir", "/etc/swift");
  APUS_ASSIGN_OR_RETURN(c.interval, s.get_double("interval", 300));
  c.recon_cache_path = s.get_string("recon_cache_path", "/var/cache/swift");
  int64_t concurrency = 8;
  APUS_ASSIGN_OR_RETURN(concurrency, s.get_int("concurrency", 8));
  c.concurrency = static_cast<int>(std::max<int64_t>(1, concurrency));
  APUS_ASSIGN_OR_RETURN(c.node_timeout, s.get_double("node_timeout", 10));
  APUS_ASSIGN_OR_RETURN(c.conn_timeout, s.get_double("conn_timeout", 0.5));
  APUS_ASSIGN_OR_RETURN(c.objects_per_second, s.get_double("objects_per_second", 50));
  c.log_name = s.get_string("log_name", "object-updater");
  auto swift = common::load_swift_conf(c.swift_dir + "/swift.conf");
  if (!swift.ok()) return swift.status();
  c.swift = std::move(*swift);
  return c;
}

// One async pending file to deliver.
struct PendingFile {
  std::string path;
  std::string device;  // device directory
  int policy = 0;
};

struct ObjectUpdater::Impl {
  UpdaterConfig config;
  common::io::Fs& fs;
  std::unique_ptr<ring::Ring> ring;
  common::io::BlockingPool disk{"updater-disk", 1};
  UpdaterStats stats;

  Impl(UpdaterConfig c, common::io::Fs& f, std::unique_ptr<ring::Ring> r)
      : config(std::move(c)), fs(f), ring(std::move(r)) {}

  // One more of a pass's stat, also sent to StatsD under Swift's name for it.
  void count(uint64_t UpdaterStats::*stat, std::string_view name) {
    ++(stats.*stat);
    config.statsd.increment(name);
  }

  // Lists the newest pending per object on every device, removing superseded ones (pool).
  std::vector<PendingFile> gather();
  net::awaitable<void> process(const PendingFile& file, common::http::ConnectionPool& pool);

  // One round of an update to the replicas that have not taken it yet.
  struct Attempt {
    bool all_ok = true;         // every replica took it
    bool new_successes = false;  // some replica took it this round
    bool error = false;         // no replicas to send to (ring trouble)
    std::optional<std::string> redirect;  // a shard to send it to instead (301)
    std::string object_path;              // for logs
  };
  net::awaitable<Attempt> send(AsyncUpdate& update, int policy,
                               common::http::ConnectionPool& pool);
};

std::vector<PendingFile> ObjectUpdater::Impl::gather() {
  std::vector<PendingFile> out;
  auto devices = fs.list_dir(config.devices);
  if (!devices.ok()) {
    APUS_LOG_ERROR("cannot list " + config.devices + ": " + devices.status().to_string());
    return out;
  }
  for (const auto& device : *devices) {
    std::string device_dir = config.devices + "/" + device;
    if (config.mount_check) {
      auto mounted = fs.is_mount(device_dir);
      if (!mounted.ok() || !*mounted) {
        APUS_LOG_WARNING("skipping " + device_dir + ": not mounted");
        continue;
      }
    }
    auto dirs = fs.list_dir(device_dir);
    if (!dirs.ok()) continue;
    for (const auto& dir : *dirs) {
      int policy = 0;
      if (dir == "async_pending") {
        policy = 0;
      } else if (dir.rfind("async_pending-", 0) == 0) {
        std::optional<int64_t> index = common::parse_python_int(std::string_view(dir).substr(14));
        policy = index && *index >= 0 && *index <= 1 << 30 ? static_cast<int>(*index) : -1;
        if (policy < 0 || !config.swift.policies.by_index(policy)) {
          APUS_LOG_WARNING("directory " + dir + " does not map to a valid policy");
          continue;
        }
      } else {
        continue;
      }
      std::string async_dir = device_dir + "/" + dir;
      auto suffixes = fs.list_dir(async_dir);
      if (!suffixes.ok()) continue;
      for (const auto& suffix : *suffixes) {
        std::string suffix_dir = async_dir + "/" + suffix;
        auto files = fs.list_dir(suffix_dir);
        if (!files.ok()) continue;
        // Names are <hash>-<timestamp>: newest first, so each hash's first file is its newest.
        std::sort(files->rbegin(), files->rend());
        std::string last_hash;
        for (const auto& name : *files) {
          auto dash = name.find('-');
          if (dash == std::string::npos) {
            count(&UpdaterStats::errors, "errors");
            APUS_LOG_ERROR("async pending file with unexpected name " + suffix_dir + "/" + name);
            continue;
          }
          std::string hash = name.substr(0, dash);
          if (hash == last_hash) {
            if (fs.unlink(suffix_dir + "/" + name).ok()) {  // superseded
              count(&UpdaterStats::unlinks, "unlinks");
            }
            continue;
          }
          last_hash = hash;
          out.push_back({suffix_dir + "/" + name, device_dir, policy});
        }
      }
    }
  }
  return out;
}


net::awaitable<ObjectUpdater::Impl::Attempt> ObjectUpdater::Impl::send(
    AsyncUpdate& update, int policy, common::http::ConnectionPool& pool) {
  Attempt out;
  std::string account = update.account, container = update.container;
  if (update.container_path) {
    if (auto shard = common::http::split_container_path(*update.container_path)) {
      std::tie(account, container) = std::move(*shard);
    }
  }
  auto nodes = ring->get_nodes(account, container);
  if (!nodes.ok()) {
    out.all_ok = false;
    out.error = true;
    co_return out;
  }
  std::string partition = std::to_string(nodes->partition);
  out.object_path = "/" + account + "/" + container + "/" + update.obj;  // for logs
  common::http::HeaderMap headers;
  bool has_policy = false, has_redirect = false, has_quoted = false;
  for (const auto& [k, v] : update.headers) {
    if (common::http::iequals(k, "User-Agent")) continue;
    has_policy |= common::http::iequals(k, "X-Backend-Storage-Policy-Index");
    has_redirect |= common::http::iequals(k, "X-Backend-Accept-Redirect");
    has_quoted |= common::http::iequals(k, "X-Backend-Accept-Quoted-Location");
    headers.add(k, v);
  }
  headers.set("User-Agent", "object-updater " + std::to_string(::getpid()));
  if (!has_policy) headers.set("X-Backend-Storage-Policy-Index", std::to_string(policy));
  if (!has_redirect) headers.set("X-Backend-Accept-Redirect", "true");
  if (!has_quoted) headers.set("X-Backend-Accept-Quoted-Location", "true");

  std::optional<std::pair<std::string, common::Timestamp>> newest_redirect;
  for (const auto& node : nodes->nodes) {
    int64_t id = node.id();
    if (std::find(update.successes.begin(), update.successes.end(), id) !=
        update.successes.end()) {
      continue;
    }
    const ring::Device& dev = *node.device;
    auto resp = co_await common::http::simple_request(
        pool, dev.replication_ip, static_cast<uint16_t>(dev.replication_port),
        make_update_request(update.op, dev.device, partition, account, container, update.obj,
                            headers));
    if (resp.ok() && resp->head.status >= 200 && resp->head.status < 300) {
      update.successes.push_back(id);
      out.new_successes = true;
      continue;
    }
    out.all_ok = false;
    if (resp.ok() && resp->head.status == 301) {
      // Of several replicas' redirects, the newest shard wins, as in Swift.
      if (auto r = redirect_of(resp->head.headers, out.object_path);
          r && (!newest_redirect || newest_redirect->second < r->second)) {
        newest_redirect = std::move(r);
      }
    }
    APUS_LOG_DEBUG("update of " + out.object_path + " to " + dev.replication_ip + ":" +
                   std::to_string(dev.replication_port) + "/" + dev.device + " failed: " +
                   (resp.ok() ? std::to_string(resp->head.status) : resp.status().to_string()));
  }
  if (newest_redirect) out.redirect = std::move(newest_redirect->first);
  co_return out;
}

net::awaitable<void> ObjectUpdater::Impl::process(const PendingFile& file,
                                                  common::http::ConnectionPool& pool) {
  auto loaded = co_await disk.call([&]() -> Result<AsyncUpdate> {
    auto bytes = fs.read_file(file.path);
    if (!bytes.ok()) return bytes.status();
    return decode_async_pending(*bytes);
  });
  if (!loaded.ok()) {
    if (loaded.status().is_not_found()) co_return;  // delivered by someone else meanwhile
    count(&UpdaterStats::errors, "errors");
    APUS_LOG_ERROR("cannot read async pending " + file.path + ": " + loaded.status().to_string());
    co_return;
  }
  AsyncUpdate& update = *loaded;
  bool rewrite = false;
  // A redirect to a shard is followed at once, once; the next pass goes on from there.
  for (int attempt = 0; attempt < 2; ++attempt) {
    Attempt a = co_await send(update, file.policy, pool);
    if (a.error) {
      count(&UpdaterStats::errors, "errors");
      co_return;
    }
    if (a.all_ok) {
      count(&UpdaterStats::successes, "successes");
      bool unlinked = co_await disk.call([&] {
        bool ok = fs.unlink(file.path).ok();
        fs.rmdir(file.path.substr(0, file.path.rfind('/'))).ignore();  // if it was the last one
        return ok;
      });
      if (unlinked) count(&UpdaterStats::unlinks, "unlinks");  // on the loop thread, as all
      co_return;
    }
    if (!a.redirect) {
      count(&UpdaterStats::failures, "failures");
      rewrite = rewrite || a.new_successes;
      break;
    }
    // Successes were the old container's replicas: the shard's are others.
    update.successes.clear();
    if (std::find(update.redirect_history.begin(), update.redirect_history.end(),
                  *a.redirect) != update.redirect_history.end()) {
      // Redirected in a circle: back to the root, history forgotten (Swift does the same).
      update.container_path.reset();
      update.redirect_history.clear();
    } else {
      update.container_path = *a.redirect;
      update.redirect_history.push_back(*a.redirect);
    }
    count(&UpdaterStats::redirects, "redirects");
    APUS_LOG_DEBUG("Update redirected for " + a.object_path + " " + file.path + " to " +
                   update.container_path.value_or("the root"));
    rewrite = true;
  }
  if (rewrite) {
    std::string tmp_dir = file.device + "/" + DiskFileManager::policy_dir("tmp", file.policy);
    Status s = co_await disk.call([&] {
      return fs.write_file_atomic(file.path, encode_async_pending(update), tmp_dir);
    });
    if (!s.ok()) APUS_LOG_ERROR("cannot rewrite " + file.path + ": " + s.to_string());
  }
}

uint64_t count_async_pendings(common::io::Fs& fs, const std::string& devices) {
  // The names in a directory; none for a file or anything unreadable.
  auto names_in = [&](const std::string& path) {
    auto names = fs.list_dir(path);
    return names.ok() ? std::move(*names) : std::vector<std::string>();
  };
  uint64_t count = 0;
  for (const std::string& device : names_in(devices)) {
    const std::string device_dir = devices + "/" + device;
    for (const std::string& dir : names_in(device_dir)) {
      if (dir != "async_pending" && !dir.starts_with("async_pending-")) continue;
      const std::string async_dir = device_dir + "/" + dir;
      for (const std::string& suffix : names_in(async_dir)) {
        count += names_in(async_dir + "/" + suffix).size();
      }
    }
  }
  return count;
}

Status write_async_pending_recon(common::io::Fs& fs, const std::string& devices,
                                 const std::string& recon_cache_path) {
  boost::json::object recon;
  recon["async_pending"] = count_async_pendings(fs, devices);
  recon["async_pending_last"] =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  return common::dump_recon_cache(recon_cache_path + "/object.recon",
                                  boost::json::serialize(recon));
}

ObjectUpdater::ObjectUpdater(UpdaterConfig config, common::io::Fs& fs,
                             std::unique_ptr<ring::Ring> container_ring)
    : impl_(std::make_unique<Impl>(std::move(config), fs, std::move(container_ring))) {}

ObjectUpdater::~ObjectUpdater() = default;

UpdaterStats ObjectUpdater::run_once() {
  Impl& impl = *impl_;
  impl.stats = UpdaterStats();
  auto start = std::chrono::steady_clock::now();
  net::io_context ioc(1);
  std::vector<PendingFile> files;
  common::spawn_logged(
      ioc.get_executor(),
      [&]() -> net::awaitable<void> {
        files = co_await impl.disk.call([&] { return impl.gather(); });
        common::http::ConnectionPool pool(
            {.conn_timeout = impl.config.conn_timeout, .node_timeout = impl.config.node_timeout});
        // `concurrency` workers take files in turn; objects_per_second paces the whole pass.
        size_t next = 0, running = 0;
        auto executor = co_await net::this_coro::executor;
        net::steady_timer all_done(executor, net::steady_timer::time_point::max());
        double per_object = impl.config.objects_per_second > 0
                                ? 1.0 / impl.config.objects_per_second
                                : 0.0;
        auto pass_start = std::chrono::steady_clock::now();
        for (int w = 0; w < impl.config.concurrency; ++w) {
          ++running;
          common::spawn_logged(
              executor,
              [&]() -> net::awaitable<void> {
                net::steady_timer pace(executor);
                while (next < files.size()) {
                  size_t i = next++;
                  if (per_object > 0) {
                    pace.expires_at(pass_start +
                                    std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                        std::chrono::duration<double>(per_object * i)));
                    co_await pace.async_wait(net::use_awaitable);
                  }
                  co_await impl.process(files[i], pool);
                }
                if (--running == 0) all_done.cancel();
              },
              "object updater worker", [&] {
                if (--running == 0) all_done.cancel();
              });
        }
        if (running > 0) {
          auto [ec] = co_await all_done.async_wait(net::as_tuple(net::use_awaitable));
          (void)ec;
        }
      },
      "object updater pass");
  ioc.run();
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  impl.config.statsd.timing_since("timing", start);  // Swift times each device's sweep
  APUS_LOG_INFO("Object update sweep completed: " + std::to_string(seconds) + "s, " +
                std::to_string(impl.stats.successes) + " successes, " +
                std::to_string(impl.stats.failures) + " failures, " +
                std::to_string(impl.stats.unlinks) + " unlinks, " +
                std::to_string(impl.stats.redirects) + " redirects, " +
                std::to_string(impl.stats.errors) + " errors");
  common::write_recon_entry(impl.config.recon_cache_path + "/object.recon",
                            "object_updater_sweep", seconds);
  // What is still pending after the pass (this thread's own time; the pass is over).
  Status counted =
      write_async_pending_recon(impl.fs, impl.config.devices, impl.config.recon_cache_path);
  if (!counted.ok()) APUS_LOG_WARNING("cannot write async_pending to recon: " + counted.to_string());
  return impl.stats;
}

void ObjectUpdater::run_forever(const std::atomic<bool>& stop) {
  common::run_passes(impl_->config.interval, stop, [this] { (void)run_once(); });
}

}  // namespace apus::object
