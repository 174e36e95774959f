// staticweb (staticweb.h). The middleware follows Swift 2.30.1's request by request: one
// pass of the client's request (or of a container's index) through the rest of the pipeline,
// decided on as its head comes in, and small subrequests for listings and error pages. Object
// bodies (the object, the index, the error page) stream to the client; only listings (up to
// the proxy's listing cap) and error answers that an error page may replace are held.
#include "proxy/staticweb.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <utility>

#include <boost/asio/awaitable.hpp>
#include <boost/json.hpp>

#include "common/config/config.h"
#include "common/http/swob.h"
#include "common/http/url.h"
#include "common/log/log.h"
#include "proxy/backend.h"
#include "proxy/subrequest.h"

namespace apus::proxy {

namespace net = boost::asio;
namespace json = boost::json;
using common::Result;
using common::Status;
using common::http::Exchange;
using common::http::HeaderMap;
using common::http::Request;
using common::http::Response;

// ---- the pure parts ----------------------------------------------------------------------------

namespace staticweb {

namespace {

// Python's str.strip() for the whitespace a header value can hold.
std::string strip(std::string_view s) {
  constexpr std::string_view kSpace = " \t\n\r\f\v";
  size_t first = s.find_first_not_of(kSpace);
  if (first == std::string_view::npos) return {};
  size_t last = s.find_last_not_of(kSpace);
  return std::string(s.substr(first, last - first + 1));
}

// ASCII lower case (Python lowers every letter; content types are ASCII in practice).
std::string ascii_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

constexpr std::string_view kDoctype =
    "<!DOCTYPE HTML PUBLIC \"-//W3C//DTD HTML 4.01 Transitional//EN\" "
    "\"http://www.w3.org/TR/html4/loose.dtd\">\n";

std::string css_link(std::string_view css, std::string_view prefix) {
  return "  <link rel=\"stylesheet\" type=\"text/css\" href=\"" + css_path(css, prefix) + "\" />\n";
}

// One row of the listing table.
void add_row(std::string& out, std::string_view cls, std::string_view href, std::string_view text,
             std::string_view size, std::string_view date) {
  out.append("   <tr class=\"item ").append(cls).append("\">\n");
  out.append("    <td class=\"colname\"><a href=\"").append(href).append("\">");
  out.append(text).append("</a></td>\n");
  out.append("    <td class=\"colsize\">").append(size).append("</td>\n");
  out.append("    <td class=\"coldate\">").append(date).append("</td>\n");
  out.append("   </tr>\n");
}

// The string `key` of `o`, or nullopt when it is missing or not a string.
std::optional<std::string_view> string_field(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  if (!v || !v->is_string()) return std::nullopt;
  return std::string_view(v->get_string().data(), v->get_string().size());
}

// A name shown relative to the listed prefix: Swift drops as many characters as the prefix
// has (the listing holds only names under it).
std::string_view after_prefix(std::string_view name, std::string_view prefix) {
  return name.substr(std::min(prefix.size(), name.size()));
}

// A JSON number as Python's float() reads it; nullopt for anything else.
std::optional<double> number_field(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  if (!v) return std::nullopt;
  if (v->is_int64()) return static_cast<double>(v->get_int64());
  if (v->is_uint64()) return static_cast<double>(v->get_uint64());
  if (v->is_double()) return v->get_double();
  return std::nullopt;
}

}  // namespace

WebConfig web_config(const HeaderMap& h) {
  WebConfig c;
  c.index = strip(h.get_or("X-Container-Meta-Web-Index", ""));
  c.error = strip(h.get_or("X-Container-Meta-Web-Error", ""));
  c.listings = strip(h.get_or("X-Container-Meta-Web-Listings", ""));
  c.listings_css = strip(h.get_or("X-Container-Meta-Web-Listings-Css", ""));
  c.listings_label = strip(h.get_or("X-Container-Meta-Web-Listings-Label", ""));
  c.dir_type = strip(h.get_or("X-Container-Meta-Web-Directory-Type", ""));
  return c;
}

std::string html_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size() + s.size() / 8);
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#x27;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string human_readable(double value) {
  static constexpr std::string_view kSuffixes = "KMGTPEZY";
  int index = -1;
  // nearbyint rounds half to even in the default rounding mode, as Python's round().
  while (value >= 1024 && index + 1 < static_cast<int>(kSuffixes.size())) {
    ++index;
    value = std::nearbyint(value / 1024);
  }
  char buf[64];
  if (index == -1) {
    double whole = std::trunc(value);  // '%d' % a float truncates
    std::snprintf(buf, sizeof buf, "%.0f", whole == 0 ? 0.0 : whole);
    return buf;
  }
  std::snprintf(buf, sizeof buf, "%.0f%ci", std::nearbyint(value), kSuffixes[index]);
  return buf;
}

std::string css_path(std::string_view css, std::string_view prefix) {
  if (css.starts_with("/") || css.starts_with("http://") || css.starts_with("https://")) {
    return common::http::quote(css, ":/");
  }
  std::string out;
  for (char c : prefix) {
    if (c == '/') out += "../";
  }
  return out + common::http::quote(css);
}

std::string listing_label(std::string_view path, std::string_view listings_label) {
  if (listings_label.empty()) return std::string(path);
  // path.split('/')[4:]: what follows "/<version>/<account>/<container>/".
  std::string_view rest = path;
  for (int i = 0; i < 4; ++i) {
    size_t slash = rest.find('/');
    if (slash == std::string_view::npos) {
      rest = {};
      break;
    }
    rest.remove_prefix(slash + 1);
  }
  return std::string(listings_label) + "/" + std::string(rest);
}

std::string listing_disabled_page(std::string_view label, std::string_view css,
                                  std::string_view prefix, std::string_view index) {
  std::string body(kDoctype);
  body += "<html>\n<head>\n<title>Listing of " + html_escape(label) + "</title>\n";
  if (!css.empty()) {
    body += css_link(css, prefix);
  } else {
    body +=
        "  <style type=\"text/css\">\n"
        "   h1 {font-size: 1em; font-weight: bold;}\n"
        "   p {font-size: 2}\n"
        "  </style>\n";
  }
  body +=
      "</head>\n<body>"
      "  <h1>Web Listing Disabled</h1>"
      "   <p>The owner of this web site has disabled web listing."
      "   <p>If you are the owner of this web site, you can enable"
      "   web listing by setting X-Container-Meta-Web-Listings.</p>";
  if (!index.empty()) {
    body +=
        "<h1>Index File Not Found</h1>"
        " <p>The owner of this web site has set "
        " <b>X-Container-Meta-Web-Index: ";
    body += index;
    body +=
        "</b>. "
        " However, this file is not found.</p>";
  }
  body += " </body>\n</html>\n";
  return body;
}

std::optional<std::string> listing_page(std::string_view json_text, std::string_view label,
                                        std::string_view css, std::string_view prefix) {
  boost::system::error_code ec;
  json::value listing = json::parse(json_text, ec);
  if (ec || !listing.is_array()) return std::nullopt;
  for (const json::value& item : listing.get_array()) {
    if (!item.is_object()) return std::nullopt;
  }
  const std::string title = html_escape(label);
  std::string body(kDoctype);
  body += "<html>\n <head>\n  <title>Listing of " + title + "</title>\n";
  if (!css.empty()) {
    body += css_link(css, prefix);
  } else {
    body +=
        "  <style type=\"text/css\">\n"
        "   h1 {font-size: 1em; font-weight: bold;}\n"
        "   th {text-align: left; padding: 0px 1em 0px 1em;}\n"
        "   td {padding: 0px 1em 0px 1em;}\n"
        "   a {text-decoration: none;}\n"
        "  </style>\n";
  }
  body += " </head>\n <body>\n  <h1 id=\"title\">Listing of " + title + "</h1>\n";
  body +=
      "  <table id=\"listing\">\n"
      "   <tr id=\"heading\">\n"
      "    <th class=\"colname\">Name</th>\n"
      "    <th class=\"colsize\">Size</th>\n"
      "    <th class=\"coldate\">Date</th>\n"
      "   </tr>\n";
  if (!prefix.empty()) {
    body +=
        "   <tr id=\"parent\" class=\"item\">\n"
        "    <td class=\"colname\"><a href=\"../\">../</a></td>\n"
        "    <td class=\"colsize\">&nbsp;</td>\n"
        "    <td class=\"coldate\">&nbsp;</td>\n"
        "   </tr>\n";
  }
  for (const json::value& item : listing.get_array()) {
    const json::object& o = item.get_object();
    if (!o.contains("subdir")) continue;
    std::optional<std::string_view> subdir = string_field(o, "subdir");
    if (!subdir) return std::nullopt;
    std::string_view name = after_prefix(*subdir, prefix);
    add_row(body, "subdir", common::http::quote(name), html_escape(name), "&nbsp;", "&nbsp;");
  }
  for (const json::value& item : listing.get_array()) {
    const json::object& o = item.get_object();
    if (!o.contains("name")) continue;
    std::optional<std::string_view> name_field = string_field(o, "name");
    std::optional<std::string_view> type = string_field(o, "content_type");
    std::optional<std::string_view> modified = string_field(o, "last_modified");
    std::optional<double> bytes = number_field(o, "bytes");
    if (!name_field || !type || !modified || !bytes) return std::nullopt;
    std::string_view name = after_prefix(*name_field, prefix);
    std::string classes;
    std::string_view rest = *type;
    for (;;) {
      size_t slash = rest.find('/');
      if (!classes.empty()) classes += ' ';
      classes += "type-" + html_escape(ascii_lower(rest.substr(0, slash)));
      if (slash == std::string_view::npos) break;
      rest.remove_prefix(slash + 1);
    }
    std::string date = html_escape(*modified);
    date = date.substr(0, date.find('.'));
    std::replace(date.begin(), date.end(), 'T', ' ');
    add_row(body, classes, common::http::quote(name), html_escape(name), human_readable(*bytes),
            date);
  }
  body +=
      "  </table>\n"
      " </body>\n"
      "</html>\n";
  return body;
}

std::optional<bool> listing_has_entries(std::string_view json_text) {
  if (json_text.empty()) return false;
  boost::system::error_code ec;
  json::value v = json::parse(json_text, ec);
  if (ec) return std::nullopt;
  switch (v.kind()) {
    case json::kind::null:
      return false;
    case json::kind::bool_:
      return v.get_bool();
    case json::kind::int64:
      return v.get_int64() != 0;
    case json::kind::uint64:
      return v.get_uint64() != 0;
    case json::kind::double_:
      return v.get_double() != 0;
    case json::kind::string:
      return !v.get_string().empty();
    case json::kind::array:
      return !v.get_array().empty();
    case json::kind::object:
      return !v.get_object().empty();
  }
  return false;
}

UrlBase parse_url_base(std::string_view url) {
  UrlBase out;
  // urlsplit: a scheme is letters, digits, '+', '-', '.' before the first ':', starting with
  // a letter; then "//" starts the network location, which ends at '/', '?' or '#'.
  size_t colon = url.find(':');
  auto scheme_char = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '+' ||
           c == '-' || c == '.';
  };
  if (colon != std::string_view::npos && colon > 0 &&
      ((url[0] >= 'a' && url[0] <= 'z') || (url[0] >= 'A' && url[0] <= 'Z')) &&
      std::all_of(url.begin(), url.begin() + static_cast<std::ptrdiff_t>(colon), scheme_char)) {
    out.scheme = ascii_lower(url.substr(0, colon));
    url.remove_prefix(colon + 1);
  }
  if (url.starts_with("//")) {
    url.remove_prefix(2);
    out.host = std::string(url.substr(0, url.find_first_of("/?#")));
  }
  return out;
}

std::string slash_location(std::string_view path, const UrlBase& base,
                           std::optional<std::string_view> host, std::string_view server) {
  std::string scheme = base.scheme.empty() ? "http" : base.scheme;
  std::string h = !base.host.empty() ? base.host : host ? std::string(*host) : std::string(server);
  if ((scheme == "http" && h.ends_with(":80")) || (scheme == "https" && h.ends_with(":443"))) {
    h.erase(h.rfind(':'));
  }
  return scheme + "://" + h + common::http::quote(std::string(path) + "/");
}

}  // namespace staticweb

// ---- the middleware ----------------------------------------------------------------------------

namespace {

bool is_success(int status) { return status >= 200 && status < 300; }
bool is_redirection(int status) { return status >= 300 && status < 400; }

// swob's answer with its explanation body, none for a HEAD (swob never builds the body of a
// HEAD answer: it goes out with Content-Length: 0).
Response swob_answer(const Request& req, int status) {
  Response r = common::http::swob_response(status);
  if (req.method == "HEAD") r.body.clear();
  return r;
}

// Error answers held in case an error page replaces them: Swift's own are a few hundred bytes.
constexpr size_t kMaxHeldError = 64 * 1024;

// An answer of the rest of the pipeline, decided on when its head comes in: sent on to the
// client (optionally under another status: an error page keeps the error's status), dropped
// (its body abandoned), or held whole (at most kMaxHeldError bytes of body). Lives in the
// coroutine frame of the request it serves; all calls on that request's executor.
class Intercept final : public ExchangeWrapper {
 public:
  enum class Action { kForward, kDrop, kHold };
  using Decide = std::function<Action(int status, const HeaderMap& headers)>;

  // `req` replaces the client's request; a forwarded body is not written when the client's
  // own request is a HEAD (an error page read by GET for a HEAD).
  Intercept(Exchange& client, Request req, Decide decide)
      : ExchangeWrapper(client, std::move(req)),
        decide_(std::move(decide)),
        client_head_(client.request().method == "HEAD") {}

  // Forwarded answers go out with `status` instead of their own.
  void forward_as(int status, std::string reason) {
    forward_status_ = status;
    forward_reason_ = std::move(reason);
  }

  Action action() const { return action_; }
  int status() const { return status_; }  // 0: nothing answered
  const HeaderMap& headers() const { return headers_; }
  Response held;         // kHold: the answer
  bool too_big = false;  // kHold: its body went past kMaxHeldError

  net::awaitable<Status> write_body(std::string_view chunk) override {
    switch (action_) {
      case Action::kForward:
        if (client_head_) co_return Status();
        co_return co_await ExchangeWrapper::write_body(chunk);
      case Action::kDrop:
        co_return Status::cancelled("answer dropped by staticweb");
      case Action::kHold:
        if (held.body.size() + chunk.size() > kMaxHeldError) {
          too_big = true;
          co_return Status::cancelled("answer too large to hold");
        }
        held.body.append(chunk);
        co_return Status();
    }
    co_return Status();
  }
  net::awaitable<Status> finish_response() override {
    if (action_ == Action::kForward) co_return co_await ExchangeWrapper::finish_response();
    co_return Status();
  }
  bool response_started() const override {
    return action_ == Action::kForward && status_ != 0 ? ExchangeWrapper::response_started()
                                                       : status_ != 0;
  }
  int response_status() const override {
    return action_ == Action::kForward && status_ != 0 ? ExchangeWrapper::response_status()
                                                       : status_;
  }

 protected:
  net::awaitable<Status> do_respond(Response r) override {
    decide(r.status, r.headers);
    switch (action_) {
      case Action::kForward:
        if (forward_status_) {
          r.status = forward_status_;
          r.reason = forward_reason_;
        }
        co_return co_await ExchangeWrapper::do_respond(std::move(r));
      case Action::kDrop:
        co_return Status();
      case Action::kHold:
        if (r.body.size() > kMaxHeldError) {
          too_big = true;
          co_return Status::cancelled("answer too large to hold");
        }
        held = std::move(r);
        co_return Status();
    }
    co_return Status();
  }
  net::awaitable<Status> do_start_response(int status, HeaderMap headers,
                                           std::optional<uint64_t> length) override {
    decide(status, headers);
    switch (action_) {
      case Action::kForward:
        co_return co_await ExchangeWrapper::do_start_response(
            forward_status_ ? forward_status_ : status, std::move(headers), length);
      case Action::kDrop:
        co_return Status();
      case Action::kHold:
        held.status = status;
        held.headers = std::move(headers);
        co_return Status();
    }
    co_return Status();
  }

 private:
  void decide(int status, const HeaderMap& headers) {
    status_ = status;
    headers_ = headers;
    action_ = decide_(status, headers);
  }

  Decide decide_;
  const bool client_head_;
  Action action_ = Action::kForward;
  int status_ = 0;
  HeaderMap headers_;
  int forward_status_ = 0;
  std::string forward_reason_;
};

// What one request to staticweb is about.
struct Site {
  std::string path;  // the decoded request path (PATH_INFO)
  std::string version, account, container, obj;
  staticweb::WebConfig web;
};

// The middleware. Keeps only its config and the info lookup (thread-safe); each request's state
// lives in its coroutine frames.
class StaticWeb final : public Middleware {
 public:
  StaticWeb(staticweb::UrlBase url_base, std::string server, InfoLookup& info, size_t max_listing)
      : url_base_(std::move(url_base)),
        server_(std::move(server)),
        info_(info),
        max_listing_(max_listing) {}

  std::optional<std::pair<std::string, std::string>> info() const override {
    return std::make_pair(std::string("staticweb"), std::string("{}"));
  }

  net::awaitable<void> call(Exchange& ex, ProxyEnv& env, const Next& next) override {
    const Request& req = ex.request();
    if (!env.authorize) {
      APUS_LOG_DEBUG("No authentication middleware authorized request yet. Skipping staticweb");
      co_return co_await next(ex, env);
    }
    Site site;
    site.path = common::http::percent_decode(req.path());
    auto segs = common::http::split_path(site.path, 2, 4, true);
    if (!segs.ok() || (req.method != "GET" && req.method != "HEAD") ||
        (!env.remote_user.empty() && !web_mode(req)) || (*segs)[2].value_or("").empty()) {
      co_return co_await next(ex, env);
    }
    site.version = *(*segs)[0];
    site.account = *(*segs)[1];
    site.container = *(*segs)[2];
    site.obj = (*segs)[3].value_or("");
    CachedInfo info = co_await info_.container_info(site.account, site.container, req, env);
    if (is_success(info.status)) site.web = staticweb::web_config(info.headers);
    if (!site.obj.empty()) co_return co_await handle_object(ex, env, next, site);
    co_await handle_container(ex, env, next, site, info);
  }

 private:
  static bool web_mode(const Request& req) {
    return common::config_true_value(req.headers.get_or("X-Web-Mode", "f"));
  }

  // The client's request as Swift's dict(env) copies it for another path: every header kept,
  // "<User-Agent> StaticWeb" (Swift formats a missing agent as None).
  static Request same_request(const Request& client, std::optional<std::string> decoded_path) {
    Request r = client;
    if (decoded_path) {
      r.target = common::http::quote(*decoded_path);
      if (!client.query().empty()) r.target += "?" + std::string(client.query());
    }
    r.headers.set("User-Agent",
                  std::string(client.headers.get_or("User-Agent", "None")) + " StaticWeb");
    return r;
  }

  static ProxyEnv same_env(const ProxyEnv& env) {
    ProxyEnv copy = env;
    copy.source = "SW";
    return copy;
  }

  // A fresh GET of the rest of the pipeline (Swift's make_env): the user, not the token.
  static Request fresh_get(const Request& client, std::string_view path, std::string_view query) {
    HeaderMap h = subrequest_headers(client, "StaticWeb");
    h.erase("X-Auth-Token");
    return make_subrequest("GET", path, query, std::move(h));
  }

  Response redirect_with_slash(const Request& req, const Site& site) const {
    Response r = swob_answer(req, 301);
    r.headers.set("Location", staticweb::slash_location(site.path, url_base_,
                                                        req.headers.get("Host"), server_));
    return r;
  }

  static std::string container_path(const Site& site) {
    return "/" + site.version + "/" + site.account + "/" + site.container;
  }

  // Swift's _error_response(): `answer` as it is, or, when the container names error pages,
  // the page <status><suffix> under the answer's status (when it can be read).
  net::awaitable<void> error_response(Exchange& ex, ProxyEnv& env, const Next& next,
                                      const Site& site, Response answer) const {
    if (site.web.error.empty()) co_return co_await ex.reply(std::move(answer));
    Request page = fresh_get(
        ex.request(), container_path(site) + "/" + std::to_string(answer.status) + site.web.error,
        ex.request().query());
    Intercept out(ex, std::move(page), [](int status, const HeaderMap&) {
      return is_success(status) ? Intercept::Action::kForward : Intercept::Action::kDrop;
    });
    out.forward_as(answer.status, answer.reason);
    ProxyEnv sub = subrequest_env(env, "SW");
    co_await next(out, sub);
    if (out.action() == Intercept::Action::kForward && out.status() != 0) co_return;
    co_await ex.reply(std::move(answer));
  }

  // Swift's handle_container(): /<version>/<account>/<container>[/].
  net::awaitable<void> handle_container(Exchange& ex, ProxyEnv& env, const Next& next,
                                        const Site& site, const CachedInfo& info) const {
    const Request& req = ex.request();
    if (auto acl = info.headers.get("X-Container-Read")) {
      env.acl = std::string(*acl);
    } else {
      env.acl.reset();
    }
    if (auto denied = co_await env.authorize(req, env)) {
      co_return co_await error_response(ex, env, next, site, std::move(*denied));
    }
    if (site.web.listings.empty() && site.web.index.empty()) {
      if (web_mode(req)) co_return co_await ex.reply(swob_answer(req, 404));
      co_return co_await next(ex, env);
    }
    if (!site.path.ends_with('/')) co_return co_await ex.reply(redirect_with_slash(req, site));
    if (site.web.index.empty()) co_return co_await listing(ex, env, next, site, "");
    const bool pages = !site.web.error.empty();
    Intercept index(ex, same_request(req, site.path + site.web.index),
                    [pages](int status, const HeaderMap&) {
                      if (status == 404) return Intercept::Action::kDrop;
                      if (is_success(status) || is_redirection(status) || !pages) {
                        return Intercept::Action::kForward;
                      }
                      return Intercept::Action::kHold;
                    });
    ProxyEnv sub = same_env(env);
    co_await next(index, sub);
    switch (index.action()) {
      case Intercept::Action::kForward:
        co_return;
      case Intercept::Action::kDrop:
        if (index.status() == 0) co_return;  // nothing answered: catch_errors does
        co_return co_await listing(ex, env, next, site, "");
      case Intercept::Action::kHold:
        if (index.too_big) co_return co_await ex.reply(swob_answer(req, 500));
        co_return co_await error_response(ex, env, next, site, std::move(index.held));
    }
  }

  // Swift's handle_object(): /<version>/<account>/<container>/<object or pseudo-directory>.
  net::awaitable<void> handle_object(Exchange& ex, ProxyEnv& env, const Next& next,
                                     const Site& site) const {
    const Request& req = ex.request();
    const bool pages = !site.web.listings.empty() || !site.web.index.empty();
    const std::string dir_type =
        site.web.dir_type.empty() ? "application/directory" : site.web.dir_type;
    Intercept object(ex, same_request(req, std::nullopt), [&](int status, const HeaderMap& h) {
      bool missing = status == 404;
      if (is_success(status) || is_redirection(status)) {
        // A directory marker is no object here: a directory.
        auto length = h.get("Content-Length");
        int64_t n = length ? std::atoll(std::string(*length).c_str()) : 0;
        missing = h.get_or("Content-Type", "") == dir_type && n <= 1;
      }
      return missing && pages ? Intercept::Action::kDrop : Intercept::Action::kForward;
    });
    ProxyEnv sub = same_env(env);
    co_await next(object, sub);
    if (object.action() == Intercept::Action::kForward || object.status() == 0) co_return;
    const bool slash = site.path.ends_with('/');
    if (!site.web.index.empty()) {
      std::string index_path = site.path + (slash ? "" : "/") + site.web.index;
      Intercept index(ex, same_request(req, index_path), [slash](int status, const HeaderMap&) {
        if ((is_success(status) || is_redirection(status)) && slash) {
          return Intercept::Action::kForward;
        }
        return Intercept::Action::kDrop;
      });
      ProxyEnv index_env = same_env(env);
      co_await next(index, index_env);
      const int status = index.status();
      if (index.action() == Intercept::Action::kForward) co_return;
      if (is_success(status) || is_redirection(status)) {
        co_return co_await ex.reply(redirect_with_slash(req, site));
      }
      // Swift's handle_object() gives nothing back for any other answer: catch_errors' 500.
      if (status != 404) co_return;
    }
    if (!slash) {
      // A pseudo-directory named without its slash is redirected if anything is under it.
      Request check = fresh_get(
          req, container_path(site),
          "limit=1&delimiter=/&prefix=" + common::http::quote(site.obj + "/") + "&format=json");
      auto r =
          co_await run_subrequest(next, std::move(check), subrequest_env(env, "SW"), max_listing_);
      if (!r.ok()) co_return;  // the listing broke off: catch_errors' 500, as in Swift
      std::optional<bool> found =
          is_success(r->status) ? staticweb::listing_has_entries(r->body) : false;
      if (!found) co_return;  // not JSON: Swift fails (catch_errors' 500)
      if (!*found) {
        co_return co_await error_response(ex, env, next, site, swob_answer(ex.request(), 404));
      }
      co_return co_await ex.reply(redirect_with_slash(req, site));
    }
    co_await listing(ex, env, next, site, site.obj);
  }

  // Swift's _listing(): the HTML listing of `prefix` ("" for the container's top).
  net::awaitable<void> listing(Exchange& ex, ProxyEnv& env, const Next& next, const Site& site,
                               std::string prefix) const {
    const std::string label = staticweb::listing_label(site.path, site.web.listings_label);
    if (!common::config_true_value(site.web.listings)) {
      Response r = common::http::swob_response_with_body(
          404,
          staticweb::listing_disabled_page(label, site.web.listings_css, prefix, site.web.index));
      co_return co_await error_response(ex, env, next, site, std::move(r));
    }
    std::string query = "delimiter=/";
    if (!prefix.empty()) query += "&prefix=" + common::http::quote(prefix);
    query += "&format=json";
    auto r = co_await run_subrequest(next, fresh_get(ex.request(), container_path(site), query),
                                     subrequest_env(env, "SW"), max_listing_);
    if (!r.ok()) {
      APUS_LOG_DEBUG("staticweb listing of " + site.path + ": " + r.status().to_string());
      co_return;  // catch_errors answers 500
    }
    if (!is_success(r->status)) {
      co_return co_await error_response(ex, env, next, site, std::move(*r));
    }
    if (!prefix.empty()) {
      std::optional<bool> found = staticweb::listing_has_entries(r->body);
      if (!found) co_return;
      if (!*found) {
        co_return co_await error_response(ex, env, next, site, swob_answer(ex.request(), 404));
      }
    }
    auto page = staticweb::listing_page(r->body, label, site.web.listings_css, prefix);
    if (!page) co_return;
    Response out;
    out.status = 200;
    out.headers.set("Content-Type", "text/html; charset=UTF-8");
    out.body = std::move(*page);
    co_await ex.reply(std::move(out));
  }

  const staticweb::UrlBase url_base_;
  const std::string server_;  // "<bind_ip>:<bind_port>", Swift's SERVER_NAME:SERVER_PORT
  InfoLookup& info_;
  const size_t max_listing_;  // the most listing bytes held (the proxy's own cap)
};

}  // namespace

Result<std::unique_ptr<Middleware>> make_staticweb(const common::Section& section,
                                                   const MiddlewareContext& context) {
  staticweb::UrlBase base = staticweb::parse_url_base(section.get_string("url_base", ""));
  if ((base.host.find('[') == std::string::npos) != (base.host.find(']') == std::string::npos)) {
    return section.invalid("url_base", "Invalid IPv6 URL");
  }
  std::string server =
      section.get_string("bind_ip", "0.0.0.0") + ":" + section.get_string("bind_port", "8080");
  return std::unique_ptr<Middleware>(
      std::make_unique<StaticWeb>(std::move(base), std::move(server), context.info,
                                  max_listing_body(context.swift.constraints)));
}

}  // namespace apus::proxy
