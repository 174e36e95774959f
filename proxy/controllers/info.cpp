#include "proxy/controllers/info.h"

#include <boost/json.hpp>

#include "common/http/swob.h"
#include "proxy/internal/app.h"

namespace apus::proxy {

namespace net = boost::asio;
using common::http::Exchange;
using common::http::Response;

namespace {

constexpr std::string_view kAllowed = "GET, HEAD, OPTIONS";

}  // namespace

net::awaitable<void> InfoController::handle(Exchange& ex, ProxyEnv&) {
  if (!allows(kAllowed, ex.request().method)) {
    co_return co_await ex.reply(method_not_allowed(kAllowed));
  }
  if (!config().expose_info) co_return co_await ex.reply(common::http::swob_response(403));
  Response r;
  r.status = 200;
  r.headers.set("Content-Type", "application/json; charset=UTF-8");
  r.body = info_json();
  co_return co_await ex.reply(std::move(r));
}

std::string InfoController::info_json() {
  const ProxyConfig& conf = config();
  const common::Constraints& c = conf.swift.constraints;
  boost::json::object swift;
  swift["version"] = APUS_SWIFT_VERSION;
  swift["strict_cors_mode"] = true;
  boost::json::array policies;
  for (const common::StoragePolicy* p : conf.swift.policies.visible()) {
    boost::json::object o;
    o["name"] = p->name();
    o["aliases"] = p->aliases();
    if (p->is_default) o["default"] = true;
    policies.push_back(std::move(o));
  }
  swift["policies"] = std::move(policies);
  swift["allow_account_management"] = conf.allow_account_management;
  swift["account_autocreate"] = conf.account_autocreate;
  swift["allow_open_expired"] = false;
  swift["max_file_size"] = c.max_file_size;
  swift["max_meta_name_length"] = c.max_meta_name_length;
  swift["max_meta_value_length"] = c.max_meta_value_length;
  swift["max_meta_count"] = c.max_meta_count;
  swift["max_meta_overall_size"] = c.max_meta_overall_size;
  swift["max_header_size"] = c.max_header_size;
  swift["max_object_name_length"] = c.max_object_name_length;
  swift["container_listing_limit"] = c.container_listing_limit;
  swift["account_listing_limit"] = c.account_listing_limit;
  swift["max_account_name_length"] = c.max_account_name_length;
  swift["max_container_name_length"] = c.max_container_name_length;
  swift["extra_header_count"] = c.extra_header_count;
  std::string out = "{\"swift\": " + boost::json::serialize(swift);
  for (const auto& [name, json] : app().middleware_info()) {
    out += ", \"" + name + "\": " + json;
  }
  out += "}";
  return out;
}

}  // namespace apus::proxy
