#include "proxy/controllers/object.h"

#include <algorithm>
#include <array>
#include <deque>
#include <fstream>
#include <functional>
#include <sstream>
#include <unordered_map>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "common/async.h"
#include "common/config/config.h"
#include "common/constraints.h"
#include "common/crypto/crc32c.h"
#include "common/crypto/md5.h"
#include "common/crypto/random.h"
#include "common/listing_format.h"
#include "common/expiring_queue.h"
#include "common/hash_path.h"
#include "common/http/client.h"
#include "common/http/date.h"
#include "common/http/range.h"
#include "common/http/swob.h"
#include "common/http/url.h"
#include "common/log/log.h"
#include "common/timestamp.h"
#include "common/update_plan.h"
#include "proxy/internal/app.h"
#include "proxy/memcache.h"
#include "proxy/shard_ranges.h"

namespace apus::proxy {

namespace net = boost::asio;
using common::Result;
using common::Status;
using common::Timestamp;
using common::UpdatePlan;
using common::plan_updates;
using common::http::ClientConnection;
using common::http::Exchange;
using common::http::HeaderMap;
using common::http::OrRefusal;
using common::http::Request;
using common::http::Response;
using common::http::iequals;
using common::http::istarts_with;
using common::http::swob_response;

namespace {

// Bytes first..last (inclusive) of an object.
struct ByteSpan {
  uint64_t first = 0;
  uint64_t last = 0;
};


// Python's mimetypes.guess_type() by extension, from /etc/mime.types as Python reads it.
const std::unordered_map<std::string, std::string>& mime_types() {
  static const auto* table = [] {
    auto* t = new std::unordered_map<std::string, std::string>();
    std::ifstream in("/etc/mime.types");
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty() || line[0] == '#') continue;
      std::istringstream words(line);
      std::string type, ext;
      words >> type;
      while (words >> ext) {
        if (ext[0] == '#') break;
        t->emplace(ext, type);
      }
    }
    return t;
  }();
  return *table;
}

std::string guess_content_type(const std::string& object) {
  size_t slash = object.rfind('/');
  std::string base = slash == std::string::npos ? object : object.substr(slash + 1);
  size_t dot = base.rfind('.');
  if (dot == std::string::npos || dot + 1 == base.size()) return "application/octet-stream";
  std::string ext = common::http::to_lower(base.substr(dot + 1));
  auto it = mime_types().find(ext);
  return it == mime_types().end() ? "application/octet-stream" : it->second;
}

// The client headers an object write passes to the object servers.
bool object_write_header(std::string_view name) {
  static constexpr std::string_view kPassed[] = {
      "content-type", "content-encoding", "content-disposition", "content-language",
      "cache-control", "expires", "x-delete-at", "x-object-manifest",
      "x-static-large-object", "x-robots-tag", "etag", "if-none-match", "x-timestamp",
      "x-if-delete-at"};
  if (istarts_with(name, "x-object-meta-") || istarts_with(name, "x-object-sysmeta-") ||
      istarts_with(name, "x-object-transient-sysmeta-") || istarts_with(name, "x-backend-")) {
    return true;
  }
  for (std::string_view p : kPassed) {
    if (iequals(name, p)) return true;
  }
  return false;
}

// The headers of an object write to the object servers: the backend basics, the client's
// object headers, the write's timestamp and policy.
HeaderMap object_write_headers(const Request& req, const HeaderMap& client,
                               const std::string& trans_id, const Timestamp& now, int policy) {
  HeaderMap h = backend_headers(req, trans_id);
  for (const auto& [k, v] : client) {
    if (object_write_header(k)) h.set(k, v);
  }
  h.set("X-Timestamp", now.internal());
  h.set("X-Backend-Storage-Policy-Index", std::to_string(policy));
  return h;
}

// Feeds one upload to the connections of its replicas, each with a queue of at most
// `depth` chunks (Swift's put_queue_depth): a node may fall that far behind the others before
// it holds the upload up. A connection whose write fails is dropped. One writer coroutine per
// connection; everything runs on the request's worker thread. Shared with the writers, so a
// request that ends early leaves them nothing dangling.
class PutFanout {
 public:
  // One piece of the upload, read straight into its own buffer (uninitialized, not copied)
  // and shared by every connection's queue.
  struct Chunk {
    explicit Chunk(size_t capacity) : bytes(new char[capacity]), capacity(capacity) {}
    std::string_view view() const { return {bytes.get(), size}; }
    std::unique_ptr<char[]> bytes;
    size_t capacity;
    size_t size = 0;
  };

  PutFanout(net::any_io_executor ex, std::vector<std::unique_ptr<ClientConnection>> conns,
            size_t depth)
      : depth_(std::max<size_t>(1, depth)), room_(ex) {
    for (auto& c : conns) lanes_.push_back(std::make_unique<Lane>(ex, std::move(c)));
  }

  static void start(const std::shared_ptr<PutFanout>& self) {
    for (size_t i = 0; i < self->lanes_.size(); ++i) {
      common::spawn_logged(self->room_.get_executor(), write_lane(self, i), "PUT replica writer",
                           [self, i] {
                             Lane& l = *self->lanes_[i];
                             l.alive = false;
                             l.running = false;
                             l.queue.clear();
                             self->room_.cancel();
                           });
    }
  }

  // Queues `chunk` for every live connection, first waiting while a live queue is full.
  net::awaitable<void> push(std::shared_ptr<const Chunk> chunk) {
    while (any_lane([this](const Lane& l) { return l.queue.size() >= depth_; })) {
      co_await wait(room_);
    }
    for (auto& l : lanes_) {
      if (!l->alive) continue;
      l->queue.push_back(chunk);
      l->wake.cancel();
    }
  }

  // Waits until every live connection has written all it was given.
  net::awaitable<void> drain() {
    closing_ = true;
    for (auto& l : lanes_) l->wake.cancel();
    while (any_lane([](const Lane& l) { return !l.queue.empty() || l.running; })) {
      co_await wait(room_);
    }
  }

  // Stops the writers; the connections close with the last reference.
  void abandon() {
    closing_ = true;
    for (auto& l : lanes_) {
      l->alive = false;
      l->queue.clear();
      l->wake.cancel();
    }
  }

  size_t size() const { return lanes_.size(); }
  size_t alive() const {
    return static_cast<size_t>(std::count_if(lanes_.begin(), lanes_.end(),
                                             [](const auto& l) { return l->alive; }));
  }
  // Connection i after drain(), or null when its writes failed.
  std::unique_ptr<ClientConnection> take(size_t i) {
    return lanes_[i]->alive ? std::move(lanes_[i]->conn) : nullptr;
  }

 private:
  struct Lane {
    Lane(net::any_io_executor ex, std::unique_ptr<ClientConnection> c)
        : conn(std::move(c)), wake(ex) {}
    std::unique_ptr<ClientConnection> conn;
    std::deque<std::shared_ptr<const Chunk>> queue;  // the front is being written
    bool alive = true;
    bool running = true;
    net::steady_timer wake;  // the writer waits on it for work; set only by the writer
  };

  // What a lane writes at once: all it has queued, up to this many chunks. A small PUT's
  // preamble, body and footer, with the body's end, go in one write (one segment to the
  // object server, which then reads its whole body with one read).
  static constexpr size_t kMaxGather = 16;

  static net::awaitable<void> write_lane(std::shared_ptr<PutFanout> self, size_t i) {
    Lane& l = *self->lanes_[i];
    std::array<std::shared_ptr<const Chunk>, kMaxGather> held;  // alive while being written
    std::array<std::string_view, kMaxGather> pieces;
    while (l.alive) {
      if (l.queue.empty()) {
        if (self->closing_) break;
        co_await wait(l.wake);
        continue;
      }
      const size_t n = std::min(l.queue.size(), kMaxGather);
      for (size_t k = 0; k < n; ++k) {
        held[k] = l.queue[k];
        pieces[k] = held[k]->view();
      }
      // drain() has begun: nothing more comes, so the end of the body goes with the rest.
      const bool last = self->closing_ && n == l.queue.size();
      Status s = co_await l.conn->write_body(std::span(pieces.data(), n), last);
      for (size_t k = 0; k < n; ++k) held[k].reset();
      l.queue.erase(l.queue.begin(), l.queue.begin() + static_cast<std::ptrdiff_t>(
                                                           std::min(n, l.queue.size())));
      if (!s.ok()) {
        l.alive = false;
        l.queue.clear();
      }
      self->room_.cancel();
    }
    l.running = false;
    self->room_.cancel();
  }

  // Waits until `timer` is cancelled (by whoever has news for its owner).
  static net::awaitable<void> wait(net::steady_timer& timer) {
    timer.expires_at(net::steady_timer::time_point::max());
    (void)co_await timer.async_wait(net::as_tuple(net::use_awaitable));
  }

  template <class Pred>
  bool any_lane(Pred pred) const {
    return std::any_of(lanes_.begin(), lanes_.end(),
                       [&](const auto& l) { return l->alive && pred(*l); });
  }

  size_t depth_;
  bool closing_ = false;
  net::steady_timer room_;  // push() and drain() wait on it; the writers cancel it
  std::vector<std::unique_ptr<Lane>> lanes_;
};

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Joins "ip:port" (or the device name) of the nodes `indices` picks, comma-separated.
std::string node_list(const ring::NodeList& nodes, const std::vector<size_t>& indices, bool hosts) {
  std::string out;
  for (size_t j : indices) {
    const ring::Device& d = *nodes.nodes[j].device;
    if (!out.empty()) out += ",";
    out += hosts ? d.ip + ":" + std::to_string(d.port) : d.device;
  }
  return out;
}

// The update headers of the i-th object request of a write: X-Container-Host/-Device/
// -Partition, X-Delete-At-Host/-Device/-Partition/-Container when the write sets X-Delete-At
// (`queue`), as `plan` spreads them, and Swift's X-Backend-Clean-Expiring-Object-Queue: only
// the first two requests remove an old queue row (each removal is an async pending that the
// updaters deliver to every queue replica), unless the caller said otherwise (the expirer's
// own deletes say no).
void add_updates(HeaderMap& h, const UpdatePlan& plan, size_t i,
                 const ring::NodeList& container_nodes,
                 const std::optional<std::string>& container_path,
                 const ring::NodeList* queue_nodes, const std::string& queue_container) {
  if (!plan.container[i].empty()) {
    h.set("X-Container-Partition", std::to_string(container_nodes.partition));
    h.set("X-Container-Host", node_list(container_nodes, plan.container[i], true));
    h.set("X-Container-Device", node_list(container_nodes, plan.container[i], false));
    // Quoted: a container name may hold bytes a header cannot (Swift's reason too).
    if (container_path) {
      h.set("X-Backend-Quoted-Container-Path", common::http::quote(*container_path));
    }
  }
  if (queue_nodes && !plan.delete_at[i].empty()) {
    h.set("X-Delete-At-Container", queue_container);
    h.set("X-Delete-At-Partition", std::to_string(queue_nodes->partition));
    h.set("X-Delete-At-Host", node_list(*queue_nodes, plan.delete_at[i], true));
    h.set("X-Delete-At-Device", node_list(*queue_nodes, plan.delete_at[i], false));
  }
  constexpr size_t kQueueCleaners = 2;  // Swift's n_desired_queue_updates
  if (!h.contains("X-Backend-Clean-Expiring-Object-Queue")) {
    h.set("X-Backend-Clean-Expiring-Object-Queue", i < kQueueCleaners ? "t" : "f");
  }
}

// Swift's check_delete_headers(): X-Delete-After becomes X-Delete-At; both must be in the
// future. A 400 text response when not.
std::optional<Response> fix_delete_headers(HeaderMap& h, const Timestamp& now) {
  const double now_seconds = now.seconds();
  if (auto after = h.get("X-Delete-After")) {
    std::optional<int64_t> v = common::parse_python_int_saturating(*after);
    if (!v) return common::http::text_response(400, "Non-integer X-Delete-After");
    // Swift adds in floating point and truncates after clamping.
    const int64_t at = common::clamp_delete_at(now_seconds + static_cast<double>(*v));
    if (static_cast<double>(at) <= now_seconds) {
      return common::http::text_response(400, "X-Delete-After in past");
    }
    h.erase("X-Delete-After");
    h.set("X-Delete-At", common::normalize_delete_at(at));
  }
  if (auto at = h.get("X-Delete-At")) {
    std::optional<int64_t> v = common::parse_python_int_saturating(*at);
    if (!v) return common::http::text_response(400, "Non-integer X-Delete-At");
    const int64_t clamped = common::clamp_delete_at(*v);
    if (static_cast<double>(clamped) <= now_seconds) {
      return common::http::text_response(400, "X-Delete-At in past");
    }
    h.set("X-Delete-At", common::normalize_delete_at(clamped));
  }
  return std::nullopt;
}

// A storage policy index header as a number; -1 (no such policy, so no ring: 503) when it is
// not one.
int policy_index(std::string_view text) {
  std::optional<int64_t> v = common::parse_python_int(text);
  return v && *v >= 0 && *v <= INT32_MAX ? static_cast<int>(*v) : -1;
}

// Swift's clean_content_type(): a trailing swift_bytes parameter goes, nothing else changes.
std::string clean_content_type(std::string_view value) {
  size_t semi = value.rfind(';');
  if (semi != std::string_view::npos) {
    std::string_view right = value.substr(semi + 1);
    while (!right.empty() && (right.front() == ' ' || right.front() == '\t')) right.remove_prefix(1);
    if (right.starts_with("swift_bytes=")) return std::string(value.substr(0, semi));
  }
  return std::string(value);
}

// The bytes of the object a GET answer carries, when a resume can ask for the rest with one
// Range: the whole object (200) or a single range (206 with Content-Range).
std::optional<ByteSpan> resumable_span(const common::http::ClientResponse& head) {
  if (!head.content_length || *head.content_length == 0) return std::nullopt;
  if (head.status == 200) return ByteSpan{0, *head.content_length - 1};
  if (head.status != 206) return std::nullopt;
  // "bytes <first>-<last>/<length>"; a multipart/byteranges answer has none.
  std::string_view cr = head.headers.get_or("Content-Range", "");
  unsigned long long first = 0, last = 0;
  if (std::sscanf(std::string(cr).c_str(), "bytes %llu-%llu/", &first, &last) != 2 ||
      last < first || last - first + 1 != *head.content_length) {
    return std::nullopt;
  }
  return ByteSpan{first, last};
}

// The client's copy of a backend object response's headers.
HeaderMap client_object_headers(const HeaderMap& backend) {
  HeaderMap h;
  for (const auto& [name, value] : backend) {
    if (iequals(name, "date") || iequals(name, "connection") || iequals(name, "x-put-timestamp") ||
        iequals(name, "x-delete-after") || iequals(name, "transfer-encoding")) {
      continue;
    }
    if (iequals(name, "etag")) {
      std::string v(value);
      v.erase(std::remove(v.begin(), v.end(), '"'), v.end());
      h.set(name, v);
    } else if (iequals(name, "content-type")) {
      h.set(name, clean_content_type(value));
    } else {
      h.set(name, value);
    }
  }
  h.set("Accept-Ranges", "bytes");
  return h;
}

// ---- PUT connections and answers -------------------------------------------------------------

// What one connection slot of a PUT ended with: a connection ready for the body (its node
// answered 100 Continue), or the final answer a node gave instead (409: a newer one exists, 412:
// If-None-Match), or neither when every node it tried failed.
struct PutSlot {
  std::unique_ptr<ClientConnection> conn;
  const ring::Device* device = nullptr;
  int early_status = 0;
};

// Waits until `timer` is cancelled or `deadline` passes. The owner of a timer is the only one
// that sets it; the others cancel it to wake the owner.
net::awaitable<void> wait_until(net::steady_timer& timer,
                                std::chrono::steady_clock::time_point deadline) {
  timer.expires_at(deadline);
  (void)co_await timer.async_wait(net::as_tuple(net::use_awaitable));
}

// Swift's _get_put_connections(): one attempt per replica, all at once, each taking the next
// node of the shared iterator (a handoff takes the place of a failed primary) until a node
// answers. Everything runs on the request's worker thread; the attempts share this state, so
// the request's frame owns nothing they touch.
struct PutConnects {
  PutConnects(net::any_io_executor ex, NodeIter it, size_t n)
      : nodes(std::move(it)), slots(n), done(ex) {}
  NodeIter nodes;
  std::vector<PutSlot> slots;
  size_t running = 0;
  net::steady_timer done;  // cancelled by each attempt that ends
};

using PutHeadersFor = std::function<void(size_t slot, HeaderMap& headers)>;

net::awaitable<void> connect_put_slot(std::shared_ptr<PutConnects> state, size_t i,
                                      common::http::ClientOptions options, NodeHealth& health,
                                      common::http::ClientRequest request, std::string path) {
  auto& pool = common::http::ConnectionPool::for_this_thread();
  PutSlot& slot = state->slots[i];
  const bool need_footer = request.headers.contains("X-Backend-Obj-Metadata-Footer");
  NodeRef node;
  while (state->nodes.next(&node)) {
    const ring::Device& dev = *node.device;
    common::http::ClientRequest out = request;
    out.target = "/" + common::http::quote(dev.device) + path;
    auto started = std::chrono::steady_clock::now();
    const NodeAddress to = node_address(dev, request.headers);
    auto begun = co_await common::http::start_request(pool, options, to.ip, to.port,
                                                      std::move(out));
    if (!begun.ok()) {
      health.record_error(dev);
      // Swift logs this as an error too: the replica goes to a handoff, which an operator
      // needs to see (and a node that keeps failing is error-limited).
      log_node_error("Object", dev,
                     "Expect: 100-continue on " + request.method + " " + path + ": " +
                         begun.status().to_string());
      continue;
    }
    health.record_timing(dev, seconds_since(started));
    if (begun->status == 100 && need_footer &&
        !common::config_true_value(
            begun->conn->continue_headers().get_or("X-Obj-Metadata-Footer", "no"))) {
      // A node that cannot take the footer cannot store the object as the client's request
      // needs it (Swift's FooterNotSupported): another one takes its place.
      APUS_LOG_WARNING("object server " + dev.ip + ":" + std::to_string(dev.port) +
                       " does not take metadata footers");
      continue;
    }
    if (begun->status == 100) {
      slot.conn = std::move(begun->conn);
      slot.device = &dev;
      break;
    }
    // A final answer instead of 100 Continue: 409 (newer exists), 412 (If-None-Match), 507.
    auto head = co_await begun->conn->read_response_head();
    int status = head.ok() ? head->status : begun->status;
    if (status == 507) health.limit_now(dev);
    if (status >= 500) {
      health.record_error(dev);
      continue;
    }
    slot.early_status = status;
    slot.device = &dev;
    break;
  }
  --state->running;
  state->done.cancel();
}

// Connects the `n` slots of a PUT at once and waits for all of them (each bounded by
// conn_timeout and node_timeout per node it tries). `headers_for` adds a slot's own headers
// (its container update) to `request`, whose target is `path` after the device.
net::awaitable<std::vector<PutSlot>> connect_put_nodes(NodeIter it, size_t n,
                                                       common::http::ClientOptions options,
                                                       NodeHealth& health,
                                                       common::http::ClientRequest request,
                                                       std::string path,
                                                       const PutHeadersFor& headers_for) {
  auto ex = co_await net::this_coro::executor;
  auto state = std::make_shared<PutConnects>(ex, std::move(it), n);
  for (size_t i = 0; i < n; ++i) {
    common::http::ClientRequest mine = request;
    headers_for(i, mine.headers);
    ++state->running;
    common::spawn_logged(ex, connect_put_slot(state, i, options, health, std::move(mine), path),
                         "PUT connect " + path, [state] {
                           --state->running;
                           state->done.cancel();
                         });
  }
  while (state->running > 0) {
    co_await wait_until(state->done, std::chrono::steady_clock::time_point::max());
  }
  co_return std::move(state->slots);
}

// A connection that took the whole body, and its node.
struct PutLane {
  std::unique_ptr<ClientConnection> conn;
  const ring::Device* device = nullptr;
};

// The final answers of a PUT, read from every lane at once (Swift's _get_put_responses()).
// Shared with the readers; a straggler left behind after the quorum finishes into it.
struct PutAnswers {
  explicit PutAnswers(net::any_io_executor ex) : done(ex) {}
  std::vector<BackendResponse> answers;
  std::vector<int> statuses;
  size_t running = 0;
  net::steady_timer done;  // cancelled by each reader that ends
};

// Waits until every answer of `state` is in, or a quorum of one class and
// post_quorum_timeout more.
net::awaitable<void> wait_for_put_answers(std::shared_ptr<PutAnswers> state, size_t quorum,
                                          double post_quorum_timeout) {
  using Clock = std::chrono::steady_clock;
  auto deadline = Clock::time_point::max();
  while (state->running > 0) {
    if (deadline == Clock::time_point::max() && have_quorum(state->statuses, quorum)) {
      deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                    std::chrono::duration<double>(post_quorum_timeout));
    }
    if (Clock::now() >= deadline) break;
    co_await wait_until(state->done, deadline);
  }
}

net::awaitable<void> read_put_answer(std::shared_ptr<PutAnswers> state, PutLane lane,
                                     NodeHealth& health) {
  constexpr size_t kMaxAnswerBody = 64 << 10;  // an error text; 2xx bodies are empty
  const ring::Device& dev = *lane.device;
  std::unique_ptr<ClientConnection> conn = std::move(lane.conn);
  auto head = (co_await conn->finish_body()).ok()
                  ? co_await conn->read_response_head()
                  : Result<common::http::ClientResponse>(Status::unavailable("body not ended"));
  if (head.ok()) {
    BackendResponse a;
    a.status = head->status;
    a.headers = head->headers;
    auto body = co_await conn->read_body_all(kMaxAnswerBody);
    if (body.ok()) a.body = std::move(*body);
    common::http::ConnectionPool::for_this_thread().release(std::move(conn));
    if (a.status == 507) health.limit_now(dev);
    if (a.status >= 500) health.record_error(dev);
    state->statuses.push_back(a.status);
    state->answers.push_back(std::move(a));
  } else {
    health.record_error(dev);
  }
  --state->running;
  state->done.cancel();
}

net::awaitable<std::vector<BackendResponse>> read_put_answers(std::vector<PutLane> lanes,
                                                              size_t quorum,
                                                              double post_quorum_timeout,
                                                              NodeHealth& health) {
  auto ex = co_await net::this_coro::executor;
  auto state = std::make_shared<PutAnswers>(ex);
  for (PutLane& lane : lanes) {
    ++state->running;
    common::spawn_logged(ex, read_put_answer(state, std::move(lane), health), "PUT answer",
                         [state] {
                           --state->running;
                           state->done.cancel();
                         });
  }
  co_await wait_for_put_answers(state, quorum, post_quorum_timeout);
  co_return state->answers;
}

// A PUT whose body was read whole from the client: each replica gets the head and the whole
// MIME document in one write, without Expect: 100-continue, and answers once it stored the
// object. One node at a time per replica, from the shared iterator as connect_put_slot takes
// them: a node that fails or answers 5xx (507 error-limits it) gives its place to the next,
// which gets the body again (Swift's proxy moves on the same way from a node that fails
// before its 100 Continue; this is where most such failures come from).
struct WholePut : PutAnswers {
  WholePut(net::any_io_executor ex, NodeIter it) : PutAnswers(ex), nodes(std::move(it)) {}
  NodeIter nodes;
};

net::awaitable<void> put_whole_slot(std::shared_ptr<WholePut> state,
                                    common::http::ClientOptions options, NodeHealth& health,
                                    common::http::ClientRequest request, std::string path,
                                    std::shared_ptr<const std::string> document) {
  constexpr size_t kMaxAnswerBody = 64 << 10;  // an error text; 2xx bodies are empty
  auto& pool = common::http::ConnectionPool::for_this_thread();
  NodeRef node;
  while (state->nodes.next(&node)) {
    const ring::Device& dev = *node.device;
    common::http::ClientRequest out = request;
    out.target = "/" + common::http::quote(dev.device) + path;
    const NodeAddress to = node_address(dev, request.headers);
    // No node timing: the exchange includes the object's fsync, not comparable with the
    // connect-and-first-answer times the other requests record.
    auto answer = co_await common::http::simple_request(pool, options, to.ip, to.port,
                                                        std::move(out), *document,
                                                        kMaxAnswerBody);
    if (!answer.ok()) {
      health.record_error(dev);
      log_node_error("Object", dev,
                     "Trying to " + request.method + " " + path + ": " +
                         answer.status().to_string());
      continue;
    }
    const int status = answer->head.status;
    if (status == 507) health.limit_now(dev);
    if (status >= 500) {
      health.record_error(dev);
      continue;
    }
    BackendResponse a;
    a.status = status;
    a.headers = std::move(answer->head.headers);
    a.body = std::move(answer->body);
    state->statuses.push_back(status);
    state->answers.push_back(std::move(a));
    break;
  }
  --state->running;
  state->done.cancel();
}

// ---- checks of the client's request and the answer to a PUT ----------------------------------

constexpr std::string_view kAllowed = "DELETE, GET, HEAD, OPTIONS, POST, PUT";

// Swift's PUT checks of the client's headers (Content-Type already guessed when missing):
// If-None-Match only with *, check_object_creation(), the reserved Content-Type parameters.
std::optional<Response> bad_put_headers(const HeaderMap& client, const common::Constraints& c,
                                        const std::string& object,
                                        bool content_type_overridden = false) {
  if (auto inm = client.get("If-None-Match"); inm && inm->find('*') == std::string_view::npos) {
    return common::http::swob_response_with_body(400, "If-None-Match only supports *");
  }
  common::CheckResult check = common::check_object_creation(c, client, object);
  if (check.ok() && !content_type_overridden) check = common::check_content_type(client);
  return refusal(check);
}

// The time of a write: the client's X-Timestamp when it gives one (400 when that is no
// timestamp), else now.
OrRefusal<Timestamp> write_timestamp(const HeaderMap& client) {
  auto ts = client.get("X-Timestamp");
  if (!ts) return Timestamp::now();
  auto parsed = Timestamp::parse(*ts);
  if (!parsed.ok()) {
    return common::http::text_response(
        400, "X-Timestamp should be a UNIX timestamp float value; was '" + std::string(*ts) + "'");
  }
  return *parsed;
}

// The client's answer to a PUT from the object servers' answers (missing ones, of `n`
// replicas, count as 503): 201 with the ETag of the bytes sent when a quorum stored them, 500
// when a replica says it stored other bytes.
Response put_response(std::vector<BackendResponse> answers, size_t n, const std::string& etag,
                      const Timestamp& now) {
  for (const auto& a : answers) {
    if (a.status >= 200 && a.status < 300) {
      std::string backend_etag(a.headers.get_or("Etag", etag));
      backend_etag.erase(std::remove(backend_etag.begin(), backend_etag.end(), '"'),
                         backend_etag.end());
      if (backend_etag != etag) return swob_response(500);
    }
  }
  while (answers.size() < n) {
    BackendResponse missing;
    missing.status = 503;
    answers.push_back(std::move(missing));
  }
  Response r = best_response(answers, n);
  if (r.status >= 200 && r.status < 300) {
    r.status = 201;
    r.body.clear();
    r.headers.set("Etag", etag);
    r.headers.set("Last-Modified", common::http::format_http_date(now.ceil()));
  }
  return r;
}

// Whether a PUT's body is read whole before any replica is asked (put_whole): a known length
// that fits in one of the chunks the proxy reads from clients anyway. Not with If-None-Match:
// Swift's object servers answer it before the body, and the proxy then sends the body to no
// replica; answered after the body, the replicas without the object would have stored it.
bool sends_whole_body(const Request& req, const ProxyConfig& conf) {
  return req.content_length && *req.content_length <= conf.client_chunk_size &&
         !req.headers.contains("If-None-Match");
}

}  // namespace

// ---- ObjectController: routing ---------------------------------------------------------------

std::string ObjectController::quoted_path() const {
  return "/" + common::http::quote(path().account) + "/" + common::http::quote(path().container) +
         "/" + common::http::quote(path().object);
}

std::optional<ObjectController::Placement> ObjectController::place(const CachedInfo& container,
                                                                   const Request& req) {
  Placement out;
  out.policy = policy_index(req.headers.get_or(
      "X-Backend-Storage-Policy-Index",
      container.headers.get_or("X-Backend-Storage-Policy-Index", "0")));
  out.ring = app().object_ring(out.policy);
  if (!out.ring) return std::nullopt;
  const ApiPath& p = path();
  auto part = out.ring->get_part(p.account, p.container, p.object);
  ring::Ring& container_ring = app().container_ring();
  auto cpart = container_ring.get_part(p.account, p.container);
  if (!part.ok() || !cpart.ok()) return std::nullopt;
  out.partition = *part;
  out.container_nodes = container_ring.get_part_nodes(*cpart);
  return out;
}

net::awaitable<void> ObjectController::target_shard(Placement& placement,
                                                   const CachedInfo& container,
                                                   const Request& req, const ProxyEnv& env) {
  const std::string_view state = container.headers.get_or("X-Backend-Sharding-State", "unsharded");
  if (state != "sharded" && state != "sharding") co_return;
  const ApiPath& p = path();
  const double ttl = config().recheck_updating_shard_ranges;
  const std::string key = "shard-updating/" + p.account + "/" + p.container;  // Swift's
  std::optional<std::vector<ShardRange>> ranges;
  if (ttl > 0 && env.memcache) {
    if (auto cached = co_await env.memcache->get(key)) ranges = parse_shard_ranges(*cached);
  }
  if (!ranges) {
    // Without a cache, only the one range is asked for, as Swift asks then.
    const bool caching = ttl > 0 && env.memcache;
    std::string query = "format=json&states=updating";
    if (!caching) query += "&includes=" + common::http::quote(p.object, "");
    HeaderMap h = backend_headers(req, env.trans_id);
    h.set("X-Backend-Record-Type", "shard");
    auto cpart = app().container_ring().get_part(p.account, p.container);
    if (!cpart.ok()) co_return;
    Response r = co_await get_or_head(
        app(), app().container_ring(), *cpart, "GET",
        "/" + common::http::quote(p.account) + "/" + common::http::quote(p.container) + "?" +
            query,
        h);
    if (r.status < 200 || r.status >= 300 ||
        !iequals(r.headers.get_or("X-Backend-Record-Type", ""), "shard")) {
      APUS_LOG_WARNING("Failed to get shard ranges from /" + p.account + "/" + p.container +
                       ": " + std::to_string(r.status) + "; updating the root");
      co_return;
    }
    ranges = parse_shard_ranges(r.body);
    if (!ranges) {
      APUS_LOG_ERROR("Failed to get shard ranges from /" + p.account + "/" + p.container +
                     ": invalid data; updating the root");
      co_return;
    }
    if (!ranges->empty() && caching) {
      co_await env.memcache->set(key, std::move(r.body), ttl);  // Swift's dicts, as listed
    }
  }
  if (!ranges) co_return;
  const ShardRange* shard = find_shard_range(p.object, *ranges);
  if (!shard) co_return;
  auto nodes = app().container_ring().get_nodes(shard->account(), shard->container());
  if (!nodes.ok()) co_return;
  placement.container_nodes = std::move(*nodes);
  placement.container_path = shard->name;
}

std::optional<ObjectController::QueuePlacement> ObjectController::place_in_queue(
    const HeaderMap& client) {
  auto value = client.get("X-Delete-At");
  if (!value) return std::nullopt;
  std::optional<int64_t> delete_at = common::parse_python_int_saturating(*value);
  if (!delete_at) return std::nullopt;  // fix_delete_headers() has refused it already
  ring::Ring& container_ring = app().container_ring();
  const ApiPath& p = path();
  auto hash = common::hash_path_hex(container_ring.hash_config(), p.account, p.container,
                                    p.object);
  if (!hash.ok()) return std::nullopt;
  QueuePlacement out;
  out.container = common::expirer_container_name(common::clamp_delete_at(*delete_at),
                                                 config().expiring_objects_container_divisor,
                                                 *hash);
  auto nodes = container_ring.get_nodes(config().expiring_objects_account, out.container);
  if (!nodes.ok()) return std::nullopt;
  out.nodes = std::move(*nodes);
  return out;
}

net::awaitable<void> ObjectController::handle(Exchange& ex, ProxyEnv& env) {
  const Request& req = ex.request();
  if (!allows(kAllowed, req.method)) co_return co_await ex.reply(method_not_allowed(kAllowed));
  CachedInfo container = co_await container_info(req, env);
  if (req.method == "OPTIONS") {
    co_return co_await ex.reply(options_response(req, kAllowed, &container));
  }
  auto origin = req.headers.get("Origin");
  if (!origin) co_return co_await serve(ex, env, container);
  HeaderEditor cors(ex, cors_edit(container, std::string(*origin)));
  co_await serve(cors, env, container);
}

net::awaitable<void> ObjectController::serve(Exchange& ex, ProxyEnv& env,
                                             const CachedInfo& container) {
  const Request& req = ex.request();
  std::optional<Response> early = co_await authorize(req, env, std::nullopt);
  if (container.status >= 500 || container.status == 0) {
    co_return co_await ex.reply(swob_response(503));
  }
  if (early) {
    bool read = req.method == "GET" || req.method == "HEAD";
    std::optional<std::string> acl;
    if (auto v = container.headers.get(read ? "X-Container-Read" : "X-Container-Write")) {
      acl = std::string(*v);
    }
    if (auto denied = co_await authorize(req, env, acl)) {
      co_return co_await ex.reply(std::move(*denied));
    }
  }
  if (req.method == "GET" || req.method == "HEAD") {
    co_await get_or_head_object(ex, env, container);
  } else if (container.status < 200 || container.status >= 300) {
    co_await ex.reply(swob_response(404));
  } else if (req.method == "PUT") {
    co_await put(ex, env, container);
  } else {
    co_await post_or_delete(ex, env, container);
  }
}

// ---- GET and HEAD ----------------------------------------------------------------------------

net::awaitable<void> ObjectController::get_or_head_object(Exchange& ex, ProxyEnv& env,
                                                          const CachedInfo& container) {
  const Request& req = ex.request();
  int policy = policy_index(req.headers.get_or(
      "X-Backend-Storage-Policy-Index",
      container.headers.get_or("X-Backend-Storage-Policy-Index", "0")));
  ring::Ring* ring = app().object_ring(policy);
  if (!ring) co_return co_await ex.reply(swob_response(503));
  env.policy_index = std::to_string(policy);
  auto part = ring->get_part(path().account, path().container, path().object);
  if (!part.ok()) co_return co_await ex.reply(swob_response(500));
  HeaderMap h = backend_headers(req, env.trans_id);
  for (const auto& [k, v] : req.headers) h.set(k, v);
  h.set("X-Trans-Id", env.trans_id);
  h.set("X-Backend-Storage-Policy-Index", std::to_string(policy));

  common::http::ClientRequest request;
  request.method = req.method;
  request.target = "/" + std::to_string(*part) + quoted_path();
  request.headers = std::move(h);
  const bool newest = common::config_true_value(req.headers.get_or("X-Newest", ""));
  NodeIter it = iter_nodes(app(), *ring, *part, NodeIter::Purpose::kRead, policy);
  std::vector<BackendResponse> answers;
  std::optional<Source> source = co_await find_source(it, request, newest, "", answers);
  // The quorum of the answers that counted (find_source), as Swift's GET takes it.
  if (!source) co_return co_await ex.reply(best_response(answers, answers.size()));
  const common::http::ClientResponse& head = source->head;
  HeaderMap out_headers = client_object_headers(head.headers);
  if (req.method == "HEAD") {
    Response r;
    r.status = head.status;
    r.headers = std::move(out_headers);
    if (head.content_length) r.headers.set("Content-Length", std::to_string(*head.content_length));
    common::http::ConnectionPool::for_this_thread().release(std::move(source->conn));
    co_return co_await ex.reply(std::move(r));
  }
  if (!head.content_length) {
    // No length (a chunked or close-delimited answer, e.g. from a middleware or another
    // implementation): streamed through chunked, a chunk at a time, never held whole. Without
    // a length there is no span to resume from, so a failure midway ends the body short.
    const int status = head.status;
    co_return co_await stream_unsized_body(ex, *source, status, std::move(out_headers),
                                           request.target);
  }
  co_await stream_body(ex, it, request, std::move(source), std::move(out_headers));
}

net::awaitable<void> ObjectController::stream_body(Exchange& ex, NodeIter& it,
                                                   const common::http::ClientRequest& request,
                                                   std::optional<Source> source,
                                                   HeaderMap headers) {
  // Should the replica fail or stall (recoverable_node_timeout) midway, the rest comes from
  // another replica of the same ETag with a Range, as Swift resumes.
  const std::string& path = request.target;
  const common::http::ClientResponse& head = source->head;
  const uint64_t length = *head.content_length;
  std::optional<ByteSpan> span = resumable_span(head);
  const std::string etag(common::http::normalize_etag(head.headers.get_or("Etag", "")));
  // A verified read (kVerifiedReadHeader) that ends short may have been held back for bad
  // bytes already sent; its reader trusts the whole body, so no other replica's tail is added.
  const bool verified = head.headers.contains(common::http::kVerifiedReadHeader);
  // The first bytes of the body are on their way (often in the same segment as the answer's
  // head): the client's head goes with them, in one write.
  ex.hold_head_for_body();
  Status s = co_await ex.start_response(head.status, std::move(headers), length);
  // No bigger than the body: a 64 KiB buffer per 4 KiB GET cost a large malloc and free each.
  std::vector<char> buf(std::max<size_t>(
      1, static_cast<size_t>(std::min<uint64_t>(config().object_chunk_size, length))));
  uint64_t sent = 0;
  while (s.ok() && sent < length) {
    auto n = co_await source->conn->read_body(buf);
    if (n.ok() && *n > 0) {
      sent += *n;
      s = co_await ex.write_body(std::string_view(buf.data(), *n));
      continue;
    }
    std::string why = n.ok() ? "the body ended early" : n.status().to_string();
    if (!span || etag.empty() || verified) {
      APUS_LOG_WARNING("object GET " + path + ": " + why +
                       (verified ? " (a verified read: not resumed)" : " (cannot resume)"));
      co_return;  // the client sees a short body, never a wrong one
    }
    common::http::ClientRequest rest = request;
    rest.method = "GET";
    rest.headers.set("Range", "bytes=" + std::to_string(span->first + sent) + "-" +
                                  std::to_string(span->last));
    std::vector<BackendResponse> ignored;
    auto next = co_await find_source(it, rest, false, etag, ignored);
    std::optional<ByteSpan> got = next ? resumable_span(next->head) : std::nullopt;
    if (!next || next->head.status != 206 || !got || got->first != span->first + sent ||
        got->last != span->last) {
      APUS_LOG_WARNING("object GET " + path + ": " + why + ", and no other replica resumes it");
      co_return;
    }
    APUS_LOG_INFO("object GET " + path + ": " + why + "; resumed at byte " +
                  std::to_string(span->first + sent) + " from another replica");
    source = std::move(next);
  }
  if (s.ok()) (void)co_await ex.finish_response();
  common::http::ConnectionPool::for_this_thread().release(std::move(source->conn));
}

net::awaitable<void> ObjectController::stream_unsized_body(Exchange& ex, Source& source,
                                                           int status, HeaderMap headers,
                                                           const std::string& path) {
  Status s = co_await ex.start_response(status, std::move(headers), std::nullopt);
  std::vector<char> buf(config().object_chunk_size);
  while (s.ok()) {
    auto n = co_await source.conn->read_body(buf);
    if (!n.ok()) {
      APUS_LOG_WARNING("object GET " + path + ": " + n.status().to_string() +
                       " (no length, cannot resume)");
      co_return;  // the client sees the chunked body end without its last chunk
    }
    if (*n == 0) break;
    s = co_await ex.write_body(std::string_view(buf.data(), *n));
  }
  if (s.ok()) (void)co_await ex.finish_response();
  common::http::ConnectionPool::for_this_thread().release(std::move(source.conn));
}

net::awaitable<std::optional<ObjectController::Source>> ObjectController::find_source(
    NodeIter& it, const common::http::ClientRequest& request, bool newest,
    std::string_view etag, std::vector<BackendResponse>& answers) {
  const ProxyConfig& conf = config();
  common::http::ClientOptions options;
  options.conn_timeout = conf.backend.conn_timeout;
  // X-Newest answers are not resumed, so they get the plain node_timeout, as in Swift.
  options.node_timeout = newest ? conf.backend.node_timeout : conf.recoverable_node_timeout;
  auto& pool = common::http::ConnectionPool::for_this_thread();
  std::vector<Source> sources;
  Timestamp latest_tombstone;
  size_t missing_suppression =
      std::min<size_t>(conf.rebalance_missing_suppression_count,
                       it.primary_count() > 0 ? it.primary_count() - 1 : 0);
  NodeRef node;
  while (it.next(&node)) {
    common::http::ClientRequest out = request;
    out.target = "/" + common::http::quote(node.device->device) + request.target;
    auto started = std::chrono::steady_clock::now();
    const NodeAddress to = node_address(*node.device, request.headers);
    auto begun = co_await common::http::start_request(pool, options, to.ip, to.port,
                                                      std::move(out));
    Result<common::http::ClientResponse> head =
        begun.ok() ? co_await begun->conn->read_response_head()
                   : Result<common::http::ClientResponse>(begun.status());
    if (!head.ok()) {
      health().record_error(*node.device);
      continue;
    }
    std::unique_ptr<ClientConnection> conn = std::move(begun->conn);
    health().record_timing(*node.device, seconds_since(started));
    const int status = head->status;
    if ((status >= 200 && status < 400) || status == 416) {
      if (!etag.empty() &&
          common::http::normalize_etag(head->headers.get_or("Etag", "")) != etag) {
        BackendResponse other;  // another version of the object: not a source for a resume
        other.status = 404;
        answers.push_back(std::move(other));
        continue;
      }
      Timestamp ts = source_timestamp(head->headers);
      if (ts < latest_tombstone) continue;  // older than a DELETE another node saw
      sources.push_back(Source{std::move(conn), std::move(*head), ts});
      if (!newest) break;  // one good answer is enough
      continue;
    }
    BackendResponse a;
    a.status = status;
    a.headers = head->headers;
    a.from_primary = node.primary;
    auto body = co_await conn->read_body_all(1 << 20);
    if (body.ok()) a.body = std::move(*body);
    pool.release(std::move(conn));
    if (status == 507) {
      health().limit_now(*node.device);
    } else if (status >= 500) {
      health().record_error(*node.device);
    }
    // Which answers count towards the final status, as Swift's GET counts them: a handoff's
    // 404 or 5xx only if it holds a tombstone (X-Backend-Timestamp: the object was there and
    // was deleted), and the first rebalance_missing_suppression_count 404s without one not
    // at all (the object may just not have moved yet). A node that never answered does not
    // count either. The status is then the quorum of what counted.
    const Timestamp tombstone =
        common::timestamp_or_zero(a.headers.get_or("X-Backend-Timestamp", "0"));
    const bool no_tombstone = tombstone == Timestamp();
    if (!node.primary && (status >= 500 || status == 404) && no_tombstone) continue;
    if (status == 404 && no_tombstone && missing_suppression > 0) {
      --missing_suppression;
      continue;
    }
    if (status == 404) latest_tombstone = std::max(latest_tombstone, tombstone);
    answers.push_back(std::move(a));
  }
  // The newest good answer (the last of equals, as Swift's sort keeps them), if it is not
  // older than a tombstone seen after it; the others are dropped with their connections.
  std::optional<Source> best;
  for (Source& candidate : sources) {
    if (candidate.timestamp < latest_tombstone) continue;
    if (!best || candidate.timestamp >= best->timestamp) best = std::move(candidate);
  }
  co_return best;
}

// ---- PUT -------------------------------------------------------------------------------------

net::awaitable<void> ObjectController::put(Exchange& ex, ProxyEnv& env,
                                           const CachedInfo& container) {
  const Request& req = ex.request();
  HeaderMap client = req.headers;
  bool detect = common::config_true_value(client.get_or("X-Detect-Content-Type", ""));
  // An empty Content-Type counts as none, as in Swift: the type is guessed.
  if (client.get_or("Content-Type", "").empty() || detect) {
    client.set("Content-Type", guess_content_type(path().object));
  }
  if (auto bad = bad_put_headers(client, config().swift.constraints, path().object,
                                 env.content_type_overridden)) {
    co_return co_await ex.reply(std::move(*bad));
  }
  OrRefusal<Timestamp> now = write_timestamp(client);
  if (!now) co_return co_await ex.reply(std::move(now).refusal());
  if (auto bad = fix_delete_headers(client, *now)) co_return co_await ex.reply(std::move(*bad));
  std::optional<Placement> placement = place(container, req);
  if (!placement) co_return co_await ex.reply(swob_response(503));
  env.policy_index = std::to_string(placement->policy);
  co_await target_shard(*placement, container, req, env);
  const ring::NodeList& container_nodes = placement->container_nodes;

  // Connect to as many nodes as the ring has replicas at once, with Expect: 100-continue.
  common::http::ClientOptions options;
  options.conn_timeout = config().backend.conn_timeout;
  options.node_timeout = config().backend.node_timeout;
  NodeIter it = iter_nodes(app(), *placement->ring, placement->partition,
                           NodeIter::Purpose::kWrite, placement->policy);
  const size_t n = it.primary_count();
  common::http::ClientRequest put;
  put.method = "PUT";
  put.headers = object_write_headers(req, client, env.trans_id, *now, placement->policy);
  // The body goes as a MIME document with a metadata footer (Swift's MIMEPutter, which Swift
  // uses when a middleware such as encryption has footers), the framing's bytes making it
  // chunked with its own length in a header of its own. The footer has the body's ETag, which
  // every object server, Swift's too, checks against the MD5 of what it received, so a body
  // damaged on the way to one replica is refused there (Swift's proxy sends a plain body and
  // no ETag unless the client gave one: such a replica is stored with its damage and an ETag
  // to match). It also has the body's MD5 and CRC32C (kBodyChecksumHeader): Apus's object
  // servers check the CRC32C, at memory speed, instead of hashing the body once more.
  const std::string mime_boundary = common::crypto::request_random_hex(32);
  put.headers.set(common::http::kBodyChecksumHeader, "crc32c");
  put.headers.set("X-Backend-Obj-Metadata-Footer", "yes");
  put.headers.set("X-Backend-Obj-Multipart-Mime-Boundary", mime_boundary);
  if (req.content_length) {
    put.headers.set("X-Backend-Obj-Content-Length", std::to_string(*req.content_length));
  }
  put.chunked = true;
  put.expect_continue = true;
  const std::string target = "/" + std::to_string(placement->partition) + quoted_path();
  std::optional<QueuePlacement> queue = place_in_queue(client);
  const UpdatePlan plan =
      plan_updates(n, container_nodes.nodes.size(), queue ? queue->nodes.nodes.size() : 0,
                   quorum_size(n), quorum_size(container_nodes.nodes.size()));
  const PutHeadersFor headers_for = [&container_nodes, &placement, &plan, &queue](size_t i,
                                                                                HeaderMap& h) {
    add_updates(h, plan, i, container_nodes, placement->container_path,
                queue ? &queue->nodes : nullptr, queue ? queue->container : std::string());
  };
  if (sends_whole_body(req, config())) {
    co_return co_await put_whole(ex, env, std::move(it), n, options, std::move(put), target,
                                 headers_for, *now, std::move(mime_boundary));
  }
  std::vector<PutSlot> slots = co_await connect_put_nodes(
      std::move(it), n, options, health(), std::move(put), target, headers_for);
  std::vector<std::unique_ptr<ClientConnection>> conns;
  std::vector<const ring::Device*> conn_devices;
  std::vector<int> early_statuses;
  for (PutSlot& slot : slots) {
    if (slot.conn) {
      conns.push_back(std::move(slot.conn));
      conn_devices.push_back(slot.device);
    } else if (slot.early_status != 0) {
      early_statuses.push_back(slot.early_status);
    }
  }
  bool if_none_match_star = req.headers.get_or("If-None-Match", "").find('*') !=
                            std::string_view::npos;
  if (if_none_match_star &&
      std::find(early_statuses.begin(), early_statuses.end(), 412) != early_statuses.end()) {
    co_return co_await ex.reply(swob_response(412));
  }
  if (std::find(early_statuses.begin(), early_statuses.end(), 409) != early_statuses.end()) {
    co_return co_await ex.reply(swob_response(202));
  }
  const size_t quorum = quorum_size(n);
  if (conns.size() < quorum) {
    APUS_LOG_ERROR("Object PUT returning 503, " + std::to_string(conns.size()) + "/" +
                   std::to_string(quorum) + " required connections");
    co_return co_await ex.reply(swob_response(503));
  }
  co_await send_body(ex, env, std::move(conns), std::move(conn_devices), n, *now,
                     std::move(mime_boundary));
}

namespace {

std::shared_ptr<PutFanout::Chunk> chunk_of(std::string_view bytes) {
  auto chunk = std::make_shared<PutFanout::Chunk>(bytes.size());
  std::copy(bytes.begin(), bytes.end(), chunk->bytes.get());
  chunk->size = bytes.size();
  return chunk;
}

// The end of a MIME PUT body: the footer document (its JSON as Swift's json.dumps() of a
// HeaderKeyDict writes it, with its MD5) and the closing boundary.
std::string mime_footer(const HeaderMap& footers, std::string_view boundary) {
  std::string json = "{";
  for (const auto& [name, value] : footers) {
    if (json.size() > 1) json += ", ";
    common::listing::append_json_string(json, common::http::title_case(name));
    json += ": ";
    common::listing::append_json_string(json, value);
  }
  json += "}";
  std::string out;
  out.append("\r\n--").append(boundary).append("\r\nX-Document: object metadata\r\n");
  out.append("Content-MD5: ").append(common::crypto::md5_hex(json)).append("\r\n\r\n");
  out.append(json).append("\r\n--").append(boundary).append("--\r\n");
  return out;
}

// The footer of a PUT body: `env`'s (encryption's), the ETag and the body's checksums. The
// footer's ETag wins over the request's at the object servers, so the client's is checked here
// against the MD5 of what came, as they would have checked it (422). A refusal when that or
// encryption refuses.
std::optional<Response> put_footers(const Request& req, ProxyEnv& env, const std::string& body_md5,
                                    const std::string& body_crc32c, HeaderMap& footers) {
  if (env.update_footers) {
    if (auto refusal = env.update_footers(footers)) return refusal;
  }
  if (!footers.contains("Etag")) {
    std::string client_etag(common::http::normalize_etag(req.headers.get_or("Etag", "")));
    if (!client_etag.empty() && common::http::to_lower(client_etag) != body_md5) {
      return swob_response(422);
    }
    footers.set("Etag", body_md5);
  }
  footers.set(common::http::kBodyMd5Footer, body_md5);
  footers.set(common::http::kBodyCrc32cFooter, body_crc32c);
  return std::nullopt;
}

std::string mime_preamble(std::string_view boundary) {
  return "--" + std::string(boundary) + "\r\nX-Document: object body\r\n\r\n";
}

}  // namespace

net::awaitable<void> ObjectController::send_body(
    Exchange& ex, ProxyEnv& env, std::vector<std::unique_ptr<ClientConnection>> conns,
    std::vector<const ring::Device*> devices, size_t n, Timestamp now,
    std::string mime_boundary) {
  const ProxyConfig& conf = config();
  const std::optional<uint64_t> length = ex.request().content_length;
  const size_t quorum = quorum_size(n);
  // Stream the body to every connection while hashing it.
  common::crypto::Md5 md5;
  common::crypto::Crc32c crc;
  uint64_t received = 0;
  auto fanout = std::make_shared<PutFanout>(co_await net::this_coro::executor, std::move(conns),
                                            conf.put_queue_depth);
  PutFanout::start(fanout);
  // Queued with the first piece of the body (or the footer), to go in the same write.
  auto preamble = chunk_of(mime_preamble(mime_boundary));
  for (;;) {
    auto chunk = std::make_shared<PutFanout::Chunk>(conf.client_chunk_size);
    auto got = co_await ex.read_body(std::span(chunk->bytes.get(), chunk->capacity));
    if (!got.ok()) {
      fanout->abandon();
      co_return co_await ex.reply(client_read_failure(got.status()));
    }
    if (*got == 0) break;
    chunk->size = *got;
    received += *got;
    if (received > static_cast<uint64_t>(conf.swift.constraints.max_file_size)) {
      // A chunked upload past max_file_size (a known length was checked up front): 413 while
      // streaming, as Swift answers. The backends never see the end of the body, so none of
      // them commits what it got.
      fanout->abandon();
      co_return co_await ex.reply(swob_response(413));
    }
    md5.update(chunk->view());
    crc.update(chunk->view());
    if (preamble) co_await fanout->push(std::exchange(preamble, nullptr));
    co_await fanout->push(std::move(chunk));
    if (fanout->alive() < quorum) {
      fanout->abandon();
      co_return co_await ex.reply(swob_response(503));
    }
  }
  if (length && received < *length) {
    fanout->abandon();
    app().count("object.client_disconnects");
    co_return co_await ex.reply(swob_response(499));
  }
  // The closing boundary goes out only with the footer: without it, no object server commits.
  const std::string body_md5 = md5.hex_digest();
  HeaderMap footers;
  if (auto refusal = put_footers(ex.request(), env, body_md5, crc.hex(), footers)) {
    fanout->abandon();
    co_return co_await ex.reply(std::move(*refusal));
  }
  if (preamble) co_await fanout->push(std::move(preamble));  // an empty body
  co_await fanout->push(chunk_of(mime_footer(footers, mime_boundary)));
  co_await fanout->drain();
  std::vector<PutLane> lanes;
  for (size_t i = 0; i < fanout->size(); ++i) {
    std::unique_ptr<ClientConnection> conn = fanout->take(i);  // null once it failed
    if (conn) lanes.push_back(PutLane{std::move(conn), devices[i]});
  }
  // Every final answer, or a quorum of them and post_quorum_timeout for the others.
  std::vector<BackendResponse> answers = co_await read_put_answers(
      std::move(lanes), quorum, conf.backend.post_quorum_timeout, health());
  co_return co_await ex.reply(put_response(std::move(answers), n, body_md5, now));
}

Response ObjectController::client_read_failure(const Status& failure) {
  const bool timed_out = failure.is_timeout();
  app().count(timed_out ? "object.client_timeouts" : "object.client_disconnects");
  return swob_response(timed_out ? 408 : 499);
}

net::awaitable<void> ObjectController::put_whole(
    Exchange& ex, ProxyEnv& env, NodeIter it, size_t n, common::http::ClientOptions options,
    common::http::ClientRequest put, std::string target,
    const std::function<void(size_t, HeaderMap&)>& headers_for, Timestamp now,
    std::string mime_boundary) {
  const Request& req = ex.request();
  const uint64_t length = *req.content_length;
  // The body is read straight into the MIME document, after its preamble, with a byte of room
  // more to see one longer than its length (a middleware's reader could give one; the HTTP
  // framing cannot).
  auto document = std::make_shared<std::string>(mime_preamble(mime_boundary));
  const size_t start = document->size();
  document->resize(start + length + 1);
  size_t got = 0;
  for (;;) {
    if (got == length + 1) {
      co_return co_await ex.reply(common::http::swob_response_with_body(
          400, "Request body longer than its Content-Length"));
    }
    auto read = co_await ex.read_body(
        std::span(document->data() + start + got, length + 1 - got));
    if (!read.ok()) co_return co_await ex.reply(client_read_failure(read.status()));
    if (*read == 0) break;
    got += *read;
  }
  if (got < length) {
    app().count("object.client_disconnects");
    co_return co_await ex.reply(swob_response(499));
  }
  document->resize(start + got);
  const std::string_view body = std::string_view(*document).substr(start);
  const std::string body_md5 = common::crypto::md5_hex(body);
  common::crypto::Crc32c crc;
  crc.update(body);
  HeaderMap footers;
  if (auto refusal = put_footers(req, env, body_md5, crc.hex(), footers)) {
    co_return co_await ex.reply(std::move(*refusal));
  }
  document->append(mime_footer(footers, mime_boundary));

  put.expect_continue = false;
  auto executor = co_await net::this_coro::executor;
  auto state = std::make_shared<WholePut>(executor, std::move(it));
  for (size_t i = 0; i < n; ++i) {
    common::http::ClientRequest mine = put;
    headers_for(i, mine.headers);
    ++state->running;
    common::spawn_logged(executor,
                         put_whole_slot(state, options, health(), std::move(mine), target,
                                        document),
                         "PUT " + target, [state] {
                           --state->running;
                           state->done.cancel();
                         });
  }
  const size_t quorum = quorum_size(n);
  co_await wait_for_put_answers(state, quorum, config().backend.post_quorum_timeout);
  // Stragglers still running after post_quorum_timeout add to what is left behind, unread.
  std::vector<BackendResponse> answers = std::move(state->answers);
  // A replica holding the object at this time or newer: Swift answers 202 when one says so
  // before the body, and so does this when one says so after it.
  for (const BackendResponse& a : answers) {
    if (a.status == 409) co_return co_await ex.reply(swob_response(202));
  }
  if (answers.size() < quorum) {
    APUS_LOG_ERROR("Object PUT returning 503, " + std::to_string(answers.size()) + "/" +
                   std::to_string(quorum) + " required connections");
  }
  co_return co_await ex.reply(put_response(std::move(answers), n, body_md5, now));
}

// ---- POST and DELETE -------------------------------------------------------------------------

net::awaitable<void> ObjectController::post_or_delete(Exchange& ex, ProxyEnv& env,
                                                      const CachedInfo& container) {
  const Request& req = ex.request();
  HeaderMap client = req.headers;
  // Swift's ensure_x_timestamp(): a middleware's X-Timestamp (object versioning's) is the
  // write's time.
  OrRefusal<Timestamp> when = write_timestamp(client);
  if (!when) co_return co_await ex.reply(std::move(when).refusal());
  Timestamp now = *when;
  if (req.method == "POST") {
    if (auto bad = refusal(common::check_metadata(config().swift.constraints, client,
                                                  common::MetadataTarget::kObject))) {
      co_return co_await ex.reply(std::move(*bad));
    }
    if (auto bad = fix_delete_headers(client, now)) co_return co_await ex.reply(std::move(*bad));
  }
  std::optional<Placement> placement = place(container, req);
  if (!placement) co_return co_await ex.reply(swob_response(503));
  env.policy_index = std::to_string(placement->policy);
  co_await target_shard(*placement, container, req, env);
  const ring::NodeList& container_nodes = placement->container_nodes;
  HeaderMap base = object_write_headers(req, client, env.trans_id, now, placement->policy);
  NodeIter it = iter_nodes(app(), *placement->ring, placement->partition,
                           req.method == "DELETE" ? NodeIter::Purpose::kDelete
                                                  : NodeIter::Purpose::kRead,
                           placement->policy);
  const size_t n = it.primary_count();
  const size_t outgoing = it.request_count();
  std::optional<QueuePlacement> queue;
  if (req.method == "POST") queue = place_in_queue(client);
  const UpdatePlan plan = plan_updates(
      outgoing, container_nodes.nodes.size(), queue ? queue->nodes.nodes.size() : 0,
      quorum_size(n), quorum_size(container_nodes.nodes.size()));
  auto answers = co_await make_requests(
      config().backend, health(), std::move(it), req.method, quoted_path(), [&](size_t i) {
        HeaderMap h = base;
        add_updates(h, plan, i, container_nodes, placement->container_path,
                    queue ? &queue->nodes : nullptr, queue ? queue->container : std::string());
        return h;
      });
  Response r = best_response(answers, n);
  if (req.method == "DELETE" && r.status == 503) {
    // Swift's override for DELETE: 404s count as 204s when no class reached a quorum.
    for (auto& a : answers) {
      if (a.status == 404) a.status = 204;
    }
    Response again = best_response(answers, n);
    if (again.status != 503) r = std::move(again);
  }
  co_return co_await ex.reply(std::move(r));
}

}  // namespace apus::proxy
