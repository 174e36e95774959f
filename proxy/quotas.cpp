// account_quotas and container_quotas (limits.h), as Swift 2.30.1 has them.
//
// container_quotas: a container's X-Container-Meta-Quota-Bytes and -Quota-Count (plain user
// metadata, set by anyone who may POST to the container) must be digits; an object PUT that
// would take the container past either answers 413 "Upload exceeds quota." once the user has
// been authorized against the container's write ACL (a user who could not write at all gets
// the auth answer instead, so the 413 never tells a stranger that the container exists).
//
// account_quotas: X-Account-Meta-Quota-Bytes may be set or removed by a reseller admin only
// (403 for anyone else; 400 when not digits); an object PUT that would take the account past
// it answers 413, after the usual authorization: the 413 is given by the authorize step, so a
// denied user still sees the denial.
//
// Both check the Content-Length of a PUT (0 for a chunked one, as Swift). COPY and PUT with
// X-Copy-From reach them as the copy middleware's PUT of the destination with the source's
// length, so a copy into a container or account over its quota fails the same way; a copy of a
// large object is checked with its whole length. A reseller's own writes are never limited.
#include <algorithm>
#include <limits>

#include "common/config/config.h"
#include "common/http/swob.h"
#include "common/http/url.h"
#include "proxy/limits.h"
#include "proxy/versioned_writes.h"

namespace apus::proxy {

namespace net = boost::asio;
using common::Result;
using common::http::Exchange;
using common::http::Request;
using common::http::Response;
using common::http::swob_response;
using common::http::swob_response_with_body;

namespace quotas {

bool python_isdigit(std::string_view value) {
  if (value.empty()) return false;
  for (char ch : value) {
    auto c = static_cast<unsigned char>(ch);
    if (!(c >= '0' && c <= '9') && c != 0xB2 && c != 0xB3 && c != 0xB9) return false;
  }
  return true;
}

std::optional<int64_t> digits_value(std::string_view value) {
  int64_t n = 0;
  for (char c : value) {
    if (c < '0' || c > '9') return std::nullopt;
    if (n > (std::numeric_limits<int64_t>::max() - (c - '0')) / 10) {
      n = std::numeric_limits<int64_t>::max();
    } else {
      n = n * 10 + (c - '0');
    }
  }
  return n;
}

}  // namespace quotas

namespace {

constexpr std::string_view kExceeded = "Upload exceeds quota.";

int64_t saturating_add(int64_t a, int64_t b) {
  if (b > 0 && a > std::numeric_limits<int64_t>::max() - b) {
    return std::numeric_limits<int64_t>::max();
  }
  return a + b;
}

// A count or byte total from an info header (int() of it in Swift); 0 when missing.
int64_t info_number(const CachedInfo& info, std::string_view header) {
  auto v = info.headers.get(header);
  if (!v) return 0;
  return common::parse_python_int_saturating(*v).value_or(0);
}

// What catch_errors answers when a middleware fails (Swift's int() of a value its isdigit()
// let through, such as '²').
Response internal_error() {
  Response r = swob_response(500);
  r.headers.set("Content-Type", "text/plain");
  r.body = "An error occurred";
  return r;
}

// The upload's size as the quotas count it: Content-Length, 0 when chunked.
int64_t upload_size(const Request& req) {
  if (!req.content_length) return 0;
  return static_cast<int64_t>(
      std::min<uint64_t>(*req.content_length, std::numeric_limits<int64_t>::max()));
}

// authorize() that denies with `refusal` whatever the inner callback would have allowed; the
// inner callback's own denial still wins (the user learns nothing past it).
net::awaitable<std::optional<Response>> refuse_after(Authorize inner, Response refusal,
                                                     const Request& req, ProxyEnv& env) {
  if (auto denied = co_await inner(req, env)) co_return denied;
  co_return refusal;
}

class ContainerQuotas final : public Middleware {
 public:
  explicit ContainerQuotas(InfoLookup& info) : info_(info) {}

  std::optional<std::pair<std::string, std::string>> info() const override {
    return std::make_pair(std::string("container_quotas"), std::string("{}"));
  }

  net::awaitable<void> call(Exchange& ex, ProxyEnv& env, const Next& next) override {
    const Request& req = ex.request();
    auto segs = common::http::split_path(common::http::percent_decode(req.path()), 3, 4, true);
    if (!segs.ok()) co_return co_await next(ex, env);
    const bool object = !(*segs)[3].value_or("").empty();  // "/v1/a/c/" is the container
    if (!object && (req.method == "PUT" || req.method == "POST")) {
      for (auto [header, body] : {std::pair{"X-Container-Meta-Quota-Bytes", "Invalid bytes quota."},
                                  std::pair{"X-Container-Meta-Quota-Count", "Invalid count quota."}}) {
        auto v = req.headers.get(header);
        if (v && !v->empty() && !quotas::python_isdigit(*v)) {
          co_return co_await ex.reply(swob_response_with_body(400, body));
        }
      }
    } else if (object && is_put(req.method)) {
      const std::string& account = *(*segs)[1];
      const std::string& container = *(*segs)[2];
      CachedInfo info = co_await info_.container_info(account, container, req, env);
      if (info.status >= 200 && info.status < 300) {
        auto quota_bytes = info.headers.get("X-Container-Meta-Quota-Bytes");
        if (quota_bytes && quotas::python_isdigit(*quota_bytes)) {
          auto quota = quotas::digits_value(*quota_bytes);
          if (!quota) co_return co_await ex.reply(internal_error());
          int64_t used = info_number(info, "X-Container-Bytes-Used");
          // A versioned container's bytes include its versions container's: Swift's
          // object_versioning adds them, from a HEAD made then, to the container HEAD that
          // container_quotas reads. The versions container's cached info is dropped first so
          // that it is as fresh as Swift's HEAD (one more backend HEAD, only with a quota).
          std::string versions(info.headers.get_or(versioning::kSysContainer, ""));
          if (!versions.empty()) {
            const std::string name = common::http::percent_decode(versions);
            co_await info_.forget_info(account, name, env);
            CachedInfo v = co_await info_.container_info(account, name, req, env);
            if (v.status >= 200 && v.status < 300) {
              used = saturating_add(used, info_number(v, "X-Container-Bytes-Used"));
            }
          }
          int64_t size = saturating_add(used, upload_size(req));
          if (*quota < size) co_return co_await refuse(ex, env, info);
        }
        auto quota_count = info.headers.get("X-Container-Meta-Quota-Count");
        if (quota_count && quotas::python_isdigit(*quota_count)) {
          auto quota = quotas::digits_value(*quota_count);
          if (!quota) co_return co_await ex.reply(internal_error());
          int64_t count = saturating_add(info_number(info, "X-Container-Object-Count"), 1);
          if (*quota < count) co_return co_await refuse(ex, env, info);
        }
      }
    }
    co_await next(ex, env);
  }

 private:
  // Swift tests `req.method in ('PUT')`, a substring test of "PUT": "P", "PU", "U", "UT" and
  // "T" count too (the app refuses those methods anyway, after the quota).
  static bool is_put(std::string_view method) {
    return !method.empty() && std::string_view("PUT").find(method) != std::string_view::npos;
  }

  // Answers an upload over quota: the auth answer for a user who may not write to the
  // container at all, else 413.
  static net::awaitable<void> refuse(Exchange& ex, ProxyEnv& env, const CachedInfo& info) {
    if (env.authorize) {
      env.acl.reset();
      if (auto acl = info.headers.get("X-Container-Write")) env.acl = std::string(*acl);
      std::optional<Response> denied = co_await env.authorize(ex.request(), env);
      if (denied) co_return co_await ex.reply(std::move(*denied));
    }
    co_await ex.reply(swob_response_with_body(413, std::string(kExceeded)));
  }

  InfoLookup& info_;
};

class AccountQuotas final : public Middleware {
 public:
  explicit AccountQuotas(InfoLookup& info) : info_(info) {}

  std::optional<std::pair<std::string, std::string>> info() const override {
    return std::make_pair(std::string("account_quotas"), std::string("{}"));
  }

  net::awaitable<void> call(Exchange& ex, ProxyEnv& env, const Next& next) override {
    const Request& req = ex.request();
    if (req.method != "POST" && req.method != "PUT") co_return co_await next(ex, env);
    auto segs = common::http::split_path(common::http::percent_decode(req.path()), 2, 4, true);
    if (!segs.ok()) co_return co_await next(ex, env);
    const std::string& account = *(*segs)[1];
    // An empty name ("/v1/a/") is none, as Python's truth test has it.
    const bool container = !(*segs)[2].value_or("").empty();
    const bool object = !(*segs)[3].value_or("").empty();

    // The quota a request sets: meaningful on the account only. An X-Remove- with a value
    // removes it (Swift's 0, which no check below refuses).
    std::optional<std::string> new_quota;
    if (!container) {
      if (auto v = req.headers.get("X-Account-Meta-Quota-Bytes")) new_quota = std::string(*v);
      if (!req.headers.get_or("X-Remove-Account-Meta-Quota-Bytes", "").empty()) new_quota = "";
    }
    if (env.reseller_request) {
      if (new_quota && !new_quota->empty() && !quotas::python_isdigit(*new_quota)) {
        co_return co_await ex.reply(swob_response(400));
      }
      co_return co_await next(ex, env);
    }
    if (new_quota) co_return co_await ex.reply(swob_response(403));
    if (req.method == "POST" || !object) co_return co_await next(ex, env);

    CachedInfo info = co_await info_.account_info(account, req, env);
    auto quota_text = info.headers.get("X-Account-Meta-Quota-Bytes");
    if (!quota_text) co_return co_await next(ex, env);
    auto quota = common::parse_python_int_saturating(*quota_text);
    if (!quota || *quota < 0) co_return co_await next(ex, env);
    int64_t size = saturating_add(info_number(info, "X-Account-Bytes-Used"), upload_size(req));
    if (*quota >= size) co_return co_await next(ex, env);

    Response refusal = swob_response_with_body(413, std::string(kExceeded));
    if (!env.authorize) co_return co_await ex.reply(std::move(refusal));
    // Refused by the authorize step, so that container ACLs are still checked first.
    env.authorize = [inner = env.authorize, refusal](const Request& r, ProxyEnv& e) {
      return refuse_after(inner, refusal, r, e);
    };
    co_await next(ex, env);
  }

 private:
  InfoLookup& info_;
};

}  // namespace

Result<std::unique_ptr<Middleware>> make_container_quotas(const common::Section&,
                                                          const MiddlewareContext& context) {
  return std::unique_ptr<Middleware>(std::make_unique<ContainerQuotas>(context.info));
}

Result<std::unique_ptr<Middleware>> make_account_quotas(const common::Section&,
                                                        const MiddlewareContext& context) {
  return std::unique_ptr<Middleware>(std::make_unique<AccountQuotas>(context.info));
}

}  // namespace apus::proxy
