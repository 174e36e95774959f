// Subrequests: requests a middleware makes of the rest of the pipeline on behalf of a client's
// request (Swift's make_subrequest()), as copy reads its source and writes its destination, SLO
// and DLO read manifests and segments, symlink follows its target, bulk deletes and extracts.
//
// A subrequest runs through `app` (a middleware's `next`) on a Request and ProxyEnv of its own,
// so the user's rights are checked on it as on any request, and its answer comes back to the
// middleware instead of the client:
// - Subrequest streams the answer: start() returns once the response head is in, and read()
//   hands the body over as it comes, with a bounded read-ahead (SLO prefetches the next
//   segment while the current one streams).
// - run_subrequest() and run_subrequest_with_body() collect a small whole answer (HEADs,
//   DELETEs, listings, manifests), the latter feeding the request body from a BodySource.
//
// A body is never served wrong: one that ends short of its length, or whose subrequest ends
// mid-body (a backend failed), is a failed Result, never a short success.
//
// Thread-compatible: a subrequest runs on the executor of the coroutine that starts it (the
// worker thread, or strand, of the client's request), and every call is made from there.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include <boost/asio/awaitable.hpp>

#include "common/http/server.h"
#include "common/status.h"
#include "proxy/pipeline.h"

namespace apus::proxy {

// The env of a subrequest made for `env`'s request: the same trans-id, start time, user,
// authorize callback (and override), clean_acl, memcache and log_info; swift.source = `source`
// ("SLO", "DLO", "SYM", "EA", "BD", "SSC"...). Nothing request-specific (acl, add_headers,
// inbound X-Timestamp, swift_owner) carries over: authorization is decided afresh.
ProxyEnv subrequest_env(const ProxyEnv& env, std::string source);

// For a subrequest that is the client's own write in another place (object versioning's PUT
// of the new version, copy's PUT of the copy): what that write was to carry, which
// subrequest_env() leaves behind: S3's server-side encryption of it and the footer callback.
void carry_write(const ProxyEnv& from, ProxyEnv& to);

// subrequest_env() for a request some middleware already authorized (Swift's
// make_pre_authed_env): its authorize allows everything, authorize_override is set, and the
// user is ".wsgi.pre_authed". Only for requests the middleware itself decided on, never for a
// path a client chose unchecked.
ProxyEnv pre_authed_env(const ProxyEnv& env, std::string source);

// The headers of a pre-authorized subrequest made for `client` (Swift's make_pre_authed_env()):
// what make_env() carries over, without the client's token, User-Agent "Swift".
common::http::HeaderMap pre_authed_headers(const common::http::Request& client);

// The headers a subrequest made for the client's request `client` carries over, as Swift's
// make_env() copies them (Host, Origin, Access-Control-Request-Method, X-User-Id, X-Project-Id,
// Referer: a Referer may be what grants read access to a segment's container), plus the
// X-Auth-Token that Swift's middlewares pass on, and a User-Agent: the client's followed by
// `agent` ("SLO", "DLO MultipartGET"), as Swift's '%(orig)s <agent>'.strip() gives it, or
// `agent` alone when `after_client_agent` is false (Swift's default agent 'Swift').
common::http::HeaderMap subrequest_headers(const common::http::Request& client,
                                           std::string_view agent,
                                           bool after_client_agent = true);

// A request for `method` on the decoded path `path` ("/v1/AUTH_a/c/o"), percent-encoded into
// the target as Swift's quote() does, followed by '?' and `query` (already encoded) unless it
// is empty. No body: content_length 0 (set it, or chunked, for a body).
common::http::Request make_subrequest(std::string method, std::string_view path,
                                      std::string_view query, common::http::HeaderMap headers);

// A request running through `app` (the rest of the pipeline) whose answer the caller reads as a
// stream. Owned by the caller; its state is shared with the running request, which keeps it
// alive until the request ends.
//
// Always co_await close() before destroying a Subrequest whose request may still run. One
// destroyed without it abandons the request as close() does, without waiting: the request's
// body writes fail (Cancelled) and it ends in the background, keeping its own state alive, so
// nothing dangles; but the caller no longer knows when it ends, and the executor must keep
// running until it does.
class Subrequest {
 public:
  struct State;  // shared with the running request (subrequest.cpp)

  // Starts `req` (which has no body) with `env` and returns once its response head is in; a
  // request that ends without any answer gives status 500. Up to `read_ahead` bytes of body
  // are buffered ahead of the reader (0: a one-chunk hand-over, the writer waiting until the
  // reader took its chunk); at most read_ahead plus one chunk is ever held.
  // `app` is copied: the caller's may go away.
  static boost::asio::awaitable<std::unique_ptr<Subrequest>> start(const Next& app,
                                                                   common::http::Request req,
                                                                   ProxyEnv env,
                                                                   size_t read_ahead = 0);

  explicit Subrequest(std::shared_ptr<State> state);
  ~Subrequest();
  Subrequest(const Subrequest&) = delete;
  Subrequest& operator=(const Subrequest&) = delete;

  // The response head.
  int status() const;
  const common::http::HeaderMap& headers() const;
  // The body's length: the Content-Length header, else the length the answer announced;
  // nullopt for a body of unknown length (chunked).
  std::optional<uint64_t> length() const;

  // Up to buf.size() body bytes; 0 at the end of a complete body (at once for a HEAD, 204 or
  // 304). IOError when the body ended short of (or beyond) its length or the request ended
  // mid-body; Cancelled after close().
  boost::asio::awaitable<common::Result<size_t>> read(std::span<char> buf);

  // The whole remaining body, at most `max_bytes` of it: InvalidArgument beyond (read() stops
  // there; close() the rest). Errors as read().
  boost::asio::awaitable<common::Result<std::string>> read_all(size_t max_bytes);

  // Abandons what is left of the body (the request's next body write fails with Cancelled) and
  // waits until the request has ended. Idempotent. Then read() fails with Cancelled.
  boost::asio::awaitable<void> close();

  // Body bytes received and not read yet (at most read_ahead plus one chunk).
  size_t buffered() const;

 private:
  std::shared_ptr<State> state_;
};

// Runs `req` (no body) through `app` and collects its whole answer. A request that ends without
// an answer gives a 500. InvalidArgument when the body exceeds `max_body` bytes (the request is
// abandoned), IOError when the body is cut short or the request ended mid-body. The headers are
// the answer's own: Content-Length only where the answer set it (a HEAD).
boost::asio::awaitable<common::Result<common::http::Response>> run_subrequest(
    const Next& app, common::http::Request req, ProxyEnv env, size_t max_body);

// Up to a caller-chosen number of small subrequests at a time (Swift's StreamingPile): each is
// started with spawn() and tagged, and their answers are taken in the order they come. The
// state is shared with the running subrequests, so a pile that goes away while they run leaves
// nothing dangling; its owner still drains it (next_done() until in_flight() is 0) to see every
// answer.
class SubrequestPile {
 public:
  struct Done {
    size_t tag = 0;
    common::Result<common::http::Response> answer;  // as run_subrequest() gives it
  };

  explicit SubrequestPile(const boost::asio::any_io_executor& executor);

  // Subrequests started and not yet taken.
  size_t in_flight() const;

  // Starts run_subrequest(app, req, env, max_body) on the pile's executor.
  void spawn(const Next& app, common::http::Request req, ProxyEnv env, size_t max_body,
             size_t tag);

  // The next answer to come in. REQUIRES: in_flight() > 0.
  boost::asio::awaitable<Done> next_done();

 private:
  struct State;
  std::shared_ptr<State> state_;
};

// A supplier of the body of a subrequest: read() gives up to buf.size() bytes, 0 at the end,
// or a failed Result (the subrequest then fails as when a client breaks off its upload).
class BodySource {
 public:
  virtual ~BodySource() = default;
  virtual boost::asio::awaitable<common::Result<size_t>> read(std::span<char> buf) = 0;
};

// A request body from a string, which must outlive it.
class StringBody final : public BodySource {
 public:
  explicit StringBody(std::string_view data) : data_(data) {}
  boost::asio::awaitable<common::Result<size_t>> read(std::span<char> buf) override;

 private:
  std::string_view data_;
};

// As run_subrequest(), with the request body read from `body` (set req.content_length or
// req.chunked to match). `body` must outlive the call.
boost::asio::awaitable<common::Result<common::http::Response>> run_subrequest_with_body(
    const Next& app, common::http::Request req, ProxyEnv env, BodySource& body, size_t max_body);

// A BodySource reading the body of a Subrequest (copy's GET feeding its PUT). `from` must
// outlive it.
class SubrequestBody final : public BodySource {
 public:
  explicit SubrequestBody(Subrequest& from) : from_(from) {}
  boost::asio::awaitable<common::Result<size_t>> read(std::span<char> buf) override;

 private:
  Subrequest& from_;
};

}  // namespace apus::proxy
