// InternalClient: Swift's internal client. A daemon that works on objects as a proxy's client
// would (the container reconciler moves objects between storage policies) runs a proxy pipeline
// in its own process, built from its config file's [pipeline:main] as written (no required
// filters added: Swift's allow_modify_pipeline=False), and sends it requests without a
// network hop or an auth token. Unlike a client's, these requests may carry what only the
// cluster says: X-Backend-Storage-Policy-Index (which policy to read or write), X-Timestamp
// (the write's time) and X-Backend-* in general.
//
// As Swift's make_request(): every request carries the client's User-Agent and
// X-Backend-Allow-Reserved-Names: true, and X-Backend-Use-Replication-Network: true when the
// client was made for the replication network (its backend requests then go to the devices'
// replication addresses). A request answered 5xx (or not at all) is tried again, up to
// request_tries in all, waiting 2, 4, 8... seconds between tries (at most 1024).
//
// Thread-compatible: one thread makes the requests, on the executor it awaits them from. The
// proxy's per-thread connection pools hold sockets of that executor's io_context: the thread
// must end (its thread_locals go) before that io_context does.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include <boost/asio/awaitable.hpp>

#include "common/config/config.h"
#include "common/http/headers.h"
#include "common/status.h"
#include "proxy/proxy_server.h"
#include "proxy/subrequest.h"

namespace apus::proxy {

class InternalClient {
 public:
  struct Options {
    std::string user_agent = "Swift";
    int request_tries = 3;
    bool use_replication_network = false;
  };

  // The pipeline of `conf` ([pipeline:main], its filters and [app:proxy-server]). Errors as
  // ProxyServer::create's; InvalidArgument when request_tries < 1.
  static common::Result<std::unique_ptr<InternalClient>> create(const common::Config& conf,
                                                                Options options);
  ~InternalClient();

  // One request without a body, its whole answer collected (at most `max_body` bytes: longer
  // is InvalidArgument). `path` is decoded ("/v1/.misplaced_objects/c"), `query` encoded.
  // Tried again while the answer is 5xx; the last answer is returned, whatever its status.
  boost::asio::awaitable<common::Result<common::http::Response>> request(
      std::string method, std::string path, std::string query, common::http::HeaderMap headers,
      size_t max_body);

  // A request whose answer streams (an object GET), tried again while it is 5xx; the caller
  // reads the body and must close() it (see Subrequest).
  boost::asio::awaitable<std::unique_ptr<Subrequest>> open(std::string method, std::string path,
                                                           common::http::HeaderMap headers);

  // A request with a body read from `body` (an object PUT fed by a GET): `length` bytes, or
  // chunked when the length is not known (nullopt). Not tried again: the body cannot be read
  // twice.
  boost::asio::awaitable<common::Result<common::http::Response>> request_with_body(
      std::string method, std::string path, common::http::HeaderMap headers, BodySource& body,
      std::optional<uint64_t> length, size_t max_body);

  const ProxyConfig& config() const { return server_->config(); }

 private:
  InternalClient(std::unique_ptr<ProxyServer> server, Options options);
  common::http::HeaderMap with_client_headers(common::http::HeaderMap headers) const;
  ProxyEnv fresh_env() const;
  boost::asio::awaitable<void> wait_before_try(int attempt) const;

  std::unique_ptr<ProxyServer> server_;
  Options options_;
  Next app_;  // the pipeline, as subrequests run it
};

}  // namespace apus::proxy
