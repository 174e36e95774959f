// ObjectController: requests to /v1/<account>/<container>/<object> (Swift's
// proxy/controllers/obj.py, replicated policies; swift-protocol.md §12): GET and HEAD from the
// first good replica, the body streamed and resumed from another replica when one fails
// midway; PUT streamed to every replica at once while hashing (100-continue, handoffs, a queue
// per replica, a quorum of answers); POST and DELETE to every replica by quorum. Each object
// server is told which container replica to update. CORS and OPTIONS against the container's
// settings. Private to proxy/.
//
// Thread-compatible: one per request, on its worker thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/awaitable.hpp>

#include "common/http/client.h"
#include "common/timestamp.h"
#include "proxy/controllers/base.h"

namespace apus::proxy {

class ObjectController final : public Controller {
 public:
  using Controller::Controller;

  boost::asio::awaitable<void> handle(common::http::Exchange& ex, ProxyEnv& env) override;

 private:
  // Where an object write goes: its policy's ring and partition, and the container replicas
  // its object servers tell.
  struct Placement {
    int policy = 0;
    ring::Ring* ring = nullptr;
    uint32_t partition = 0;
    ring::NodeList container_nodes;  // the replicas the container update goes to
    // The shard container ("<account>/<container>") the update goes to, for an object of a
    // sharded Swift container (then container_nodes are the shard's).
    std::optional<std::string> container_path;
  };

  // A good answer to an object GET or HEAD, its body still to be read.
  struct Source {
    std::unique_ptr<common::http::ClientConnection> conn;
    common::http::ClientResponse head;
    common::Timestamp timestamp;  // Swift's source_key()
  };

  // The request once OPTIONS and CORS are dealt with; `container` is the container's info.
  boost::asio::awaitable<void> serve(common::http::Exchange& ex, ProxyEnv& env,
                                     const CachedInfo& container);
  boost::asio::awaitable<void> get_or_head_object(common::http::Exchange& ex, ProxyEnv& env,
                                                  const CachedInfo& container);
  boost::asio::awaitable<void> put(common::http::Exchange& ex, ProxyEnv& env,
                                   const CachedInfo& container);
  // Streams the client's body to `conns` (the replicas that answered 100 Continue, on
  // `devices`, of `n`) as Swift's MIME document (`mime_boundary`) while hashing it, then the
  // footer (`env`'s update_footers, the ETag and the body's checksums), reads their answers
  // and replies.
  boost::asio::awaitable<void> send_body(
      common::http::Exchange& ex, ProxyEnv& env,
      std::vector<std::unique_ptr<common::http::ClientConnection>> conns,
      std::vector<const ring::Device*> devices, size_t n, common::Timestamp now,
      std::string mime_boundary);
  // A PUT whose body fits in memory (sends_whole_body): reads it whole from the client, then
  // sends each of the `n` replicas (nodes from `it`) the request `put` (its target `target`
  // after the device, `headers_for` adding each one's container update) with the whole MIME
  // document in one write, without waiting for 100 Continue, and replies from their answers.
  // Saves a round trip per replica, and at the object servers a trip to the disk pool.
  boost::asio::awaitable<void> put_whole(
      common::http::Exchange& ex, ProxyEnv& env, NodeIter it, size_t n,
      common::http::ClientOptions options, common::http::ClientRequest put, std::string target,
      const std::function<void(size_t, common::http::HeaderMap&)>& headers_for,
      common::Timestamp now, std::string mime_boundary);
  // The answer to a PUT whose body could not be read from the client (408 when it was too
  // slow, 499 when it went away), counted.
  common::http::Response client_read_failure(const common::Status& failure);
  boost::asio::awaitable<void> post_or_delete(common::http::Exchange& ex, ProxyEnv& env,
                                              const CachedInfo& container);

  // Streams the body of `source`, whose answer had a Content-Length, to the client; should
  // the replica fail midway, the rest comes from another one of the same ETag (`it` goes on
  // where the first search stopped). `request` is the GET sent to the nodes.
  boost::asio::awaitable<void> stream_body(common::http::Exchange& ex, NodeIter& it,
                                           const common::http::ClientRequest& request,
                                           std::optional<Source> source,
                                           common::http::HeaderMap headers);
  // Streams the body of an object GET answer that has no Content-Length to the client, chunked.
  boost::asio::awaitable<void> stream_unsized_body(common::http::Exchange& ex, Source& source,
                                                   int status, common::http::HeaderMap headers,
                                                   const std::string& path);
  // Swift's _get_source_and_node() for objects: asks the nodes of `it` one at a time until one
  // gives a good answer (2xx, 3xx, 416), or with `newest` asks them all and keeps the newest. A
  // good answer older than a tombstone another node reported (404 with X-Backend-Timestamp)
  // does not count, nor, with `etag` (a resume), one of another ETag. `request.target` is the
  // path after the device. The other answers are added to `answers`.
  boost::asio::awaitable<std::optional<Source>> find_source(
      NodeIter& it, const common::http::ClientRequest& request, bool newest,
      std::string_view etag, std::vector<BackendResponse>& answers);
  // The placement of the object: in the policy the request names (X-Backend-Storage-Policy-
  // Index, which only requests made in the proxy's process can carry: the container
  // reconciler's), else in `container`'s; nullopt without a ring for it.
  std::optional<Placement> place(const CachedInfo& container, const common::http::Request& req);
  // Swift's _get_update_target: when `container` is sharded (or sharding), the update of the
  // object's row goes to the shard whose range holds its name. The shard ranges a container
  // takes updates in are cached in memcached for recheck_updating_shard_ranges under Swift's
  // key (shared with Swift's proxies); with that 0, the one range is asked for each write.
  // Without a shard (none found, or asking failed) the root stays the target, as in Swift.
  boost::asio::awaitable<void> target_shard(Placement& placement, const CachedInfo& container,
                                            const common::http::Request& req,
                                            const ProxyEnv& env);
  // The expirer's queue container for a write with X-Delete-At (already checked and
  // normalized in `client`) and its replicas; nullopt when the write sets none.
  struct QueuePlacement {
    std::string container;  // the queue container's name (Swift's get_expirer_container)
    ring::NodeList nodes;
  };
  std::optional<QueuePlacement> place_in_queue(const common::http::HeaderMap& client);
  // The object's quoted path after the partition: /<account>/<container>/<object>.
  std::string quoted_path() const;
};

}  // namespace apus::proxy
