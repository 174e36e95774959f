#include "container-server/reconciler.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>

#include "common/async.h"
#include "common/hash_path.h"
#include "common/http/url.h"
#include "common/log/log.h"
#include "common/process.h"
#include "proxy/internal_client.h"
#include "ring/direct_client.h"
#include "ring/ring.h"

namespace apus::container {

namespace net = boost::asio;
using common::MisplacedEntry;
using common::Result;
using common::Status;
using common::Timestamp;
using common::http::HeaderMap;
using common::http::Response;

namespace {

constexpr std::string_view kAccount = common::kMisplacedObjectsAccount;
// Swift's CONTAINER_POLICY_TTL, and the most containers whose policy is remembered (Swift's
// LRUCache default size).
constexpr double kContainerPolicyTtl = 30;
constexpr size_t kMaxContainerPolicies = 1000;
// A listing page (Swift's CONTAINER_LISTING_LIMIT rows of names up to 1024 bytes, which JSON
// escaping can make 6 times longer, with their fields).
constexpr size_t kMaxListingBody = 80u << 20;
constexpr size_t kMaxSmallAnswer = 1u << 20;  // HEADs, DELETEs, a PUT's answer

double now_seconds() { return Timestamp::now().seconds(); }

// Runs task(i) for every i < n at once, and returns once all of them have ended.
template <class Task>
net::awaitable<void> run_all(size_t n, Task task) {
  auto executor = co_await net::this_coro::executor;
  size_t running = n;
  net::steady_timer all_done(executor, net::steady_timer::time_point::max());
  auto one_done = [&] {
    if (--running == 0) all_done.cancel();
  };
  for (size_t i = 0; i < n; ++i) {
    common::spawn_logged(
        executor,
        [&, i]() -> net::awaitable<void> {
          co_await task(i);
          one_done();
        },
        "container reconciler task", one_done);
  }
  if (running > 0) (void)co_await all_done.async_wait(net::as_tuple(net::use_awaitable));
}

bool is_success(int status) { return status >= 200 && status < 300; }
// What the reconciler's object HEAD and GET accept (Swift's acceptable_statuses=(2, 4)); any
// other answer is an error, its headers unused.
bool is_acceptable(int status) { return is_success(status) || (status >= 400 && status < 500); }

}  // namespace

common::Timestamp slightly_later(const common::Timestamp& t, uint64_t offset) {
  auto later = t.plus_offset(offset);
  return later.ok() ? *later : t;
}

// ---- configuration ---------------------------------------------------------------------------

Result<ReconcilerConfig> ReconcilerConfig::from_config(const common::Config& conf,
                                                       const std::string& path) {
  ReconcilerConfig c;
  c.config_path = path;
  common::Section s = conf.section("container-reconciler");
  c.swift_dir = s.get_string("swift_dir", "/etc/swift");
  APUS_ASSIGN_OR_RETURN(c.reclaim_age, s.get_int("reclaim_age", 604800));
  APUS_ASSIGN_OR_RETURN(c.interval, s.get_double("interval", 30));
  // Swift: int(conf.get('request_tries') or 3).
  int64_t tries = 3;
  if (!s.get_string("request_tries", "").empty()) {
    APUS_ASSIGN_OR_RETURN(tries, s.get_int("request_tries", 3));
  }
  if (tries < 1) return s.invalid("request_tries", "must be positive");
  c.request_tries = static_cast<int>(std::min<int64_t>(tries, 100));
  APUS_ASSIGN_OR_RETURN(c.ring_check_interval, s.get_double("ring_check_interval", 15));
  int64_t concurrency = 1;
  APUS_ASSIGN_OR_RETURN(concurrency, s.get_int("concurrency", 1));
  if (concurrency < 1) return s.invalid("concurrency", "must be set to at least 1");
  c.concurrency = static_cast<int>(std::min<int64_t>(concurrency, 10000));
  APUS_ASSIGN_OR_RETURN(c.processes, s.get_int("processes", 0));
  if (c.processes < 0) {
    return s.invalid("processes", "must be an integer greater than or equal to 0");
  }
  APUS_ASSIGN_OR_RETURN(c.process, s.get_int("process", 0));
  if (c.process < 0) return s.invalid("process", "must be an integer greater than or equal to 0");
  if (c.processes && c.process >= c.processes) {
    return s.invalid("process", "must be less than processes");
  }
  c.log_name = s.get_string("log_name", "container-reconciler");
  auto swift = common::load_swift_conf(c.swift_dir + "/swift.conf");
  if (!swift.ok()) return swift.status();
  c.swift = std::move(*swift);
  return c;
}

// ---- the reconciler --------------------------------------------------------------------------

struct ContainerReconciler::Impl {
  ReconcilerConfig config;
  std::unique_ptr<proxy::InternalClient> client;
  std::unique_ptr<ring::Ring> container_ring;
  std::map<int64_t, std::unique_ptr<ring::Ring>> object_rings;
  ReconcilerStats stats;
  // run_forever()'s stop flag: a pass ends between rows once it is set (null: never).
  const std::atomic<bool>* stop = nullptr;
  bool stopping() const { return stop != nullptr && stop->load(); }
  std::chrono::steady_clock::time_point last_stats_log;
  std::string user_agent;
  // The policy of each container ("a/c") the primaries agreed on (nullopt: no majority), and
  // when that was learned.
  std::map<std::string, std::pair<double, std::optional<int64_t>>> container_policies;
  // The network side of a pass: made for the pass's thread (see the header).
  std::unique_ptr<net::io_context> ioc;
  std::unique_ptr<common::http::ConnectionPool> pool;

  // Counts `metric` and logs "<metric>: <message>" at `level` (Swift's stats_log).
  void stats_log(const std::string& metric, const std::string& message,
                 common::log::Level level = common::log::Level::kDebug);
  // "Reconciler Stats: {...}" at most once a minute, or now when `force`.
  void log_stats(bool force);

  ring::Ring* object_ring(int64_t policy);
  bool can_reconcile_policy(int64_t policy);
  common::http::ClientOptions direct_options() const {
    return {.conn_timeout = config.conn_timeout, .node_timeout = config.response_timeout};
  }

  net::awaitable<void> pass();
  // The rows of the queue container `container` (`container` empty: the queue account's
  // containers) after `marker`: nullopt when the listing failed (logged); a 404 is empty.
  net::awaitable<std::optional<boost::json::array>> list_page(const std::string& container,
                                                             const std::string& marker);
  net::awaitable<void> work_container(const std::string& container);
  net::awaitable<void> work_rows(const std::string& container,
                                 std::vector<std::pair<std::string, MisplacedEntry>> rows);
  net::awaitable<void> process_queue_item(const std::string& container,
                                          const std::string& row_name,
                                          const MisplacedEntry& entry);
  // Swift's reconcile_object: whether the row is done with (then it leaves the queue).
  net::awaitable<bool> reconcile_object(const MisplacedEntry& e);
  net::awaitable<std::optional<int64_t>> container_policy(const std::string& account,
                                                          const std::string& container);
  net::awaitable<bool> ensure_object_in_right_location(const MisplacedEntry& e,
                                                       int64_t dest_policy);
  net::awaitable<bool> ensure_tombstone_in_right_location(const MisplacedEntry& e,
                                                          int64_t dest_policy,
                                                          const Timestamp& source_ts);
  net::awaitable<bool> throw_tombstones(const MisplacedEntry& e);
  net::awaitable<void> pop_queue(const std::string& container, const std::string& row_name,
                                 const MisplacedEntry& e);
};

void ContainerReconciler::Impl::stats_log(const std::string& metric, const std::string& message,
                                          common::log::Level level) {
  APUS_LOG(level, metric + ": " + message);
  ++stats[metric];
}

void ContainerReconciler::Impl::log_stats(bool force) {
  auto now = std::chrono::steady_clock::now();
  if (!force && now - last_stats_log <= std::chrono::seconds(60)) return;
  last_stats_log = now;
  std::string text;
  for (const auto& [name, count] : stats) {
    text += (text.empty() ? "'" : ", '") + name + "': " + std::to_string(count);
  }
  APUS_LOG_INFO("Reconciler Stats: {" + text + "}");
}

ring::Ring* ContainerReconciler::Impl::object_ring(int64_t policy) {
  if (policy < 0 || policy > INT32_MAX) return nullptr;  // no such policy: no ring
  auto it = object_rings.find(policy);
  if (it != object_rings.end()) return it->second.get();
  const auto* p = config.swift.policies.by_index(static_cast<int>(policy));
  if (!p) return nullptr;
  ring::RingOptions options;
  options.reload_time = std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::duration<double>(config.ring_check_interval));
  auto r = ring::Ring::open(config.swift_dir + "/" + p->policy_string("object") + ".ring.gz",
                            {config.swift.hash_path_prefix, config.swift.hash_path_suffix},
                            options);
  if (!r.ok()) {
    APUS_LOG_ERROR("cannot load the ring of policy " + std::to_string(policy) + ": " +
                   r.status().to_string());
    return nullptr;
  }
  return object_rings.emplace(policy, std::move(*r)).first->second.get();
}

bool ContainerReconciler::Impl::can_reconcile_policy(int64_t policy) {
  ring::Ring* ring = object_ring(policy);
  return ring != nullptr && !ring->next_part_power();
}

net::awaitable<void> ContainerReconciler::Impl::pass() {
  APUS_LOG_DEBUG("pulling items from the queue");
  // The current hour's container first: the updaters may not have reported it yet.
  const std::string current = common::misplaced_container_name(Timestamp::now());
  co_await work_container(current);
  APUS_LOG_DEBUG("looking for containers in " + std::string(kAccount));
  std::string marker;
  for (;;) {
    auto page = co_await list_page("", marker);
    if (!page || page->empty()) break;
    const std::string before = marker;
    if (const auto* last = page->back().if_object()) {
      if (const auto* n = last->if_contains("name"); n && n->is_string()) {
        marker = std::string(n->as_string());
      }
    }
    // Newest first: older containers are expected to be empty.
    for (auto it = page->rbegin(); it != page->rend(); ++it) {
      const auto* row = it->if_object();
      const auto* n = row ? row->if_contains("name") : nullptr;
      if (!n || !n->is_string()) continue;
      std::string name(n->as_string());
      if (stopping()) co_return;
      if (name != current) co_await work_container(name);
    }
    if (marker == before) break;  // a page without names would be asked for again and again
  }
}

net::awaitable<std::optional<boost::json::array>> ContainerReconciler::Impl::list_page(
    const std::string& container, const std::string& marker) {
  const std::string path =
      "/v1/" + std::string(kAccount) + (container.empty() ? "" : "/" + container);
  const std::string query = "format=json&marker=" + common::http::quote(marker, "") +
                            "&end_marker=&prefix=";
  auto r = co_await client->request("GET", path, query, {}, kMaxListingBody);
  const std::string what = container.empty() ? "containers in account " + std::string(kAccount)
                                             : "objects in container " + container;
  if (!r.ok()) {
    APUS_LOG_ERROR("Error listing " + what + " (" + r.status().to_string() + ")");
    co_return std::nullopt;
  }
  APUS_LOG_DEBUG("listing " + path + "?" + query + ": " + std::to_string(r->status) + ", " +
                 std::to_string(r->body.size()) + " bytes");
  if (r->status == 404 || r->status == 204) co_return boost::json::array();
  if (r->status != 200) {
    APUS_LOG_ERROR("Error listing " + what + " (Unexpected response: " +
                   std::to_string(r->status) + ")");
    co_return std::nullopt;
  }
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(r->body, ec);
  if (ec || !v.is_array()) {
    APUS_LOG_ERROR("Error listing " + what + " (not a JSON listing)");
    co_return std::nullopt;
  }
  co_return std::move(v.as_array());
}

net::awaitable<void> ContainerReconciler::Impl::work_container(const std::string& container) {
  APUS_LOG_DEBUG("checking container " + container);
  bool found = false, listed = true;
  std::string marker;
  for (;;) {
    auto page = co_await list_page(container, marker);
    if (!page) {
      listed = false;
      break;
    }
    if (page->empty()) break;
    found = true;
    const std::string before = marker;
    std::vector<std::pair<std::string, MisplacedEntry>> rows;
    for (const auto& v : *page) {
      const auto* o = v.if_object();
      auto field = [&](const char* key) -> std::string {
        const auto* f = o ? o->if_contains(key) : nullptr;
        return f && f->is_string() ? std::string(f->as_string()) : std::string();
      };
      std::string name = field("name");
      if (!name.empty()) marker = name;
      auto entry = common::parse_misplaced_entry(name, field("content_type"), field("hash"),
                                                 field("last_modified"));
      if (!entry.ok()) {
        stats_log("invalid_record",
                  "invalid queue record: " + boost::json::serialize(v) + ": " +
                      entry.status().message(),
                  common::log::Level::kError);
        continue;
      }
      if (config.processes > 0) {
        auto hash = common::hash_path_hex(
            {config.swift.hash_path_prefix, config.swift.hash_path_suffix}, entry->account,
            entry->container, entry->object);
        if (!hash.ok() ||
            common::hex_mod(*hash, static_cast<uint64_t>(config.processes)) !=
                static_cast<uint64_t>(config.process)) {
          continue;
        }
      }
      rows.emplace_back(std::move(name), std::move(*entry));
    }
    co_await work_rows(container, std::move(rows));
    if (stopping()) co_return;
    if (marker == before) break;  // a page without names would be asked for again and again
  }
  // An old queue container found empty goes, so the queue does not grow for ever. (Swift also
  // tries when the listing failed; a container whose name is no number it cannot judge, and
  // its pass ends there. Apus keeps both.)
  char* end = nullptr;
  const double hour = std::strtod(container.c_str(), &end);
  const bool numeric = !container.empty() && end == container.c_str() + container.size();
  if (listed && !found && numeric && hour < now_seconds() - static_cast<double>(config.reclaim_age)) {
    HeaderMap h;
    h.set("X-Timestamp", Timestamp::now().internal());
    auto r = co_await client->request("DELETE", "/v1/" + std::string(kAccount) + "/" + container,
                                      "", std::move(h), kMaxSmallAnswer);
    const int status = r.ok() ? r->status : 0;
    if (!is_success(status) && status != 404 && status != 409 && status != 412) {
      APUS_LOG_WARNING("could not delete the empty queue container " + container + ": " +
                       (r.ok() ? std::to_string(status) : r.status().to_string()));
    }
  }
  log_stats(false);
}

net::awaitable<void> ContainerReconciler::Impl::work_rows(
    const std::string& container, std::vector<std::pair<std::string, MisplacedEntry>> rows) {
  // `concurrency` workers, each taking the next row until none is left.
  size_t next = 0;
  co_await run_all(std::min<size_t>(static_cast<size_t>(config.concurrency), rows.size()),
                   [&](size_t) -> net::awaitable<void> {
                     while (next < rows.size() && !stopping()) {
                       const size_t i = next++;
                       co_await process_queue_item(container, rows[i].first, rows[i].second);
                     }
                   });
}

net::awaitable<void> ContainerReconciler::Impl::process_queue_item(const std::string& container,
                                                                   const std::string& row_name,
                                                                   const MisplacedEntry& entry) {
  APUS_LOG_DEBUG("checking placement for '" + entry.path() + "' (" + entry.timestamp.normal() +
                 ") in policy_index " + std::to_string(entry.policy_index));
  const bool done = co_await reconcile_object(entry);
  const std::string what = "'" + entry.path() + "' (" + entry.timestamp.normal() +
                           ") in policy_index " + std::to_string(entry.policy_index);
  if (done) {
    stats_log("success", what + " was handled successfully", common::log::Level::kInfo);
  } else {
    stats_log("retry", what + " must be retried", common::log::Level::kInfo);
  }
  log_stats(false);
  if (done) co_await pop_queue(container, row_name, entry);
}

net::awaitable<std::optional<int64_t>> ContainerReconciler::Impl::container_policy(
    const std::string& account, const std::string& container) {
  const std::string key = account + "/" + container;
  const double now = now_seconds();
  if (auto it = container_policies.find(key);
      it != container_policies.end() && now - it->second.first < kContainerPolicyTtl) {
    co_return it->second.second;
  }
  auto nodes = container_ring->get_nodes(account, container);
  if (!nodes.ok()) co_return std::nullopt;
  // Swift's direct_get_container_policy_index: every primary's HEAD, at once; a 404 counts with
  // what it says (a deleted container's policy and timestamps; a server without the database
  // says policy 0 and zero timestamps, which Swift takes as a claim too); a majority must
  // answer.
  std::vector<common::PolicyClaim> claims;
  co_await run_all(nodes->nodes.size(), [&](size_t i) -> net::awaitable<void> {
    HeaderMap h;
    h.set("User-Agent", user_agent);
    h.set("X-Backend-Use-Replication-Network", "true");
    auto r = co_await ring::direct_request(*pool, direct_options(), *nodes->nodes[i].device,
                                           "HEAD", nodes->partition,
                                           "/" + account + "/" + container, "", std::move(h),
                                           kMaxSmallAnswer);
    if (!r.ok() || (!is_success(r->head.status) && r->head.status != 404)) co_return;
    const HeaderMap& got = r->head.headers;
    auto policy = common::parse_python_int(got.get_or("X-Backend-Storage-Policy-Index", ""));
    if (!policy) co_return;  // no policy at all (another implementation): not a claim
    const std::string zero = Timestamp().internal();
    claims.push_back({*policy, std::string(got.get_or("X-Backend-Put-Timestamp", zero)),
                      std::string(got.get_or("X-Backend-Delete-Timestamp", zero)),
                      std::string(got.get_or("X-Backend-Status-Changed-At", zero)), 0});
  });
  std::optional<int64_t> out;
  if (claims.size() >= nodes->nodes.size() / 2 + 1) {
    const common::PolicyClaim* best = &claims.front();
    for (const auto& c : claims) {
      if (common::policy_claim_wins(*best, c)) best = &c;
    }
    out = best->storage_policy_index;
  }
  if (container_policies.size() >= kMaxContainerPolicies) container_policies.clear();
  container_policies[key] = {now, out};
  co_return out;
}

net::awaitable<bool> ContainerReconciler::Impl::reconcile_object(const MisplacedEntry& e) {
  const std::string what = "'" + e.path() + "' (" + e.timestamp.normal() + ")";
  std::optional<int64_t> dest = co_await container_policy(e.account, e.container);
  if (!dest) {
    stats_log("unavailable_container", what + " unable to determine the destination policy_index");
    co_return false;
  }
  if (*dest == e.policy_index) {
    stats_log("noop_object", what + " container policy_index " + std::to_string(*dest) +
                                 " matches queue policy index " +
                                 std::to_string(e.policy_index));
    co_return true;
  }
  // Neither policy may be in the middle of a partition power increase.
  if (!can_reconcile_policy(e.policy_index)) {
    stats_log("ppi_skip", "Source policy (" + std::to_string(e.policy_index) +
                              ") in the middle of a part power increase (PPI)");
    co_return false;
  }
  if (!can_reconcile_policy(*dest)) {
    stats_log("ppi_skip", "Container policy (" + std::to_string(*dest) +
                              ") in the middle of a part power increase (PPI)");
    co_return false;
  }
  // Is the object in the destination already (or deleted there), as new as the queued write?
  HeaderMap h;
  h.set("X-Backend-Storage-Policy-Index", std::to_string(*dest));
  auto head = co_await client->request("HEAD", "/v1" + e.path(), "", std::move(h),
                                       kMaxSmallAnswer);
  if (!head.ok() || !is_acceptable(head->status)) {
    stats_log("unavailable_destination",
              what + " unable to determine the destination timestamp, if any");
    co_return false;
  }
  const Timestamp dest_ts =
      common::timestamp_or_zero(head->headers.get_or("X-Backend-Timestamp", "0"));
  if (dest_ts >= e.timestamp) {
    stats_log("found_object", "'" + e.path() + "' (" + dest_ts.normal() + ") in policy_index " +
                                  std::to_string(*dest) + " is newer than queue (" +
                                  e.timestamp.normal() + ")");
    co_return co_await throw_tombstones(e);
  }
  stats_log("misplaced_object", what + " in policy_index " + std::to_string(e.policy_index) +
                                    " should be in policy_index " + std::to_string(*dest));
  co_return co_await ensure_object_in_right_location(e, *dest);
}

net::awaitable<bool> ContainerReconciler::Impl::ensure_object_in_right_location(
    const MisplacedEntry& e, int64_t dest_policy) {
  const std::string what = "'" + e.path() + "'";
  APUS_LOG_DEBUG("fetching " + what + " (" + e.timestamp.normal() + ") from storage policy " +
                 std::to_string(e.policy_index));
  HeaderMap h;
  h.set("X-Backend-Storage-Policy-Index", std::to_string(e.policy_index));
  std::unique_ptr<proxy::Subrequest> source =
      co_await client->open("GET", "/v1" + e.path(), std::move(h));
  const int status = source->status();
  // An answer other than 2xx and 4xx is Swift's UnexpectedResponse: its headers are not used.
  const Timestamp source_ts =
      is_acceptable(status)
          ? common::timestamp_or_zero(source->headers().get_or("X-Backend-Timestamp", "0"))
          : Timestamp();
  if (status == 404 && e.is_delete) {
    co_await source->close();
    co_return co_await ensure_tombstone_in_right_location(e, dest_policy, source_ts);
  }
  if (!is_success(status) || source_ts < e.timestamp) {
    co_await source->close();
    if (e.timestamp.seconds() < now_seconds() - static_cast<double>(config.reclaim_age)) {
      // Old, and nothing anywhere to move: given up.
      stats_log("lost_source", what + " (" + e.timestamp.internal() +
                                   ") was not available in policy_index " +
                                   std::to_string(e.policy_index) + " and has expired",
                common::log::Level::kCritical);
      co_return true;
    }
    // The copy that satisfies the row may still turn up (a replica that is down): later.
    stats_log("unavailable_source", what + " (" + e.timestamp.internal() + ") in policy_index " +
                                        std::to_string(e.policy_index) + " responded " +
                                        std::to_string(status) + " (" + source_ts.internal() + ")",
              common::log::Level::kWarning);
    co_return false;
  }
  // Any source at or after the row's time is moved.
  const Timestamp put_ts = slightly_later(std::max(source_ts, e.timestamp), 2);
  stats_log("copy_attempt", what + " (" + source_ts.normal() + ") in policy_index " +
                                std::to_string(e.policy_index) + " will be moved to policy_index " +
                                std::to_string(dest_policy) + " (" + put_ts.internal() + ")");
  HeaderMap put_headers = source->headers();
  put_headers.set("X-Backend-Storage-Policy-Index", std::to_string(dest_policy));
  put_headers.set("X-Timestamp", put_ts.internal());
  put_headers.erase("Content-Length");
  // The length the GET gave, or chunked without one (as Swift's upload_object).
  proxy::SubrequestBody body(*source);
  Result<Response> put = co_await client->request_with_body(
      "PUT", "/v1" + e.path(), std::move(put_headers), body, source->length(), kMaxSmallAnswer);
  co_await source->close();
  if (!put.ok() || !is_success(put->status)) {
    stats_log("copy_failed", "upload " + what + " (" + source_ts.normal() +
                                 ") from policy_index " + std::to_string(e.policy_index) +
                                 " to policy_index " + std::to_string(dest_policy) + " returned " +
                                 (put.ok() ? std::to_string(put->status) : put.status().to_string()),
              common::log::Level::kWarning);
    co_return false;
  }
  stats_log("copy_success", what + " (" + source_ts.normal() + ") moved from policy_index " +
                                std::to_string(e.policy_index) + " to policy_index " +
                                std::to_string(dest_policy) + " (" + put_ts.internal() + ")");
  co_return co_await throw_tombstones(e);
}

net::awaitable<bool> ContainerReconciler::Impl::ensure_tombstone_in_right_location(
    const MisplacedEntry& e, int64_t dest_policy, const Timestamp& source_ts) {
  const std::string what = "'" + e.path() + "' (" + source_ts.normal() + ")";
  const Timestamp delete_ts = slightly_later(e.timestamp, 2);
  stats_log("delete_attempt", what + " in policy_index " + std::to_string(e.policy_index) +
                                  " will be deleted from policy_index " +
                                  std::to_string(dest_policy) + " (" + delete_ts.internal() + ")");
  HeaderMap h;
  h.set("X-Backend-Storage-Policy-Index", std::to_string(dest_policy));
  h.set("X-Timestamp", delete_ts.internal());
  auto r = co_await client->request("DELETE", "/v1" + e.path(), "", std::move(h), kMaxSmallAnswer);
  if (!r.ok() || (!is_success(r->status) && r->status != 404)) {
    stats_log("delete_failed", "delete " + what + " from policy_index " +
                                   std::to_string(dest_policy) + " (" + delete_ts.internal() +
                                   ") returned " +
                                   (r.ok() ? std::to_string(r->status) : r.status().to_string()),
              common::log::Level::kWarning);
    co_return false;
  }
  stats_log("delete_success", what + " deleted from policy_index " + std::to_string(dest_policy) +
                                  " (" + delete_ts.internal() + ")",
            common::log::Level::kInfo);
  co_return co_await throw_tombstones(e);
}

net::awaitable<bool> ContainerReconciler::Impl::throw_tombstones(const MisplacedEntry& e) {
  const std::string what = "'" + e.path() + "' (" + e.timestamp.normal() + ")";
  const Timestamp x_timestamp = slightly_later(e.timestamp);
  stats_log("cleanup_attempt", what + " from policy_index " + std::to_string(e.policy_index) +
                                   " (" + x_timestamp.internal() + ") will be deleted");
  HeaderMap h;
  h.set("X-Timestamp", x_timestamp.internal());
  h.set("X-Backend-Storage-Policy-Index", std::to_string(e.policy_index));
  auto r = co_await client->request("DELETE", "/v1" + e.path(), "", std::move(h), kMaxSmallAnswer);
  if (!r.ok() || (!is_success(r->status) && r->status != 404)) {
    stats_log("cleanup_failed", what + " was not cleaned up in storage_policy " +
                                    std::to_string(e.policy_index) + " (" +
                                    (r.ok() ? std::to_string(r->status) : r.status().to_string()) +
                                    ")");
    co_return false;
  }
  stats_log("cleanup_success", what + " was successfully removed from policy_index " +
                                   std::to_string(e.policy_index));
  co_return true;
}

net::awaitable<void> ContainerReconciler::Impl::pop_queue(const std::string& container,
                                                          const std::string& row_name,
                                                          const MisplacedEntry& e) {
  const Timestamp x_timestamp = slightly_later(std::max(e.queued_at, e.timestamp));
  const std::string path = "/" + std::string(kAccount) + "/" + container + "/" + row_name;
  stats_log("pop_queue", "remove '" + path + "' (" + e.timestamp.normal() +
                             ") from the queue (" + x_timestamp.internal() + ")");
  auto nodes = container_ring->get_nodes(kAccount, container);
  if (!nodes.ok()) co_return;
  // Every primary at once, each on its own; one that misses it keeps the row, and a later pass
  // finds the work done and removes it again.
  co_await run_all(nodes->nodes.size(), [&](size_t i) -> net::awaitable<void> {
    const ring::Device& dev = *nodes->nodes[i].device;
    HeaderMap h;
    h.set("User-Agent", user_agent);
    h.set("X-Timestamp", x_timestamp.internal());
    h.set("X-Backend-Use-Replication-Network", "true");
    auto r = co_await ring::direct_request(*pool, direct_options(), dev, "DELETE",
                                           nodes->partition, path, "", std::move(h),
                                           kMaxSmallAnswer);
    if (!r.ok() || !is_success(r->head.status)) {
      APUS_LOG_DEBUG("queue row " + path + " not removed from " + dev.device + ": " +
                     (r.ok() ? std::to_string(r->head.status) : r.status().to_string()));
    }
  });
}

// ---- ContainerReconciler ---------------------------------------------------------------------

Result<std::unique_ptr<ContainerReconciler>> ContainerReconciler::create(
    ReconcilerConfig config, const common::Config& conf) {
  auto impl = std::make_unique<Impl>();
  impl->config = std::move(config);
  impl->user_agent = "direct-client " + std::to_string(::getpid());  // as Swift's direct_client
  proxy::InternalClient::Options options;
  options.user_agent = "Swift Container Reconciler";
  options.request_tries = impl->config.request_tries;
  options.use_replication_network = true;
  auto client = proxy::InternalClient::create(conf, options);
  if (!client.ok()) return client.status();
  impl->client = std::move(*client);
  ring::RingOptions ring_options;
  ring_options.reload_time = std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::duration<double>(impl->config.ring_check_interval));
  auto ring = ring::Ring::open(
      impl->config.swift_dir + "/container.ring.gz",
      {impl->config.swift.hash_path_prefix, impl->config.swift.hash_path_suffix}, ring_options);
  if (!ring.ok()) return ring.status();
  impl->container_ring = std::move(*ring);
  impl->last_stats_log = std::chrono::steady_clock::now();
  return std::unique_ptr<ContainerReconciler>(new ContainerReconciler(std::move(impl)));
}

ContainerReconciler::ContainerReconciler(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

ContainerReconciler::~ContainerReconciler() = default;

ReconcilerStats ContainerReconciler::run_once() {
  Impl& impl = *impl_;
  if (!impl.ioc) impl.ioc = std::make_unique<net::io_context>(1);
  // The pass on a thread of its own: the proxy's per-thread connection pools (and the
  // memcache client's) hold sockets of `ioc`, and go when that thread ends, before `ioc` does.
  std::thread runner([&impl] {
    impl.ioc->restart();
    impl.pool = std::make_unique<common::http::ConnectionPool>(impl.direct_options());
    common::spawn_logged(impl.ioc->get_executor(), [&impl]() -> net::awaitable<void> {
      co_await impl.pass();
    }, "container reconciler pass");
    impl.ioc->run();
    impl.pool.reset();
  });
  runner.join();
  impl.log_stats(true);
  ReconcilerStats out = impl.stats;
  return out;
}

void ContainerReconciler::run_forever(const std::atomic<bool>& stop) {
  impl_->stop = &stop;
  while (!stop.load()) {
    (void)run_once();
    impl_->stats.clear();
    char interval[32];
    std::snprintf(interval, sizeof interval, "%g", impl_->config.interval);
    APUS_LOG_INFO(std::string("sleeping between intervals (") + interval + "s)");
    common::sleep_until_or_stopped(common::seconds_from_now(impl_->config.interval), stop);
  }
}

}  // namespace apus::container
