// copy: Swift's server-side copy (swift-protocol.md §15): COPY with Destination, and PUT with
// X-Copy-From. The source is read with a GET subrequest and its body streamed into a PUT
// subrequest (proxy/subrequest.h), both through the rest of the pipeline, so the user's read and
// write rights are checked on each side as Swift checks them. Memory stays at one chunk: the
// GET's writes wait until the PUT has read what they hand over (no read-ahead). A source body
// that breaks off fails the PUT, which never stores a short copy.
#include <array>

#include "common/constraints.h"
#include "common/http/swob.h"
#include "common/http/url.h"
#include "proxy/middleware.h"
#include "proxy/subrequest.h"

namespace apus::proxy {

namespace net = boost::asio;
using common::Result;
using common::http::Exchange;
using common::http::HeaderMap;
using common::http::Request;
using common::http::Response;
using common::http::iequals;
using common::http::swob_response;
using common::http::swob_response_with_body;

// The most of the sink PUT's answer kept (its body is a short status page).
constexpr size_t kMaxSinkAnswer = 1 << 20;

namespace {

// Swift's _check_path_header(): "[/]<container>/<object>" from a header, or nullopt.
std::optional<std::pair<std::string, std::string>> container_and_object(std::string_view value) {
  std::string v = common::http::percent_decode(value);
  if (v.empty() || v[0] != '/') v = "/" + v;
  auto segs = common::http::split_path(v, 2, 2, true);
  if (!segs.ok()) return std::nullopt;
  return std::make_pair(*(*segs)[0], *(*segs)[1]);
}

// Swift's check_account_format(): a 412 body when the account name is not usable.
std::optional<std::string> account_format_error(std::string_view account) {
  if (account.empty()) return "Account name cannot be empty";
  if (account.find('/') != std::string_view::npos) return "Account name cannot contain slashes";
  return std::nullopt;
}

// The env of the sink PUT: Swift's copy builds that PUT on the client's whole environ, so a
// reseller admin's copy is still a reseller's request (account_quotas lets it through).
ProxyEnv sink_env(const ProxyEnv& env) {
  ProxyEnv sub = subrequest_env(env, "SSC");
  sub.reseller_request = env.reseller_request;
  // The sink is the client's write: it is encrypted as the client asked (S3's SSE).
  carry_write(env, sub);
  return sub;
}

class Copy final : public Middleware {
 public:
  explicit Copy(const common::Constraints& constraints) : constraints_(constraints) {}

  net::awaitable<void> call(Exchange& ex, ProxyEnv& env, const Next& next) override {
    const Request& req = ex.request();
    auto segs = common::http::split_path(common::http::percent_decode(req.path()), 4, 4, true);
    bool object = segs.ok();
    if (object && req.method == "OPTIONS") {
      // Swift's copy adds COPY to a successful object OPTIONS answer.
      HeaderEditor with_copy(ex, [](int status, HeaderMap& h) {
        if (status < 200 || status >= 300) return;
        for (const char* name : {"Allow", "Access-Control-Allow-Methods"}) {
          auto v = h.get(name);
          if (v && v->find("COPY") == std::string_view::npos) {
            h.set(name, std::string(*v) + ", COPY");
          }
        }
      });
      co_await next(with_copy, env);
      co_return;
    }
    if (!object || !((req.method == "PUT" && !req.headers.get_or("X-Copy-From", "").empty()) ||
                     req.method == "COPY")) {
      co_await next(ex, env);
      co_return;
    }
    std::string version = *(*segs)[0], account = *(*segs)[1];
    std::string container = *(*segs)[2], obj = *(*segs)[3];
    Request put = req;
    if (req.method == "COPY") {
      auto dest = req.headers.get("Destination");
      if (!dest || dest->empty()) {
        co_return co_await ex.reply(swob_response_with_body(412, "Destination header required"));
      }
      std::string dest_account = account;
      if (auto da = req.headers.get("Destination-Account")) {
        dest_account = common::http::percent_decode(*da);
        if (auto err = account_format_error(dest_account)) {
          co_return co_await ex.reply(swob_response_with_body(412, *err));
        }
        put.headers.set("X-Copy-From-Account", common::http::quote(account));
        put.headers.erase("Destination-Account");
      }
      auto where = container_and_object(*dest);
      if (!where) {
        co_return co_await ex.reply(swob_response_with_body(
            412, "Destination header must be of the form <container name>/<object name>"));
      }
      put.method = "PUT";
      put.target = common::http::quote("/" + version + "/" + dest_account + "/" + where->first +
                                       "/" + where->second);
      if (!req.query().empty()) put.target += "?" + std::string(req.query());  // Swift keeps it
      put.headers.set("X-Copy-From", common::http::quote("/" + container + "/" + obj));
      put.headers.erase("Destination");
      put.content_length = 0;
      account = dest_account;
    }
    co_await copy_put(ex, env, next, std::move(put), version, account);
  }

 private:
  net::awaitable<void> copy_put(Exchange& ex, ProxyEnv& env, const Next& next, Request put,
                                const std::string& version, const std::string& dest_account) {
    if ((put.content_length && *put.content_length > 0) || put.chunked) {
      co_return co_await ex.reply(
          common::http::text_response(400, "Copy requests require a zero byte body"));
    }
    std::string source_account = dest_account;
    if (auto sa = put.headers.get("X-Copy-From-Account")) {
      source_account = common::http::percent_decode(*sa);
      if (auto err = account_format_error(source_account)) {
        co_return co_await ex.reply(swob_response_with_body(412, *err));
      }
    }
    auto source = container_and_object(put.headers.get_or("X-Copy-From", ""));
    if (!source) {
      co_return co_await ex.reply(swob_response_with_body(
          412, "X-Copy-From header must be of the form <container name>/<object name>"));
    }
    std::string source_path = "/" + version + "/" + source_account + "/" + source->first + "/" +
                              source->second;

    // The source GET, with the copy's conditional and Range headers.
    Request get = put;
    get.method = "GET";
    get.target = common::http::quote(source_path);
    // ?multipart-manifest=get copies a manifest itself (a DLO's, or an SLO's in its raw
    // format), as Swift's copy does.
    const bool manifest_get =
        common::http::query_param(put.query(), "multipart-manifest") == "get";
    if (manifest_get) {
      // The rest of the query too (an old version's version-id), as Swift's copy keeps it.
      get.target += "?" + std::string(put.query()) + "&format=raw";
    } else if (!put.query().empty()) {
      get.target += "?" + std::string(put.query());  // copy_get() keeps it: ?symlink=get
    }
    get.headers.erase("X-Backend-Storage-Policy-Index");
    get.headers.set("X-Newest", "true");
    get.content_length = 0;
    get.chunked = false;
    std::unique_ptr<Subrequest> src =
        co_await Subrequest::start(next, std::move(get), subrequest_env(env, "SSC"));

    int status = src->status();
    if (status >= 300) {
      // Swift answers with the source's own answer (404, 412, 304...).
      Response r;
      r.status = status;
      r.headers = src->headers();
      std::array<char, 16384> buf;
      for (;;) {
        auto n = co_await src->read(buf);
        if (!n.ok() || *n == 0) break;
        r.body.append(buf.data(), *n);
      }
      co_await src->close();
      r.headers.erase("Content-Length");
      co_return co_await ex.reply(std::move(r));
    }
    if (!src->length() || static_cast<int64_t>(*src->length()) > constraints_.max_file_size) {
      co_await src->close();
      co_return co_await ex.reply(swob_response(413));
    }

    Request sink = put;
    sink.headers = sink_headers(put.headers, src->headers(), status);
    sink.headers.set("Content-Length", std::to_string(*src->length()));
    if (manifest_get) {
      // The sink stores a DLO manifest with its X-Object-Manifest, an SLO's with
      // ?multipart-manifest=put.
      std::string query;
      for (std::string_view rest = put.query(); !rest.empty();) {
        std::string_view field = rest.substr(0, rest.find('&'));
        rest.remove_prefix(std::min(rest.size(), field.size() + 1));
        if (field == "multipart-manifest" || field.starts_with("multipart-manifest=")) continue;
        query += (query.empty() ? "" : "&") + std::string(field);
      }
      if (src->headers().contains("X-Static-Large-Object")) {
        query += (query.empty() ? "" : "&") + std::string("multipart-manifest=put");
      } else if (auto dlo = src->headers().get("X-Object-Manifest")) {
        sink.headers.set("X-Object-Manifest", *dlo);
        if (auto etag = src->headers().get("Etag"); etag && status == 200) {
          sink.headers.set("Etag", *etag);
        }
      }
      sink.target = std::string(put.path()) + (query.empty() ? "" : "?" + query);
    }
    // The source's version-id (object versioning) names no version of the sink.
    if (common::http::query_param(sink.query(), "version-id")) {
      std::string query;
      for (std::string_view rest = sink.query(); !rest.empty();) {
        std::string_view field = rest.substr(0, rest.find('&'));
        rest.remove_prefix(std::min(rest.size(), field.size() + 1));
        if (field == "version-id" || field.starts_with("version-id=")) continue;
        query += (query.empty() ? "" : "&") + std::string(field);
      }
      sink.target = std::string(sink.path()) + (query.empty() ? "" : "?" + query);
    }
    sink.content_length = src->length();
    sink.chunked = false;
    sink.expect_continue = false;
    SubrequestBody body(*src);
    auto answer = co_await run_subrequest_with_body(next, std::move(sink),
                                                    sink_env(env), body,
                                                    kMaxSinkAnswer);
    co_await src->close();
    if (!answer.ok()) co_return co_await ex.reply(swob_response(500));
    Response r = std::move(*answer);
    if (r.status >= 200 && r.status < 300) {
      r.headers.set("X-Copied-From-Account", common::http::quote(source_account));
      r.headers.set("X-Copied-From", common::http::quote(source->first + "/" + source->second));
      if (auto lm = src->headers().get("Last-Modified")) {
        r.headers.set("X-Copied-From-Last-Modified", *lm);
      }
    }
    co_return co_await ex.reply(std::move(r));
  }

  // The sink PUT's headers: the source's metadata (`source`, answered with `status`), then the
  // request's own (`put`) on top.
  static HeaderMap sink_headers(const HeaderMap& put, const HeaderMap& source, int status) {
    HeaderMap h;
    if (common::config_true_value(put.get_or("X-Fresh-Metadata", "false"))) {
      h = put;  // only the source's sysmeta survives
      for (const auto& [k, v] : source) {
        if (common::http::istarts_with(k, "x-object-sysmeta-")) h.set(k, v);
      }
    } else {
      for (const auto& [k, v] : source) {
        if (iequals(k, "x-static-large-object") || iequals(k, "x-object-manifest") ||
            iequals(k, "etag") || iequals(k, "content-type") || iequals(k, "x-timestamp") ||
            iequals(k, "x-backend-timestamp")) {
          continue;
        }
        h.set(k, v);
      }
      for (const auto& [k, v] : put) h.set(k, v);
    }
    if (status == 200 && !source.contains("X-Static-Large-Object") &&
        !source.contains("X-Object-Manifest")) {
      if (auto etag = source.get("Etag")) h.set("Etag", *etag);
    } else {
      // Without the source's etag, the listing may not show an override of it either (a range
      // of an object, an SLO's content): the sink's own etag goes to its container.
      std::vector<std::string> overrides;
      for (const auto& [k, v] : h) {
        if (common::http::istarts_with(k, "X-Object-Sysmeta-Container-Update-Override-")) {
          overrides.push_back(k);
        }
      }
      for (const auto& k : overrides) h.erase(k);
    }
    h.erase("X-Copy-From");
    h.erase("X-Copy-From-Account");
    h.erase("Content-Length");
    h.erase("Transfer-Encoding");
    if (put.get_or("Content-Type", "").empty()) {
      h.set("Content-Type", source.get_or("Content-Type", "application/octet-stream"));
    }
    return h;
  }

  const common::Constraints& constraints_;
};

}  // namespace

Result<std::unique_ptr<Middleware>> make_copy(const MiddlewareContext& context) {
  return std::unique_ptr<Middleware>(std::make_unique<Copy>(context.swift.constraints));
}

}  // namespace apus::proxy
