// How the proxy reaches storage servers: node order, error limiting, and Swift's rules for
// turning several backend answers into one (swift-protocol.md §12.1-12.4).
//
// Thread-safety: NodeHealth is thread-safe (one per proxy process, shared by workers).
// NodeIter and the request helpers belong to one request on one worker thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/awaitable.hpp>

#include "common/config/config.h"
#include "common/constraints.h"
#include "common/http/client.h"
#include "common/http/headers.h"
#include "common/http/server.h"
#include "common/thread_annotations.h"
#include "common/timestamp.h"
#include "ring/ring.h"

namespace apus::proxy {

// Swift's quorum_size(): (n + 1) / 2 for replicated writes and account/container requests.
inline size_t quorum_size(size_t n) { return (n + 1) / 2; }

// What a proxy knows of each node, shared by all its requests: error counts (Swift's
// error_suppression_limit/_interval: a node with more than `limit` errors, the last within
// `interval` seconds, is skipped; a 507 limits it at once) and, for sorting_method = timing,
// the last connect time seen for each node's IP, kept for `timing_expiry` seconds.
class NodeHealth {
 public:
  NodeHealth(int limit, double interval_seconds, double timing_expiry_seconds = 300,
             bool keep_timings = false)
      : limit_(limit),
        interval_(interval_seconds),
        timing_expiry_(timing_expiry_seconds),
        keep_timings_(keep_timings) {}
  bool is_limited(const ring::Device& dev) APUS_EXCLUDES(mutex_);
  void record_error(const ring::Device& dev) APUS_EXCLUDES(mutex_);
  void limit_now(const ring::Device& dev) APUS_EXCLUDES(mutex_);
  // Remembers how long reaching `dev` took (rounded to the millisecond, as Swift sorts
  // them); a no-op unless timings are kept.
  void record_timing(const ring::Device& dev, double seconds) APUS_EXCLUDES(mutex_);
  // The timing of dev's IP, or -1 when there is none or it expired (Swift tries those first).
  double timing(const ring::Device& dev) APUS_EXCLUDES(mutex_);

 private:
  struct Entry {
    int errors = 0;
    std::chrono::steady_clock::time_point last;
  };
  struct Timing {
    double seconds = 0;
    std::chrono::steady_clock::time_point expires;
  };
  static std::string key(const ring::Device& dev);
  int limit_;
  double interval_;
  double timing_expiry_;
  bool keep_timings_;
  common::Mutex mutex_;
  std::map<std::string, Entry> nodes_ APUS_GUARDED_BY(mutex_);
  std::map<std::string, Timing> timings_ APUS_GUARDED_BY(mutex_);  // by IP
};

// One piece of Swift's affinity settings: region N, or region N zone M, with a priority
// (read_affinity "r1=100, r2z1=200"; write_affinity "r1, r2z1" has none).
struct AffinityRule {
  int region = 0;
  std::optional<int> zone;
  int64_t priority = 0;
  bool matches(const ring::Device& dev) const {
    return dev.region == region && (!zone || dev.zone == *zone);
  }
};

// How a proxy orders the nodes it asks, as Swift's per-policy proxy options have it:
// sorting_method (shuffle, timing or affinity by read_affinity) for the primaries, and
// write_affinity, which sends object writes to `write_affinity_node_count` local nodes
// (primaries or handoffs) first.
struct NodeOrder {
  enum class Sort { kShuffle, kTiming, kAffinity };
  Sort sort = Sort::kShuffle;
  std::vector<AffinityRule> read_affinity;   // by priority
  std::vector<AffinityRule> write_affinity;  // empty: no write affinity
  int64_t write_affinity_node_count = 2;     // times the replicas when `_times_replicas`
  bool write_affinity_node_count_times_replicas = true;
  std::optional<int64_t> write_affinity_handoff_delete_count;  // nullopt: "auto"

  // Reads sorting_method, read_affinity, write_affinity, write_affinity_node_count and
  // write_affinity_handoff_delete_count from `s`, starting from `base` (the app's options,
  // for a [proxy-server:policy:N] section). InvalidArgument naming the bad value.
  static common::Result<NodeOrder> from_config(const common::Section& s, const NodeOrder& base);
  bool write_local(const ring::Device& dev) const;
  size_t local_node_count(size_t replicas) const;
  // Shuffles `nodes`, then sorts them by timing or read affinity (Swift's sort_nodes).
  void sort_nodes(std::vector<const ring::Device*>& nodes, NodeHealth& health) const;
};

// Parses "r1=100, r2z1=200" (with priorities) or "r1, r2z1" (without); InvalidArgument
// quoting the value otherwise.
common::Result<std::vector<AffinityRule>> parse_affinity(std::string_view value,
                                                         bool with_priority);

// One node to try: a device and whether it is one of the partition's primaries.
struct NodeRef {
  const ring::Device* device = nullptr;
  bool primary = true;
};

// Told when a request goes to more handoffs than its node count plans for, which means some
// primary was skipped as error-limited (Swift's NodeIter.log_handoffs). `all_primaries` says
// every primary was skipped.
class HandoffLog {
 public:
  virtual ~HandoffLog() = default;
  virtual void extra_handoff(size_t handoffs, bool all_primaries) = 0;
};

// Swift's node iterator: first as many nodes as the ring has replicas, in the order of the
// NodeOrder, then the others one by one, at most `limit` nodes in all, error-limited ones
// skipped; a node error-limited by the time the next one is asked for gives its place to
// another. For reads and for writes without write affinity, the first nodes are the
// primaries and the others the handoffs. Under write affinity, a write's first nodes are the
// first local ones among primaries and handoffs, and a DELETE goes to the primaries and as many
// local handoffs as there are remote primaries. Holds the ring state its devices point into.
class NodeIter {
 public:
  enum class Purpose { kRead, kWrite, kDelete };
  NodeIter(const ring::Ring& ring, uint32_t partition, size_t limit, NodeHealth& health,
           const NodeOrder& order, Purpose purpose = Purpose::kRead,
           HandoffLog* handoff_log = nullptr);
  // The next node, or false when none is left.
  bool next(NodeRef* out);
  size_t primary_count() const { return primaries_.nodes.size(); }
  // How many nodes a request goes to at once: the replicas, plus the local handoffs of a
  // DELETE under write affinity.
  size_t request_count() const { return request_count_; }
  uint32_t partition() const { return primaries_.partition; }
  // The primaries in ring order (for X-Container-Host and the like).
  const ring::NodeList& primaries() const { return primaries_; }

 private:
  // The next node of primaries-then-handoffs not already queued.
  bool next_in_ring(NodeRef* out);
  bool queued(const ring::Device* dev) const;
  void count_handoff();

  ring::NodeList primaries_;
  std::vector<NodeRef> queue_;  // the nodes given first, in order
  size_t next_queued_ = 0;
  size_t next_primary_ = 0;
  std::optional<ring::HandoffIterator> handoffs_;
  size_t request_count_ = 0;
  size_t limit_;
  size_t given_ = 0;
  const ring::Device* last_given_ = nullptr;
  size_t handoffs_given_ = 0;  // nodes given after the first `replicas` places
  NodeHealth& health_;
  HandoffLog* handoff_log_;
};

// One answer from a storage server, read whole (account and container answers, errors).
struct BackendResponse {
  int status = 0;  // 0: no answer (connection failure or timeout)
  common::http::HeaderMap headers;
  std::string body;
  bool from_primary = true;
};

// The largest account or container listing page a well-formed backend answer can hold under
// `c`: a full page (container_listing_limit or account_listing_limit rows) of the longest
// rows. A row's name (max_object_name_length) and content type (a header, max_header_size)
// may take six bytes per byte once JSON-escaped (\u00XX), plus the fixed fields. With Swift's
// defaults that is about 530 MiB; Swift's proxy holds a listing page whole too
// (listing_formats).
size_t max_listing_body(const common::Constraints& c);

struct BackendOptions {
  double conn_timeout = 0.5;
  double node_timeout = 10;
  double post_quorum_timeout = 0.5;
  // The largest answer read whole: max_listing_body() of the proxy's constraints.
  size_t max_body = max_listing_body(common::Constraints{});
};

// Logs a failed request to a storage node as Swift's proxy words it, at ERROR:
// "ERROR with <server_type> server <ip>:<port>/<device> re: <what>".
void log_node_error(std::string_view server_type, const ring::Device& device,
                    const std::string& what);

// Sends one request to one node and reads the whole answer. Connection trouble, timeouts and
// 5xx count against the node in `health` (507 limits it at once); the time to the answer is
// its timing. An answer longer than options.max_body is not the node's fault: it gives no
// answer (status 0) but counts nothing against the node.
boost::asio::awaitable<BackendResponse> request_node(const BackendOptions& options,
                                                     NodeHealth& health,
                                                     const ring::Device& device,
                                                     const std::string& method,
                                                     const std::string& path,
                                                     const common::http::HeaderMap& headers,
                                                     const std::string& body = {});

// Swift's make_requests(): the same request to the partition's primaries at once, each failing
// over to the next handoff on no answer or 5xx, until a quorum agrees or every node answered
// (post_quorum_timeout after a quorum of the primaries). `headers_for(i)` gives the headers of
// the i-th request (container updates differ per node). Returns the answers, one per request
// (nodes.request_count()).
using HeadersFor = std::function<common::http::HeaderMap(size_t index)>;
boost::asio::awaitable<std::vector<BackendResponse>> make_requests(
    const BackendOptions& options, NodeHealth& health, NodeIter nodes,
    const std::string& method, const std::string& path_after_part, const HeadersFor& headers_for,
    const std::string& body = {});

// Swift's have_quorum(): `quorum` answers of one class (1xx, 2xx, 3xx or 4xx) among `statuses`.
bool have_quorum(const std::vector<int>& statuses, size_t quorum);

// Swift's best_response(): for 2xx, 3xx and 4xx in that order, the highest status of the first
// class holding a quorum of `node_count` answers, with that answer's headers and body; else
// 503. A 404 from a handoff without X-Backend-Timestamp does not count.
common::http::Response best_response(const std::vector<BackendResponse>& answers,
                                     size_t node_count);

// Swift's source_key(): how new an answer is, from X-Backend-Data-Timestamp,
// X-Backend-Timestamp, X-Put-Timestamp or X-Timestamp (the first present); 0 without.
common::Timestamp source_timestamp(const common::http::HeaderMap& headers);

// Where a backend request goes: the device's replication address when the request carries
// X-Backend-Use-Replication-Network: true (Swift's internal clients on the replication
// network, such as the container reconciler), else its client address. A client cannot ask for
// it: the proxy strips X-Backend-* from what clients send.
struct NodeAddress {
  const std::string& ip;
  uint16_t port;
};
NodeAddress node_address(const ring::Device& device, const common::http::HeaderMap& request);

// Headers every backend request carries (X-Trans-Id, User-Agent, Referer...), from the client
// request.
common::http::HeaderMap backend_headers(const common::http::Request& client,
                                        const std::string& trans_id);

}  // namespace apus::proxy
