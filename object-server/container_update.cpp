#include "object-server/container_update.h"

#include <unistd.h>

#include <chrono>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "common/async.h"
#include "common/config/config.h"
#include "common/expiring_queue.h"
#include "common/http/swob.h"
#include "common/http/url.h"
#include "common/log/log.h"
#include "common/update_plan.h"
#include "object-server/delete_at.h"

namespace apus::object {

namespace net = boost::asio;
using common::Status;
using common::http::HeaderMap;
using common::http::Request;

namespace {

// What every update carries from the request that caused it.
ContainerUpdate update_from(const Request& req, const Location& loc, std::string op,
                            HeaderMap headers) {
  ContainerUpdate u;
  u.op = std::move(op);
  u.device = loc.device;
  u.policy = loc.policy;
  u.headers = std::move(headers);
  u.headers.set("X-Trans-Id", req.headers.get_or("X-Trans-Id", "-"));
  u.headers.set("Referer", common::http::as_referer(req));
  static const std::string user_agent = "object-server " + std::to_string(::getpid());  // once
  u.headers.set("User-Agent", user_agent);
  return u;
}

// The shard container a proxy named for the update ("account/container"), or nullopt for the
// root: Swift's X-Backend-Quoted-Container-Path, else the older unquoted header.
std::optional<std::string> shard_path(const Request& req) {
  std::string path;
  auto quoted = req.headers.get("X-Backend-Quoted-Container-Path");
  if (quoted && !quoted->empty()) {
    path = common::http::percent_decode(*quoted);
  } else {
    path = std::string(req.headers.get_or("X-Backend-Container-Path", ""));
  }
  if (path.empty()) return std::nullopt;
  if (!common::http::split_container_path(path)) {
    APUS_LOG_ERROR("Invalid X-Backend-Container-Path, should be of the form 'account/container' "
                   "but got \"" + path + "\"");
    return std::nullopt;
  }
  return path;
}

}  // namespace

std::optional<std::pair<std::string, common::Timestamp>> redirect_of(const HeaderMap& h,
                                                                     std::string_view what) {
  auto location = h.get("Location");
  if (!location) return std::nullopt;
  std::string path(*location);
  if (size_t scheme = path.find("://"); scheme != std::string::npos) {  // urlparse(...).path
    size_t slash = path.find('/', scheme + 3);
    path = slash == std::string::npos ? "" : path.substr(slash);
  }
  path = path.substr(0, path.find_first_of("?#"));
  if (common::config_true_value(h.get_or("X-Backend-Location-Is-Quoted", "false"))) {
    path = common::http::percent_decode(path);
  }
  auto segs = common::http::split_path(path, 2, 3, true);
  auto ts = common::Timestamp::parse(h.get_or("X-Backend-Redirect-Timestamp", ""));
  if (!segs.ok() || !ts.ok()) {
    APUS_LOG_ERROR("Container update failed for " + std::string(what) +
                   "; problem with redirect location: " + std::string(*location));
    return std::nullopt;
  }
  return std::make_pair(*(*segs)[0] + "/" + *(*segs)[1], *ts);
}

std::pair<std::string, std::string> ContainerUpdate::target_container() const {
  auto shard = container_path ? common::http::split_container_path(*container_path) : std::nullopt;
  return shard ? *shard : std::make_pair(account, container);
}

std::string ContainerUpdate::pending_timestamp() const {
  return std::string(headers.get_or("X-Meta-Timestamp", headers.get_or("X-Timestamp", "")));
}

AsyncUpdate ContainerUpdate::to_async_update() const {
  AsyncUpdate update;
  update.op = op;
  update.account = account;
  update.container = container;
  update.obj = object;
  update.container_path = container_path;
  for (const auto& [k, v] : headers) update.headers.emplace_back(common::http::title_case(k), v);
  return update;
}

common::http::ClientRequest make_update_request(std::string op, std::string_view device,
                                                std::string_view partition,
                                                std::string_view account,
                                                std::string_view container,
                                                std::string_view object, HeaderMap headers) {
  common::http::ClientRequest request;
  request.method = std::move(op);
  std::string name = "/" + std::string(account) + "/" + std::string(container) + "/" +
                     std::string(object);
  request.target = "/" + common::http::quote(device) + "/" + std::string(partition) +
                   common::http::quote(name);
  request.headers = std::move(headers);
  return request;
}


std::optional<ContainerUpdate> container_update_for(const Request& req, const Location& loc,
                                                    std::string op, HeaderMap headers) {
  std::string_view host_header = req.headers.get_or("X-Container-Host", "");
  std::string_view device_header = req.headers.get_or("X-Container-Device", "");
  auto hosts = common::list_from_csv(host_header);
  auto devices = common::list_from_csv(device_header);
  std::string partition(req.headers.get_or("X-Container-Partition", ""));
  if (hosts.size() != devices.size()) {
    APUS_LOG_ERROR(
        "container update failed: different numbers of hosts and devices in request: \"" +
        std::string(host_header) + "\" vs \"" + std::string(device_header) + "\"");
    return std::nullopt;
  }
  if (partition.empty() || hosts.empty()) return std::nullopt;  // nobody to tell, as in Swift

  headers.set("X-Backend-Storage-Policy-Index", std::to_string(loc.policy));
  ContainerUpdate u = update_from(req, loc, std::move(op), std::move(headers));
  u.account = loc.account;
  u.container = loc.container;
  u.object = loc.object;
  u.container_path = shard_path(req);
  u.container_partition = std::move(partition);
  for (size_t i = 0; i < hosts.size(); ++i) u.targets.emplace_back(hosts[i], devices[i]);
  return u;
}

std::optional<ContainerUpdate> delete_at_update_for(const Request& req, const Location& loc,
                                                    const common::Timestamp& timestamp,
                                                    std::string op, int64_t delete_at,
                                                    std::string_view object_hash,
                                                    const ExpiringQueue& queue) {
  if (common::config_true_value(req.headers.get_or("X-Backend-Replication", ""))) {
    return std::nullopt;
  }
  delete_at = common::clamp_delete_at(delete_at);  // as Swift, before the queue container is derived
  HeaderMap headers;
  headers.set("X-Backend-Storage-Policy-Index", "0");  // system accounts are policy 0
  headers.set("X-Timestamp", timestamp.internal());
  std::optional<int64_t> queue_container;
  std::vector<std::pair<std::string, std::string>> targets;
  std::string partition;
  if (op != "DELETE") {
    auto hosts = req.headers.get("X-Delete-At-Host");
    if (!hosts) return std::nullopt;  // other object servers carry this update
    std::string_view given = req.headers.get_or("X-Delete-At-Container", "");
    if (!given.empty()) {
      queue_container = parse_queue_container(given);
      if (!queue_container) {
        // Swift fails the request here with a 500 after storing the object; the best guess
        // (what it does for a proxy that sends no container) keeps the object queued.
        APUS_LOG_WARNING("invalid X-Delete-At-Container \"" + std::string(given) +
                         "\"; making a best guess at the queue container");
      }
    }
    partition = std::string(req.headers.get_or("X-Delete-At-Partition", ""));
    auto host_list = common::list_from_csv(*hosts);
    auto device_list = common::list_from_csv(req.headers.get_or("X-Delete-At-Device", ""));
    for (size_t i = 0; i < host_list.size() && i < device_list.size(); ++i) {
      if (!host_list[i].empty() && !device_list[i].empty() && !partition.empty()) {
        targets.emplace_back(host_list[i], device_list[i]);
      }
    }
    headers.set("X-Size", "0");
    headers.set("X-Content-Type", "text/plain");
    headers.set("X-Etag", "d41d8cd98f00b204e9800998ecf8427e");
  } else if (!common::config_true_value(
                 req.headers.get_or("X-Backend-Clean-Expiring-Object-Queue", "t"))) {
    return std::nullopt;
  }
  // A DELETE cannot know the container its row was queued in: Swift's best guess, as it makes.
  int64_t container = queue_container.value_or(
      common::expirer_container_number(delete_at, queue.container_divisor, object_hash));
  ContainerUpdate u = update_from(req, loc, std::move(op), std::move(headers));
  u.account = queue.account;
  u.container = common::normalize_delete_at(container);
  u.object = common::expirer_task_name(delete_at, loc.account, loc.container, loc.object);
  u.container_partition = std::move(partition);
  u.targets = std::move(targets);
  return u;
}

Status save_async_pending(DiskFileManager& disk, const ContainerUpdate& update) {
  Location row;
  row.account = update.account;
  row.container = update.container;
  row.object = update.object;
  auto hash = disk.object_hash(row);
  if (!hash.ok()) return hash.status();
  std::string tmp_dir = disk.tmp_dir(update.device, update.policy);
  auto made = disk.fs().mkdirs(tmp_dir);
  if (!made.ok()) return made.status();
  APUS_RETURN_IF_ERROR(disk.fs().write_file_atomic(
      disk.async_pending_path(update.device, update.policy, *hash, update.pending_timestamp()),
      encode_async_pending(update.to_async_update()), tmp_dir));
  disk.count("async_pendings");
  return Status();
}

// ---- UpdateSender ----------------------------------------------------------------------------

net::awaitable<void> UpdateSender::send(std::shared_ptr<const ContainerUpdate> update,
                                        double wait_seconds) {
  if (options_.async_mode || update->targets.empty()) {
    co_await save(std::move(update));
    co_return;
  }
  // Deliveries carry on after the wait ends; they own a copy of everything they need.
  auto executor = co_await net::this_coro::executor;
  auto done = std::make_shared<net::steady_timer>(
      executor, std::chrono::duration_cast<net::steady_timer::duration>(
                    std::chrono::duration<double>(wait_seconds)));
  auto remaining = std::make_shared<size_t>(update->targets.size());
  for (size_t i = 0; i < update->targets.size(); ++i) {
    common::spawn_logged(
        executor,
        [this, update, i, done, remaining]() -> net::awaitable<void> {
          co_await deliver(update, i);
          if (--*remaining == 0) done->cancel();
        },
        "container update delivery", [done, remaining] {
          if (--*remaining == 0) done->cancel();
        });
  }
  co_await done->async_wait(net::as_tuple(net::use_awaitable));
}

net::awaitable<void> UpdateSender::deliver(std::shared_ptr<const ContainerUpdate> update,
                                           size_t target) {
  const auto& [host, device] = update->targets[target];
  std::optional<std::pair<std::string, uint16_t>> host_port = common::split_host_port(host);
  if (host_port) {
    auto& pool = common::http::ConnectionPool::for_this_thread();
    common::http::ClientOptions timeouts{.conn_timeout = options_.conn_timeout,
                                         .node_timeout = options_.node_timeout};
    auto [account, container] = update->target_container();
    auto response = co_await common::http::simple_request(
        pool, timeouts, host_port->first, host_port->second,
        make_update_request(update->op, device, update->container_partition, account, container,
                            update->object, update->headers));
    if (response.ok() && response->head.status >= 200 && response->head.status < 300) co_return;
    if (response.ok() && response->head.status == 301) {
      // A sharded root names the shard: the pending goes there (Swift keeps it the same way).
      auto [root_account, root_container] = update->target_container();
      if (auto redirect = redirect_of(response->head.headers,
                                      "/" + root_account + "/" + root_container + "/" +
                                          update->object)) {
        APUS_LOG_DEBUG("Update to /" + root_account + "/" + root_container + "/" +
                       update->object + " redirected to " + redirect->first);
        auto redirected = std::make_shared<ContainerUpdate>(*update);
        redirected->container_path = redirect->first;
        update = std::move(redirected);
      }
      co_await save(std::move(update));
      co_return;
    }
    APUS_LOG_ERROR("container update failed with " + host + "/" + device +
                   " (saving for async update later): " +
                   (response.ok() ? std::to_string(response->head.status) + " response"
                                  : response.status().to_string()));
  }
  co_await save(std::move(update));
}

net::awaitable<void> UpdateSender::save(std::shared_ptr<const ContainerUpdate> update) {
  Status s = co_await pool_for_(update->device).call([this, update] {
    return save_async_pending(disk_, *update);
  });
  if (!s.ok()) APUS_LOG_ERROR("cannot save async pending: " + s.to_string());
}

}  // namespace apus::object
