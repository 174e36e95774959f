#include "proxy/controllers/account.h"

#include <algorithm>
#include <string>
#include <vector>

#include <boost/json.hpp>

#include "common/constraints.h"
#include "common/http/swob.h"
#include "common/http/url.h"
#include "common/listing_format.h"
#include "common/timestamp.h"
#include "proxy/internal/app.h"

namespace apus::proxy {

namespace net = boost::asio;
using common::Timestamp;
using common::http::Exchange;
using common::http::HeaderMap;
using common::http::Request;
using common::http::Response;
using common::http::istarts_with;
using common::http::swob_response;

namespace {

// Python's json.dumps(v, ensure_ascii=True, separators=(',', ':'), sort_keys=True).
void append_sorted_json(std::string& out, const boost::json::value& v) {
  if (v.is_object()) {
    std::vector<std::pair<std::string, const boost::json::value*>> items;
    for (const auto& [k, val] : v.as_object()) items.emplace_back(std::string(k), &val);
    std::sort(items.begin(), items.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    out += "{";
    for (size_t i = 0; i < items.size(); ++i) {
      if (i) out += ",";
      common::listing::append_json_string(out, items[i].first);
      out += ":";
      append_sorted_json(out, *items[i].second);
    }
    out += "}";
  } else if (v.is_array()) {
    out += "[";
    for (size_t i = 0; i < v.as_array().size(); ++i) {
      if (i) out += ",";
      append_sorted_json(out, v.as_array()[i]);
    }
    out += "]";
  } else if (v.is_string()) {
    common::listing::append_json_string(out, std::string(v.as_string()));
  } else {
    out += boost::json::serialize(v);
  }
}

// The X-Account-Access-Control an owner sees: the stored ACL, re-serialized as Swift's
// format_acl(version=2) does; nothing for an empty or unreadable one.
std::optional<std::string> format_account_acl(std::string_view stored) {
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(stored, ec);
  if (ec || !v.is_object() || v.as_object().empty()) return std::nullopt;
  std::string out;
  append_sorted_json(out, v);
  return out;
}

// A fake, empty account (Swift's account_listing_response with a FakeAccountBroker).
Response fake_empty_account() {
  std::string now = Timestamp::now().normal();
  Response r;
  r.status = 200;
  r.headers.set("X-Account-Container-Count", "0");
  r.headers.set("X-Account-Object-Count", "0");
  r.headers.set("X-Account-Bytes-Used", "0");
  r.headers.set("X-Timestamp", now);
  r.headers.set("X-PUT-Timestamp", now);
  r.headers.set("Content-Type", "application/json; charset=utf-8");
  r.headers.set("X-Backend-Fake-Account-Listing", "yes");
  r.body = "[]";
  return r;
}

std::optional<Response> bad_account_name(const std::string& account,
                                         const common::Constraints& c) {
  if (static_cast<int64_t>(account.size()) <= c.max_account_name_length) return std::nullopt;
  return common::http::swob_response_with_body(
      400, "Account name length of " + std::to_string(account.size()) + " longer than " +
               std::to_string(c.max_account_name_length));
}

}  // namespace

net::awaitable<void> AccountController::handle(Exchange& ex, ProxyEnv& env) {
  const Request& req = ex.request();
  const std::string_view allowed = config().allow_account_management
                                       ? "DELETE, GET, HEAD, OPTIONS, POST, PUT"
                                       : "GET, HEAD, OPTIONS, POST";
  if (!allows(allowed, req.method)) co_return co_await ex.reply(method_not_allowed(allowed));
  if (req.method == "OPTIONS") {
    co_return co_await ex.reply(options_response(req, allowed, nullptr));
  }
  if (auto denied = co_await authorize(req, env, std::nullopt)) {
    co_return co_await ex.reply(std::move(*denied));
  }
  if (auto bad = bad_account_name(path().account, config().swift.constraints)) {
    co_return co_await ex.reply(std::move(*bad));
  }
  auto part = app().account_ring().get_part(path().account);
  if (!part.ok()) co_return co_await ex.reply(swob_response(500));
  if (req.method == "GET" || req.method == "HEAD") {
    co_await get_or_head_account(ex, env, *part);
  } else {
    co_await write_account(ex, env, *part);
  }
}

net::awaitable<void> AccountController::get_or_head_account(Exchange& ex, const ProxyEnv& env,
                                                            uint32_t part) {
  const Request& req = ex.request();
  HeaderMap h = backend_headers(req, env.trans_id);
  for (const auto& [k, v] : req.headers) h.set(k, v);
  h.set("X-Trans-Id", env.trans_id);
  std::string query(req.query());
  Response r = co_await get_or_head(app(), app().account_ring(), part, req.method,
                                    "/" + common::http::quote(path().account) +
                                        (query.empty() ? "" : "?" + query),
                                    h);
  if (r.status == 404) {
    if (common::http::to_lower(r.headers.get_or("X-Account-Status", "")) == "deleted") {
      r.status = 410;
      r.body = swob_response(410).body;
    } else if (config().account_autocreate) {
      r = fake_empty_account();
    }
  }
  if (!env.swift_owner) {
    remove_owner_headers(r.headers);
  } else if (auto acl = r.headers.get("X-Account-Sysmeta-Core-Access-Control")) {
    if (auto shown = format_account_acl(*acl)) r.headers.set("X-Account-Access-Control", *shown);
  }
  co_return co_await ex.reply(std::move(r));
}

net::awaitable<void> AccountController::write_account(Exchange& ex, const ProxyEnv& env,
                                                      uint32_t part) {
  const Request& req = ex.request();
  if (req.method == "DELETE" && !req.query().empty()) {
    co_return co_await ex.reply(common::http::swob_response_with_body(
        400, "The account DELETE cannot take a query string"));
  }
  HeaderMap client = req.headers;
  apply_removes(client, "account");
  if (!env.swift_owner) remove_owner_headers(client);
  for (const auto& [k, v] : env.add_headers) client.set(k, v);
  if (auto bad = refusal(common::check_metadata(config().swift.constraints, client,
                                                common::MetadataTarget::kAccount))) {
    co_return co_await ex.reply(std::move(*bad));
  }
  const HeaderMap base = backend_headers(req, env.trans_id);
  HeaderMap h = base;
  for (const auto& [k, v] : client) {
    if (istarts_with(k, "x-account-meta-") || istarts_with(k, "x-account-sysmeta-")) h.set(k, v);
  }
  h.set("X-Timestamp", Timestamp::now().internal());
  const std::string path = "/" + common::http::quote(this->path().account);
  ring::Ring& ring = app().account_ring();
  co_await forget_account_info(env);
  NodeIter nodes = iter_nodes(app(), ring, part);
  auto answers = co_await make_requests(config().backend, health(), std::move(nodes), req.method,
                                        path, [&](size_t) { return h; });
  Response r = best_response(answers, answers.size());
  // Again: a read during the write may have cached the old state.
  co_await forget_account_info(env);
  if (req.method == "POST" && r.status == 404 && config().account_autocreate) {
    // Swift creates the account, then posts again.
    HeaderMap put = base;
    put.set("X-Timestamp", Timestamp::now().internal());
    NodeIter put_nodes = iter_nodes(app(), ring, part);
    auto created = co_await make_requests(config().backend, health(), std::move(put_nodes), "PUT",
                                          path, [&](size_t) { return put; });
    (void)created;
    h.set("X-Timestamp", Timestamp::now().internal());
    NodeIter again = iter_nodes(app(), ring, part);
    answers = co_await make_requests(config().backend, health(), std::move(again), "POST", path,
                                     [&](size_t) { return h; });
    r = best_response(answers, answers.size());
  }
  co_return co_await ex.reply(std::move(r));
}

}  // namespace apus::proxy
