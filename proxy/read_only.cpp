// read_only (limits.h): writes (PUT, POST, COPY, and DELETE unless allow_deletes) to an
// account that is read only answer 405 "Writes are disabled for this account.". An account is
// read only when its X-Account-Sysmeta-Read-Only says so (true or false, set by an operator
// directly on the account servers: gatekeeper keeps clients from it), else when the
// cluster-wide read_only option is on. A COPY is judged by its Destination-Account.
#include "common/config/config.h"
#include "common/constraints.h"
#include "common/http/swob.h"
#include "common/http/url.h"
#include "proxy/limits.h"

namespace apus::proxy {

namespace net = boost::asio;
using common::Result;
using common::http::Exchange;
using common::http::Request;
using common::http::swob_response_with_body;

namespace {

class ReadOnly final : public Middleware {
 public:
  ReadOnly(bool read_only, bool allow_deletes, const common::Constraints& constraints,
           InfoLookup& info)
      : read_only_(read_only),
        allow_deletes_(allow_deletes),
        constraints_(constraints),
        info_(info) {}

  std::optional<std::pair<std::string, std::string>> info() const override {
    // Swift registers the section only when the whole cluster is read only.
    if (!read_only_) return std::nullopt;
    return std::make_pair(std::string("read_only"), std::string("{}"));
  }

  net::awaitable<void> call(Exchange& ex, ProxyEnv& env, const Next& next) override {
    const Request& req = ex.request();
    if (!is_write(req.method)) co_return co_await next(ex, env);
    auto segs = common::http::split_path(common::http::percent_decode(req.path()), 2, 4, true);
    if (!segs.ok() || !common::valid_api_version(constraints_, (*segs)[0].value_or(""))) {
      co_return co_await next(ex, env);
    }
    std::string account = *(*segs)[1];
    if (req.method == "COPY") {
      if (auto dest = req.headers.get("Destination-Account")) {
        // Swift's check_account_format(), on the header as it is (not unquoted).
        if (dest->empty()) {
          co_return co_await ex.reply(swob_response_with_body(412, "Account name cannot be empty"));
        }
        if (dest->find('/') != std::string_view::npos) {
          co_return co_await ex.reply(
              swob_response_with_body(412, "Account name cannot contain slashes"));
        }
        account = std::string(*dest);
      }
    }
    CachedInfo info = co_await info_.account_info(account, req, env);
    std::string_view flag = info.headers.get_or("X-Account-Sysmeta-Read-Only", "");
    const bool read_only = flag.empty() ? read_only_ : common::config_true_value(flag);
    if (read_only) {
      co_return co_await ex.reply(
          swob_response_with_body(405, "Writes are disabled for this account."));
    }
    co_await next(ex, env);
  }

 private:
  bool is_write(std::string_view method) const {
    return method == "PUT" || method == "POST" || method == "COPY" ||
           (method == "DELETE" && !allow_deletes_);
  }

  const bool read_only_;
  const bool allow_deletes_;
  const common::Constraints& constraints_;
  InfoLookup& info_;
};

}  // namespace

Result<std::unique_ptr<Middleware>> make_read_only(const common::Section& section,
                                                   const MiddlewareContext& context) {
  // config_true_value(): anything but a true word is false, never an error.
  const bool read_only = common::config_true_value(section.get_string("read_only", ""));
  const bool allow_deletes = common::config_true_value(section.get_string("allow_deletes", ""));
  return std::unique_ptr<Middleware>(std::make_unique<ReadOnly>(
      read_only, allow_deletes, context.swift.constraints, context.info));
}

}  // namespace apus::proxy
