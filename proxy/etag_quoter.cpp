// etag_quoter (limits.h): object answers carry RFC 7232 quoted ETags ("<md5>") where asked
// for: by the container's X-Container-Rfc-Compliant-Etags, else the account's
// X-Account-Rfc-Compliant-Etags, else the enable_by_default option. Those two client headers
// are kept as sysmeta (X-<Type>-Sysmeta-Rfc-Compliant-Etags, "True" or "False"; an empty value
// or X-Remove- clears it) and shown back under their client names.
#include "common/config/config.h"
#include "common/constraints.h"
#include "common/http/headers.h"
#include "common/http/url.h"
#include "proxy/limits.h"

namespace apus::proxy {

namespace net = boost::asio;
using common::Result;
using common::http::Exchange;
using common::http::HeaderMap;
using common::http::Request;

namespace {

bool is_success(int status) { return status >= 200 && status < 300; }

// An ETag as RFC 7232 writes it: one already quoted (or weak) stays, anything else is quoted.
void quote_etags(HeaderMap& h) {
  std::vector<std::pair<std::string, std::string>> quoted;
  for (const auto& [name, value] : h) {
    if (!common::http::iequals(name, "etag")) continue;
    std::string_view v(value);
    if ((v.starts_with('"') || v.starts_with("W/\"")) && v.ends_with('"') && !v.empty()) {
      continue;
    }
    quoted.emplace_back(name, "\"" + value + "\"");
  }
  for (auto& [name, value] : quoted) h.set(name, value);
}

class EtagQuoter final : public Middleware {
 public:
  EtagQuoter(std::string enable_by_default, const common::Constraints& constraints,
             InfoLookup& info)
      : enable_by_default_(std::move(enable_by_default)),
        constraints_(constraints),
        info_(info) {}

  std::optional<std::pair<std::string, std::string>> info() const override {
    return std::make_pair(
        std::string("etag_quoter"),
        std::string("{\"enable_by_default\": ") +
            (common::config_true_value(enable_by_default_) ? "true" : "false") + "}");
  }

  net::awaitable<void> call(Exchange& ex, ProxyEnv& env, const Next& next) override {
    const Request& req = ex.request();
    auto segs = common::http::split_path(common::http::percent_decode(req.path()), 2, 4, true);
    if (!segs.ok() || !common::valid_api_version(constraints_, (*segs)[0].value_or(""))) {
      co_return co_await next(ex, env);
    }
    const std::string& account = *(*segs)[1];
    // An empty name ("/v1/a/c/") is none, as Python's truth test has it.
    if ((*segs)[3].value_or("").empty()) {
      co_return co_await account_or_container(ex, env, next,
                                              !(*segs)[2].value_or("").empty());
    }
    const std::string& container = *(*segs)[2];
    CachedInfo cinfo = co_await info_.container_info(account, container, req, env);
    if (!is_success(cinfo.status)) co_return co_await next(ex, env);
    std::optional<std::string> flag;
    if (auto v = cinfo.headers.get("X-Container-Sysmeta-Rfc-Compliant-Etags")) {
      flag = std::string(*v);
    } else {
      CachedInfo ainfo = co_await info_.account_info(account, req, env);
      if (!is_success(ainfo.status)) co_return co_await next(ex, env);
      if (auto a = ainfo.headers.get("X-Account-Sysmeta-Rfc-Compliant-Etags")) {
        flag = std::string(*a);
      }
    }
    if (!common::config_true_value(flag.value_or(enable_by_default_))) {
      co_return co_await next(ex, env);
    }
    HeaderEditor quoting(ex, [](int, HeaderMap& h) { quote_etags(h); });
    co_await next(quoting, env);
  }

 private:
  static net::awaitable<void> account_or_container(Exchange& ex, ProxyEnv& env,
                                                   const Next& next, bool container) {
    const std::string client = std::string("X-") + (container ? "Container" : "Account") +
                               "-Rfc-Compliant-Etags";
    const std::string sysmeta = std::string("X-") + (container ? "Container" : "Account") +
                                "-Sysmeta-Rfc-Compliant-Etags";
    HeaderEditor out(ex, [client, sysmeta](int, HeaderMap& h) {
      if (auto v = h.get(sysmeta)) {
        std::string value(*v);
        h.erase(sysmeta);
        h.set(client, value);
      }
    });
    HeaderMap& h = out.mutable_request().headers;
    if (auto v = h.get(client)) {
      h.set(sysmeta, v->empty() ? "" : (common::config_true_value(*v) ? "True" : "False"));
    }
    if (!h.get_or("X-Remove-" + client.substr(2), "").empty()) h.set(sysmeta, "");
    co_await next(out, env);
  }

  const std::string enable_by_default_;
  const common::Constraints& constraints_;
  InfoLookup& info_;
};

}  // namespace

Result<std::unique_ptr<Middleware>> make_etag_quoter(const common::Section& section,
                                                     const MiddlewareContext& context) {
  return std::unique_ptr<Middleware>(std::make_unique<EtagQuoter>(
      section.get_string("enable_by_default", "false"), context.swift.constraints,
      context.info));
}

}  // namespace apus::proxy
