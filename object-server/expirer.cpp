#include "object-server/expirer.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <map>
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
#include "common/config/config.h"
#include "common/expiring_queue.h"
#include "common/http/client.h"
#include "common/http/url.h"
#include "common/log/log.h"
#include "common/timestamp.h"
#include "common/update_plan.h"
#include "common/process.h"
#include "common/recon_cache.h"
#include "ring/direct_client.h"
#include "ring/ring.h"

namespace apus::object {

namespace net = boost::asio;
using common::Result;
using common::Status;
using common::Timestamp;
using common::http::HeaderMap;

namespace {

// Rows asked for per listing request, and the most a page's JSON may hold: names are at most
// 1024 bytes, which JSON escaping can make 6 times longer.
constexpr size_t kListingPage = 1000;
constexpr size_t kMaxListingBody = 16u << 20;
// Rows held for the round-robin order before they are handed out (Swift's
// MAX_OBJECTS_TO_CACHE): a pass over a long queue works in batches of this many.
constexpr size_t kMaxTasksCached = 100000;

Status bad_value(const common::Section& s, std::string_view key, std::string_view why) {
  return s.invalid(key, why);
}

}  // namespace

// ---- configuration ---------------------------------------------------------------------------

Result<ExpirerConfig> ExpirerConfig::from_config(const common::Config& conf,
                                                 const std::string& path) {
  ExpirerConfig c;
  common::Section s = conf.section("object-expirer");
  const bool legacy = path.find("expirer") != std::string::npos;
  if (legacy) {
    c.dequeue_from_legacy = true;
  } else {
    APUS_ASSIGN_OR_RETURN(c.dequeue_from_legacy, s.get_bool("dequeue_from_legacy", false));
  }
  // The proxy side (Swift's InternalClient): the same file for the legacy layout, else
  // internal_client_conf_path.
  common::Section proxy = s;
  std::optional<common::Config> ic_conf;
  if (legacy) {
    proxy = conf.section("app:proxy-server");
  } else {
    std::string ic_path = s.get_string("internal_client_conf_path", "");
    const bool explicit_path = !ic_path.empty();
    if (!explicit_path) ic_path = "/etc/swift/internal-client.conf";
    auto loaded = common::Config::load(ic_path);
    if (loaded.ok()) {
      ic_conf = std::move(*loaded);
      proxy = ic_conf->section("app:proxy-server");
    } else if (explicit_path) {
      return Status::invalid_argument("cannot read internal_client_conf_path " + ic_path + ": " +
                                      loaded.status().to_string());
    }
  }
  c.swift_dir = proxy.get_string("swift_dir", s.get_string("swift_dir", "/etc/swift"));
  APUS_ASSIGN_OR_RETURN(c.conn_timeout, proxy.get_double("conn_timeout", 0.5));
  APUS_ASSIGN_OR_RETURN(c.node_timeout, proxy.get_double("node_timeout", 10));

  // Swift reads `interval` as float(value or 300): an empty value is the default.
  if (!s.get_string("interval", "").empty()) {
    APUS_ASSIGN_OR_RETURN(c.interval, s.get_double("interval", 300));
  }
  if (!s.get_string("report_interval", "").empty()) {
    APUS_ASSIGN_OR_RETURN(c.report_interval, s.get_double("report_interval", 300));
  }
  APUS_ASSIGN_OR_RETURN(c.tasks_per_second, s.get_double("tasks_per_second", 50));
  int64_t concurrency = 1;
  APUS_ASSIGN_OR_RETURN(concurrency, s.get_int("concurrency", 1));
  if (concurrency < 1) return bad_value(s, "concurrency", "must be set to at least 1");
  c.concurrency = static_cast<int>(std::min<int64_t>(concurrency, 10000));
  APUS_ASSIGN_OR_RETURN(c.reclaim_age, s.get_int("reclaim_age", 604800));
  int64_t tries = 3;
  if (!s.get_string("request_tries", "").empty()) {
    APUS_ASSIGN_OR_RETURN(tries, s.get_int("request_tries", 3));
  }
  c.request_tries = static_cast<int>(std::clamp<int64_t>(tries, 1, 100));
  APUS_ASSIGN_OR_RETURN(c.processes, s.get_int("processes", 0));
  APUS_ASSIGN_OR_RETURN(c.process, s.get_int("process", 0));
  c.log_name = s.get_string("log_name", "object-expirer");
  c.recon_cache_path = s.get_string("recon_cache_path", "/var/cache/swift");

  auto swift = common::load_swift_conf(c.swift_dir + "/swift.conf");
  if (!swift.ok()) return swift.status();
  c.swift = std::move(*swift);
  // Swift: the deprecated option, when set, wins over swift.conf's prefix.
  std::string prefix = s.get_string("auto_create_account_prefix", "");
  if (prefix.empty()) {
    prefix = c.swift.constraints.auto_create_account_prefix;
  } else {
    APUS_LOG_WARNING("Option auto_create_account_prefix is deprecated. Configure "
                     "auto_create_account_prefix under the swift-constraints section of "
                     "swift.conf.");
  }
  std::string name = s.get_string("expiring_objects_account_name", "");
  c.expiring_objects_account = prefix + (name.empty() ? "expiring_objects" : name);
  APUS_RETURN_IF_ERROR(c.set_processes(std::nullopt, std::nullopt));
  return c;
}

Status ExpirerConfig::set_processes(std::optional<int64_t> processes_arg,
                                    std::optional<int64_t> process_arg) {
  if (processes_arg) processes = *processes_arg;
  if (process_arg) process = *process_arg;
  if (process < 0) {
    return Status::invalid_argument("process must be an integer greater than or equal to 0");
  }
  if (processes < 0) {
    return Status::invalid_argument("processes must be an integer greater than or equal to 0");
  }
  if (processes && process >= processes) {
    return Status::invalid_argument("process must be less than processes");
  }
  return Status();
}

// ---- the pass --------------------------------------------------------------------------------

namespace {

// One expired row to act on.
struct Task {
  std::string queue_container;  // the row's queue container
  std::string row;              // the row's name
  common::ExpirerTask target;
  bool async_delete = false;    // SLO's async delete: no X-If-Delete-At
};

// A listing row: its name and content type.
struct ListingRow {
  std::string name;
  std::string content_type;
};

std::string csv_nodes(const ring::NodeList& nodes, const std::vector<size_t>& indices,
                      bool hosts) {
  std::string out;
  for (size_t j : indices) {
    const ring::Device& d = *nodes.nodes[j].device;
    if (!out.empty()) out += ",";
    out += hosts ? d.ip + ":" + std::to_string(d.port) : d.device;
  }
  return out;
}

std::chrono::steady_clock::duration seconds(double s) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(s));
}

}  // namespace

int best_status(const std::vector<int>& statuses, size_t quorum, bool override_404) {
  auto pick = [&](const std::vector<int>& s, const std::vector<bool>& avoid) {
    for (int hundred : {200, 300, 400}) {
      size_t count = 0;
      int best = 0;
      for (size_t i = 0; i < s.size(); ++i) {
        if (s[i] < hundred || s[i] >= hundred + 100) continue;
        ++count;
        if (!avoid[i]) best = std::max(best, s[i]);
      }
      if (count >= quorum && best != 0) return best;
    }
    return 0;
  };
  std::vector<bool> none(statuses.size(), false);
  int status = pick(statuses, none);
  if (status == 0 && override_404) {
    std::vector<int> faked = statuses;
    std::vector<bool> avoid(statuses.size(), false);
    for (size_t i = 0; i < faked.size(); ++i) {
      if (faked[i] == 404) {
        faked[i] = 204;
        avoid[i] = true;
      }
    }
    status = pick(faked, avoid);
  }
  return status == 0 ? 503 : status;
}


struct ObjectExpirer::Impl {
  ExpirerConfig config;
  common::HashPathConfig hash;
  std::unique_ptr<ring::Ring> account_ring, container_ring;
  std::map<int, std::unique_ptr<ring::Ring>> object_rings;
  ExpirerStats stats;
  std::string user_agent;
  std::unique_ptr<common::http::ConnectionPool> pool;
  // Per pass: the storage policy of each target container ("a/c"), or the status that
  // stands for it when it has none (404: gone, 503: unknown).
  std::map<std::string, std::pair<int, int>> container_policies;  // status, policy
  std::chrono::steady_clock::time_point pass_start, last_report;

  explicit Impl(ExpirerConfig c) : config(std::move(c)) {
    hash = {config.swift.hash_path_prefix, config.swift.hash_path_suffix};
    user_agent = "object-expirer " + std::to_string(::getpid());
  }

  Status open_rings();
  ring::Ring* object_ring(int policy);
  common::http::ClientOptions timeouts() const {
    return {.conn_timeout = config.conn_timeout, .node_timeout = config.node_timeout};
  }
  HeaderMap base_headers() const {
    HeaderMap h;
    h.set("User-Agent", user_agent);
    h.set("X-Backend-Use-Replication-Network", "true");
    return h;
  }

  // One request to one device (its replication address).
  net::awaitable<Result<common::http::SimpleResponse>> send(const ring::Device& dev,
                                                            const std::string& method,
                                                            uint32_t part,
                                                            const std::string& path,
                                                            const std::string& query,
                                                            HeaderMap headers, size_t max_body);
  // A read as the proxy makes it: the partition's primaries, then handoffs (2 * replicas in
  // all), until one answers 2xx; 404 when none did and one said 404, else 503. Tried again
  // (request_tries in all) on 503.
  net::awaitable<common::http::SimpleResponse> read(ring::Ring& ring, const std::string& method,
                                                    const std::string& account,
                                                    const std::string& container,
                                                    const std::string& query);
  // A listing page after `marker` (of the account when `container` is empty); nullopt on
  // failure (logged). 404 gives an empty page.
  net::awaitable<std::optional<std::vector<ListingRow>>> list_page(const std::string& account,
                                                                   const std::string& container,
                                                                   const std::string& marker);

  net::awaitable<void> pass();
  net::awaitable<void> run_tasks(std::vector<Task> tasks);
  net::awaitable<void> process(const Task& task);
  // The DELETE a proxy makes for the expirer: Swift's status for it.
  net::awaitable<int> delete_object(const Task& task);
  net::awaitable<int> delete_object_once(const Task& task);
  net::awaitable<std::pair<int, int>> target_policy(const std::string& account,
                                                    const std::string& container);
  net::awaitable<void> pop_queue(const Task& task);
  net::awaitable<void> delete_queue_container(const std::string& container);
  void report(bool final);
};

Status ObjectExpirer::Impl::open_rings() {
  auto open = [&](const std::string& name) {
    return ring::Ring::open(config.swift_dir + "/" + name + ".ring.gz", hash);
  };
  if (!account_ring) {
    auto r = open("account");
    if (!r.ok()) return r.status();
    account_ring = std::move(*r);
  }
  if (!container_ring) {
    auto r = open("container");
    if (!r.ok()) return r.status();
    container_ring = std::move(*r);
  }
  return Status();
}

ring::Ring* ObjectExpirer::Impl::object_ring(int policy) {
  auto it = object_rings.find(policy);
  if (it != object_rings.end()) return it->second.get();
  if (!config.swift.policies.by_index(policy)) return nullptr;
  std::string name = policy == 0 ? "object" : "object-" + std::to_string(policy);
  auto r = ring::Ring::open(config.swift_dir + "/" + name + ".ring.gz", hash);
  if (!r.ok()) {
    APUS_LOG_ERROR("cannot load the ring of policy " + std::to_string(policy) + ": " +
                   r.status().to_string());
    return nullptr;
  }
  return object_rings.emplace(policy, std::move(*r)).first->second.get();
}

net::awaitable<Result<common::http::SimpleResponse>> ObjectExpirer::Impl::send(
    const ring::Device& dev, const std::string& method, uint32_t part, const std::string& path,
    const std::string& query, HeaderMap headers, size_t max_body) {
  co_return co_await ring::direct_request(*pool, timeouts(), dev, method, part, path, query,
                                          std::move(headers), max_body);
}

net::awaitable<common::http::SimpleResponse> ObjectExpirer::Impl::read(
    ring::Ring& ring, const std::string& method, const std::string& account,
    const std::string& container, const std::string& query) {
  common::http::SimpleResponse out;
  out.head.status = 503;
  std::string path = "/" + account + (container.empty() ? "" : "/" + container);
  for (int attempt = 0; attempt < config.request_tries; ++attempt) {
    auto nodes = ring.get_nodes(account, container);
    if (!nodes.ok()) co_return out;
    const size_t limit = 2 * nodes->nodes.size();
    std::vector<ring::Node> order = nodes->nodes;
    ring.get_more_nodes(nodes->partition).take(limit - order.size(), &order);
    bool saw_404 = false;
    for (const ring::Node& node : order) {
      HeaderMap h = base_headers();
      h.set("X-Timestamp", Timestamp::now().internal());
      auto r = co_await send(*node.device, method, nodes->partition, path, query, std::move(h),
                             kMaxListingBody);
      if (!r.ok()) continue;
      if (r->head.status >= 200 && r->head.status < 300) co_return std::move(*r);
      if (r->head.status == 404) saw_404 = true;
    }
    if (saw_404) {
      out.head.status = 404;
      co_return out;
    }
  }
  co_return out;
}

net::awaitable<std::optional<std::vector<ListingRow>>> ObjectExpirer::Impl::list_page(
    const std::string& account, const std::string& container, const std::string& marker) {
  std::string query = "?format=json&limit=" + std::to_string(kListingPage) +
                      "&marker=" + common::http::quote(marker, "");
  ring::Ring& ring = container.empty() ? *account_ring : *container_ring;
  auto r = co_await read(ring, "GET", account, container, query);
  std::vector<ListingRow> rows;
  if (r.head.status == 404) co_return rows;
  if (r.head.status < 200 || r.head.status >= 300) {
    APUS_LOG_ERROR("cannot list /" + account + (container.empty() ? "" : "/" + container) +
                   ": " + std::to_string(r.head.status));
    co_return std::nullopt;
  }
  boost::system::error_code ec;
  boost::json::value parsed = boost::json::parse(r.body, ec);
  if (ec || !parsed.is_array()) {
    APUS_LOG_ERROR("unreadable listing of /" + account + "/" + container);
    co_return std::nullopt;
  }
  for (const auto& v : parsed.as_array()) {
    if (!v.is_object()) continue;
    const auto& o = v.as_object();
    ListingRow row;
    if (auto* n = o.if_contains("name"); n && n->is_string()) {
      row.name = std::string(std::string_view(n->as_string()));
    }
    if (auto* t = o.if_contains("content_type"); t && t->is_string()) {
      row.content_type = std::string(std::string_view(t->as_string()));
    }
    if (!row.name.empty()) rows.push_back(std::move(row));
  }
  co_return rows;
}

net::awaitable<void> ObjectExpirer::Impl::pass() {
  const std::string& account = config.expiring_objects_account;
  const uint64_t divisor = config.processes > 0 ? static_cast<uint64_t>(config.processes) : 1;
  const uint64_t my_index = config.processes > 0 ? static_cast<uint64_t>(config.process) : 0;
  auto head = co_await read(*account_ring, "HEAD", account, "", "");
  if (head.head.status == 404) co_return;  // nothing was ever queued
  if (head.head.status < 200 || head.head.status >= 300) {
    APUS_LOG_ERROR("cannot read the queue account " + account + ": " +
                   std::to_string(head.head.status));
    ++stats.errors;
    co_return;
  }
  auto count = common::parse_python_int(head.head.headers.get_or("X-Account-Container-Count", "0"));
  if (!count || *count <= 0) co_return;
  APUS_LOG_INFO("Pass beginning for task account " + account + "; " + std::to_string(*count) +
                " possible containers; " +
                std::string(head.head.headers.get_or("X-Account-Object-Count", "0")) +
                " possible objects");

  // The queue containers whose time has come, in order (the listing is sorted by name, and
  // the names are times).
  std::vector<std::string> containers;
  std::string marker;
  const Timestamp now = Timestamp::now();
  for (bool more = true; more;) {
    auto page = co_await list_page(account, "", marker);
    if (!page) co_return;
    if (page->empty()) break;
    marker = page->back().name;
    for (const ListingRow& row : *page) {
      auto when = Timestamp::parse(row.name);
      if (!when.ok()) {
        APUS_LOG_ERROR("queue container with an unexpected name: " + row.name);
        continue;
      }
      if (*when > now) {
        more = false;
        break;
      }
      containers.push_back(row.name);
    }
  }

  // Rows grouped by target container for Swift's round-robin order, handed out in batches.
  std::map<std::string, std::deque<Task>> cache;
  size_t cached = 0;
  auto flush = [&]() -> net::awaitable<void> {
    std::vector<Task> ordered;
    ordered.reserve(cached);
    while (!cache.empty()) {
      for (auto it = cache.begin(); it != cache.end();) {
        if (it->second.empty()) {
          it = cache.erase(it);
          continue;
        }
        ordered.push_back(std::move(it->second.front()));
        it->second.pop_front();
        ++it;
      }
    }
    cached = 0;
    co_await run_tasks(std::move(ordered));
  };
  for (const std::string& container : containers) {
    bool empty = true;
    std::string row_marker;
    for (bool more = true; more;) {
      auto page = co_await list_page(account, container, row_marker);
      if (!page) {
        empty = false;  // unknown: keep the container
        break;
      }
      if (page->empty()) break;
      empty = false;
      row_marker = page->back().name;
      for (ListingRow& row : *page) {
        auto target = common::parse_expirer_task(row.name);
        if (!target) {
          APUS_LOG_ERROR("Unexcepted error handling task \"" + row.name + "\"");
          continue;
        }
        if (target->delete_at > Timestamp::now()) {
          more = false;  // the rest of this container is not due yet
          break;
        }
        if (common::expirer_hash_mod(container + "/" + row.name, divisor) != my_index) {
          ++stats.skipped;
          continue;
        }
        Task task;
        task.queue_container = container;
        task.async_delete = row.content_type == common::kAsyncDeleteType;
        task.row = std::move(row.name);
        task.target = std::move(*target);
        std::string key = task.target.account + "/" + task.target.container;
        cache[key].push_back(std::move(task));
        if (++cached > kMaxTasksCached) co_await flush();
      }
    }
    if (empty) co_await delete_queue_container(container);
  }
  co_await flush();
}

net::awaitable<void> ObjectExpirer::Impl::run_tasks(std::vector<Task> tasks) {
  if (tasks.empty()) co_return;
  auto executor = co_await net::this_coro::executor;
  size_t next = 0, running = 0;
  net::steady_timer all_done(executor, net::steady_timer::time_point::max());
  const double per_task = config.tasks_per_second > 0 ? 1.0 / config.tasks_per_second : 0.0;
  const auto start = std::chrono::steady_clock::now();
  for (int w = 0; w < config.concurrency; ++w) {
    ++running;
    common::spawn_logged(
        executor,
        [&]() -> net::awaitable<void> {
          net::steady_timer pace(executor);
          while (next < tasks.size()) {
            size_t i = next++;
            if (per_task > 0) {
              pace.expires_at(start + seconds(per_task * static_cast<double>(i)));
              co_await pace.async_wait(net::as_tuple(net::use_awaitable));
            }
            co_await process(tasks[i]);
          }
          if (--running == 0) all_done.cancel();
        },
        "object expirer worker", [&] {
          if (--running == 0) all_done.cancel();
        });
  }
  if (running > 0) (void)co_await all_done.async_wait(net::as_tuple(net::use_awaitable));
}

net::awaitable<void> ObjectExpirer::Impl::process(const Task& task) {
  const auto began = std::chrono::steady_clock::now();
  const std::string where = task.queue_container + "/" + task.row;
  int status = co_await delete_object(task);
  bool done = (status >= 200 && status < 300) || status == 409 ||
              (task.async_delete && status == 404);
  if (!done && (status == 404 || status == 412)) {
    // Not there, or its X-Delete-At changed since it was queued: tried again on later passes
    // (a replica may still hold it), given up once reclaim_age has passed.
    const double age = Timestamp::now().seconds() - task.target.delete_at.seconds();
    done = age >= static_cast<double>(config.reclaim_age);
  }
  if (!done) {
    ++stats.errors;
    config.statsd.increment("errors");
    config.statsd.timing_since("timing", began);
    APUS_LOG_ERROR("Unexpected response while deleting object " +
                   config.expiring_objects_account + " " + task.queue_container + " " +
                   task.row + ": " + std::to_string(status));
    report(false);
    co_return;
  }
  co_await pop_queue(task);
  ++stats.objects;
  config.statsd.increment("objects");
  config.statsd.timing_since("timing", began);
  APUS_LOG_DEBUG("expired " + task.target.target_path() + " (" + where + "): " +
                 std::to_string(status));
  report(false);
}

net::awaitable<std::pair<int, int>> ObjectExpirer::Impl::target_policy(
    const std::string& account, const std::string& container) {
  std::string key = account + "/" + container;
  auto it = container_policies.find(key);
  if (it != container_policies.end()) co_return it->second;
  auto r = co_await read(*container_ring, "HEAD", account, container, "");
  std::pair<int, int> out{r.head.status, 0};
  if (r.head.status >= 200 && r.head.status < 300) {
    const auto* policy = config.swift.policies.by_index_string(
        r.head.headers.get_or("X-Backend-Storage-Policy-Index", "0"));
    out = policy ? std::make_pair(200, policy->index) : std::make_pair(503, 0);
  }
  if (out.first != 503) container_policies[key] = out;  // a failure is asked again
  co_return out;
}

net::awaitable<int> ObjectExpirer::Impl::delete_object(const Task& task) {
  int status = 503;
  for (int attempt = 0; attempt < config.request_tries; ++attempt) {
    if (attempt > 0) {
      // Swift's InternalClient waits 2, 4, ... seconds before trying again.
      net::steady_timer wait(co_await net::this_coro::executor, seconds(1 << attempt));
      (void)co_await wait.async_wait(net::as_tuple(net::use_awaitable));
    }
    status = co_await delete_object_once(task);
    if (status < 500) break;
  }
  co_return status;
}

net::awaitable<int> ObjectExpirer::Impl::delete_object_once(const Task& task) {
  const common::ExpirerTask& t = task.target;
  auto [container_status, policy] = co_await target_policy(t.account, t.container);
  if (container_status != 200) co_return container_status == 404 ? 404 : 503;
  ring::Ring* ring = object_ring(policy);
  if (!ring) co_return 503;
  auto nodes = ring->get_nodes(t.account, t.container, t.object);
  auto container_nodes = container_ring->get_nodes(t.account, t.container);
  if (!nodes.ok() || !container_nodes.ok()) co_return 503;
  const size_t n = nodes->nodes.size();
  const common::UpdatePlan plan =
      common::plan_updates(n, container_nodes->nodes.size(), 0, (n + 1) / 2,
                           (container_nodes->nodes.size() + 1) / 2);
  std::vector<ring::Node> order = nodes->nodes;
  ring->get_more_nodes(nodes->partition).take(n, &order);
  const std::string timestamp = t.delete_at.normal();
  const std::string path = "/" + t.account + "/" + t.container + "/" + t.object;
  const std::string trans_id = "tx-object-expirer-" + std::to_string(::getpid());
  // One request per primary; one whose node fails or answers 5xx moves on to the next
  // handoff, as the proxy's make_requests() does.
  std::vector<int> statuses;
  size_t next_node = 0;
  for (size_t i = 0; i < n; ++i) {
    HeaderMap h = base_headers();
    h.set("X-Timestamp", timestamp);
    h.set("X-Trans-Id", trans_id);
    h.set("X-Backend-Storage-Policy-Index", std::to_string(policy));
    if (!task.async_delete) {
      h.set("X-If-Delete-At", timestamp);
      h.set("X-Backend-Clean-Expiring-Object-Queue", "no");
    }
    if (!plan.container[i].empty()) {
      h.set("X-Container-Partition", std::to_string(container_nodes->partition));
      h.set("X-Container-Host", csv_nodes(*container_nodes, plan.container[i], true));
      h.set("X-Container-Device", csv_nodes(*container_nodes, plan.container[i], false));
    }
    int status = 503;
    while (next_node < order.size()) {
      const ring::Device& dev = *order[next_node++].device;
      auto r = co_await send(dev, "DELETE", nodes->partition, path, "", h, 1 << 16);
      if (!r.ok() || r->head.status >= 500 || r->head.status < 200) continue;
      status = r->head.status;
      break;
    }
    statuses.push_back(status);
  }
  co_return best_status(statuses, (n + 1) / 2, /*override_404=*/true);
}

net::awaitable<void> ObjectExpirer::Impl::pop_queue(const Task& task) {
  auto nodes =
      container_ring->get_nodes(config.expiring_objects_account, task.queue_container);
  if (!nodes.ok()) co_return;
  const std::string path =
      "/" + config.expiring_objects_account + "/" + task.queue_container + "/" + task.row;
  const std::string now = Timestamp::now().internal();
  // Each replica on its own; one that misses it keeps the row, and a later pass finds the
  // object gone (404) and tries again.
  for (const ring::Node& node : nodes->nodes) {
    HeaderMap h = base_headers();
    h.set("X-Timestamp", now);
    auto r = co_await send(*node.device, "DELETE", nodes->partition, path, "", std::move(h),
                           1 << 16);
    if (!r.ok()) {
      APUS_LOG_DEBUG("queue row " + path + " not removed from " + node.device->device + ": " +
                     r.status().to_string());
    }
  }
}

net::awaitable<void> ObjectExpirer::Impl::delete_queue_container(const std::string& container) {
  const std::string& account = config.expiring_objects_account;
  auto nodes = container_ring->get_nodes(account, container);
  auto accounts = account_ring->get_nodes(account);
  if (!nodes.ok() || !accounts.ok() || nodes->nodes.empty()) co_return;
  const std::string now = Timestamp::now().internal();
  // Account replicas spread over the container requests, as the proxy's container DELETE does.
  std::vector<std::vector<size_t>> account_for(nodes->nodes.size());
  for (size_t i = 0; i < accounts->nodes.size(); ++i) {
    account_for[i % account_for.size()].push_back(i);
  }
  int deleted = 0;
  for (size_t i = 0; i < nodes->nodes.size(); ++i) {
    HeaderMap h = base_headers();
    h.set("X-Timestamp", now);
    if (!account_for[i].empty()) {
      h.set("X-Account-Partition", std::to_string(accounts->partition));
      h.set("X-Account-Host", csv_nodes(*accounts, account_for[i], true));
      h.set("X-Account-Device", csv_nodes(*accounts, account_for[i], false));
    }
    auto r = co_await send(*nodes->nodes[i].device, "DELETE", nodes->partition,
                           "/" + account + "/" + container, "", std::move(h), 1 << 16);
    // 404 (already gone) and 409 (a row came meanwhile) are fine too, as for Swift.
    if (r.ok() && r->head.status >= 200 && r->head.status < 300) ++deleted;
  }
  if (deleted > 0) ++stats.containers_deleted;
}

void ObjectExpirer::Impl::report(bool final) {
  auto now = std::chrono::steady_clock::now();
  const int elapsed =
      static_cast<int>(std::chrono::duration<double>(now - pass_start).count());
  if (final) {
    APUS_LOG_INFO("Pass completed in " + std::to_string(elapsed) + "s; " +
                  std::to_string(stats.objects) + " objects expired");
    boost::json::object recon;
    recon["object_expiration_pass"] = std::chrono::duration<double>(now - pass_start).count();
    recon["expired_last_pass"] = stats.objects;
    Status written = common::dump_recon_cache(config.recon_cache_path + "/object.recon",
                                              boost::json::serialize(recon));
    if (!written.ok()) APUS_LOG_ERROR("cannot write the recon cache: " + written.to_string());
  } else if (now - last_report >= seconds(config.report_interval)) {
    APUS_LOG_INFO("Pass so far " + std::to_string(elapsed) + "s; " +
                  std::to_string(stats.objects) + " objects expired");
    last_report = now;
  }
}

// ---- ObjectExpirer ---------------------------------------------------------------------------

ObjectExpirer::ObjectExpirer(ExpirerConfig config)
    : impl_(std::make_unique<Impl>(std::move(config))) {}

ObjectExpirer::~ObjectExpirer() = default;

ExpirerStats ObjectExpirer::run_once() {
  Impl& impl = *impl_;
  impl.stats = ExpirerStats();
  if (!impl.config.dequeue_from_legacy) {
    APUS_LOG_INFO("This node is not configured to dequeue tasks from the legacy queue.  This "
                  "node will not process any expiration tasks.  At least one node in your "
                  "cluster must be configured with dequeue_from_legacy == true.");
    return impl.stats;
  }
  Status rings = impl.open_rings();
  if (!rings.ok()) {
    APUS_LOG_ERROR("cannot load the rings: " + rings.to_string());
    ++impl.stats.errors;
    return impl.stats;
  }
  impl.pass_start = impl.last_report = std::chrono::steady_clock::now();
  impl.container_policies.clear();
  net::io_context ioc(1);
  // The connection pool's sockets belong to `ioc`: it goes before the io_context does.
  impl.pool = std::make_unique<common::http::ConnectionPool>(impl.timeouts());
  common::spawn_logged(ioc.get_executor(), [&]() -> net::awaitable<void> {
    APUS_LOG_DEBUG("Run begin");
    co_await impl.pass();
    APUS_LOG_DEBUG("Run end");
  }, "object expirer pass");
  ioc.run();
  impl.pool.reset();
  impl.report(true);
  return impl.stats;
}

void ObjectExpirer::run_forever(const std::atomic<bool>& stop) {
  std::mt19937_64 random(std::random_device{}());
  std::uniform_real_distribution<double> fraction(0.0, 1.0);
  const double interval = impl_->config.interval;
  common::sleep_until_or_stopped(common::seconds_from_now(fraction(random) * interval), stop);
  while (!stop.load()) {
    auto begin = std::chrono::steady_clock::now();
    (void)run_once();
    double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    if (elapsed < interval) {
      common::sleep_until_or_stopped(
          common::seconds_from_now(fraction(random) * (interval - elapsed)), stop);
    }
  }
}

}  // namespace apus::object
