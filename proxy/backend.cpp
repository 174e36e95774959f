#include "proxy/backend.h"

#include <unistd.h>

#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <numeric>
#include <random>

#include "common/http/swob.h"
#include "common/http/url.h"
#include "common/log/log.h"

namespace apus::proxy {

namespace net = boost::asio;
using common::http::HeaderMap;
using common::http::Response;
using Clock = std::chrono::steady_clock;

// ---- error limiting --------------------------------------------------------------------------

std::string ErrorLimiter::key(const ring::Device& dev) {
  return dev.ip + ":" + std::to_string(dev.port) + "/" + dev.device;
}

bool ErrorLimiter::is_limited(const ring::Device& dev) {
  std::lock_guard lock(mutex_);
  auto it = nodes_.find(key(dev));
  if (it == nodes_.end()) return false;
  auto age = std::chrono::duration<double>(Clock::now() - it->second.last).count();
  if (age > interval_) {
    nodes_.erase(it);
    return false;
  }
  return it->second.errors > limit_;
}

void ErrorLimiter::record_error(const ring::Device& dev) {
  std::lock_guard lock(mutex_);
  Entry& e = nodes_[key(dev)];
  ++e.errors;
  e.last = Clock::now();
}

void ErrorLimiter::limit_now(const ring::Device& dev) {
  std::lock_guard lock(mutex_);
  Entry& e = nodes_[key(dev)];
  e.errors = limit_ + 1;
  e.last = Clock::now();
}

// ---- node iteration --------------------------------------------------------------------------

NodeIter::NodeIter(const ring::Ring& ring, uint32_t partition, size_t limit,
                   ErrorLimiter& limiter, bool shuffle)
    : primaries_(ring.get_part_nodes(partition)), limit_(limit), limiter_(limiter) {
  order_.resize(primaries_.nodes.size());
  std::iota(order_.begin(), order_.end(), 0);
  if (shuffle) {
    thread_local std::mt19937 rng(std::random_device{}());
    std::shuffle(order_.begin(), order_.end(), rng);
  }
  handoffs_.emplace(ring.get_more_nodes(partition));
}

bool NodeIter::next(NodeRef* out) {
  while (given_ < limit_) {
    if (next_primary_ < order_.size()) {
      const ring::Device* dev = primaries_.nodes[order_[next_primary_++]].device;
      if (limiter_.is_limited(*dev)) continue;
      ++given_;
      *out = NodeRef{dev, true};
      return true;
    }
    ring::Node n;
    if (!handoffs_ || !handoffs_->next(&n)) return false;
    if (limiter_.is_limited(*n.device)) continue;
    ++given_;
    *out = NodeRef{n.device, false};
    return true;
  }
  return false;
}

// ---- single requests -------------------------------------------------------------------------

net::awaitable<BackendResponse> request_node(const BackendOptions& options, ErrorLimiter& limiter,
                                             const ring::Device& device, const std::string& method,
                                             const std::string& path, const HeaderMap& headers,
                                             const std::string& body) {
  common::http::ClientOptions client_options;
  client_options.conn_timeout = options.conn_timeout;
  client_options.node_timeout = options.node_timeout;
  auto& pool = common::http::ConnectionPool::for_this_thread(client_options);
  common::http::ClientRequest req;
  req.method = method;
  req.target = "/" + common::http::quote(device.device) + path;
  req.headers = headers;
  req.content_length = body.size();
  BackendResponse out;
  auto resp = co_await common::http::simple_request(
      pool, device.ip, static_cast<uint16_t>(device.port), std::move(req), body, options.max_body);
  if (!resp.ok()) {
    limiter.record_error(device);
    APUS_LOG_DEBUG("ERROR with server " + device.ip + ":" + std::to_string(device.port) + "/" +
                   device.device + " trying to " + method + " " + path + ": " +
                   resp.status().to_string());
    co_return out;
  }
  out.status = resp->head.status;
  out.headers = std::move(resp->head.headers);
  out.body = std::move(resp->body);
  if (out.status == 507) {
    limiter.limit_now(device);
  } else if (out.status >= 500) {
    limiter.record_error(device);
  }
  co_return out;
}

// ---- make_requests ---------------------------------------------------------------------------

namespace {

bool have_quorum(const std::vector<int>& statuses, size_t quorum) {
  if (statuses.size() < quorum) return false;
  for (int hundred : {100, 200, 300, 400}) {
    size_t n = std::count_if(statuses.begin(), statuses.end(),
                             [&](int s) { return s >= hundred && s < hundred + 100; });
    if (n >= quorum) return true;
  }
  return false;
}

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
    const BackendOptions& options, ErrorLimiter& limiter, NodeIter nodes,
    const std::string& method, const std::string& path_after_part, const HeadersFor& headers_for,
    const std::string& body) {
  auto ex = co_await net::this_coro::executor;
  const size_t n = nodes.primary_count();
  const size_t quorum = quorum_size(n);
  std::string path = "/" + std::to_string(nodes.partition()) + path_after_part;
  auto state = std::make_shared<Fanout>(ex, std::move(nodes));
  for (size_t i = 0; i < n; ++i) {
    ++state->running;
    HeaderMap headers = headers_for(i);
    net::co_spawn(
        ex,
        [state, &options, &limiter, method, path, headers, body]() -> net::awaitable<void> {
          BackendResponse answer;
          NodeRef node;
          // One node at a time until one gives a real answer (not 1xx or 5xx).
          while (state->nodes.next(&node)) {
            answer = co_await request_node(options, limiter, *node.device, method, path,
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
        net::detached);
  }
  // Wait for every answer, or for post_quorum_timeout once a quorum agrees. Only this
  // coroutine sets the timer; the requests merely cancel it to wake it up. (The options and
  // limiter outlive any straggler left behind: both belong to the proxy app.)
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

HeaderMap backend_headers(const common::http::Request& client, const std::string& trans_id) {
  HeaderMap h;
  h.set("X-Trans-Id", trans_id);
  h.set("User-Agent", "proxy-server " + std::to_string(::getpid()));
  h.set("Referer", common::http::as_referer(client));
  for (const auto& [name, value] : client.headers) {
    if (common::http::istarts_with(name, "x-backend-")) h.set(name, value);
  }
  return h;
}

}  // namespace apus::proxy
