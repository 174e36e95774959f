// versioned_writes (versioned_writes.h): Swift's legacy versioned writes, and the filter that
// composes it with object versioning. Copies go through `next` (symlink and the app) as
// pre-authorized subrequests, as Swift's make_pre_authed_request() sends them; the client's own
// request goes on with its own rights.
#include "proxy/versioned_writes.h"

#include <boost/json.hpp>
#include <algorithm>
#include <functional>

#include "common/config/config.h"
#include "common/http/date.h"
#include "common/http/swob.h"
#include "common/http/url.h"
#include "common/timestamp.h"
#include "proxy/backend.h"
#include "proxy/subrequest.h"

namespace apus::proxy {

namespace net = boost::asio;
using common::Result;
using common::Status;
using common::http::Exchange;
using common::http::HeaderMap;
using common::http::Request;
using common::http::Response;
using common::http::iequals;
using common::http::swob_response;
using common::http::text_response;

namespace {

using namespace versioning;

constexpr size_t kMaxSmallAnswer = 1 << 20;

bool is_success(int status) { return status >= 200 && status < 300; }

ProxyEnv pre_authed(const ProxyEnv& env) { return pre_authed_env(env, "VW"); }


// The legacy _check_response_error(): 412 for any client error, 503 for the rest.
std::optional<Response> legacy_error(int status) {
  if (is_success(status)) return std::nullopt;
  if (status >= 400 && status < 500) return swob_response(412);
  return swob_response(503);
}

// The legacy middleware.
class LegacyVersionedWrites final : public Middleware {
 public:
  LegacyVersionedWrites(const MiddlewareContext& context, std::string allow)
      : constraints_(context.swift.constraints),
        info_(context.info),
        allow_(std::move(allow)),
        max_listing_(max_listing_body(context.swift.constraints)) {}

  net::awaitable<void> call(Exchange& ex, ProxyEnv& env, const Next& next) override {
    const Request& req = ex.request();
    auto segs = common::http::split_path(common::http::percent_decode(req.path()), 3, 4, true);
    if (!segs.ok()) co_return co_await next(ex, env);
    const bool has_object = (*segs)[3].has_value() && !(*segs)[3]->empty();
    const bool has_container = (*segs)[2].has_value() && !(*segs)[2]->empty();
    if (!allow_.empty() && has_container && !has_object) {
      co_return co_await container_request(ex, env, next);
    }
    if (has_object && (req.method == "PUT" || req.method == "DELETE")) {
      co_return co_await object_request(ex, env, next, *(*segs)[0], *(*segs)[1], *(*segs)[2],
                                        *(*segs)[3]);
    }
    co_await next(ex, env);
  }

 private:
  // X-Versions-Location / X-History-Location become sysmeta; the answer shows them back.
  net::awaitable<void> container_request(Exchange& ex, ProxyEnv& env, const Next& next) const {
    ExchangeWrapper w(ex);
    HeaderMap& h = w.mutable_request().headers;
    if (h.contains(kClientVersionsLoc) && h.contains(kClientHistoryLoc)) {
      if (h.get_or(kClientHistoryLoc, "").empty()) {
        h.erase(kClientHistoryLoc);
      } else if (!h.get_or(kClientVersionsLoc, "").empty()) {
        co_return co_await ex.reply(text_response(
            400, "Only one of x-versions-location or x-history-location may be specified"));
      } else {
        h.erase(kClientVersionsLoc);
      }
    }
    if (h.contains(kClientVersionsLoc) || h.contains(kClientHistoryLoc)) {
      const bool stack = h.contains(kClientVersionsLoc);
      std::string value(h.get_or(stack ? kClientVersionsLoc : kClientHistoryLoc, ""));
      const std::string& method = w.request().method;
      if (value.empty()) {
        h.set("X-Remove-Versions-Location", "x");
      } else if (!common::config_true_value(allow_) && (method == "PUT" || method == "POST")) {
        co_return co_await ex.reply(text_response(412, "Versioned Writes is disabled"));
      } else {
        if (value.find('/') != std::string::npos) {
          co_return co_await ex.reply(common::http::swob_response_with_body(
              412, "Container name cannot contain slashes"));
        }
        h.set(kSysVersionsLoc, value);
        h.set(kSysVersionsMode, stack ? "stack" : "history");
        h.set(kClientVersionsLoc, "");
        h.erase("X-Remove-Versions-Location");
        h.erase("X-Remove-History-Location");
      }
    }
    if (!h.get_or("X-Remove-Versions-Location", "").empty() ||
        !h.get_or("X-Remove-History-Location", "").empty()) {
      h.set(kClientVersionsLoc, "");
      h.set(kSysVersionsLoc, "");
      h.set(kSysVersionsMode, "");
      h.erase("X-Remove-Versions-Location");
      h.erase("X-Remove-History-Location");
    }
    HeaderEditor out(w, [](int, HeaderMap& rh) {
      std::string location(rh.get_or(kSysVersionsLoc, ""));
      if (location.empty()) return;
      rh.set(rh.get_or(kSysVersionsMode, "") == "history" ? kClientHistoryLoc : kClientVersionsLoc,
             location);
    });
    co_await next(out, env);
  }

  net::awaitable<void> object_request(Exchange& ex, ProxyEnv& env, const Next& next,
                                      const std::string& version, const std::string& account,
                                      const std::string& container,
                                      const std::string& object) const {
    const Request& req = ex.request();
    bool enabled = common::config_true_value(allow_);
    CachedInfo info = co_await info_.container_info(account, container, req, env);
    std::string versions_cont(info.headers.get_or(kSysVersionsLoc, ""));
    std::string mode(info.headers.get_or(kSysVersionsMode, "stack"));
    if (mode.empty()) mode = "stack";
    if (versions_cont.empty()) {
      versions_cont = info.headers.get_or(kClientVersionsLoc, "");
      if (allow_.empty() && !versions_cont.empty()) enabled = true;
    }
    if (!enabled || versions_cont.empty()) co_return co_await next(ex, env);
    versions_cont = common::http::percent_decode(versions_cont);
    versions_cont = versions_cont.substr(0, versions_cont.find('/'));
    const Where where{version, account, container, object, versions_cont};
    if (req.method == "PUT") {
      ExchangeWrapper w(ex);
      if (auto stop = co_await copy_current(w, env, next, where)) {
        co_return co_await ex.reply(std::move(*stop));
      }
      co_return co_await next(w, env);
    }
    if (mode == "history") co_return co_await delete_push(ex, env, next, where);
    co_await delete_pop(ex, env, next, where);
  }

  struct Where {
    std::string version, account, container, object, versions_cont;
    std::string object_path() const {
      return "/" + version + "/" + account + "/" + container + "/" + object;
    }
    std::string versions_path(std::string_view name) const {
      return "/" + version + "/" + account + "/" + versions_cont + "/" + std::string(name);
    }
  };

  net::awaitable<std::optional<Response>> authorize_write(const Request& req, ProxyEnv& env,
                                                          const Where& w) const {
    if (!env.authorize) co_return std::nullopt;
    CachedInfo info = co_await info_.container_info(w.account, w.container, req, env);
    std::optional<std::string> acl;
    if (auto v = info.headers.get("X-Container-Write")) acl = std::string(*v);
    env.acl = acl;
    co_return co_await env.authorize(req, env);
  }

  // The path a copy goes to, from the source's headers.
  using Destination = std::function<Result<std::string>(const HeaderMap& source)>;

  // GETs `from` (raw, newest) and PUTs its data and metadata at to(its headers). An empty 200
  // when copied, 404 when there was nothing to copy, or the error to answer.
  net::awaitable<Response> copy_object(const Request& req, ProxyEnv& env, const Next& next,
                                       const std::string& from, const Destination& to) const {
    HeaderMap gh = pre_authed_headers(req);
    gh.set("X-Newest", "True");
    std::unique_ptr<Subrequest> src = co_await Subrequest::start(
        next, make_subrequest("GET", from, "symlink=get", gh), pre_authed(env));
    const int status = src->status();
    if (!src->length() || static_cast<int64_t>(*src->length()) > constraints_.max_file_size) {
      co_await src->close();
      co_return *legacy_error(413);
    }
    if (status == 404) {
      co_await src->close();
      co_return swob_response(404);
    }
    if (auto bad = legacy_error(status)) {
      co_await src->close();
      co_return std::move(*bad);
    }
    auto path = to(src->headers());
    if (!path.ok()) {
      co_await src->close();
      co_return swob_response(503);
    }
    Request put = make_subrequest("PUT", *path, "", pre_authed_headers(req));
    for (const auto& [k, v] : src->headers()) {
      if (iequals(k, "x-timestamp") || common::http::istarts_with(k, "x-backend-") ||
          iequals(k, "content-length") || iequals(k, "transfer-encoding") ||
          iequals(k, "connection")) {
        continue;
      }
      put.headers.set(k, v);
    }
    put.headers.set("Content-Length", std::to_string(*src->length()));
    put.content_length = src->length();
    ProxyEnv put_env = pre_authed(env);
    if (auto slo_size = put.headers.get("X-Object-Sysmeta-Slo-Size")) {
      put.headers.set("Content-Type", std::string(put.headers.get_or("Content-Type", "")) +
                                          "; swift_bytes=" + std::string(*slo_size));
      put_env.content_type_overridden = true;
    }
    SubrequestBody body(*src);
    auto answer = co_await run_subrequest_with_body(next, std::move(put), std::move(put_env), body,
                                                    kMaxSmallAnswer);
    co_await src->close();
    if (!answer.ok()) co_return swob_response(503);
    if (auto bad = legacy_error(answer->status)) co_return std::move(*bad);
    co_return Response{};
  }

  // The current object, if any, copied to the versions container, named after its timestamp.
  // `w` is the client's request going on afterwards (its query dropped, as Swift's
  // _copy_current() drops it).
  net::awaitable<std::optional<Response>> copy_current(ExchangeWrapper& w, ProxyEnv& env,
                                                       const Next& next, const Where& where) const {
    const Request& req = w.request();
    if (auto denied = co_await authorize_write(req, env, where)) co_return std::move(*denied);
    Destination to = [&where](const HeaderMap& h) -> Result<std::string> {
      std::string ts(h.get_or("X-Timestamp", ""));
      if (ts.empty()) {
        auto when = common::http::parse_http_date(h.get_or("Last-Modified", ""));
        ts = std::to_string(when.value_or(0));
      }
      auto name = legacy_versions_name(where.object, ts);
      if (!name.ok()) return name.status();
      return where.versions_path(*name);
    };
    Response copied = co_await copy_object(req, env, next, where.object_path(), to);
    w.mutable_request().target = std::string(w.request().path());
    if (copied.status == 404) co_return std::nullopt;
    if (copied.status != 200) co_return copied;
    co_return std::nullopt;
  }

  // History mode DELETE: the object is copied away and a delete marker written.
  net::awaitable<void> delete_push(Exchange& ex, ProxyEnv& env, const Next& next,
                                   const Where& where) const {
    ExchangeWrapper w(ex);
    if (auto stop = co_await copy_current(w, env, next, where)) {
      co_return co_await ex.reply(std::move(*stop));
    }
    const Request& req = w.request();
    auto name = legacy_versions_name(where.object, common::Timestamp::now().internal());
    HeaderMap mh = pre_authed_headers(req);
    mh.set("Content-Type", kDeleteMarkerType);
    mh.set("Content-Length", "0");
    if (auto token = req.headers.get("X-Auth-Token")) mh.set("X-Auth-Token", *token);
    ProxyEnv marker_env = pre_authed(env);
    marker_env.content_type_overridden = true;
    auto marker = co_await run_subrequest(
        next, make_subrequest("PUT", where.versions_path(*name), "", mh), std::move(marker_env),
        kMaxSmallAnswer);
    if (!marker.ok()) co_return co_await ex.reply(swob_response(503));
    if (auto bad = legacy_error(marker->status)) co_return co_await ex.reply(std::move(*bad));
    co_await next(w, env);
  }

  // One page of the versions listing of `prefix`, newest first (reverse), after `marker`.
  // nullopt at the end (or when the versions container is gone); an error response otherwise.
  net::awaitable<common::http::OrRefusal<std::vector<std::pair<std::string, std::string>>>>
  listing_page(const Request& req, ProxyEnv& env, const Next& next, const Where& where,
               const std::string& prefix, const std::string& marker) const {
    using Page = std::vector<std::pair<std::string, std::string>>;  // name, content type
    std::string query = "format=json&prefix=" + common::http::quote(prefix, "") +
                        "&marker=" + common::http::quote(marker, "") + "&reverse=on";
    auto answer = co_await run_subrequest(
        next,
        make_subrequest("GET", "/v1/" + where.account + "/" + where.versions_cont, query,
                        pre_authed_headers(req)),
        pre_authed(env), max_listing_);
    if (!answer.ok()) co_return swob_response(500);
    if (answer->status == 404) co_return Page{};
    if (!is_success(answer->status)) {
      if (answer->status >= 400 && answer->status < 500) co_return swob_response(412);
      co_return swob_response(500);
    }
    Page page;
    if (answer->body.empty()) co_return page;
    boost::system::error_code ec;
    boost::json::value v = boost::json::parse(answer->body, ec);
    if (ec || !v.is_array()) co_return swob_response(500);
    for (const auto& item : v.get_array()) {
      const auto* o = item.if_object();
      if (!o) continue;
      const auto* name = o->if_contains("name");
      const auto* type = o->if_contains("content_type");
      if (!name || !name->is_string()) continue;
      page.emplace_back(std::string(name->get_string()),
                        type && type->is_string() ? std::string(type->get_string()) : "");
    }
    co_return page;
  }

  // Stack mode DELETE: the newest version takes the object's place (a delete marker on top
  // goes, and the version under it comes back if the object is gone).
  net::awaitable<void> delete_pop(Exchange& ex, ProxyEnv& env, const Next& next,
                                  const Where& where) const {
    const Request& req = ex.request();
    const std::string prefix = legacy_versions_prefix(where.object);
    std::vector<std::pair<std::string, std::string>> items;
    size_t at = 0;
    std::string marker;
    bool done = false;
    // The next version, newest first; nullopt at the end.
    auto next_item = [&]() -> net::awaitable<
                               common::http::OrRefusal<std::optional<std::pair<std::string, std::string>>>> {
      using Item = std::optional<std::pair<std::string, std::string>>;
      if (at == items.size() && !done) {
        auto page = co_await listing_page(req, env, next, where, prefix, marker);
        if (!page) co_return std::move(page).refusal();
        items = std::move(*page);
        at = 0;
        if (items.empty()) {
          done = true;
        } else {
          marker = items.back().first;
        }
      }
      if (at == items.size()) co_return Item();
      co_return Item(items[at++]);
    };
    const Destination to_object = [&where](const HeaderMap&) -> Result<std::string> {
      return where.object_path();
    };
    HeaderMap auth;
    if (auto token = req.headers.get("X-Auth-Token")) auth.set("X-Auth-Token", *token);
    bool authed = false;
    for (;;) {
      auto previous = co_await next_item();
      if (!previous) co_return co_await ex.reply(std::move(previous).refusal());
      if (!*previous) break;
      if (!authed) {
        if (auto denied = co_await authorize_write(req, env, where)) {
          co_return co_await ex.reply(std::move(*denied));
        }
        authed = true;
      }
      const auto& [prev_name, prev_type] = **previous;
      std::string delete_path;
      if (prev_type == kDeleteMarkerType) {
        HeaderMap hh = pre_authed_headers(req);
        hh.set("X-Newest", "True");
        for (const auto& [k, v] : auth) hh.set(k, v);
        auto head = co_await run_subrequest(
            next, make_subrequest("HEAD", where.object_path(), "", hh), pre_authed(env),
            kMaxSmallAnswer);
        const int hstatus = head.ok() ? head->status : 503;
        if (hstatus != 404) {
          if (auto bad = legacy_error(hstatus)) co_return co_await ex.reply(std::move(*bad));
          break;  // the object is there: it is the one deleted
        }
        for (;;) {
          auto restore = co_await next_item();
          if (!restore) co_return co_await ex.reply(std::move(restore).refusal());
          if (!*restore || (*restore)->second == kDeleteMarkerType) break;
          const std::string path = where.versions_path((*restore)->first);
          Response copied = co_await copy_object(req, env, next, path, to_object);
          if (copied.status == 404) continue;
          if (copied.status != 200) co_return co_await ex.reply(std::move(copied));
          HeaderMap dh = pre_authed_headers(req);
          for (const auto& [k, v] : auth) dh.set(k, v);
          auto del = co_await run_subrequest(next, make_subrequest("DELETE", path, "", dh),
                                             pre_authed(env), kMaxSmallAnswer);
          const int dstatus = del.ok() ? del->status : 503;
          if (dstatus != 404) {
            if (auto bad = legacy_error(dstatus)) co_return co_await ex.reply(std::move(*bad));
          }
          break;
        }
        delete_path = where.versions_path(prev_name);
      } else {
        const std::string path = where.versions_path(prev_name);
        Response copied = co_await copy_object(req, env, next, path, to_object);
        if (copied.status == 404) continue;
        if (copied.status != 200) co_return co_await ex.reply(std::move(copied));
        delete_path = path;
      }
      // The version now restored (or the marker) goes, and its answer is the client's.
      HeaderMap dh = pre_authed_headers(req);
      for (const auto& [k, v] : auth) dh.set(k, v);
      ExchangeWrapper del(ex, make_subrequest("DELETE", delete_path, "", dh));
      ProxyEnv del_env = pre_authed(env);
      co_return co_await next(del, del_env);
    }
    co_await next(ex, env);
  }

  const common::Constraints& constraints_;
  InfoLookup& info_;
  const std::string allow_;  // allow_versioned_writes as written (Swift tests it for presence)
  const size_t max_listing_;
};

// The filter: the legacy middleware around object versioning, as Swift stacks them.
class VersionedWrites final : public Middleware {
 public:
  VersionedWrites(std::unique_ptr<Middleware> legacy, std::unique_ptr<Middleware> versioning,
                  bool legacy_info)
      : legacy_(std::move(legacy)), versioning_(std::move(versioning)), legacy_info_(legacy_info) {}

  std::vector<std::pair<std::string, std::string>> info_sections() const override {
    std::vector<std::pair<std::string, std::string>> out;
    if (legacy_info_) {
      out.emplace_back("versioned_writes",
                       "{\"allowed_flags\": [\"x-versions-location\", \"x-history-location\"]}");
    }
    if (versioning_) out.emplace_back("object_versioning", "{}");
    return out;
  }

  net::awaitable<void> call(Exchange& ex, ProxyEnv& env, const Next& next) override {
    if (!versioning_) co_return co_await legacy_->call(ex, env, next);
    // `next` is the pipeline's, which outlives every request; the inner Next refers to it.
    Middleware* inner = versioning_.get();
    const Next* rest = &next;
    Next through = [inner, rest](Exchange& e, ProxyEnv& en) { return inner->call(e, en, *rest); };
    co_await legacy_->call(ex, env, through);
  }

 private:
  std::unique_ptr<Middleware> legacy_;
  std::unique_ptr<Middleware> versioning_;  // null without allow_object_versioning
  const bool legacy_info_;
};

}  // namespace

std::unique_ptr<Middleware> make_legacy_versioned_writes(const MiddlewareContext& context,
                                                         std::string allow_versioned_writes) {
  return std::make_unique<LegacyVersionedWrites>(context, std::move(allow_versioned_writes));
}

Result<std::unique_ptr<Middleware>> make_versioned_writes(const common::Section& section,
                                                          const MiddlewareContext& context) {
  std::string allow = section.get_string("allow_versioned_writes", "");
  const bool object_versioning =
      common::config_true_value(section.get_string("allow_object_versioning", ""));
  const bool legacy_info = common::config_true_value(allow);
  return std::unique_ptr<Middleware>(std::make_unique<VersionedWrites>(
      make_legacy_versioned_writes(context, std::move(allow)),
      object_versioning ? make_object_versioning(context) : nullptr, legacy_info));
}

}  // namespace apus::proxy
