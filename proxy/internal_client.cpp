#include "proxy/internal_client.h"

#include <algorithm>
#include <chrono>
#include <cstdint>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "proxy/info_cache.h"
#include "proxy/middleware.h"

namespace apus::proxy {

namespace net = boost::asio;
using common::Result;
using common::Status;
using common::http::HeaderMap;
using common::http::Response;

Result<std::unique_ptr<InternalClient>> InternalClient::create(const common::Config& conf,
                                                               Options options) {
  if (options.request_tries < 1) {
    return Status::invalid_argument("request_tries must be positive");
  }
  auto server = ProxyServer::create(conf, ProxyServer::Options{.modify_pipeline = false});
  if (!server.ok()) return server.status();
  return std::unique_ptr<InternalClient>(new InternalClient(std::move(*server),
                                                            std::move(options)));
}

InternalClient::InternalClient(std::unique_ptr<ProxyServer> server, Options options)
    : server_(std::move(server)), options_(std::move(options)) {
  ProxyServer* s = server_.get();
  app_ = [s](common::http::Exchange& ex, ProxyEnv& env) { return s->handle_internal(ex, env); };
}

InternalClient::~InternalClient() = default;

HeaderMap InternalClient::with_client_headers(HeaderMap headers) const {
  headers.set("User-Agent", options_.user_agent);
  if (!headers.contains("X-Backend-Allow-Reserved-Names")) {
    headers.set("X-Backend-Allow-Reserved-Names", "true");
  }
  if (options_.use_replication_network && !headers.contains("X-Backend-Use-Replication-Network")) {
    headers.set("X-Backend-Use-Replication-Network", "true");
  }
  return headers;
}

ProxyEnv InternalClient::fresh_env() const {
  ProxyEnv env;
  env.trans_id = generate_trans_id("");
  env.start_time =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  env.info_memo = std::make_shared<RequestInfoMemo>();
  return env;
}

net::awaitable<void> InternalClient::wait_before_try(int attempt) const {
  // Swift waits 2 s before the second try, 4 s before the third, and so on (here at most 1024 s).
  net::steady_timer wait(co_await net::this_coro::executor,
                         std::chrono::seconds(int64_t{1} << std::min(attempt, 10)));
  (void)co_await wait.async_wait(net::as_tuple(net::use_awaitable));
}

net::awaitable<Result<Response>> InternalClient::request(std::string method, std::string path,
                                                         std::string query, HeaderMap headers,
                                                         size_t max_body) {
  headers = with_client_headers(std::move(headers));
  Result<Response> answer = Status::unavailable("no try made");
  for (int attempt = 0; attempt < options_.request_tries; ++attempt) {
    if (attempt > 0) co_await wait_before_try(attempt);
    answer = co_await run_subrequest(app_, make_subrequest(method, path, query, headers),
                                     fresh_env(), max_body);
    // An answer too long for max_body would be as long again.
    if (!answer.ok() && answer.status().code() == Status::Code::kInvalidArgument) break;
    if (answer.ok() && answer->status < 500) break;
  }
  co_return answer;
}

net::awaitable<std::unique_ptr<Subrequest>> InternalClient::open(std::string method,
                                                                 std::string path,
                                                                 HeaderMap headers) {
  headers = with_client_headers(std::move(headers));
  std::unique_ptr<Subrequest> answer;
  for (int attempt = 0; attempt < options_.request_tries; ++attempt) {
    if (attempt > 0) {
      co_await answer->close();
      co_await wait_before_try(attempt);
    }
    answer = co_await Subrequest::start(app_, make_subrequest(method, path, "", headers),
                                        fresh_env());
    if (answer->status() < 500) break;
  }
  co_return answer;
}

net::awaitable<Result<Response>> InternalClient::request_with_body(std::string method,
                                                                   std::string path,
                                                                   HeaderMap headers,
                                                                   BodySource& body,
                                                                   std::optional<uint64_t> length,
                                                                   size_t max_body) {
  common::http::Request req =
      make_subrequest(std::move(method), path, "", with_client_headers(std::move(headers)));
  req.headers.erase("Content-Length");
  req.headers.erase("Transfer-Encoding");
  if (length) {
    req.headers.set("Content-Length", std::to_string(*length));
    req.content_length = *length;
    req.chunked = false;
  } else {
    req.headers.set("Transfer-Encoding", "chunked");  // Swift's upload_object without a length
    req.content_length.reset();
    req.chunked = true;
  }
  co_return co_await run_subrequest_with_body(app_, std::move(req), fresh_env(), body, max_body);
}

}  // namespace apus::proxy
