// How the proxy reaches storage servers: node order, error limiting, and Swift's rules for
// turning several backend answers into one (swift-protocol.md §12.1-12.4).
//
// Thread-safety: ErrorLimiter is thread-safe (one per proxy process, shared by workers).
// NodeIter and the request helpers belong to one request on one worker thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/awaitable.hpp>

#include "common/http/client.h"
#include "common/http/headers.h"
#include "common/http/server.h"
#include "ring/ring.h"

namespace apus::proxy {

// Swift's quorum_size(): (n + 1) / 2 for replicated writes and account/container requests.
inline size_t quorum_size(size_t n) { return (n + 1) / 2; }

// Counts node errors; a node with more than `limit` errors, the last within `interval`
// seconds, is skipped (Swift's error_suppression_limit/_interval). A 507 limits at once.
class ErrorLimiter {
 public:
  ErrorLimiter(int limit, double interval_seconds) : limit_(limit), interval_(interval_seconds) {}
  bool is_limited(const ring::Device& dev);
  void record_error(const ring::Device& dev);
  void limit_now(const ring::Device& dev);

 private:
  struct Entry {
    int errors = 0;
    std::chrono::steady_clock::time_point last;
  };
  static std::string key(const ring::Device& dev);
  int limit_;
  double interval_;
  std::mutex mutex_;
  std::map<std::string, Entry> nodes_;  // GUARDED_BY(mutex_)
};

// One node to try: a device and whether it is a primary.
struct NodeRef {
  const ring::Device* device = nullptr;
  bool primary = true;
};

// Swift's node iterator: the primaries (shuffled), then handoffs, at most `limit` nodes in all,
// error-limited ones skipped. Holds the ring state its devices point into.
class NodeIter {
 public:
  NodeIter(const ring::Ring& ring, uint32_t partition, size_t limit, ErrorLimiter& limiter,
           bool shuffle = true);
  // The next node, or false when none is left.
  bool next(NodeRef* out);
  size_t primary_count() const { return primaries_.nodes.size(); }
  uint32_t partition() const { return primaries_.partition; }
  // The primaries in ring order (for X-Container-Host and the like).
  const ring::NodeList& primaries() const { return primaries_; }

 private:
  ring::NodeList primaries_;
  std::vector<size_t> order_;
  size_t next_primary_ = 0;
  std::optional<ring::HandoffIterator> handoffs_;
  size_t limit_;
  size_t given_ = 0;
  ErrorLimiter& limiter_;
};

// One answer from a storage server, read whole (account and container answers, errors).
struct BackendResponse {
  int status = 0;  // 0: no answer (connection failure or timeout)
  common::http::HeaderMap headers;
  std::string body;
  bool from_primary = true;
};

struct BackendOptions {
  double conn_timeout = 0.5;
  double node_timeout = 10;
  double post_quorum_timeout = 0.5;
  size_t max_body = 16 << 20;  // listing pages can be a few MiB
};

// Sends one request to one node and reads the whole answer. Connection trouble, timeouts and
// 5xx count against the node in `limiter` (507 limits it at once).
boost::asio::awaitable<BackendResponse> request_node(const BackendOptions& options,
                                                     ErrorLimiter& limiter,
                                                     const ring::Device& device,
                                                     const std::string& method,
                                                     const std::string& path,
                                                     const common::http::HeaderMap& headers,
                                                     const std::string& body = {});

// Swift's make_requests(): the same request to the partition's primaries at once, each failing
// over to the next handoff on no answer or 5xx, until a quorum agrees or every node answered
// (post_quorum_timeout after a quorum). `headers_for(i)` gives the headers of the i-th request
// (container updates differ per node). Returns the answers, one per primary.
using HeadersFor = std::function<common::http::HeaderMap(size_t index)>;
boost::asio::awaitable<std::vector<BackendResponse>> make_requests(
    const BackendOptions& options, ErrorLimiter& limiter, NodeIter nodes,
    const std::string& method, const std::string& path_after_part, const HeadersFor& headers_for,
    const std::string& body = {});

// Swift's best_response(): for 2xx, 3xx and 4xx in that order, the highest status of the first
// class holding a quorum of `node_count` answers, with that answer's headers and body; else
// 503. A 404 from a handoff without X-Backend-Timestamp does not count.
common::http::Response best_response(const std::vector<BackendResponse>& answers,
                                     size_t node_count);

// Headers every backend request carries (X-Trans-Id, User-Agent, Referer...), from the client
// request.
common::http::HeaderMap backend_headers(const common::http::Request& client,
                                        const std::string& trans_id);

}  // namespace apus::proxy
