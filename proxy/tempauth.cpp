// tempauth: Swift's development auth (swift-protocol.md §14): users from the config, tokens
// handed out at /auth/v1.0, and the authorize rules (owners, reseller admins, container ACLs
// with referrers and .rlistings, account ACLs), with several reseller prefixes and service
// tokens (X-Service-Token adds a service user's groups, which <prefix>_require_group asks of
// the owners of that prefix's accounts).
//
// Tokens are "<first prefix>tk<uuid4 hex>" from the kernel's CSPRNG (common/crypto/random.h).
// Anything of the client's that goes into a header (the realm of a 401) is percent-encoded.
//
// Tokens live in this process and, when the cache filter names memcached servers, in memcached
// too, under Swift's keys and values ("AUTH_/token/<token>" -> [expires, groups],
// "AUTH_/user/<account:user>" -> token), so any proxy, Apus or Swift, accepts a token another
// issued.
#include <algorithm>
#include <boost/json.hpp>
#include <chrono>
#include <map>
#include <set>

#include "common/config/config.h"
#include "common/crypto/random.h"
#include "common/http/swob.h"
#include "common/http/url.h"
#include "common/listing_format.h"
#include "common/pickle.h"
#include "common/thread_annotations.h"
#include "proxy/memcache.h"
#include "common/log/log.h"
#include "proxy/acl.h"
#include "proxy/middleware.h"
#include "proxy/s3api/s3_auth.h"

namespace apus::proxy {

namespace net = boost::asio;
using common::Result;
using common::Status;
using common::http::Exchange;
using common::http::HeaderMap;
using common::http::Request;
using common::http::Response;
using common::http::swob_response;

namespace {

struct User {
  std::string key;
  std::vector<std::string> groups;  // as configured (".admin", ".reseller_admin", ...)
  std::string url;                  // explicit storage URL, or empty
  std::string prefix;               // the reseller prefix of its account, e.g. "AUTH_"
  std::string account_id;           // its storage account, e.g. "AUTH_test"
};

std::vector<std::string> split(std::string_view s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    size_t at = s.find(sep, start);
    out.emplace_back(s.substr(start, at == std::string_view::npos ? s.npos : at - start));
    if (at == std::string_view::npos) return out;
    start = at + 1;
  }
}

std::string strip(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return std::string(s);
}

// Base64 without padding, as user64_ names are written.
std::string b64_decode(std::string s) {
  while (s.size() % 4) s += '=';
  static const std::string kChars =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  int val = 0, bits = -8;
  for (char c : s) {
    if (c == '=') break;
    auto pos = kChars.find(c);
    if (pos == std::string::npos) return {};
    val = (val << 6) + static_cast<int>(pos);
    bits += 6;
    if (bits >= 0) {
      out.push_back(static_cast<char>((val >> bits) & 0xFF));
      bits -= 8;
    }
  }
  return out;
}


class TempAuth final : public Middleware {
 public:
  explicit TempAuth(InfoLookup& info) : info_(info) {}

  Status configure(const common::Section& s) {
    // Swift's config_read_reseller_options(): "AUTH, SERVICE" -> AUTH_, SERVICE_ ('' is the
    // empty prefix, nothing at all means only it); require_group applies to every prefix
    // unless <prefix>_require_group ("''require_group" for the empty one) overrides it.
    for (auto& p : common::list_from_csv(s.get_string("reseller_prefix", "AUTH"))) {
      if (p == "''") p.clear();
      if (!p.empty() && p.back() != '_') p += '_';
      if (std::find(prefixes_.begin(), prefixes_.end(), p) == prefixes_.end()) {
        prefixes_.push_back(p);
      }
    }
    if (prefixes_.empty()) prefixes_.push_back("");
    for (const auto& p : prefixes_) {
      std::string group = strip(s.get_string((p.empty() ? "''" : p) + "require_group", ""));
      if (group.empty()) group = strip(s.get_string("require_group", ""));
      require_group_[p] = group;
    }
    auth_prefix_ = s.get_string("auth_prefix", "/auth/");
    if (auth_prefix_.empty()) auth_prefix_ = "/auth/";
    if (auth_prefix_.front() != '/') auth_prefix_ = "/" + auth_prefix_;
    if (auth_prefix_.back() != '/') auth_prefix_ += '/';
    APUS_ASSIGN_OR_RETURN(token_life_, s.get_double("token_life", 86400));
    storage_url_scheme_ = s.get_string("storage_url_scheme", "default");
    for (const auto& [key, value] : s.items()) {
      std::string account, user;
      if (key.rfind("user64_", 0) == 0) {
        auto parts = split(key.substr(7), '_');
        if (parts.size() != 2) continue;
        account = b64_decode(parts[0]);
        user = b64_decode(parts[1]);
      } else if (key.rfind("user_", 0) == 0) {
        std::string rest = key.substr(5);
        size_t us = rest.find('_');
        if (us == std::string::npos) continue;
        account = rest.substr(0, us);
        user = rest.substr(us + 1);
      } else {
        continue;
      }
      auto words = common::split_words(value);
      if (words.empty()) continue;
      User u;
      u.key = words[0];
      for (size_t i = 1; i < words.size(); ++i) {
        if (i + 1 == words.size() && (words[i].find("://") != std::string::npos ||
                                      words[i].find("$HOST") != std::string::npos)) {
          u.url = words[i];
        } else {
          u.groups.push_back(words[i]);
        }
      }
      u.prefix = prefixes_.front();
      // The storage account: the explicit URL's last segment, else prefix + account.
      u.account_id = u.url.empty() ? u.prefix + common::http::quote(account)
                                   : u.url.substr(u.url.rfind('/') + 1);
      users_[account + ":" + user] = std::move(u);
    }
    return Status();
  }

  std::optional<std::pair<std::string, std::string>> info() const override {
    return std::make_pair(std::string("tempauth"), std::string("{\"account_acls\": true}"));
  }

  net::awaitable<void> call(Exchange& ex, ProxyEnv& env, const Next& next) override {
    const Request& req = ex.request();
    if (env.authorize_override) {
      co_await next(ex, env);
      co_return;
    }
    if (req.path().starts_with(auth_prefix_)) {
      co_return co_await ex.reply(co_await handle_auth(req, env.memcache));
    }
    if (env.s3_signature) {
      co_return co_await call_s3(ex, env, next);
    }
    std::string_view token = req.headers.get_or("X-Auth-Token", req.headers.get_or("X-Storage-Token", ""));
    bool ours = !token.empty() && owns_token(token);
    if (ours) {
      std::string groups = co_await groups_of(std::string(token), env.memcache);
      if (auto service = req.headers.get("X-Service-Token"); !groups.empty() && service) {
        std::string more = co_await groups_of(std::string(*service), env.memcache);
        if (!more.empty()) groups += "," + more;
      }
      if (groups.empty()) {
        std::string realm = "unknown";
        auto segs = common::http::split_path(common::http::percent_decode(req.path()), 2, 3, true);
        if (segs.ok()) realm = (*segs)[1].value_or("unknown");
        co_return co_await ex.reply(unauthorized(req, realm));
      }
      env.remote_user = groups;
      if (groups.find(".reseller_admin") != std::string::npos) env.reseller_request = true;
    }
    env.authorize = [this](const Request& r, ProxyEnv& e) { return authorize(r, e); };
    env.clean_acl = [](std::string_view header, std::string_view value) {
      return clean_acl(header, value);
    };
    co_await next(ex, env);
  }

  // A request s3api made for an S3 client (Swift's get_groups() with s3api.auth_details): the
  // access key is "account:user"; the user's key must make the request's signature. The path
  // names the access key in place of the account, which becomes the user's storage account.
  // A signature that does not check leaves the request to be denied (401, which s3api answers
  // as SignatureDoesNotMatch).
  net::awaitable<void> call_s3(Exchange& ex, ProxyEnv& env, const Next& next) {
    s3api::S3Signature& sig = *env.s3_signature;
    auto it = users_.find(sig.access_key());
    if (it != users_.end() && sig.check(it->second.key)) {
      const User& u = it->second;
      sig.set_account(u.account_id);
      size_t colon = sig.access_key().find(':');
      env.remote_user = user_groups(sig.access_key().substr(0, colon),
                                    sig.access_key().substr(colon + 1), u);
      std::vector<std::string> groups = split(env.remote_user, ',');
      sig.set_account_owner(
          std::find(groups.begin(), groups.end(), u.account_id) != groups.end() ||
          std::find(groups.begin(), groups.end(), ".reseller_admin") != groups.end());
      if (env.remote_user.find(".reseller_admin") != std::string::npos) env.reseller_request = true;
      env.authorize = [this](const Request& r, ProxyEnv& e) { return authorize(r, e); };
      if (env.s3_acl) {
        env.authorize = [](const Request&, ProxyEnv&) -> net::awaitable<std::optional<Response>> {
          co_return std::nullopt;
        };
        env.swift_owner = true;
      }
      env.clean_acl = [](std::string_view header, std::string_view value) {
        return clean_acl(header, value);
      };
      // The access key in the account's place becomes the account (s3api names another
      // account when the bucket is there).
      std::string path = common::http::percent_decode(ex.request().path());
      size_t at = path.find('/', 1);
      if (at == std::string::npos ||
          path.compare(at + 1, sig.access_key().size(), sig.access_key()) != 0 ||
          (path.size() > at + 1 + sig.access_key().size() &&
           path[at + 1 + sig.access_key().size()] != '/')) {
        co_return co_await next(ex, env);
      }
      path.replace(at + 1, sig.access_key().size(), u.account_id);
      ExchangeWrapper rewritten(ex);
      std::string query(ex.request().query());
      rewritten.mutable_request().target =
          common::http::quote(path) + (query.empty() ? "" : "?" + query);
      co_return co_await next(rewritten, env);
    }
    if (!env.authorize) {
      env.authorize = [](const Request& r, ProxyEnv& e) -> net::awaitable<std::optional<Response>> {
        co_return denied(r, e);
      };
    }
    co_await next(ex, env);
  }

  // Swift's clean_acl().
  static Result<std::string> clean_acl(std::string_view header, std::string_view value) {
    std::string name = common::http::to_lower(header);
    std::string out;
    for (const auto& raw_item : split(value, ',')) {
      std::string raw = strip(raw_item);
      if (raw.empty()) continue;
      auto add = [&](const std::string& v) { out += (out.empty() ? "" : ",") + v; };
      size_t colon = raw.find(':');
      if (colon == std::string::npos) {
        add(raw);
        continue;
      }
      std::string first = strip(raw.substr(0, colon)), second = strip(raw.substr(colon + 1));
      if (first.empty() || first[0] != '.') {
        add(raw);
      } else if (first == ".r" || first == ".ref" || first == ".referer" || first == ".referrer") {
        if (name.find("write") != std::string::npos) {
          return Status::invalid_argument("Referrers not allowed in write ACL: '" + raw + "'");
        }
        bool negate = !second.empty() && second[0] == '-';
        if (negate) second = strip(second.substr(1));
        if (!second.empty() && second != "*" && second[0] == '*') second = strip(second.substr(1));
        if (second.empty() || second == ".") {
          return Status::invalid_argument(
              "No host/domain value after referrer designation in ACL: '" + raw + "'");
        }
        add(".r:" + std::string(negate ? "-" : "") + second);
      } else {
        return Status::invalid_argument("Unknown designator '" + first + "' in ACL: '" + raw +
                                        "'");
      }
    }
    return out;
  }

 private:
  struct Token {
    std::string groups;
    double expires = 0;
  };

  static double now() {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
        .count();
  }

  // Tokens are issued with the first prefix only, so only those are ours (an empty first
  // prefix claims every token, as in Swift).
  bool owns_token(std::string_view token) const { return token.starts_with(prefixes_.front()); }

  // The groups of a valid token: from this process, else from memcached (issued by another
  // proxy, Swift's or ours). Empty when unknown or expired.
  net::awaitable<std::string> groups_of(std::string token, Memcache* mc) {
    {
      common::MutexLock lock(&mutex_);
      auto it = tokens_.find(token);
      if (it != tokens_.end()) {
        if (it->second.expires >= now()) co_return it->second.groups;
        tokens_.erase(it);
      }
    }
    if (!mc) co_return std::string();
    auto cached = co_await mc->get(prefixes_.front() + "/token/" + token);
    if (!cached) co_return std::string();
    boost::system::error_code ec;
    auto v = boost::json::parse(*cached, ec);
    if (ec || !v.is_array() || v.as_array().size() != 2 || !v.as_array()[1].is_string()) {
      co_return std::string();
    }
    double expires = v.as_array()[0].is_number() ? v.as_array()[0].to_number<double>() : 0;
    if (expires < now()) co_return std::string();
    std::string groups(v.as_array()[1].as_string());
    common::MutexLock lock(&mutex_);
    tokens_[token] = Token{groups, expires};
    co_return groups;
  }

  // Shares a token through memcached as Swift's tempauth stores it.
  static net::awaitable<void> share_token(Memcache* mc, const std::string& prefix,
                                          const std::string& account_user,
                                          const std::string& token, const Token& t) {
    std::string value = "[" + common::pickle::python_float_repr(t.expires) + ", ";
    common::listing::append_json_string(value, t.groups);
    value += "]";
    std::string quoted;
    common::listing::append_json_string(quoted, token);
    double ttl = t.expires - now();
    co_await mc->set(prefix + "/token/" + token, value, ttl);
    co_await mc->set(prefix + "/user/" + account_user, quoted, ttl);
  }

  // The reseller prefix an account belongs to: a non-empty one first (the empty prefix
  // matches every name), else the empty one when configured.
  std::optional<std::string> account_prefix(std::string_view account) const {
    for (const auto& p : prefixes_) {
      if (!p.empty() && account.starts_with(p)) return p;
    }
    if (std::find(prefixes_.begin(), prefixes_.end(), "") != prefixes_.end()) return "";
    return std::nullopt;
  }

  // Swift's _get_user_groups(): "account,account:user", the configured groups, and for an
  // .admin the account under every non-empty prefix (AUTH_test, SERVICE_test) plus its own
  // storage account. The first two name the user; the prefixed accounts make it an owner.
  std::string user_groups(const std::string& account, const std::string& user,
                          const User& u) const {
    std::vector<std::string> groups = {account, account + ":" + user};
    bool admin = false;
    for (const auto& g : u.groups) {
      if (g == ".admin") {
        admin = true;
      } else {
        groups.push_back(g);
      }
    }
    if (admin) {
      for (const auto& p : prefixes_) {
        if (!p.empty()) groups.push_back(p + account);
      }
      if (std::find(groups.begin(), groups.end(), u.account_id) == groups.end()) {
        groups.push_back(u.account_id);
      }
    }
    std::string out;
    for (const auto& g : groups) out += (out.empty() ? "" : ",") + g;
    return out;
  }

  // Whether two group lists hold the same groups (a token is reused only then, as in Swift,
  // which compares sets: another proxy may have listed them in another order).
  static bool same_groups(std::string_view a, std::string_view b) {
    auto set_of = [](std::string_view s) {
      auto parts = split(s, ',');
      return std::set<std::string>(parts.begin(), parts.end());
    };
    return !a.empty() && set_of(a) == set_of(b);
  }

  // Swift's extract_acl_and_report_errors(): what is wrong with an account ACL, if anything.
  static std::optional<std::string> account_acl_error(std::string_view data) {
    boost::system::error_code ec;
    boost::json::value v = data.empty() ? boost::json::value(boost::json::object())
                                        : boost::json::parse(data, ec);
    if (ec || !v.is_object()) {
      std::string shown;
      common::listing::append_json_string(shown, data);  // close to Python's %r
      shown = "'" + shown.substr(1, shown.size() - 2) + "'";
      return "Syntax error in input (" + shown + ")";
    }
    static const std::set<std::string> kKeys = {"admin", "read-write", "read-only"};
    for (const auto& [key, value] : v.as_object()) {
      std::string k(key);
      std::string quoted;
      common::listing::append_json_string(quoted, k);
      if (!kKeys.count(k)) return "Key " + quoted + " not recognized";
    }
    for (const char* key : {"admin", "read-write", "read-only"}) {
      auto it = v.as_object().find(key);
      if (it == v.as_object().end()) continue;
      std::string quoted = std::string("\"") + key + "\"";
      if (!it->value().is_array()) return "Value for key " + quoted + " must be a list";
      for (const auto& g : it->value().as_array()) {
        if (!g.is_string()) return "Elements of " + quoted + " list must be strings";
      }
    }
    return std::nullopt;
  }

  // Swift's denied_response(): 403 for a known user, 401 for an anonymous one.
  static Response denied(const Request& req, const ProxyEnv& env) {
    return answer(req, env.remote_user.empty() ? 401 : 403);
  }

  net::awaitable<std::optional<Response>> authorize(const Request& req, ProxyEnv& env) {
    auto segs = common::http::split_path(common::http::percent_decode(req.path()), 1, 4, true);
    if (!segs.ok()) co_return answer(req, 404);
    std::string account = (*segs)[1].value_or("");
    // As Swift tests them, by truth: "/v1/a/c/" names no object (an anonymous listing of it
    // needs .rlistings), "/v1/a/" no container.
    bool container = !(*segs)[2].value_or("").empty(), object = !(*segs)[3].value_or("").empty();
    auto prefix = account_prefix(account);
    if (!prefix) co_return denied(req, env);
    if (auto acl = req.headers.get("X-Account-Access-Control")) {
      if (auto error = account_acl_error(*acl)) {
        Response r;
        r.status = 400;
        r.headers.set("Content-Type", "text/plain; charset=UTF-8");
        r.body = "X-Account-Access-Control invalid: " + *error + "\n\nInput: " +
                 std::string(*acl) + "\n";
        co_return r;
      }
      env.add_headers.set("X-Account-Sysmeta-Core-Access-Control", *acl);
    }
    std::vector<std::string> groups = split(env.remote_user, ',');
    auto has = [&](std::string_view g) {
      return std::find(groups.begin(), groups.end(), g) != groups.end();
    };
    bool dot_account = account.size() > prefix->size() && account[prefix->size()] == '.';
    bool is_prefix_only = std::find(prefixes_.begin(), prefixes_.end(), account) != prefixes_.end();
    if (has(".reseller_admin") && !is_prefix_only && !dot_account) {
      env.swift_owner = true;
      co_return std::nullopt;
    }
    if (has(".reseller_reader") && !is_prefix_only && !dot_account &&
        (req.method == "GET" || req.method == "HEAD")) {
      co_return std::nullopt;
    }
    if (has(account) && ((req.method != "DELETE" && req.method != "PUT") || container)) {
      // An owner of a prefix with a require_group (SERVICE_require_group = service) needs that
      // group too, which a user gets only with a service user's X-Service-Token.
      const std::string& required = require_group_.at(*prefix);
      if (required.empty() || has(required)) {
        env.swift_owner = true;
        co_return std::nullopt;
      }
    }
    if (req.method == "OPTIONS") co_return std::nullopt;
    ParsedAcl parsed = parse_acl(env.acl.value_or(""));
    const std::vector<std::string>& referrers = parsed.referrers;
    const std::vector<std::string>& acl_groups = parsed.groups;
    if (referrer_allowed(req.headers.get_or("Referer", ""), referrers)) {
      if (object || std::find(acl_groups.begin(), acl_groups.end(), ".rlistings") !=
                        acl_groups.end()) {
        co_return std::nullopt;
      }
    }
    for (const auto& g : groups) {
      if (!g.empty() && std::find(acl_groups.begin(), acl_groups.end(), g) != acl_groups.end()) {
        co_return std::nullopt;
      }
    }
    // Account ACLs from the account's sysmeta.
    CachedInfo info = co_await info_.account_info(account, req, env);
    if (auto acl = info.headers.get("X-Account-Sysmeta-Core-Access-Control")) {
      boost::system::error_code ec;
      auto v = boost::json::parse(*acl, ec);
      if (!ec && v.is_object()) {
        auto members = [&](const char* level) {
          std::set<std::string> out;
          if (auto it = v.as_object().find(level); it != v.as_object().end() &&
                                                   it->value().is_array()) {
            for (const auto& m : it->value().as_array()) {
              if (m.is_string()) out.insert(std::string(m.as_string()));
            }
          }
          return out;
        };
        auto in = [&](const std::set<std::string>& set) {
          for (const auto& g : groups) {
            if (set.count(g)) return true;
          }
          return false;
        };
        if (in(members("admin"))) {
          env.swift_owner = true;
          co_return std::nullopt;
        }
        if (in(members("read-write")) && (container || req.method == "GET" || req.method == "HEAD")) {
          co_return std::nullopt;
        }
        if (in(members("read-only")) && (req.method == "GET" || req.method == "HEAD")) {
          co_return std::nullopt;
        }
      }
    }
    co_return denied(req, env);
  }

  // GET /auth/v1.0 (and the other token paths): a token for valid credentials.
  net::awaitable<Response> handle_auth(const Request& req, Memcache* mc) {
    Response r = co_await issue_token(req, mc);
    co_return r;
  }

  net::awaitable<Response> issue_token(const Request& req, Memcache* mc) {
    if (req.method != "GET") co_return answer(req, 405);
    // Swift pops the auth prefix, then reads <version>[/<account>/<"auth">].
    std::string path = common::http::percent_decode(req.path());
    std::string rest = "/" + path.substr(std::min(path.size(), auth_prefix_.size()));
    auto segs = common::http::split_path(rest, 1, 4, true);
    if (!segs.ok()) co_return answer(req, 404);
    const std::string version = (*segs)[0].value_or("");
    if (version != "v1" && version != "v1.0" && version != "auth") co_return answer(req, 400);
    segs = common::http::split_path(rest, 1, 3, true);
    if (!segs.ok()) co_return answer(req, 404);
    auto header = [&](std::string_view name) { return std::string(req.headers.get_or(name, "")); };
    std::string account, user, key;
    if (version == "v1" && (*segs)[2] == std::optional<std::string>("auth")) {
      account = (*segs)[1].value_or("");
      user = header("X-Storage-User");  // the bare user name; X-Auth-User is account:user
      if (user.empty()) {
        user = header("X-Auth-User");
        size_t colon = user.find(':');
        if (colon == std::string::npos || user.substr(0, colon) != account) {
          co_return unauthorized(req, account);
        }
        user = user.substr(colon + 1);
      }
      key = header("X-Storage-Pass");
      if (key.empty()) key = header("X-Auth-Key");
    } else if (version == "auth" || version == "v1.0") {
      user = header("X-Auth-User");
      if (user.empty()) user = header("X-Storage-User");
      size_t colon = user.find(':');
      if (colon == std::string::npos) co_return unauthorized(req, "unknown");
      account = user.substr(0, colon);
      user = user.substr(colon + 1);
      key = header("X-Auth-Key");
      if (key.empty()) key = header("X-Storage-Pass");
    } else {
      co_return answer(req, 400);
    }
    if (account.empty() || user.empty() || key.empty()) {
      co_return unauthorized(req, account.empty() ? "unknown" : account);
    }
    auto it = users_.find(account + ":" + user);
    if (it == users_.end()) co_return unauthorized(req, account);
    // A wrong key names no realm, so it does not confirm that the account exists.
    if (it->second.key != key) co_return unauthorized(req, "unknown");
    const User& u = it->second;
    std::string groups = user_groups(account, user, u);
    std::string token;
    double expires = now() + token_life_;
    {
      common::MutexLock lock(&mutex_);
      auto existing = user_tokens_.find(account + ":" + user);
      if (existing != user_tokens_.end()) {
        auto t = tokens_.find(existing->second);
        if (t != tokens_.end() && t->second.expires > now() &&
            same_groups(t->second.groups, groups)) {
          token = t->first;
          expires = t->second.expires;
        }
      }
    }
    if (token.empty() && mc) {
      // Another proxy may hold a token for this user already (Swift's tempauth reuses it).
      if (auto cached = co_await mc->get(prefixes_.front() + "/user/" + account + ":" + user)) {
        boost::system::error_code ec;
        auto v = boost::json::parse(*cached, ec);
        if (!ec && v.is_string()) {
          std::string candidate(v.as_string());
          if (same_groups(co_await groups_of(candidate, mc), groups)) {
            common::MutexLock lock(&mutex_);
            token = candidate;
            expires = tokens_[candidate].expires;
          }
        }
      }
    }
    if (token.empty()) {
      // Swift's shape (prefix, "tk", uuid4().hex); 122 bits from the kernel's CSPRNG, so one
      // token tells nothing about any other.
      token = u.prefix + "tk" + common::crypto::uuid4_hex();
      Token t{groups, expires};
      {
        common::MutexLock lock(&mutex_);
        tokens_[token] = t;
        user_tokens_[account + ":" + user] = token;
      }
      if (mc) co_await share_token(mc, prefixes_.front(), account + ":" + user, token, t);
    }
    std::string url = u.url;
    std::string host = std::string(req.headers.get_or("Host", "127.0.0.1"));
    if (url.empty()) {
      std::string scheme = storage_url_scheme_ == "default" ? "http" : storage_url_scheme_;
      url = scheme + "://" + host + "/v1/" + u.account_id;
    } else if (size_t at = url.find("$HOST"); at != std::string::npos) {
      url.replace(at, 5, "http://" + host);
    }
    Response r;
    r.status = 200;
    r.headers.set("Content-Type", "text/html; charset=UTF-8");
    r.headers.set("X-Auth-Token", token);
    r.headers.set("X-Storage-Token", token);
    r.headers.set("X-Auth-Token-Expires", std::to_string(static_cast<int64_t>(expires - now())));
    r.headers.set("X-Storage-Url", url);
    co_return r;
  }

  // swob's answer with its explanation body, but none for HEAD: swob never builds the body of
  // a HEAD answer, so it goes out with Content-Length: 0.
  static Response answer(const Request& req, int status) {
    Response r = swob_response(status);
    if (req.method == "HEAD") r.body.clear();
    return r;
  }

  // A 401 with Swift's challenge. The realm comes from the request (the path's account, the
  // X-Auth-User header), so it is percent-encoded: no CR, LF, NUL, quote or non-ASCII byte of
  // the client's can end the quoted string or the header line. (Swift writes it raw.)
  static Response unauthorized(const Request& req, std::string_view realm) {
    Response r = answer(req, 401);
    r.headers.set("Www-Authenticate", "Swift realm=\"" + common::http::quote(realm) + "\"");
    return r;
  }

  InfoLookup& info_;
  std::vector<std::string> prefixes_;                  // reseller prefixes, "AUTH_" first
  std::map<std::string, std::string> require_group_;  // prefix -> group its owners need, or ""
  std::string auth_prefix_;
  double token_life_ = 86400;
  std::string storage_url_scheme_;
  std::map<std::string, User> users_;  // "account:user"
  common::Mutex mutex_;
  std::map<std::string, Token> tokens_ APUS_GUARDED_BY(mutex_);
  // "account:user" -> its current token.
  std::map<std::string, std::string> user_tokens_ APUS_GUARDED_BY(mutex_);
};

}  // namespace

Result<std::unique_ptr<Middleware>> make_tempauth(const common::Section& section,
                                                   const MiddlewareContext& context) {
  auto mw = std::make_unique<TempAuth>(context.info);
  APUS_RETURN_IF_ERROR(mw->configure(section));
  return std::unique_ptr<Middleware>(std::move(mw));
}

}  // namespace apus::proxy
