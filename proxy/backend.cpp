#include "proxy/backend.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <numeric>
#include <random>

#include "common/async.h"
#include "common/config/config.h"
#include "common/http/swob.h"
#include "common/http/url.h"
#include "common/log/log.h"

namespace apus::proxy {

namespace net = boost::asio;
using common::http::HeaderMap;
using common::http::Response;
using Clock = std::chrono::steady_clock;
using common::Result;
using common::Status;

// ---- node health -----------------------------------------------------------------------------

std::string NodeHealth::key(const ring::Device& dev) {
  return dev.ip + ":" + std::to_string(dev.port) + "/" + dev.device;
}

bool NodeHealth::is_limited(const ring::Device& dev) {
  common::MutexLock lock(&mutex_);
  auto it = nodes_.find(key(dev));
  if (it == nodes_.end()) return false;
  auto age = std::chrono::duration<double>(Clock::now() - it->second.last).count();
  if (age > interval_) {
    nodes_.erase(it);
    return false;
  }
  return it->second.errors > limit_;
}

void NodeHealth::record_error(const ring::Device& dev) {
  common::MutexLock lock(&mutex_);
  Entry& e = nodes_[key(dev)];
  ++e.errors;
  e.last = Clock::now();
}

void NodeHealth::limit_now(const ring::Device& dev) {
  common::MutexLock lock(&mutex_);
  Entry& e = nodes_[key(dev)];
  e.errors = limit_ + 1;
  e.last = Clock::now();
}

void NodeHealth::record_timing(const ring::Device& dev, double seconds) {
  if (!keep_timings_) return;
  auto expires = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                    std::chrono::duration<double>(timing_expiry_));
  common::MutexLock lock(&mutex_);
  timings_[dev.ip] = Timing{std::round(seconds * 1000) / 1000, expires};
}

double NodeHealth::timing(const ring::Device& dev) {
  common::MutexLock lock(&mutex_);
  auto it = timings_.find(dev.ip);
  if (it == timings_.end() || it->second.expires <= Clock::now()) return -1;
  return it->second.seconds;
}

// ---- node order ------------------------------------------------------------------------------

namespace {

std::string trimmed(std::string_view v) {
  size_t b = v.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return {};
  size_t e = v.find_last_not_of(" \t\r\n");
  return std::string(v.substr(b, e - b + 1));
}

}  // namespace

Result<std::vector<AffinityRule>> parse_affinity(std::string_view value, bool with_priority) {
  std::vector<AffinityRule> rules;
  std::string whole = trimmed(value);
  if (whole.empty()) return rules;
  auto invalid = [&] {
    return Status::invalid_argument(std::string(with_priority ? "Invalid affinity value: "
                                                              : "Invalid write-affinity value: ") +
                                    "'" + whole + "'");
  };
  for (const std::string& piece : common::list_from_csv(whole)) {
    // r<region>[z<zone>][=<priority>], digits only, as Swift's regular expressions take them.
    size_t i = 0;
    auto number = [&](int64_t* out) {
      size_t begin = i;
      while (i < piece.size() && piece[i] >= '0' && piece[i] <= '9') ++i;
      if (i == begin || i - begin > 9) return false;
      (void)std::from_chars(piece.data() + begin, piece.data() + i, *out);  // at most 9 digits
      return true;
    };
    AffinityRule rule;
    int64_t n = 0;
    if (piece.empty() || piece[i++] != 'r' || !number(&n)) return invalid();
    rule.region = static_cast<int>(n);
    if (i < piece.size() && piece[i] == 'z') {
      ++i;
      if (!number(&n)) return invalid();
      rule.zone = static_cast<int>(n);
    }
    if (with_priority) {
      if (i >= piece.size() || piece[i++] != '=' || !number(&rule.priority)) return invalid();
    }
    if (i != piece.size()) return invalid();
    rules.push_back(rule);
  }
  std::stable_sort(rules.begin(), rules.end(), [](const AffinityRule& a, const AffinityRule& b) {
    return a.priority < b.priority;
  });
  return rules;
}

Result<NodeOrder> NodeOrder::from_config(const common::Section& s, const NodeOrder& base) {
  NodeOrder o = base;
  if (auto method = s.get("sorting_method")) {
    std::string m = common::http::to_lower(trimmed(*method));
    if (m == "shuffle") {
      o.sort = Sort::kShuffle;
    } else if (m == "timing") {
      o.sort = Sort::kTiming;
    } else if (m == "affinity") {
      o.sort = Sort::kAffinity;
    } else {
      return s.invalid("sorting_method", "must be one of affinity, shuffle, timing, not '" + m + "'");
    }
  }
  if (auto v = s.get("read_affinity")) {
    auto rules = parse_affinity(*v, true);
    if (!rules.ok()) return s.invalid("read_affinity", rules.status().message());
    o.read_affinity = std::move(*rules);
  }
  if (auto v = s.get("write_affinity")) {
    auto rules = parse_affinity(*v, false);
    if (!rules.ok()) return s.invalid("write_affinity", rules.status().message());
    o.write_affinity = std::move(*rules);
  }
  if (auto v = s.get("write_affinity_node_count")) {
    // "N" or "N * replicas", as Swift reads it.
    auto words = common::split_words(common::http::to_lower(*v));
    bool ok = (words.size() == 1 || (words.size() == 3 && words[1] == "*" &&
                                     words[2] == "replicas")) &&
              !words[0].empty() &&
              words[0].find_first_not_of("0123456789") == std::string::npos &&
              words[0].size() < 10;
    if (!ok) {
      return s.invalid("write_affinity_node_count", "must be N or N * replicas, not '" + *v + "'");
    }
    (void)std::from_chars(words[0].data(), words[0].data() + words[0].size(),
                          o.write_affinity_node_count);  // checked above: 1 to 9 digits
    o.write_affinity_node_count_times_replicas = words.size() == 3;
  }
  if (auto v = s.get("write_affinity_handoff_delete_count")) {
    std::string t = common::http::to_lower(trimmed(*v));
    if (t == "auto") {
      o.write_affinity_handoff_delete_count.reset();
    } else {
      auto n = s.get_int("write_affinity_handoff_delete_count", 0);
      if (!n.ok() || *n < 0) {
        return s.invalid("write_affinity_handoff_delete_count", "must be auto or a count");
      }
      o.write_affinity_handoff_delete_count = *n;
    }
  }
  return o;
}

bool NodeOrder::write_local(const ring::Device& dev) const {
  return std::any_of(write_affinity.begin(), write_affinity.end(),
                     [&](const AffinityRule& r) { return r.matches(dev); });
}

size_t NodeOrder::local_node_count(size_t replicas) const {
  int64_t n = write_affinity_node_count *
              (write_affinity_node_count_times_replicas ? static_cast<int64_t>(replicas) : 1);
  return static_cast<size_t>(std::max<int64_t>(0, n));
}

void NodeOrder::sort_nodes(std::vector<const ring::Device*>& nodes, NodeHealth& health) const {
  // Shuffled first, so that equal keys (timings within a millisecond, one affinity tier)
  // spread the load; the sorts are stable.
  thread_local std::mt19937 rng(std::random_device{}());
  std::shuffle(nodes.begin(), nodes.end(), rng);
  if (sort == Sort::kTiming) {
    std::vector<std::pair<double, const ring::Device*>> keyed;
    for (const ring::Device* d : nodes) keyed.emplace_back(health.timing(*d), d);
    std::stable_sort(keyed.begin(), keyed.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    for (size_t i = 0; i < nodes.size(); ++i) nodes[i] = keyed[i].second;
  } else if (sort == Sort::kAffinity) {
    auto key = [this](const ring::Device* d) {
      for (const AffinityRule& r : read_affinity) {
        if (r.matches(*d)) return r.priority;
      }
      return int64_t{1} << 32;  // after every listed tier
    };
    std::stable_sort(nodes.begin(), nodes.end(),
                     [&](const ring::Device* a, const ring::Device* b) { return key(a) < key(b); });
  }
}

// ---- node iteration --------------------------------------------------------------------------

NodeIter::NodeIter(const ring::Ring& ring, uint32_t partition, size_t limit, NodeHealth& health,
                   const NodeOrder& order, Purpose purpose, HandoffLog* handoff_log)
    : primaries_(ring.get_part_nodes(partition)),
      limit_(limit),
      health_(health),
      handoff_log_(handoff_log) {
  const size_t replicas = primaries_.nodes.size();
  request_count_ = replicas;
  handoffs_.emplace(ring.get_more_nodes(partition));
  // The nodes given before the rest of the ring: under write affinity, the preferred local
  // ones (computed on a look-ahead of the ring's order, as Swift does).
  if (purpose == Purpose::kWrite && !order.write_affinity.empty()) {
    const size_t wanted = order.local_node_count(replicas);
    NodeRef n;
    while (queue_.size() < wanted && next_in_ring(&n)) {
      if (order.write_local(*n.device)) queue_.push_back(n);
    }
    next_primary_ = 0;
    handoffs_.emplace(ring.get_more_nodes(partition));
  } else if (purpose == Purpose::kDelete && !order.write_affinity.empty()) {
    size_t local_primaries = 0;
    for (const auto& p : primaries_.nodes) {
      queue_.push_back(NodeRef{p.device, true});
      local_primaries += order.write_local(*p.device);
    }
    size_t extra = order.write_affinity_handoff_delete_count
                       ? static_cast<size_t>(*order.write_affinity_handoff_delete_count)
                       : replicas - local_primaries;
    next_primary_ = replicas;  // the primaries are queued; look at handoffs only
    ring::Node h;
    std::vector<NodeRef> local_handoffs;
    while (local_handoffs.size() < extra && handoffs_->next(&h)) {
      if (order.write_local(*h.device)) local_handoffs.push_back(NodeRef{h.device, false});
    }
    queue_.insert(queue_.end(), local_handoffs.begin(), local_handoffs.end());
    request_count_ = queue_.size();
    next_primary_ = 0;
    handoffs_.emplace(ring.get_more_nodes(partition));
  }
  // The first `replicas` nodes go in the NodeOrder's order (Swift sorts exactly those).
  NodeRef n;
  while (queue_.size() < replicas && next_in_ring(&n)) queue_.push_back(n);
  std::vector<const ring::Device*> first;
  for (size_t i = 0; i < replicas && i < queue_.size(); ++i) first.push_back(queue_[i].device);
  order.sort_nodes(first, health_);
  for (size_t i = 0; i < first.size(); ++i) {
    queue_[i].device = first[i];
    queue_[i].primary = std::any_of(primaries_.nodes.begin(), primaries_.nodes.end(),
                                    [&](const ring::Node& p) { return p.device == first[i]; });
  }
}

bool NodeIter::queued(const ring::Device* dev) const {
  return std::any_of(queue_.begin(), queue_.end(),
                     [dev](const NodeRef& q) { return q.device == dev; });
}

bool NodeIter::next_in_ring(NodeRef* out) {
  while (next_primary_ < primaries_.nodes.size()) {
    const ring::Device* dev = primaries_.nodes[next_primary_++].device;
    if (queued(dev)) continue;
    *out = NodeRef{dev, true};
    return true;
  }
  ring::Node n;
  while (handoffs_ && handoffs_->next(&n)) {
    if (queued(n.device)) continue;
    *out = NodeRef{n.device, false};
    return true;
  }
  return false;
}

bool NodeIter::next(NodeRef* out) {
  const size_t replicas = primaries_.nodes.size();
  // As Swift's generator does when it resumes: the node given last does not use up a place
  // when it got error-limited meanwhile (another node takes its place).
  if (last_given_ != nullptr && health_.is_limited(*last_given_)) --given_;
  last_given_ = nullptr;
  while (given_ < limit_) {
    NodeRef n;
    // As in Swift, a "handoff" is any node after the first `replicas` places of the order
    // (under write affinity those places may hold local handoffs).
    bool handoff = true;
    if (next_queued_ < queue_.size()) {
      handoff = next_queued_ >= replicas;
      n = queue_[next_queued_++];
    } else if (!next_in_ring(&n)) {
      return false;
    }
    if (health_.is_limited(*n.device)) continue;
    ++given_;
    last_given_ = n.device;
    if (handoff) count_handoff();
    *out = n;
    return true;
  }
  return false;
}

void NodeIter::count_handoff() {
  ++handoffs_given_;
  const size_t replicas = primaries_.nodes.size();
  // The handoffs a request may use with every primary up: its node count less the replicas.
  const size_t expected = limit_ > replicas ? limit_ - replicas : 0;
  if (handoff_log_ == nullptr || handoffs_given_ <= expected) return;
  handoff_log_->extra_handoff(handoffs_given_, handoffs_given_ - expected == replicas);
}

// ---- single requests -------------------------------------------------------------------------

size_t max_listing_body(const common::Constraints& c) {
  // Per row: the JSON punctuation, "hash" (32), "last_modified" (26), "bytes" (20 digits) and
  // their names take under 256 bytes; name and content type at most six bytes per byte.
  constexpr int64_t kEscapeFactor = 6;
  constexpr int64_t kFixedRowBytes = 256;
  auto page = [&](int64_t rows, int64_t name_bytes) {
    int64_t row = kEscapeFactor * (std::max<int64_t>(0, name_bytes) +
                                   std::max<int64_t>(0, c.max_header_size)) +
                  kFixedRowBytes;
    return std::max<int64_t>(1, rows) * row + 2;
  };
  int64_t most = std::max(page(c.container_listing_limit, c.max_object_name_length),
                          page(c.account_listing_limit, c.max_container_name_length));
  return static_cast<size_t>(std::max<int64_t>(most, int64_t{16} << 20));
}

namespace {

// "Account", "Container" or "Object" for a backend path "/part/account[/container[/object]]"
// (a listing's query, which may hold '/' in its prefix, does not count).
std::string_view server_type_of(std::string_view path) {
  path = path.substr(0, path.find('?'));
  size_t slashes = std::count(path.begin(), path.end(), '/');
  if (slashes <= 2) return "Account";
  return slashes == 3 ? "Container" : "Object";
}

}  // namespace

void log_node_error(std::string_view server_type, const ring::Device& device,
                    const std::string& what) {
  APUS_LOG_ERROR("ERROR with " + std::string(server_type) + " server " + device.ip + ":" +
                 std::to_string(device.port) + "/" + device.device + " re: " + what);
}

net::awaitable<BackendResponse> request_node(const BackendOptions& options, NodeHealth& health,
                                             const ring::Device& device, const std::string& method,
                                             const std::string& path, const HeaderMap& headers,
                                             const std::string& body) {
  common::http::ClientOptions client_options;
  client_options.conn_timeout = options.conn_timeout;
  client_options.node_timeout = options.node_timeout;
  auto& pool = common::http::ConnectionPool::for_this_thread();
  common::http::ClientRequest req;
  req.method = method;
  req.target = "/" + common::http::quote(device.device) + path;
  req.headers = headers;
  req.content_length = body.size();
  BackendResponse out;
  auto start = Clock::now();
  const NodeAddress to = node_address(device, headers);
  auto resp = co_await common::http::simple_request(pool, client_options, to.ip, to.port,
                                                    std::move(req), body, options.max_body);
  if (!resp.ok() && resp.status().code() == Status::Code::kInvalidArgument) {
    // Too long for max_body (or no address): a limit of ours, not a fault of the node, which
    // must not be error-limited for every account over one answer.
    APUS_LOG_WARNING("answer of " + device.ip + ":" + std::to_string(device.port) + "/" +
                     device.device + " to " + method + " " + path + " not taken: " +
                     resp.status().to_string());
    co_return out;
  }
  if (!resp.ok()) {
    health.record_error(device);
    // An error, as Swift logs it: the request goes to another node, and an operator needs to
    // see which node failed and how (a node that keeps failing is error-limited and skipped,
    // so a dead node costs error_suppression_limit lines per error_suppression_interval).
    log_node_error(server_type_of(path), device,
                   "Trying to " + method + " " + path + ": " + resp.status().to_string());
    co_return out;
  }
  health.record_timing(device, std::chrono::duration<double>(Clock::now() - start).count());
  out.status = resp->head.status;
  out.headers = std::move(resp->head.headers);
  out.body = std::move(resp->body);
  if (out.status == 507) {
    health.limit_now(device);
  } else if (out.status >= 500) {
    health.record_error(device);
  }
  co_return out;
}

// ---- make_requests ---------------------------------------------------------------------------

bool have_quorum(const std::vector<int>& statuses, size_t quorum) {
  if (statuses.size() < quorum) return false;
  for (int hundred : {100, 200, 300, 400}) {
    size_t n = std::count_if(statuses.begin(), statuses.end(),
                             [&](int s) { return s >= hundred && s < hundred + 100; });
    if (n >= quorum) return true;
  }
  return false;
}

namespace {

// What the concurrent requests share; it outlives make_requests() when stragglers are left
// behind after a quorum (they finish into it and nobody reads it).
struct Fanout {
  Fanout(net::any_io_executor ex, NodeIter it) : nodes(std::move(it)), done(ex) {}
  NodeIter nodes;
  std::vector<BackendResponse> answers;
  std::vector<int> statuses;
  size_t running = 0;
  net::steady_timer done;  // cancelled by each request that finishes
};

}  // namespace

net::awaitable<std::vector<BackendResponse>> make_requests(
    const BackendOptions& options, NodeHealth& health, NodeIter nodes,
    const std::string& method, const std::string& path_after_part, const HeadersFor& headers_for,
    const std::string& body) {
  auto ex = co_await net::this_coro::executor;
  const size_t n = nodes.request_count();
  const size_t quorum = quorum_size(nodes.primary_count());
  std::string path = "/" + std::to_string(nodes.partition()) + path_after_part;
  auto state = std::make_shared<Fanout>(ex, std::move(nodes));
  for (size_t i = 0; i < n; ++i) {
    ++state->running;
    HeaderMap headers = headers_for(i);
    common::spawn_logged(
        ex,
        [state, &options, &health, method, path, headers, body]() -> net::awaitable<void> {
          BackendResponse answer;
          NodeRef node;
          // One node at a time until one gives a real answer (not 1xx or 5xx).
          while (state->nodes.next(&node)) {
            answer = co_await request_node(options, health, *node.device, method, path,
                                           headers, body);
            answer.from_primary = node.primary;
            if (answer.status >= 200 && answer.status < 500) break;
            answer = BackendResponse();
          }
          if (answer.status != 0) {
            state->statuses.push_back(answer.status);
            state->answers.push_back(std::move(answer));
          }
          --state->running;
          state->done.cancel();  // wake make_requests() to look again
        },
        "backend " + method + " " + path,
        [state] {
          --state->running;
          state->done.cancel();
        });
  }
  // Wait for every answer, or for post_quorum_timeout once a quorum agrees. Only this
  // coroutine sets the timer; the requests merely cancel it to wake it up. (The options and
  // health outlive any straggler left behind: both belong to the proxy app.)
  auto deadline = Clock::time_point::max();
  for (;;) {
    if (state->running == 0) break;
    if (deadline == Clock::time_point::max() && have_quorum(state->statuses, quorum)) {
      deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                    std::chrono::duration<double>(options.post_quorum_timeout));
    }
    if (Clock::now() >= deadline) break;
    state->done.expires_at(deadline);
    auto [ec] = co_await state->done.async_wait(net::as_tuple(net::use_awaitable));
    (void)ec;
  }
  std::vector<BackendResponse> out = state->answers;
  while (out.size() < n) {
    BackendResponse missing;
    missing.status = 503;
    out.push_back(std::move(missing));
  }
  co_return out;
}

Response best_response(const std::vector<BackendResponse>& answers, size_t node_count) {
  size_t quorum = quorum_size(node_count ? node_count : answers.size());
  for (int hundred : {200, 300, 400}) {
    const BackendResponse* best = nullptr;
    size_t count = 0;
    for (const auto& a : answers) {
      if (a.status < hundred || a.status >= hundred + 100) continue;
      ++count;
      if (!best || a.status > best->status) best = &a;
    }
    if (count >= quorum && best) {
      Response r = common::http::swob_response(best->status);
      r.body = best->body;
      for (const auto& [name, value] : best->headers) {
        if (common::http::iequals(name, "etag")) {
          std::string v(value);
          v.erase(std::remove(v.begin(), v.end(), '"'), v.end());
          r.headers.set(name, v);
        } else if (!common::http::iequals(name, "date") &&
                   !common::http::iequals(name, "content-length") &&
                   !common::http::iequals(name, "content-type") &&
                   !common::http::iequals(name, "connection") &&
                   !common::http::iequals(name, "x-put-timestamp") &&
                   !common::http::iequals(name, "x-delete-after")) {
          r.headers.set(name, value);
        }
      }
      return r;
    }
  }
  return common::http::swob_response(503);
}

common::Timestamp source_timestamp(const HeaderMap& headers) {
  for (const char* name :
       {"X-Backend-Data-Timestamp", "X-Backend-Timestamp", "X-Put-Timestamp", "X-Timestamp"}) {
    std::string_view v = headers.get_or(name, "");
    if (!v.empty()) return common::timestamp_or_zero(v);
  }
  return common::Timestamp();
}

NodeAddress node_address(const ring::Device& device, const HeaderMap& request) {
  if (common::config_true_value(request.get_or("X-Backend-Use-Replication-Network", ""))) {
    return {device.replication_ip, static_cast<uint16_t>(device.replication_port)};
  }
  return {device.ip, static_cast<uint16_t>(device.port)};
}

HeaderMap backend_headers(const common::http::Request& client, const std::string& trans_id) {
  HeaderMap h;
  // Room for the client's headers too: an object GET or HEAD adds them all next, and growing
  // the map one doubling at a time cost a handful of allocations per request.
  h.reserve(client.headers.size() + 4);
  h.set("X-Trans-Id", trans_id);
  // Swift's backend_user_agent; the pid asked once (a getpid() per request showed in strace).
  static const std::string user_agent = "proxy-server " + std::to_string(::getpid());
  h.set("User-Agent", user_agent);
  h.set("Referer", common::http::as_referer(client));
  for (const auto& [name, value] : client.headers) {
    if (common::http::istarts_with(name, "x-backend-")) h.set(name, value);
  }
  return h;
}

}  // namespace apus::proxy
