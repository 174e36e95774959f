// symlink (symlink.h). GET and HEAD follow links without buffering: each hop runs through the
// rest of the pipeline on a wrapper of the client's exchange that looks at the answer's head;
// a link's (empty) answer is dropped and the next hop starts, anything else streams straight
// to the client. A static link's PUT checks its target with HEAD subrequests, POST answers
// are turned into 307s for links, and container listings are rewritten whole.
#include "proxy/symlink.h"

#include <boost/json.hpp>
#include <algorithm>
#include <functional>

#include "common/config/config.h"
#include "common/http/swob.h"
#include "common/http/url.h"
#include "common/listing_format.h"
#include "common/pickle.h"
#include "proxy/backend.h"
#include "proxy/subrequest.h"

namespace apus::proxy {

namespace net = boost::asio;
using common::Result;
using common::Status;
using common::http::Exchange;
using common::http::HeaderMap;
using common::http::OrRefusal;
using common::http::Request;
using common::http::Response;
using common::http::swob_response;
using common::http::swob_response_with_body;
using common::http::text_response;

namespace symlink {

namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

std::string_view strip(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

// Swift's check_account_format(): a 412 (swob's default type) when the name is not usable.
std::optional<Response> account_refusal(std::string_view account) {
  if (account.empty()) return swob_response_with_body(412, "Account name cannot be empty");
  if (account.find('/') != std::string_view::npos) {
    return swob_response_with_body(412, "Account name cannot contain slashes");
  }
  return std::nullopt;
}

// Swift's _extract_symlink_path_json() on one listing entry; false when Swift would fail.
bool rewrite_entry(boost::json::object& entry, std::string_view version,
                   std::string_view request_account) {
  auto it = entry.find("hash");
  if (it == entry.end()) return true;
  const auto* hash = it->value().if_string();
  if (!hash) return false;
  auto [value, params] = parse_header(std::string_view(hash->data(), hash->size()));
  std::string account(request_account);
  std::optional<std::string> target;
  for (const auto& [key, param] : params) {
    if (key == "symlink_target") {
      target = param;
    } else if (key == "symlink_target_account") {
      account = param;
    } else if (key == "symlink_target_etag") {
      entry["symlink_etag"] = param;
    } else if (key == "symlink_target_bytes") {
      auto n = common::parse_python_int(param);
      if (!n) return false;
      entry["symlink_bytes"] = *n;
    } else {
      value += "; " + key + "=" + param;
    }
  }
  entry["hash"] = value;
  if (target && !target->empty())
    entry["symlink_path"] = path_join({"/", version, account, *target});
  return true;
}

}  // namespace

std::string_view normalize_etag(std::string_view etag) {
  if (etag.size() >= 2 && etag.front() == '"' && etag.back() == '"') {
    return etag.substr(1, etag.size() - 2);
  }
  return etag;
}

std::string python_repr(std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    if (ch == quote || ch == '\\') {
      out += '\\';
      out += ch;
    } else if (ch == '\n') {
      out += "\\n";
    } else if (ch == '\r') {
      out += "\\r";
    } else if (ch == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += ch;
    }
  }
  out += quote;
  return out;
}

OrRefusal<PutTarget> prepare_put(HeaderMap& headers, std::string_view account,
                                 std::string_view container, std::string_view object) {
  static constexpr std::string_view kFormError =
      "X-Symlink-Target header must be of the form <container name>/<object name>";
  std::string target = common::http::percent_decode(headers.get_or(kTarget, ""));
  // Swift takes "/c/o" elsewhere (copy), but a link's target must be written "c/o".
  if (target.starts_with('/')) return text_response(412, std::string(kFormError));
  auto segs = common::http::split_path("/" + target, 2, 2, true);
  if (!segs.ok()) return swob_response_with_body(412, std::string(kFormError));
  const std::string& target_container = *(*segs)[0];
  const std::string& target_object = *(*segs)[1];
  headers.set(kTarget, common::http::quote(target_container + "/" + target_object));

  std::string target_account(account);
  if (auto a = headers.get(kTargetAccount)) {
    target_account = common::http::percent_decode(*a);
    if (auto refused = account_refusal(target_account)) return std::move(*refused);
    headers.set(kTargetAccount, common::http::quote(target_account));
  }
  if (target_account == account && target_container == container && target_object == object) {
    return text_response(400, "Symlink cannot target itself");
  }
  PutTarget out;
  out.etag = std::string(normalize_etag(headers.get_or(kTargetEtag, "")));
  if (out.etag.find_first_of(";\"\\") != std::string::npos) {
    return text_response(400, "Bad X-Symlink-Target-Etag format");
  }
  if (out.etag.empty() && headers.get_or("Content-Type", "").empty()) {
    headers.set("Content-Type", "application/symlink");
  }
  out.path = "/v1/" + target_account + "/" + target_container + "/" + target_object;
  return out;
}

void finish_put_headers(HeaderMap& headers) {
  for (auto [user, sys] :
       {std::pair{kTarget, kSysTarget}, std::pair{kTargetAccount, kSysTargetAccount}}) {
    if (auto v = headers.get(user)) {
      std::string value(*v);
      headers.erase(user);
      headers.set(sys, value);
    }
  }
  std::string etag(headers.get_or(kOverrideEtag, kEmptyEtag));
  etag += "; symlink_target=";
  etag += headers.get_or(kSysTarget, "");
  if (auto a = headers.get(kSysTargetAccount)) {
    etag += "; symlink_target_account=";
    etag += *a;
  }
  if (auto e = headers.get(kSysTargetEtag)) {
    etag += "; symlink_target_etag=";
    etag += *e;
    etag += "; symlink_target_bytes=";
    etag += headers.get_or(kSysTargetBytes, "");
  }
  headers.set(kOverrideEtag, etag);
}

std::pair<std::string, std::vector<std::pair<std::string, std::string>>> parse_header(
    std::string_view line) {
  // cgi's _parseparam(): split on ';' outside double quotes.
  std::vector<std::string_view> parts;
  std::string with_lead = ";" + std::string(line);
  std::string_view s(with_lead);
  while (!s.empty() && s.front() == ';') {
    s.remove_prefix(1);
    size_t end = s.find(';');
    auto quotes_before = [&](size_t e) {
      size_t quotes = 0, escaped = 0;
      for (size_t i = 0; i < e; ++i) {
        if (s[i] == '"') {
          ++quotes;
          if (i > 0 && s[i - 1] == '\\') ++escaped;
        }
      }
      return quotes - escaped;
    };
    while (end != std::string_view::npos && end > 0 && quotes_before(end) % 2 == 1) {
      end = s.find(';', end + 1);
    }
    if (end == std::string_view::npos) end = s.size();
    parts.push_back(strip(s.substr(0, end)));
    s.remove_prefix(end);
  }
  std::pair<std::string, std::vector<std::pair<std::string, std::string>>> out;
  if (parts.empty()) return out;
  out.first = std::string(parts[0]);
  for (size_t i = 1; i < parts.size(); ++i) {
    size_t eq = parts[i].find('=');
    if (eq == std::string_view::npos) continue;
    std::string name = common::http::to_lower(strip(parts[i].substr(0, eq)));
    std::string value(strip(parts[i].substr(eq + 1)));
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"') {
      std::string raw = value.substr(1, value.size() - 2), unq;
      // replace('\\\\', '\\') then replace('\\"', '"'), as cgi does, in two passes.
      for (size_t j = 0; j < raw.size(); ++j) {
        if (raw[j] == '\\' && j + 1 < raw.size() && raw[j + 1] == '\\') {
          unq += '\\';
          ++j;
        } else {
          unq += raw[j];
        }
      }
      value.clear();
      for (size_t j = 0; j < unq.size(); ++j) {
        if (unq[j] == '\\' && j + 1 < unq.size() && unq[j + 1] == '"') {
          value += '"';
          ++j;
        } else {
          value += unq[j];
        }
      }
    }
    auto same = std::find_if(out.second.begin(), out.second.end(),
                             [&](const auto& p) { return p.first == name; });
    if (same != out.second.end()) {
      same->second = std::move(value);
    } else {
      out.second.emplace_back(std::move(name), std::move(value));
    }
  }
  return out;
}

std::string path_join(std::initializer_list<std::string_view> parts) {
  std::string path;
  bool first = true;
  for (std::string_view b : parts) {
    if (first) {
      path = b;
      first = false;
    } else if (b.starts_with('/')) {
      path = b;
    } else if (path.empty() || path.ends_with('/')) {
      path += b;
    } else {
      path += '/';
      path += b;
    }
  }
  return path;
}

std::optional<std::string> rewrite_listing(std::string_view json, std::string_view version,
                                           std::string_view account) {
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(json, ec);
  if (ec || !v.is_array()) return std::nullopt;
  for (auto& item : v.get_array()) {
    auto* entry = item.if_object();
    if (!entry) return std::nullopt;
    if (!rewrite_entry(*entry, version, account)) return std::nullopt;
  }
  std::string out;
  out.reserve(json.size() + 64);
  common::listing::append_python_json(out, v);
  return out;
}

Step classify(const HeaderMap& headers, std::string_view version, std::string_view account,
              bool follow_softlinks, std::string_view target_etag, int followed, int symloop_max) {
  Step step;
  std::string_view target = headers.get_or(kSysTarget, "");
  std::string_view link_etag = headers.get_or(kSysTargetEtag, "");
  if (!target.empty() && (!link_etag.empty() || follow_softlinks)) {
    std::string_view found = link_etag.empty() ? headers.get_or("Etag", "") : link_etag;
    if (!target_etag.empty() && target_etag != found) {
      step.kind = Step::kEtagsDiffer;
      return step;
    }
    if (followed >= symloop_max) {
      step.kind = Step::kTooMany;
      return step;
    }
    std::string target_account(headers.get_or(kSysTargetAccount, ""));
    if (target_account.empty()) target_account = common::http::quote(account);
    while (target.starts_with('/')) target.remove_prefix(1);
    step.kind = Step::kFollow;
    step.next_path = path_join({"/", version, target_account, target});
    step.next_etag = std::string(link_etag);
    step.counts = !common::config_true_value(headers.get_or(kSysSymloopExtend, ""));
    step.allow_reserved = !headers.get_or(kSysAllowReserved, "").empty();
    return step;
  }
  std::string_view final_etag = headers.get_or("Etag", "");
  if (!final_etag.empty() && !target_etag.empty() && target_etag != final_etag) {
    step.kind = Step::kTargetChanged;
    step.body = "Object Etag " + python_repr(final_etag) +
                " does not match X-Symlink-Target-Etag header " + python_repr(target_etag);
  }
  return step;
}

}  // namespace symlink

namespace {

using symlink::Step;

// The most a container listing may hold for the rewrite (10,000 names of up to 1 KiB, each
// possibly \u-escaped, with their other fields).

// An ExchangeWrapper that decides, from an answer's head, whether it goes on to the client
// (headers possibly edited), is dropped (its body too), or is replaced by another answer (its
// body abandoned).
class Intercept final : public ExchangeWrapper {
 public:
  enum class Action { kForward, kDrop, kReplace };
  using Decide = std::function<Action(int status, HeaderMap& headers, Response& replacement)>;

  Intercept(Exchange& client, Request req, Decide decide)
      : ExchangeWrapper(client, std::move(req)), decide_(std::move(decide)) {}
  // Whether the answer was dropped, and its head.
  bool dropped() const { return action_ == Action::kDrop; }
  const HeaderMap& dropped_headers() const { return dropped_headers_; }

  net::awaitable<Status> write_body(std::string_view chunk) override {
    if (action_ == Action::kForward) co_return co_await ExchangeWrapper::write_body(chunk);
    if (action_ == Action::kDrop) co_return Status();  // drained, as Swift drains a link
    co_return Status::cancelled("answer replaced by the symlink middleware");
  }
  net::awaitable<Status> finish_response() override {
    if (action_ == Action::kForward) co_return co_await ExchangeWrapper::finish_response();
    co_return Status();
  }
  bool response_started() const override {
    return action_ == Action::kForward ? ExchangeWrapper::response_started() : status_ != 0;
  }
  int response_status() const override {
    return action_ == Action::kForward ? ExchangeWrapper::response_status() : status_;
  }

 protected:
  net::awaitable<Status> do_respond(Response r) override {
    decide(r.status, r.headers);
    if (action_ == Action::kForward) co_return co_await ExchangeWrapper::do_respond(std::move(r));
    if (action_ == Action::kDrop) co_return Status();
    co_return co_await ExchangeWrapper::do_respond(std::move(replacement_));
  }
  net::awaitable<Status> do_start_response(int status, HeaderMap headers,
                                           std::optional<uint64_t> length) override {
    decide(status, headers);
    if (action_ == Action::kForward) {
      co_return co_await ExchangeWrapper::do_start_response(status, std::move(headers), length);
    }
    if (action_ == Action::kDrop) co_return Status();
    co_return co_await ExchangeWrapper::do_respond(std::move(replacement_));
  }

 private:
  void decide(int status, HeaderMap& headers) {
    status_ = status;
    action_ = decide_(status, headers, replacement_);
    if (action_ == Action::kDrop) dropped_headers_ = headers;
  }
  Decide decide_;
  Action action_ = Action::kForward;
  int status_ = 0;
  HeaderMap dropped_headers_;
  Response replacement_;
};

bool is_success(int status) { return status >= 200 && status < 300; }

// /<version>/<account>/... of a decoded path.
std::pair<std::string, std::string> version_and_account(std::string_view decoded_path) {
  auto segs = common::http::split_path(decoded_path, 2, 3, true);
  if (!segs.ok()) return {};
  return {(*segs)[0].value_or(""), (*segs)[1].value_or("")};
}

Response conflict(std::string body, const std::string& content_location) {
  Response r = text_response(409, std::move(body));
  r.headers.set("Content-Location", content_location);
  return r;
}

class Symlink final : public Middleware {
 public:
  Symlink(int symloop_max, size_t max_listing)
      : symloop_max_(symloop_max), max_listing_(max_listing) {}

  std::optional<std::pair<std::string, std::string>> info() const override {
    return std::make_pair(
        std::string("symlink"),
        "{\"symloop_max\": " + std::to_string(symloop_max_) + ", \"static_links\": true}");
  }

  net::awaitable<void> call(Exchange& ex, ProxyEnv& env, const Next& next) override {
    const Request& req = ex.request();
    auto segs = common::http::split_path(common::http::percent_decode(req.path()), 3, 4, true);
    if (!segs.ok()) co_return co_await next(ex, env);
    if (!(*segs)[3]) co_return co_await container(ex, env, next, max_listing_);
    const std::string& account = *(*segs)[1];
    if (req.method == "GET" || req.method == "HEAD") {
      if (common::http::query_param(req.query(), "symlink") == "get") {
        co_return co_await read_link(ex, env, next);
      }
      co_return co_await follow(ex, env, next);
    }
    if (req.method == "PUT" && req.headers.contains(symlink::kTarget)) {
      co_return co_await put(ex, env, next, account, *(*segs)[2], *(*segs)[3]);
    }
    if (req.method == "POST") co_return co_await post(ex, env, next);
    co_await next(ex, env);
  }

 private:
  // GET or HEAD ?symlink=get: the link itself, its sysmeta shown as X-Symlink-* headers.
  static net::awaitable<void> read_link(Exchange& ex, ProxyEnv& env, const Next& next) {
    HeaderEditor out(ex, [](int, HeaderMap& h) {
      for (auto [user, sys] : {std::pair{symlink::kTarget, symlink::kSysTarget},
                               std::pair{symlink::kTargetAccount, symlink::kSysTargetAccount},
                               std::pair{symlink::kTargetEtag, symlink::kSysTargetEtag},
                               std::pair{symlink::kTargetBytes, symlink::kSysTargetBytes}}) {
        if (auto v = h.get(sys)) {
          std::string value(*v);
          h.erase(sys);
          h.set(user, value);
        }
      }
    });
    co_await next(out, env);
  }

  // GET or HEAD: the object, or what its links lead to.
  net::awaitable<void> follow(Exchange& ex, ProxyEnv& env, const Next& next) const {
    Request req = ex.request();
    // A link is a zero-byte object: its object servers answer it whole, whatever the Range.
    std::string ignore(req.headers.get_or("X-Backend-Ignore-Range-If-Metadata-Present", ""));
    req.headers.set("X-Backend-Ignore-Range-If-Metadata-Present",
                    ignore.empty() ? std::string(symlink::kSysTarget)
                                   : ignore + "," + std::string(symlink::kSysTarget));
    std::string target_etag;       // what the last static link expects of its target
    std::string last_target_path;  // quoted; empty until a link was followed
    int followed = 0;
    ProxyEnv sub;
    bool first = true;
    for (;;) {
      const auto where = version_and_account(common::http::percent_decode(req.path()));
      Step step;
      Intercept hop(ex, std::move(req), [&](int, HeaderMap& h, Response& replacement) {
        step = symlink::classify(h, where.first, where.second, true, target_etag, followed,
                                 symloop_max_);
        if (step.kind == Step::kFinal) {
          if (!last_target_path.empty()) h.set("Content-Location", last_target_path);
          return Intercept::Action::kForward;
        }
        if (step.kind == Step::kTargetChanged) {
          replacement = conflict(step.body, last_target_path);
          return Intercept::Action::kReplace;
        }
        return Intercept::Action::kDrop;
      });
      co_await next(hop, first ? env : sub);
      if (!hop.dropped()) co_return;
      if (step.kind == Step::kEtagsDiffer) {
        co_return co_await ex.reply(
            conflict("X-Symlink-Target-Etag headers do not match", last_target_path));
      }
      if (step.kind == Step::kTooMany) {
        co_return co_await ex.reply(
            text_response(409, "Too many levels of symbolic links, maximum allowed is " +
                                   std::to_string(symloop_max_)));
      }
      last_target_path = step.next_path;
      if (step.counts) ++followed;
      target_etag = step.next_etag;
      req = next_hop(hop.request(), step);
      sub = step.allow_reserved ? pre_authed_env(env, "SYM") : subrequest_env(env, "SYM");
      first = false;
    }
  }

  // The request for the target of a link, from the request that read the link.
  static Request next_hop(const Request& from, const Step& step) {
    Request req = from;
    req.target = common::http::quote(common::http::percent_decode(step.next_path));
    if (!from.query().empty()) req.target += "?" + std::string(from.query());
    req.headers.erase("X-Backend-Storage-Policy-Index");
    if (step.allow_reserved) req.headers.set("X-Backend-Allow-Reserved-Names", "true");
    return req;
  }

  // PUT with X-Symlink-Target: a zero-byte object whose sysmeta names the target.
  net::awaitable<void> put(Exchange& ex, ProxyEnv& env, const Next& next,
                           const std::string& account, const std::string& container,
                           const std::string& object) const {
    const Request& req = ex.request();
    bool has_body = req.content_length.value_or(0) != 0;
    if (!req.content_length && req.chunked) {
      char one;
      auto n = co_await ex.read_body(std::span<char>(&one, 1));
      if (!n.ok()) co_return;  // the client is gone
      has_body = *n != 0;
    }
    if (has_body) {
      co_return co_await ex.reply(text_response(400, "Symlink requests require a zero byte body"));
    }
    ExchangeWrapper link(ex);
    HeaderMap& headers = link.mutable_request().headers;
    auto target = symlink::prepare_put(headers, account, container, object);
    if (!target) co_return co_await ex.reply(std::move(target).refusal());
    if (!target->etag.empty() && env.symlink_override) {
      // A container sync's link: its target may not be here yet, so the ETag and size stand
      // as sent. Swift fails one without X-Symlink-Target-Bytes in its catch_errors.
      std::optional<std::string_view> bytes = headers.get(symlink::kTargetBytes);
      if (!bytes) co_return co_await ex.reply(text_response(500, "An error occurred"));
      headers.set(symlink::kSysTargetBytes, std::string(*bytes));
      headers.set(symlink::kSysTargetEtag, target->etag);
    } else if (!target->etag.empty()) {
      if (auto refused =
              co_await check_static(headers, link.request().query(), env, next, *target)) {
        co_return co_await ex.reply(std::move(*refused));
      }
    }
    symlink::finish_put_headers(headers);
    co_await next(link, env);
  }

  // A static link's PUT (Swift's _validate_etag_and_update_sysmeta): HEADs its target through
  // static links, checks the ETag and sets the target's size (and content type) in `link`.
  // `h` are the link PUT's headers; `query` its query string (Swift's subrequests keep it).
  net::awaitable<std::optional<Response>> check_static(HeaderMap& h, std::string_view query,
                                                       ProxyEnv& env, const Next& next,
                                                       const symlink::PutTarget& target) const {
    HeaderMap head_headers;
    if (common::config_true_value(h.get_or("X-Backend-Allow-Reserved-Names", ""))) {
      head_headers.set("X-Backend-Allow-Reserved-Names", "true");
    }
    Request head = make_subrequest("HEAD", target.path, query, head_headers);
    std::string last_target_path = target.path;
    std::string target_etag = target.etag;
    int followed = 0;
    Result<Response> answer = Status::unavailable("no answer");
    bool pre_authed = false;
    for (;;) {
      ProxyEnv sub = pre_authed ? pre_authed_env(env, "SYM") : subrequest_env(env, "SYM");
      answer = co_await run_subrequest(next, head, std::move(sub), kMaxHeadBody);
      if (!answer.ok()) co_return swob_response(500);
      const auto where = version_and_account(common::http::percent_decode(head.path()));
      Step step = symlink::classify(answer->headers, where.first, where.second, false, target_etag,
                                    followed, symloop_max_);
      if (step.kind == Step::kFinal) break;
      if (step.kind == Step::kEtagsDiffer) {
        co_return conflict("X-Symlink-Target-Etag headers do not match", last_target_path);
      }
      if (step.kind == Step::kTargetChanged) co_return conflict(step.body, last_target_path);
      if (step.kind == Step::kTooMany) {
        // Swift lets this error escape the middleware: catch_errors answers it.
        co_return text_response(500, "An error occurred");
      }
      last_target_path = step.next_path;
      if (step.counts) ++followed;
      target_etag = step.next_etag;
      head = next_hop(head, step);
      pre_authed = step.allow_reserved;
    }
    const Response& r = *answer;
    if (r.status == 404) {
      co_return conflict("X-Symlink-Target does not exist", last_target_path);
    }
    if (!is_success(r.status)) co_return swob_response(r.status);
    // Carry the target's own listing parameters (an SLO's slo_etag) over to the link's.
    if (!h.contains(symlink::kOverrideEtag)) {
      if (auto o = r.headers.get(symlink::kOverrideEtag)) {
        size_t semi = o->find(';');
        h.set(
            symlink::kOverrideEtag,
            std::string(symlink::kEmptyEtag) +
                std::string(semi == std::string_view::npos ? std::string_view() : o->substr(semi)));
      } else if (auto slo = r.headers.get("X-Object-Sysmeta-Slo-Etag")) {
        h.set(symlink::kOverrideEtag,
              std::string(symlink::kEmptyEtag) + "; slo_etag=" + std::string(*slo));
      }
    }
    std::string_view size = r.headers.get_or("X-Object-Sysmeta-Slo-Size", "");
    if (size.empty()) size = r.headers.get_or("Content-Length", "0");
    h.set(symlink::kSysTargetBytes, size);
    h.set(symlink::kSysTargetEtag, target.etag);
    if (h.get_or("Content-Type", "").empty()) {
      h.set("Content-Type", r.headers.get_or("Content-Type", ""));
    }
    co_return std::nullopt;
  }

  // POST: applied to whatever object is there; a link answers 307 to its target.
  static net::awaitable<void> post(Exchange& ex, ProxyEnv& env, const Next& next) {
    const Request& req = ex.request();
    if (req.headers.contains(symlink::kTarget)) {
      co_return co_await ex.reply(
          text_response(400, "A PUT request is required to set a symlink target"));
    }
    const auto where = version_and_account(common::http::percent_decode(req.path()));
    Intercept out(ex, req, [&](int status, HeaderMap& h, Response& replacement) {
      std::string_view target = h.get_or(symlink::kSysTarget, "");
      if (!is_success(status) || target.empty()) return Intercept::Action::kForward;
      std::string target_account(h.get_or(symlink::kSysTargetAccount, ""));
      if (target_account.empty()) target_account = common::http::quote(where.second);
      replacement = swob_response_with_body(
          307,
          "The requested POST was applied to a symlink. POST directly to the target to apply "
          "requested metadata.");
      replacement.headers.set("Location",
                              symlink::path_join({"/", where.first, target_account, target}));
      if (auto etag = h.get(symlink::kSysTargetEtag); etag && !etag->empty()) {
        replacement.headers.set(symlink::kTargetEtag, *etag);
      }
      for (const auto& [k, v] : h) {
        if (common::http::istarts_with(k, "x-object-sysmeta-")) replacement.headers.set(k, v);
      }
      return Intercept::Action::kReplace;
    });
    co_await next(out, env);
  }

  // Container requests: a GET's JSON listing shows links' targets.
  static net::awaitable<void> container(Exchange& ex, ProxyEnv& env, const Next& next,
                                        size_t max_listing) {
    const Request& req = ex.request();
    if (req.method != "GET") co_return co_await next(ex, env);
    ResponseCapture held(ex, max_listing);
    co_await next(held, env);
    if (held.too_big) co_return co_await ex.reply(swob_response(500));
    if (held.held.status == 0) co_return;  // nothing answered: catch_errors does
    Response r = std::move(held.held);
    if (is_success(r.status) && !r.body.empty()) {
      // The account as the quoted request path spells it, as Swift reads req.path.
      auto segs = common::http::split_path(req.path(), 2, 3, true);
      std::string version = segs.ok() ? (*segs)[0].value_or("") : "";
      std::string account = segs.ok() ? (*segs)[1].value_or("") : "";
      auto body = symlink::rewrite_listing(r.body, version, account);
      if (!body) co_return co_await ex.reply(swob_response(500));
      r.body = std::move(*body);
    }
    r.headers.erase("Content-Length");
    co_await ex.reply(std::move(r));
  }

  // A HEAD answer has no body; this bounds whatever a misbehaving one sends.
  static constexpr size_t kMaxHeadBody = 64 * 1024;
  const int symloop_max_;
  const size_t max_listing_;  // the most listing bytes the rewrite holds (the app's own cap)
};

}  // namespace

Result<std::unique_ptr<Middleware>> make_symlink(const common::Section& section,
                                                 const MiddlewareContext& context) {
  int64_t symloop_max = symlink::kDefaultSymloopMax;
  APUS_ASSIGN_OR_RETURN(symloop_max, section.get_int("symloop_max", symlink::kDefaultSymloopMax));
  if (symloop_max < 1) symloop_max = symlink::kDefaultSymloopMax;
  if (symloop_max > 1000000) return section.invalid("symloop_max", "must be at most 1000000");
  return std::unique_ptr<Middleware>(std::make_unique<Symlink>(static_cast<int>(symloop_max),
                                                               max_listing_body(context.swift.constraints)));
}

}  // namespace apus::proxy
