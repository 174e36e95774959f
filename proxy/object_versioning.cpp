// object_versioning (versioned_writes.h): the pure naming and listing parts, and the
// ObjectVersioning middleware. Every request it makes of the rest of the pipeline runs through
// `next` (symlink and the app), pre-authorized where Swift's make_pre_authed_request() is used
// (reading and writing the hidden versions container), and with the client's own rights where
// Swift passes the client's request on (the link PUT, the DELETE, reads of one version).
#include "proxy/versioned_writes.h"

#include <boost/json.hpp>
#include <algorithm>
#include <array>
#include <functional>

#include "common/config/config.h"
#include "common/constraints.h"
#include "common/http/date.h"
#include "common/http/headers.h"
#include "common/http/swob.h"
#include "common/http/url.h"
#include "common/listing_format.h"
#include "common/timestamp.h"
#include "proxy/backend.h"
#include "proxy/subrequest.h"
#include "proxy/symlink.h"

namespace apus::proxy {

namespace net = boost::asio;
namespace json = boost::json;
using common::Result;
using common::Status;
using common::Timestamp;
using common::http::Exchange;
using common::http::HeaderMap;
using common::http::Request;
using common::http::Response;
using common::http::swob_response;
using common::http::swob_response_with_body;
using common::http::text_response;

namespace versioning {

namespace {

std::optional<std::string> string_field(const json::object& o, std::string_view key) {
  auto it = o.find(key);
  if (it == o.end() || !it->value().is_string()) return std::nullopt;
  const json::string& s = it->value().get_string();
  return std::string(s.data(), s.size());
}

// The key Swift's build_listing() sorts by: a subdir's name, else the entry's name.
std::string merge_key(const json::object& o) {
  if (auto s = string_field(o, "subdir")) return *s;
  return string_field(o, "name").value_or("");
}

// Swift's build_listing(): the entries sorted by name (a stable sort, also when reversed, as
// Python's sorted(reverse=True) keeps equal keys in their order), cut to `limit`, as JSON.
std::string build_listing(std::vector<json::object> entries, bool reverse, int64_t limit) {
  std::vector<std::pair<std::string, size_t>> keys;
  keys.reserve(entries.size());
  for (size_t i = 0; i < entries.size(); ++i) keys.emplace_back(merge_key(entries[i]), i);
  std::stable_sort(keys.begin(), keys.end(), [reverse](const auto& a, const auto& b) {
    return reverse ? a.first > b.first : a.first < b.first;
  });
  json::array out;
  for (const auto& [key, i] : keys) {
    if (limit >= 0 && static_cast<int64_t>(out.size()) >= limit) break;
    out.emplace_back(std::move(entries[i]));
  }
  std::string body;
  common::listing::append_python_json(body, out);
  return body;
}

std::optional<json::array> parse_array_of_objects(std::string_view text) {
  boost::system::error_code ec;
  json::value v = json::parse(text, ec);
  if (ec || !v.is_array()) return std::nullopt;
  for (const auto& item : v.get_array()) {
    if (!item.is_object()) return std::nullopt;
  }
  return std::move(v.get_array());
}

}  // namespace

std::optional<std::string> reserved_name(std::initializer_list<std::string_view> parts) {
  std::string out(1, kReserved);
  bool first = true;
  for (std::string_view part : parts) {
    if (part.find(kReserved) != std::string_view::npos) return std::nullopt;
    if (!first) out += kReserved;
    out += part;
    first = false;
  }
  return out;
}

std::optional<std::vector<std::string>> split_reserved_name(std::string_view name) {
  if (name.empty() || name.front() != kReserved) return std::nullopt;
  std::vector<std::string> parts;
  size_t start = 1;
  for (;;) {
    size_t next = name.find(kReserved, start);
    parts.emplace_back(name.substr(start, next == std::string_view::npos ? std::string_view::npos
                                                                         : next - start));
    if (next == std::string_view::npos) break;
    start = next + 1;
  }
  return parts;
}

std::optional<std::string> versions_container_name(std::string_view container) {
  return reserved_name({"versions", container});
}

std::string split_versions_container_name(std::string_view name) {
  auto parts = split_reserved_name(name);
  if (!parts || parts->size() != 2 || (*parts)[0] != "versions") return std::string(name);
  return (*parts)[1];
}

Result<std::string> versions_object_name(std::string_view object, std::string_view version_id) {
  auto ts = Timestamp::parse(version_id);
  if (!ts.ok()) return ts.status();
  auto inv = ts->inverted();
  if (!inv.ok()) return inv.status();
  auto name = reserved_name({object, inv->internal()});
  if (!name) return Status::invalid_argument("Invalid reserved part in components");
  return *name;
}

std::pair<std::string, std::optional<std::string>> parse_versions_object_name(
    std::string_view name) {
  auto parts = split_reserved_name(name);
  if (!parts || parts->size() != 2) return {std::string(name), std::nullopt};
  auto ts = Timestamp::parse((*parts)[1]);
  if (!ts.ok()) return {std::string(name), std::nullopt};
  auto inv = ts->inverted();
  if (!inv.ok()) return {std::string(name), std::nullopt};
  return {(*parts)[0], inv->internal()};
}

Result<std::string> timestamp_to_version(std::string_view timestamp) {
  auto ts = Timestamp::parse(timestamp);
  if (!ts.ok()) return ts.status();
  auto plain = Timestamp::from_raw(ts->raw());
  if (!plain.ok()) return plain.status();
  return plain->internal();
}

bool valid_version(std::string_view version, bool allow_null) {
  if (version == "null" && allow_null) return true;
  return Timestamp::parse(version).ok();
}

Result<std::optional<std::string>> versions_listing_marker(
    const std::optional<std::string>& marker, const std::optional<std::string>& version_marker) {
  if (!marker) {
    if (version_marker) return Status::invalid_argument("version_marker param requires marker");
    return std::optional<std::string>();
  }
  if (!version_marker) {
    auto prefix = reserved_name({*marker, ""});
    if (!prefix) return Status::io_error("Invalid reserved part in components");
    return std::optional<std::string>(*prefix + ":");  // just past every timestamp
  }
  if (*version_marker == "null") {
    auto prefix = reserved_name({*marker, ""});  // just before every timestamp
    if (!prefix) return Status::io_error("Invalid reserved part in components");
    return std::optional<std::string>(*prefix);
  }
  auto ts = Timestamp::parse(*version_marker);
  if (!ts.ok()) return Status::invalid_argument("invalid version_marker param");
  auto name = versions_object_name(*marker, ts->internal());
  if (!name.ok()) return Status::io_error(name.status().message());
  return std::optional<std::string>(*name);
}

std::optional<std::string> rewrite_container_listing(std::string_view text,
                                                     std::string_view location,
                                                     std::string_view container,
                                                     bool versions_listing) {
  auto listing = parse_array_of_objects(text);
  if (!listing) return std::nullopt;
  for (auto& value : *listing) {
    json::object& item = value.get_object();
    auto path = string_field(item, "symlink_path");
    auto etag = string_field(item, "symlink_etag");
    auto bytes_it = item.find("symlink_bytes");
    if (!path || !etag || bytes_it == item.end()) continue;
    auto segs = common::http::split_path(common::http::percent_decode(*path), 4, 4, true);
    if (!segs.ok()) continue;
    const std::string& target_account = *(*segs)[1];
    const std::string& target_container = *(*segs)[2];
    const std::string& target_object = *(*segs)[3];
    if (target_container != location) continue;  // links elsewhere keep their fields
    int64_t bytes = 0;
    if (bytes_it->value().is_int64()) {
      bytes = bytes_it->value().get_int64();
    } else if (bytes_it->value().is_uint64()) {
      bytes = static_cast<int64_t>(bytes_it->value().get_uint64());
    } else if (bytes_it->value().is_string()) {
      auto n = common::parse_python_int(std::string(bytes_it->value().get_string()));
      if (!n) continue;
      bytes = *n;
    } else {
      continue;
    }
    std::string hash = *etag;
    if (auto h = string_field(item, "hash")) {
      for (const auto& [k, v] : symlink::parse_header(*h).second) hash += "; " + k + "=" + v;
    }
    item.stable_erase("symlink_bytes");
    item["bytes"] = bytes;
    item["version_symlink"] = true;
    item.stable_erase("symlink_etag");
    item["hash"] = hash;
    auto [object, version_id] = parse_versions_object_name(target_object);
    if (version_id && !versions_listing) {
      item["symlink_path"] = common::http::quote("/v1/" + target_account + "/" +
                                                 std::string(container) + "/" + object) +
                             "?version-id=" + *version_id;
    }
  }
  std::string out;
  common::listing::append_python_json(out, *listing);
  return out;
}

std::optional<std::string> merge_versions_listing(std::string_view primary,
                                                  const std::optional<std::string>& versions,
                                                  std::string_view account,
                                                  std::string_view location, bool reverse,
                                                  int64_t limit) {
  auto primary_listing = parse_array_of_objects(primary);
  if (!primary_listing) return std::nullopt;
  std::optional<json::array> versions_listing;
  if (versions) {
    versions_listing = parse_array_of_objects(*versions);
    if (!versions_listing) return std::nullopt;
  }
  std::vector<json::object> entries;    // null versions, then versions, then subdirs
  std::vector<std::string> subdirs;     // Swift's subdir_set, in first-seen order
  std::vector<std::string> latest;      // names whose latest version is listed
  std::vector<std::pair<std::string, json::object>> current;  // link path -> link entry
  auto add_subdir = [&](std::string s) {
    if (std::find(subdirs.begin(), subdirs.end(), s) == subdirs.end()) {
      subdirs.push_back(std::move(s));
    }
  };
  auto is_latest = [&](const std::string& name) {
    return std::find(latest.begin(), latest.end(), name) != latest.end();
  };
  for (auto& value : *primary_listing) {
    json::object& item = value.get_object();
    if (!item.contains("name")) {
      add_subdir(string_field(item, "subdir").value_or(""));
      continue;
    }
    auto vs = item.find("version_symlink");
    if (vs != item.end() && !(vs->value().is_bool() && !vs->value().get_bool()) &&
        !vs->value().is_null()) {
      std::string path = common::http::percent_decode(string_field(item, "symlink_path").value_or(""));
      current.emplace_back(std::move(path), item);
      continue;
    }
    json::object entry = item;
    entry["version_id"] = "null";
    entry["is_latest"] = true;
    latest.push_back(string_field(item, "name").value_or(""));
    entries.push_back(std::move(entry));
  }
  std::vector<json::object> tail;  // the broken-link entries (404 case)
  if (!versions_listing) {
    // No versions container: the links are listed as the versions they point at.
    for (auto& [path, item] : current) {
      // path.split('/', 4)[-1]
      std::string_view rest = path;
      for (int i = 0; i < 4; ++i) {
        size_t slash = rest.find('/');
        if (slash == std::string_view::npos) break;
        rest.remove_prefix(slash + 1);
      }
      auto [name, version_id] = parse_versions_object_name(rest);
      if (!version_id) continue;
      json::object entry;
      entry["name"] = name;
      entry["is_latest"] = !is_latest(name);
      if (!is_latest(name)) latest.push_back(name);
      entry["version_id"] = *version_id;
      for (const char* key : {"content_type", "bytes", "hash", "last_modified"}) {
        auto it = item.find(key);
        entry[key] = it == item.end() ? json::value(nullptr) : it->value();
      }
      tail.push_back(std::move(entry));
    }
  } else {
    const std::string prefix = "/v1/" + std::string(account) + "/" + std::string(location) + "/";
    for (auto& value : *versions_listing) {
      json::object& item = value.get_object();
      if (!item.contains("name")) {
        auto parts = split_reserved_name(string_field(item, "subdir").value_or(""));
        if (parts && !parts->empty()) add_subdir((*parts)[0]);
        continue;
      }
      std::string stored = string_field(item, "name").value_or("");
      auto [name, version_id] = parse_versions_object_name(stored);
      if (!version_id) continue;
      const std::string path = prefix + stored;
      auto link = std::find_if(current.begin(), current.end(),
                               [&](const auto& c) { return c.first == path; });
      if (link != current.end()) {
        item["is_latest"] = true;
        latest.push_back(name);
        current.erase(link);
      } else if (string_field(item, "content_type").value_or("") == kDeleteMarkerType &&
                 !is_latest(name)) {
        item["is_latest"] = true;
        latest.push_back(name);
      } else {
        item["is_latest"] = false;
      }
      item["name"] = name;
      item["version_id"] = *version_id;
      entries.push_back(std::move(item));
    }
    // Swift lists the links left over (their version is gone) from link_path.split('/', 1),
    // which never names a version: they are left out, as there.
  }
  for (std::string& s : subdirs) {
    json::object entry;
    entry["subdir"] = s;
    entries.push_back(std::move(entry));
  }
  for (auto& t : tail) entries.push_back(std::move(t));
  return build_listing(std::move(entries), reverse, limit);
}

std::optional<std::string> merge_account_listing(std::string_view listing_text,
                                                 std::string_view versions, bool reverse,
                                                 int64_t limit) {
  auto listing = parse_array_of_objects(listing_text);
  if (!listing) return std::nullopt;
  std::vector<std::pair<std::string, json::object>> by_name;
  if (auto vl = parse_array_of_objects(versions)) {
    for (auto& value : *vl) {
      json::object& item = value.get_object();
      auto name = string_field(item, "name");
      if (!name) continue;
      std::string user = split_versions_container_name(*name);
      auto same = std::find_if(by_name.begin(), by_name.end(),
                               [&](const auto& p) { return p.first == user; });
      if (same != by_name.end()) {
        same->second = item;
      } else {
        by_name.emplace_back(std::move(user), item);
      }
    }
  }
  auto as_int = [](const json::value* v) -> int64_t {
    if (!v) return 0;
    if (v->is_int64()) return v->get_int64();
    if (v->is_uint64()) return static_cast<int64_t>(v->get_uint64());
    return 0;
  };
  std::vector<json::object> entries;
  for (auto& value : *listing) {
    json::object& item = value.get_object();
    if (auto name = string_field(item, "name")) {
      auto v = std::find_if(by_name.begin(), by_name.end(),
                            [&](const auto& p) { return p.first == *name; });
      if (v != by_name.end()) {
        item["bytes"] = as_int(item.if_contains("bytes")) + as_int(v->second.if_contains("bytes"));
        by_name.erase(v);
      }
    }
    entries.push_back(std::move(item));
  }
  // Versions containers whose container is gone: listed so that their owner sees them.
  for (auto& [name, item] : by_name) {
    item["name"] = name;
    item["count"] = 0;
    entries.push_back(std::move(item));
  }
  return build_listing(std::move(entries), reverse, limit);
}

std::string legacy_versions_prefix(std::string_view object) {
  char len[32];
  std::snprintf(len, sizeof len, "%03zx", object.size());
  return std::string(len) + std::string(object) + "/";
}

Result<std::string> legacy_versions_name(std::string_view object, std::string_view timestamp) {
  auto ts = Timestamp::parse(timestamp);
  if (!ts.ok()) return ts.status();
  return legacy_versions_prefix(object) + ts->internal();
}

}  // namespace versioning

namespace {

using namespace versioning;

constexpr std::string_view kNoVersionsContainer =
    "The versions container does not exist. You may want to re-enable object versioning.";
// The most a small answer (HEAD, PUT, POST, DELETE, errors) may hold.
constexpr size_t kMaxSmallAnswer = 1 << 20;

bool is_success(int status) { return status >= 200 && status < 300; }

// An env for Swift's make_pre_authed_request(): no authorization on the subrequest.
ProxyEnv pre_authed(const ProxyEnv& env) { return pre_authed_env(env, "OV"); }


// Swift's _check_response_error(): nothing for a success; 412 for a 404, the answer itself for
// another client error, 503 for anything else.
std::optional<Response> response_error(const Response& r) {
  if (is_success(r.status)) return std::nullopt;
  if (r.status >= 400 && r.status < 500) {
    if (r.status == 404) return swob_response(412);
    Response out = r;
    out.headers.erase("Content-Length");
    out.headers.erase("Transfer-Encoding");
    return out;
  }
  return swob_response(503);
}

// A request's target for the decoded `path`, keeping `query`.
std::string target_of(std::string_view path, std::string_view query) {
  std::string t = common::http::quote(path);
  if (!query.empty()) t += "?" + std::string(query);
  return t;
}

// A BodySource reading the client's request body, counting the bytes.
class ClientBody final : public BodySource {
 public:
  explicit ClientBody(Exchange& ex) : ex_(ex) {}
  net::awaitable<Result<size_t>> read(std::span<char> buf) override {
    auto n = co_await ex_.read_body(buf);
    if (n.ok()) bytes_ += *n;
    co_return n;
  }
  uint64_t bytes() const { return bytes_; }

 private:
  Exchange& ex_;
  uint64_t bytes_ = 0;
};

// An ExchangeWrapper that looks at an answer's head and either lets it through (headers
// possibly edited) or replaces it with another answer (its body then abandoned).
class Replace final : public ExchangeWrapper {
 public:
  using Decide = std::function<std::optional<Response>(int status, HeaderMap& headers)>;
  Replace(Exchange& inner, Decide decide) : ExchangeWrapper(inner), decide_(std::move(decide)) {}

  net::awaitable<Status> write_body(std::string_view chunk) override {
    if (!replaced_) co_return co_await ExchangeWrapper::write_body(chunk);
    co_return Status::cancelled("answer replaced by object versioning");
  }
  net::awaitable<Status> finish_response() override {
    if (!replaced_) co_return co_await ExchangeWrapper::finish_response();
    co_return Status();
  }

 protected:
  net::awaitable<Status> do_respond(Response r) override {
    if (auto other = decide_(r.status, r.headers)) {
      replaced_ = true;
      co_return co_await ExchangeWrapper::do_respond(std::move(*other));
    }
    co_return co_await ExchangeWrapper::do_respond(std::move(r));
  }
  net::awaitable<Status> do_start_response(int status, HeaderMap headers,
                                           std::optional<uint64_t> length) override {
    if (auto other = decide_(status, headers)) {
      replaced_ = true;
      co_return co_await ExchangeWrapper::do_respond(std::move(*other));
    }
    co_return co_await ExchangeWrapper::do_start_response(status, std::move(headers), length);
  }

 private:
  Decide decide_;
  bool replaced_ = false;
};

// The decoded /<version>/<account>/<container>/<object> of an object request, and what the
// container's info says of its versioning.
struct ObjectPath {
  std::string version, account, container, object;
  std::string versions_cont;  // decoded; empty when the container was never versioned
  bool enabled = false;
};

class ObjectVersioning final : public Middleware {
 public:
  ObjectVersioning(const MiddlewareContext& context)
      : constraints_(context.swift.constraints),
        policies_(context.swift.policies),
        info_(context.info),
        max_listing_(max_listing_body(context.swift.constraints)) {}

  std::optional<std::pair<std::string, std::string>> info() const override {
    return std::make_pair(std::string("object_versioning"), std::string("{}"));
  }

  net::awaitable<void> call(Exchange& ex, ProxyEnv& env, const Next& next) override {
    const Request& req = ex.request();
    auto segs = common::http::split_path(common::http::percent_decode(req.path()), 2, 4, true);
    if (!segs.ok() || !common::valid_api_version(constraints_, (*segs)[0].value_or(""))) {
      co_return co_await next(ex, env);
    }
    ObjectPath p;
    p.version = *(*segs)[0];
    p.account = (*segs)[1].value_or("");
    p.container = (*segs)[2].value_or("");
    p.object = (*segs)[3].value_or("");
    if (p.container.empty()) {
      if (req.method == "GET") co_return co_await list_containers(ex, env, next, p);
      co_return co_await next(ex, env);
    }
    if (p.object.empty()) {
      if ((req.method == "PUT" || req.method == "POST") && req.headers.contains(kClientEnabled)) {
        co_return co_await enable_versioning(ex, env, next, p);
      }
      if (req.method == "DELETE") co_return co_await delete_container(ex, env, next, p);
      co_return co_await container_request(ex, env, next, p);
    }
    co_await object_request(ex, env, next, std::move(p));
  }

 private:
  // ---- objects ---------------------------------------------------------------------------

  net::awaitable<void> object_request(Exchange& ex, ProxyEnv& env, const Next& next,
                                      ObjectPath p) const {
    const Request& req = ex.request();
    CachedInfo info = co_await info_.container_info(p.account, p.container, req, env);
    std::string versions_cont(info.headers.get_or(kSysContainer, ""));
    if (!versions_cont.empty()) {
      versions_cont = common::http::percent_decode(versions_cont);
      versions_cont = versions_cont.substr(0, versions_cont.find('/'));
    }
    p.versions_cont = std::move(versions_cont);
    p.enabled = common::config_true_value(info.headers.get_or(kSysEnabled, ""));
    auto version_id = common::http::query_param(req.query(), "version-id");
    if (version_id && !version_id->empty()) {
      co_return co_await with_version_id(ex, env, next, p, *version_id);
    }
    if (p.versions_cont.empty()) co_return co_await next(ex, env);
    if (req.method == "PUT") co_return co_await put(ex, env, next, p);
    if (req.method == "POST") co_return co_await post(ex, env, next, p);
    if (req.method == "DELETE") co_return co_await delete_object(ex, env, next, p);
    co_await get_head(ex, env, next, p);
  }

  std::string versions_path(const ObjectPath& p, std::string_view versions_obj) const {
    return "/" + p.version + "/" + p.account + "/" + p.versions_cont + "/" +
           std::string(versions_obj);
  }
  std::string object_path(const ObjectPath& p) const {
    return "/" + p.version + "/" + p.account + "/" + p.container + "/" + p.object;
  }

  // Swift's _copy_current(): an object stored before versioning was enabled (not a link into
  // the versions container) is copied there as a version first. A response when the request
  // must end with it.
  net::awaitable<std::optional<Response>> copy_current(Exchange& ex, ProxyEnv& env,
                                                       const Next& next,
                                                       const ObjectPath& p) const {
    const Request& req = ex.request();
    if (env.authorize) {
      CachedInfo info = co_await info_.container_info(p.account, p.container, req, env);
      std::optional<std::string> acl;
      if (auto w = info.headers.get("X-Container-Write")) acl = std::string(*w);
      env.acl = acl;
      if (auto denied = co_await env.authorize(req, env)) co_return std::move(*denied);
    }
    HeaderMap gh = pre_authed_headers(req);
    gh.set("X-Newest", "True");
    std::unique_ptr<Subrequest> src = co_await Subrequest::start(
        next, make_subrequest("GET", object_path(p), "symlink=get", gh), pre_authed(env));
    const int status = src->status();
    if (status == 404) {
      co_await src->close();
      co_return std::nullopt;
    }
    if (!src->length() || static_cast<int64_t>(*src->length()) > constraints_.max_file_size) {
      co_await src->close();
      co_return swob_response(413);
    }
    if (!is_success(status)) {
      Response r;
      r.status = status;
      r.headers = src->headers();
      auto body = co_await src->read_all(kMaxSmallAnswer);
      co_await src->close();
      if (body.ok()) r.body = std::move(*body);
      co_return response_error(r);
    }
    if (src->headers().get_or(kSysSymlink, "") == "true") {
      co_await src->close();
      co_return std::nullopt;  // already a version
    }
    std::string ts(src->headers().get_or("X-Timestamp", ""));
    if (ts.empty()) ts = src->headers().get_or("X-Backend-Timestamp", "");
    if (ts.empty()) {
      auto when = common::http::parse_http_date(src->headers().get_or("Last-Modified", ""));
      ts = std::to_string(when.value_or(0));
    }
    auto version = timestamp_to_version(ts);
    auto name = version.ok() ? versions_object_name(p.object, *version) : version.status();
    if (!name.ok()) {
      co_await src->close();
      co_return swob_response(500);
    }
    Request put = make_subrequest("PUT", versions_path(p, *name), "", pre_authed_headers(req));
    for (const auto& [k, v] : src->headers()) {
      if (common::http::iequals(k, "x-timestamp") || common::http::istarts_with(k, "x-backend-") ||
          common::http::iequals(k, "content-length") ||
          common::http::iequals(k, "transfer-encoding") || common::http::iequals(k, "connection")) {
        continue;
      }
      put.headers.set(k, v);
    }
    put.headers.set("X-Backend-Allow-Reserved-Names", "true");
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
    if (!answer.ok()) co_return swob_response(500);
    if (answer->status == 404) co_return text_response(500, std::string(kNoVersionsContainer));
    co_return response_error(*answer);
  }

  // PUT: the client's data becomes a version, the object a link to it.
  net::awaitable<void> put(Exchange& ex, ProxyEnv& env, const Next& next,
                           const ObjectPath& p) const {
    if (!p.enabled) co_return co_await next(ex, env);
    if (auto stop = co_await copy_current(ex, env, next, p)) {
      co_return co_await ex.reply(std::move(*stop));
    }
    const Request& req = ex.request();
    auto ts = ensure_timestamp(req);
    if (!ts.ok()) co_return co_await ex.reply(std::move(ts).refusal());
    auto version = timestamp_to_version(ts->internal());
    auto name = version.ok() ? versions_object_name(p.object, *version) : version.status();
    if (!name.ok()) co_return co_await ex.reply(swob_response(500));

    Request vput = make_subrequest("PUT", versions_path(p, *name), "", pre_authed_headers(req));
    for (const auto& [k, v] : req.headers) {
      if (common::http::iequals(k, "x-delete-at") || common::http::iequals(k, "x-delete-after") ||
          common::http::iequals(k, "content-length") ||
          common::http::iequals(k, "transfer-encoding") || common::http::iequals(k, "expect")) {
        continue;
      }
      vput.headers.set(k, v);
    }
    vput.headers.set("X-Timestamp", ts->internal());
    vput.headers.set("X-Backend-Allow-Reserved-Names", "true");
    // Without a type, the one stored is decided further on (symlink takes a static link's
    // target's, the app guesses one from the version's name): it is read back below.
    const bool type_decided_later =
        vput.headers.get_or("Content-Type", "").empty() ||
        common::config_true_value(vput.headers.get_or("X-Detect-Content-Type", ""));
    vput.content_length = req.content_length;
    vput.chunked = !req.content_length;
    if (req.content_length) {
      vput.headers.set("Content-Length", std::to_string(*req.content_length));
    } else {
      vput.headers.set("Transfer-Encoding", "chunked");
    }
    ProxyEnv put_env = pre_authed(env);
    put_env.content_type_overridden = env.content_type_overridden;
    env.content_type_overridden = false;
    carry_write(env, put_env);  // the new version is the client's write
    const std::string put_type(vput.headers.get_or("Content-Type", ""));
    const std::string slo_size(vput.headers.get_or("X-Object-Sysmeta-Slo-Size", ""));
    ClientBody body(ex);
    auto answer = co_await run_subrequest_with_body(next, std::move(vput), std::move(put_env), body,
                                                    kMaxSmallAnswer);
    if (!answer.ok()) co_return co_await ex.reply(swob_response(500));
    if (answer->status == 404) {
      co_return co_await ex.reply(text_response(500, std::string(kNoVersionsContainer)));
    }
    if (auto bad = response_error(*answer)) co_return co_await ex.reply(std::move(*bad));
    std::string bytes = slo_size.empty() ? std::to_string(body.bytes()) : slo_size;
    std::string etag(answer->headers.get_or("Etag", ""));
    std::string type = put_type;
    if (type_decided_later) {
      HeaderMap hh = pre_authed_headers(req);
      hh.set("X-Backend-Allow-Reserved-Names", "true");
      hh.set("X-Newest", "True");
      auto head = co_await run_subrequest(
          next, make_subrequest("HEAD", versions_path(p, *name), "symlink=get", hh),
          pre_authed(env), kMaxSmallAnswer);
      type = head.ok() && is_success(head->status)
                 ? std::string(head->headers.get_or("Content-Type", "application/octet-stream"))
                 : std::string("application/octet-stream");
    }
    co_await put_link(ex, env, next, p, *name, *ts, etag, bytes,
                      common::http::parse_content_type(type).type);
  }

  // Swift's req.ensure_x_timestamp(): the request's X-Timestamp (400 when it is no timestamp),
  // else now.
  static common::http::OrRefusal<Timestamp> ensure_timestamp(const Request& req) {
    auto given = req.headers.get("X-Timestamp");
    if (!given) return Timestamp::now();
    auto ts = Timestamp::parse(*given);
    if (!ts.ok()) {
      return text_response(400, "X-Timestamp should be a UNIX timestamp float value; was " +
                                    symlink::python_repr(*given));
    }
    return *ts;
  }

  // Swift's _put_symlink_to_version(): the object becomes a static link to version `name`.
  net::awaitable<void> put_link(Exchange& ex, ProxyEnv& env, const Next& next,
                                const ObjectPath& p, const std::string& name, Timestamp ts,
                                const std::string& etag, const std::string& bytes,
                                const std::string& content_type) const {
    ExchangeWrapper link(ex);
    Request& r = link.mutable_request();
    r.method = "PUT";
    auto bumped = ts.plus_offset(1);
    r.headers.set("X-Timestamp", bumped.ok() ? bumped->internal() : ts.internal());
    r.headers.set(symlink::kSysTargetEtag, etag);
    r.headers.set(symlink::kSysTargetBytes, bytes);
    r.headers.set("Content-Type", content_type);
    r.headers.set(symlink::kTarget, common::http::quote(p.versions_cont + "/" + name));
    r.headers.set(kSysSymlink, "true");
    r.headers.set(symlink::kSysSymloopExtend, "true");
    r.headers.set(symlink::kSysAllowReserved, "true");
    r.headers.set("X-Backend-Allow-Reserved-Names", "true");
    for (std::string_view h : {"ETag", "X-If-Delete-At", "X-Symlink-Target-Account",
                               "X-Object-Manifest", "X-Static-Large-Object",
                               "X-Object-Sysmeta-Slo-Etag", "X-Object-Sysmeta-Slo-Size",
                               "Transfer-Encoding", "Expect"}) {
      r.headers.erase(h);
    }
    r.headers.set("Content-Length", "0");
    r.content_length = 0;
    r.chunked = false;
    r.expect_continue = false;
    env.source = "OV";
    const std::string version_id = parse_versions_object_name(name).second.value_or("");
    HeaderEditor out(link, [&](int, HeaderMap& h) {
      h.set("Etag", etag);
      h.set("X-Object-Version-Id", version_id);
    });
    co_await next(out, env);
  }

  // DELETE: a delete marker becomes the latest version, the object goes.
  net::awaitable<void> delete_object(Exchange& ex, ProxyEnv& env, const Next& next,
                                     const ObjectPath& p) const {
    if (!p.enabled) co_return co_await next(ex, env);
    if (auto stop = co_await copy_current(ex, env, next, p)) {
      co_return co_await ex.reply(std::move(*stop));
    }
    const Request& req = ex.request();
    auto ts = ensure_timestamp(req);
    if (!ts.ok()) co_return co_await ex.reply(std::move(ts).refusal());
    auto version = timestamp_to_version(ts->internal());
    auto name = version.ok() ? versions_object_name(p.object, *version) : version.status();
    if (!name.ok()) co_return co_await ex.reply(swob_response(500));
    HeaderMap mh = pre_authed_headers(req);
    mh.set("Content-Type", kDeleteMarkerType);
    mh.set("Content-Length", "0");
    if (auto token = req.headers.get("X-Auth-Token")) mh.set("X-Auth-Token", *token);
    mh.set("X-Backend-Allow-Reserved-Names", "true");
    mh.set("X-Timestamp", ts->internal());
    ProxyEnv marker_env = pre_authed(env);
    marker_env.content_type_overridden = true;
    auto marker = co_await run_subrequest(next, make_subrequest("PUT", versions_path(p, *name), "", mh),
                                          std::move(marker_env), kMaxSmallAnswer);
    if (!marker.ok()) co_return co_await ex.reply(swob_response(500));
    if (auto bad = response_error(*marker)) co_return co_await ex.reply(std::move(*bad));
    ExchangeWrapper del(ex);
    del.mutable_request().headers.set("X-Timestamp", ts->internal());
    const std::string version_id = version.ok() ? *version : "";
    HeaderEditor out(del, [&](int status, HeaderMap& h) {
      if (is_success(status) || status == 404) {
        h.set("X-Object-Version-Id", version_id);
        h.set("X-Backend-Content-Type", kDeleteMarkerType);
      }
    });
    co_await next(out, env);
  }

  // POST: metadata goes to the version a link points at, not to the link.
  net::awaitable<void> post(Exchange& ex, ProxyEnv& env, const Next& next,
                            const ObjectPath& p) const {
    const Request& req = ex.request();
    HeaderMap ph = pre_authed_headers(req);
    for (const auto& [k, v] : req.headers) {
      if (common::http::iequals(k, "x-delete-at") || common::http::iequals(k, "x-delete-after") ||
          common::http::iequals(k, "content-length") ||
          common::http::iequals(k, "transfer-encoding")) {
        continue;
      }
      ph.set(k, v);
    }
    ph.set("X-Backend-Allow-Reserved-Names", "true");
    ResponseCapture held(ex, kMaxSmallAnswer);
    co_await next(held, env);
    if (held.too_big) co_return co_await ex.reply(swob_response(500));
    if (held.held.status == 0) co_return;
    Response r = std::move(held.held);
    if (r.status == 307 && common::config_true_value(r.headers.get_or(kSysSymlink, "false"))) {
      std::string loc = common::http::percent_decode(r.headers.get_or("Location", ""));
      auto segs = common::http::split_path(loc, 4, 4, true);
      if (segs.ok() && *(*segs)[1] == p.account && *(*segs)[2] == p.versions_cont) {
        auto answer = co_await run_subrequest(next, make_subrequest("POST", loc, "", ph),
                                              pre_authed(env), kMaxSmallAnswer);
        if (!answer.ok()) co_return co_await ex.reply(swob_response(500));
        r = std::move(*answer);
      }
    }
    r.headers.erase("Content-Length");
    co_await ex.reply(std::move(r));
  }

  // GET, HEAD, OPTIONS: the answer names the version it comes from.
  net::awaitable<void> get_head(Exchange& ex, ProxyEnv& env, const Next& next,
                                const ObjectPath& p) const {
    HeaderEditor out(ex, [&](int, HeaderMap& h) {
      h.set("X-Object-Version-Id", "null");
      std::string loc = common::http::percent_decode(h.get_or("Content-Location", ""));
      if (!loc.empty()) {
        auto segs = common::http::split_path(loc, 4, 4, true);
        if (segs.ok() && *(*segs)[1] == p.account && *(*segs)[2] == p.versions_cont) {
          if (auto id = parse_versions_object_name(*(*segs)[3]).second) {
            h.set("X-Object-Version-Id", *id);
            h.set("Content-Location",
                  common::http::quote(object_path(p)) + "?version-id=" + *id);
          }
        }
      }
      std::string target = common::http::percent_decode(h.get_or(symlink::kTarget, ""));
      if (!target.empty()) {
        auto segs = common::http::split_path("/" + target, 2, 2, true);
        if (segs.ok() && *(*segs)[0] == p.versions_cont) {
          if (auto id = parse_versions_object_name(*(*segs)[1]).second) {
            h.set("X-Object-Version-Id", *id);
            h.set(symlink::kTarget,
                  common::http::quote(p.container + "/" + p.object) + "?version-id=" + *id);
          }
        }
      }
    });
    co_await next(out, env);
  }

  // ---- ?version-id= ----------------------------------------------------------------------

  net::awaitable<void> with_version_id(Exchange& ex, ProxyEnv& env, const Next& next,
                                       const ObjectPath& p, const std::string& version_id) const {
    const Request& req = ex.request();
    if (req.method == "POST") {
      co_return co_await ex.reply(
          swob_response_with_body(400, "POST to a specific version is not allowed"));
    }
    if (p.versions_cont.empty() && version_id != "null") {
      co_return co_await ex.reply(swob_response_with_body(
          400, "version-aware operations require that the container is versioned"));
    }
    if (!valid_version(version_id, true)) {
      co_return co_await ex.reply(swob_response_with_body(400, "Invalid version parameter"));
    }
    // The proxy answers OPTIONS from the container in the path: nothing to rewrite.
    if (req.method == "OPTIONS") co_return co_await next(ex, env);
    if (req.method == "DELETE") co_return co_await delete_version(ex, env, next, p, version_id);
    if (req.method == "PUT") co_return co_await restore_version(ex, env, next, p, version_id);
    if (version_id == "null") co_return co_await get_null_version(ex, env, next);
    co_await get_version(ex, env, next, p, version_id);
  }

  // GET or HEAD ?version-id=<id>: the version object itself (404 for a delete marker).
  net::awaitable<void> get_version(Exchange& ex, ProxyEnv& env, const Next& next,
                                   const ObjectPath& p, const std::string& version_id) const {
    auto name = versions_object_name(p.object, version_id);
    if (!name.ok()) co_return co_await ex.reply(swob_response(500));
    Replace out(ex, [&](int status, HeaderMap& h) -> std::optional<Response> {
      if (is_success(status)) h.set("X-Object-Version-Id", version_id);
      std::string_view type = h.get_or("X-Backend-Content-Type", h.get_or("Content-Type", ""));
      if (type == kDeleteMarkerType) {
        Response r = swob_response(404);
        r.headers.set("X-Object-Version-Id", version_id);
        r.headers.set("Content-Type", kDeleteMarkerType);
        return r;
      }
      return std::nullopt;
    });
    Request& r = out.mutable_request();
    r.target = target_of(versions_path(p, *name), r.query());
    r.headers.set("X-Backend-Allow-Reserved-Names", "true");
    co_await next(out, env);
  }

  // GET or HEAD ?version-id=null: the object when it is no link to a version.
  static net::awaitable<void> get_null_version(Exchange& ex, ProxyEnv& env, const Next& next) {
    static const std::string kVersionsPart = std::string(1, kReserved) + "versions" + kReserved;
    Replace out(ex, [](int status, HeaderMap& h) -> std::optional<Response> {
      if (!is_success(status)) return std::nullopt;
      if (common::http::percent_decode(h.get_or("Content-Location", "")).find(kVersionsPart) !=
          std::string::npos) {
        return swob_response(404);
      }
      h.set("X-Object-Version-Id", "null");
      return std::nullopt;
    });
    co_await next(out, env);
  }

  // DELETE ?version-id=<id>: that version goes; the object too when it links to it.
  net::awaitable<void> delete_version(Exchange& ex, ProxyEnv& env, const Next& next,
                                      const ObjectPath& p, const std::string& version_id) const {
    if (version_id == "null") co_return co_await next(ex, env);
    const Request& req = ex.request();
    HeaderMap hh = pre_authed_headers(req);
    hh.set("X-Newest", "True");
    if (auto token = req.headers.get("X-Auth-Token")) hh.set("X-Auth-Token", *token);
    auto head = co_await run_subrequest(
        next, make_subrequest("HEAD", object_path(p), "symlink=get", hh), pre_authed(env),
        kMaxSmallAnswer);
    if (!head.ok()) co_return co_await ex.reply(swob_response(500));
    const bool tombstone = head->status == 404;
    std::string link_target;
    if (!tombstone) {
      if (auto bad = response_error(*head)) co_return co_await ex.reply(std::move(*bad));
      if (head->headers.get_or(kSysSymlink, "") == "true") {
        link_target = head->headers.get_or(symlink::kTarget, "");
      }
    }
    auto name = versions_object_name(p.object, version_id);
    if (!name.ok()) co_return co_await ex.reply(swob_response(500));
    const std::string wanted = p.versions_cont + "/" + *name;
    const std::string linked = common::http::percent_decode(link_target);
    std::string current = "null";
    std::string query(req.query());
    if (tombstone || link_target.empty() || linked != wanted) {
      if (!tombstone && !link_target.empty()) {
        current = parse_versions_object_name(linked.substr(linked.find('/') + 1))
                      .second.value_or("");
      }
    } else {
      // The latest version: the link goes first, then its data.
      ResponseCapture link(ex, kMaxSmallAnswer);
      link.mutable_request().target = std::string(req.path());
      co_await next(link, env);
      if (link.held.status == 0) co_return co_await ex.reply(swob_response(500));
      if (auto bad = response_error(link.held)) co_return co_await ex.reply(std::move(*bad));
      query.clear();
    }
    HeaderEditor out(ex, [&](int, HeaderMap& h) {
      h.set("X-Object-Version-Id", version_id);
      h.set("X-Object-Current-Version-Id", current);
    });
    Request& r = out.mutable_request();
    r.target = target_of(versions_path(p, *name), query);
    r.headers.set("X-Backend-Allow-Reserved-Names", "true");
    co_await next(out, env);
  }

  // PUT ?version-id=<id>: the object becomes a link to that version again.
  net::awaitable<void> restore_version(Exchange& ex, ProxyEnv& env, const Next& next,
                                       const ObjectPath& p, const std::string& version_id) const {
    const Request& req = ex.request();
    if (!valid_version(version_id, false)) {
      co_return co_await ex.reply(swob_response_with_body(400, "Invalid version parameter"));
    }
    bool has_body = false;
    if (req.content_length) {
      has_body = *req.content_length != 0;
    } else if (req.chunked) {
      char one;
      auto n = co_await ex.read_body(std::span<char>(&one, 1));
      if (!n.ok()) co_return;  // the client is gone
      has_body = *n != 0;
    } else {
      co_return co_await ex.reply(swob_response(411));
    }
    if (has_body) {
      co_return co_await ex.reply(
          text_response(400, "PUT version-id requests require a zero byte body"));
    }
    auto name = versions_object_name(p.object, version_id);
    if (!name.ok()) co_return co_await ex.reply(swob_response(500));
    HeaderMap hh = pre_authed_headers(req);
    hh.set("X-Backend-Allow-Reserved-Names", "true");
    auto head = co_await run_subrequest(
        next, make_subrequest("HEAD", versions_path(p, *name), "symlink=get", hh),
        pre_authed(env), kMaxSmallAnswer);
    if (!head.ok()) co_return co_await ex.reply(swob_response(500));
    if (head->status == 404) {
      CachedInfo vinfo = co_await info_.container_info(p.account, p.versions_cont, req, env);
      if (is_success(vinfo.status)) {
        co_return co_await ex.reply(text_response(404, "The specified version does not exist"));
      }
      co_return co_await ex.reply(text_response(500, std::string(kNoVersionsContainer)));
    }
    if (auto bad = response_error(*head)) co_return co_await ex.reply(std::move(*bad));
    auto ts = ensure_timestamp(req);
    if (!ts.ok()) co_return co_await ex.reply(std::move(ts).refusal());
    co_await put_link(ex, env, next, p, *name, *ts, std::string(head->headers.get_or("Etag", "")),
                      std::string(head->headers.get_or("Content-Length", "0")),
                      std::string(head->headers.get_or("Content-Type", "")));
  }

  // ---- containers ------------------------------------------------------------------------

  // PUT or POST with X-Versions-Enabled.
  net::awaitable<void> enable_versioning(Exchange& ex, ProxyEnv& env, const Next& next,
                                         const ObjectPath& p) const {
    const Request& req = ex.request();
    CachedInfo info = co_await info_.container_info(p.account, p.container, req, env);
    if (!info.headers.get_or(kSysVersionsLoc, "").empty() ||
        !info.headers.get_or(kClientVersionsLoc, "").empty()) {
      co_return co_await ex.reply(swob_response_with_body(
          400,
          "Cannot enable object versioning on a container that is already using the legacy "
          "versioned writes feature."));
    }
    if (!info.headers.get_or("X-Container-Sync-To", "").empty()) {
      co_return co_await ex.reply(swob_response_with_body(
          400,
          "Cannot enable object versioning on a container configured as source of container "
          "syncing."));
    }
    const bool enabled = common::config_true_value(req.headers.get_or(kClientEnabled, ""));
    ResponseCapture held(ex, kMaxSmallAnswer);
    Request& r = held.mutable_request();
    r.headers.set(kSysEnabled, enabled ? "True" : "False");  // Python's str(bool)
    std::string versions_path_made;
    HeaderMap vh = pre_authed_headers(req);
    if (enabled) {
      if (is_success(info.status)) {
        const common::StoragePolicy* policy = policies_.by_index_string(
            info.headers.get_or("X-Backend-Storage-Policy-Index", "0"));
        if (policy && policy->is_deprecated) {
          if (env.authorize) {
            env.acl = std::nullopt;
            if (auto denied = co_await env.authorize(req, env)) {
              co_return co_await ex.reply(std::move(*denied));
            }
          }
          co_return co_await ex.reply(swob_response_with_body(
              400,
              "Cannot enable object versioning on a container that uses a deprecated storage "
              "policy."));
        }
        if (policy) vh.set("X-Storage-Policy", policy->name());
      } else if (req.method == "PUT" && req.headers.contains("X-Storage-Policy")) {
        vh.set("X-Storage-Policy", req.headers.get_or("X-Storage-Policy", ""));
      }
      vh.set("X-Backend-Allow-Reserved-Names", "true");
      auto versions_cont = versions_container_name(p.container);
      if (!versions_cont) co_return co_await ex.reply(swob_response(500));
      const std::string path = "/" + p.version + "/" + p.account + "/" + *versions_cont;
      auto made = co_await run_subrequest(next, make_subrequest("PUT", path, "", vh),
                                          pre_authed(env), kMaxSmallAnswer);
      if (!made.ok() || !(is_success(made->status) || made->status == 409)) {
        co_return co_await ex.reply(
            swob_response_with_body(500, "Error enabling object versioning"));
      }
      r.headers.set(kSysContainer, common::http::quote(*versions_cont));
      versions_path_made = path;
    }
    co_await next(held, env);
    if (held.too_big) co_return co_await ex.reply(swob_response(500));
    Response out = std::move(held.held);
    if (!is_success(out.status) && !versions_path_made.empty()) {
      // The container write failed: the versions container goes again, for a later retry.
      (void)co_await run_subrequest(next, make_subrequest("DELETE", versions_path_made, "", vh),
                                    pre_authed(env), kMaxSmallAnswer);
    }
    if (out.status == 0) co_return co_await ex.reply(swob_response(500));
    if (auto v = out.headers.get(kSysEnabled)) out.headers.set(kClientEnabled, std::string(*v));
    out.headers.erase("Content-Length");
    co_await ex.reply(std::move(out));
  }

  // DELETE: only once every version is gone; the versions container goes first.
  net::awaitable<void> delete_container(Exchange& ex, ProxyEnv& env, const Next& next,
                                        const ObjectPath& p) const {
    const Request& req = ex.request();
    CachedInfo info = co_await info_.container_info(p.account, p.container, req, env);
    std::string versions_cont = common::http::percent_decode(info.headers.get_or(kSysContainer, ""));
    if (!versions_cont.empty()) {
      HeaderMap vh = pre_authed_headers(req);
      vh.set("X-Backend-Allow-Reserved-Names", "true");
      const std::string path = "/" + p.version + "/" + p.account + "/" + versions_cont;
      auto head = co_await run_subrequest(next, make_subrequest("HEAD", path, "", vh),
                                          pre_authed(env), kMaxSmallAnswer);
      const int status = head.ok() ? head->status : 500;
      if (is_success(status) &&
          common::parse_python_int(std::string(head->headers.get_or("X-Container-Object-Count",
                                                                    "0")))
                  .value_or(0) > 0) {
        co_return co_await ex.reply(
            swob_response_with_body(409, "Delete all versions before deleting container."));
      }
      if (!is_success(status) && status != 404) {
        co_return co_await ex.reply(
            swob_response_with_body(500, "Error deleting versioned container"));
      }
      auto del = co_await run_subrequest(next, make_subrequest("DELETE", path, "", vh),
                                         pre_authed(env), kMaxSmallAnswer);
      const int dstatus = del.ok() ? del->status : 500;
      if (!is_success(dstatus) && dstatus != 404) {
        co_return co_await ex.reply(
            swob_response_with_body(500, "Error deleting versioned container"));
      }
    }
    co_await next(ex, env);
  }

  // Any other container request: X-Versions-Enabled shown, the versions' bytes counted, and a
  // GET's listing rewritten (or, with ?versions, replaced by the list of versions).
  net::awaitable<void> container_request(Exchange& ex, ProxyEnv& env, const Next& next,
                                         const ObjectPath& p) const {
    const Request& req = ex.request();
    ResponseCapture held(ex, max_listing_);
    co_await next(held, env);
    if (held.too_big) co_return co_await ex.reply(swob_response(500));
    if (held.held.status == 0) co_return;
    Response r = std::move(held.held);
    if (req.method != "HEAD") r.headers.erase("Content-Length");  // a HEAD's declares a GET's
    std::string location = common::http::percent_decode(r.headers.get_or(kSysContainer, ""));
    if (auto v = r.headers.get(kSysEnabled)) r.headers.set(kClientEnabled, std::string(*v));
    if (!location.empty()) {
      if (auto used = r.headers.get("X-Container-Bytes-Used")) {
        HeaderMap vh = pre_authed_headers(req);
        vh.set("X-Backend-Allow-Reserved-Names", "true");
        auto head = co_await run_subrequest(
            next,
            make_subrequest("HEAD", "/v1/" + p.account + "/" + location, "", vh),
            pre_authed(env), kMaxSmallAnswer);
        if (head.ok() && is_success(head->status)) {
          auto mine = common::parse_python_int(std::string(*used));
          auto theirs = common::parse_python_int(
              std::string(head->headers.get_or("X-Container-Bytes-Used", "0")));
          if (mine && theirs) r.headers.set("X-Container-Bytes-Used", std::to_string(*mine + *theirs));
        }
      }
    } else if (is_success(r.status)) {
      location = versions_container_name(p.container).value_or("");
    }
    if (is_success(r.status) && req.method == "GET") {
      const bool versions = common::http::query_param(req.query(), "versions").has_value();
      if (auto rewritten = rewrite_container_listing(r.body, location, p.container, versions)) {
        if (versions) co_return co_await list_versions(ex, env, next, p, location, *rewritten,
                                                       std::move(r));
        r.body = std::move(*rewritten);
      }
    }
    co_await ex.reply(std::move(r));
  }

  // GET ?versions: every version of every object, in JSON only.
  net::awaitable<void> list_versions(Exchange& ex, ProxyEnv& env, const Next& next,
                                     const ObjectPath& p, const std::string& location,
                                     const std::string& primary, Response r) const {
    const Request& req = ex.request();
    env.format_listing = false;
    static constexpr std::array<std::string_view, 1> kJson = {"application/json"};
    auto accepted = common::listing::best_match(req.headers.get("Accept"), kJson);
    if (!accepted.ok() || !*accepted) co_return co_await ex.reply(swob_response(406));
    const std::string_view query = req.query();
    auto marker = versions_listing_marker(common::http::query_param(query, "marker"),
                                          common::http::query_param(query, "version_marker"));
    if (!marker.ok()) {
      if (marker.status().code() == Status::Code::kInvalidArgument) {
        co_return co_await ex.reply(
            swob_response_with_body(400, std::string(marker.status().message())));
      }
      co_return co_await ex.reply(swob_response(500));
    }
    std::string delimiter = common::http::query_param(query, "delimiter").value_or("");
    if (delimiter.find_first_of(std::string("0123456789.") + kReserved) != std::string::npos) {
      co_return co_await ex.reply(swob_response_with_body(400, "invalid delimiter param"));
    }
    std::string vquery = "format=json";
    auto add = [&](std::string_view key, const std::string& value) {
      if (value.empty()) return;
      vquery += "&" + std::string(key) + "=" + common::http::quote(value, "");
    };
    if (auto prefix = common::http::query_param(query, "prefix")) {
      auto reserved = reserved_name({*prefix});
      if (!reserved) co_return co_await ex.reply(swob_response(500));
      add("prefix", *reserved);
    }
    add("marker", marker->value_or(""));
    add("limit", common::http::query_param(query, "limit").value_or(""));
    add("delimiter", delimiter);
    add("reverse", common::http::query_param(query, "reverse").value_or(""));
    HeaderMap vh = pre_authed_headers(req);
    vh.set("X-Backend-Allow-Reserved-Names", "true");
    auto listing = co_await run_subrequest(
        next, make_subrequest("GET", "/v1/" + p.account + "/" + location, vquery, vh),
        pre_authed(env), max_listing_);
    if (!listing.ok()) co_return co_await ex.reply(swob_response(500));
    std::optional<std::string> versions;
    if (is_success(listing->status)) {
      versions = std::move(listing->body);
    } else if (listing->status != 404) {
      listing->headers.erase("Content-Length");
      co_return co_await ex.reply(std::move(*listing));
    }
    int64_t limit = constraints_.container_listing_limit;
    if (auto given = common::http::query_param(query, "limit");
        given && !given->empty() && given->find_first_not_of("0123456789") == std::string::npos &&
        given->size() < 18) {
      limit = std::stoll(*given);
    }
    const bool reverse =
        common::config_true_value(common::http::query_param(query, "reverse").value_or("no"));
    auto body = merge_versions_listing(primary, versions, p.account, location, reverse, limit);
    r.body = body ? std::move(*body) : primary;
    // The env flag does not come back through a middleware that ran this request as a
    // subrequest of its own (SLO's listing rewrite): the answer carries it too.
    r.headers.set(kFormattedListing, "true");
    co_await ex.reply(std::move(r));
  }

  // ---- accounts --------------------------------------------------------------------------

  // GET of an account: each container's bytes include its versions', and versions containers
  // left without their container are listed.
  net::awaitable<void> list_containers(Exchange& ex, ProxyEnv& env, const Next& next,
                                       const ObjectPath& p) const {
    const Request& req = ex.request();
    ResponseCapture held(ex, max_listing_);
    co_await next(held, env);
    if (held.too_big) co_return co_await ex.reply(swob_response(500));
    if (held.held.status == 0) co_return;
    Response r = std::move(held.held);
    r.headers.erase("Content-Length");
    if (!is_success(r.status)) co_return co_await ex.reply(std::move(r));
    // The versions containers of the same page: prefix, marker and end_marker moved into the
    // reserved namespace.
    std::string vquery;
    bool has_prefix = false;
    for (auto [key, value] : common::http::parse_query(req.query())) {
      if (key == "prefix" || key == "marker" || key == "end_marker") {
        if (key == "prefix") has_prefix = true;
        if (auto v = versions_container_name(value)) value = *v;
      }
      vquery += (vquery.empty() ? "" : "&") + common::http::quote(key, "") + "=" +
                common::http::quote(value, "");
    }
    if (!has_prefix) {
      vquery += std::string(vquery.empty() ? "" : "&") + "prefix=" +
                common::http::quote(*reserved_name({"versions"}), "");
    }
    HeaderMap vh = pre_authed_headers(req);
    vh.set("X-Backend-Allow-Reserved-Names", "true");
    auto versions = co_await run_subrequest(
        next, make_subrequest("GET", "/v1/" + p.account, vquery, vh), pre_authed(env),
        max_listing_);
    int64_t limit = constraints_.account_listing_limit;
    if (auto given = common::http::query_param(req.query(), "limit");
        given && !given->empty() && given->find_first_not_of("0123456789") == std::string::npos &&
        given->size() < 18) {
      limit = std::stoll(*given);
    }
    const bool reverse =
        common::config_true_value(common::http::query_param(req.query(), "reverse").value_or("no"));
    auto body = merge_account_listing(r.body, versions.ok() ? versions->body : std::string(),
                                      reverse, limit);
    if (body) r.body = std::move(*body);
    co_await ex.reply(std::move(r));
  }

  const common::Constraints& constraints_;
  const common::StoragePolicies& policies_;
  InfoLookup& info_;
  const size_t max_listing_;
};

}  // namespace

std::unique_ptr<Middleware> make_object_versioning(const MiddlewareContext& context) {
  return std::make_unique<ObjectVersioning>(context);
}

}  // namespace apus::proxy
