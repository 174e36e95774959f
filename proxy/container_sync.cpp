// container_sync (container_sync.h).
//
// Swift's tempauth also lets a request through whose X-Container-Sync-Key equals the
// container's sync key when it carries an X-Timestamp; that older form of sync cannot reach
// tempauth here (nor in Swift with gatekeeper's default shunt_inbound_x_timestamp, which Apus
// always applies): no client's X-Timestamp is on the request by then, so it is left out.
//
// Swift looks up the container's info for every /v1 container or object request before looking
// at its headers; here it is looked up only when an answer depends on it (a container PUT or
// POST with X-Container-Sync-To, or a sync signature to check). The answers are the same.
#include "proxy/container_sync.h"

#include <atomic>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/constraints.h"
#include "common/container_sync_realms.h"
#include "common/crypto/hmac.h"
#include "common/http/swob.h"
#include "common/http/url.h"
#include "common/listing_format.h"
#include "common/log/log.h"

namespace apus::proxy {

namespace net = boost::asio;
using common::Result;
using common::http::Exchange;
using common::http::Request;
using common::http::Response;

namespace {

constexpr std::string_view kInboundTimestamp = "X-Backend-Inbound-X-Timestamp";

// Whether `c` is whitespace to Python's str.split() on a header value (WSGI hands headers over
// as latin-1 text, so every byte is one character): ASCII whitespace, the separators 0x1c-0x1f,
// NEL and NBSP.
bool py_space(unsigned char c) {
  return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0;
}

std::vector<std::string_view> py_split(std::string_view s) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && py_space(static_cast<unsigned char>(s[i]))) ++i;
    size_t start = i;
    while (i < s.size() && !py_space(static_cast<unsigned char>(s[i]))) ++i;
    if (i > start) out.push_back(s.substr(start, i - start));
  }
  return out;
}

// A header value as Swift signs it: the latin-1 text WSGI made of the bytes, encoded as UTF-8.
std::string latin1_to_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    if (c < 0x80) {
      out.push_back(ch);
    } else {
      out.push_back(static_cast<char>(0xc0 | (c >> 6)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3f)));
    }
  }
  return out;
}

bool is_ascii(std::string_view s) {
  for (char c : s) {
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  }
  return true;
}

std::string ascii_upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  }
  return out;
}

// swob's www_authenticate() realm for a /<version>/<account>/... path: the quoted account.
std::string auth_realm(std::string_view account) {
  if (account == "v1.0" || account == "auth") return "unknown";
  return common::http::quote(account);
}

class ContainerSync final : public Middleware {
 public:
  ContainerSync(std::string realms_path, bool allow_full_urls, std::string realm,
                std::string cluster, const common::Constraints& constraints, InfoLookup& info)
      : realms_(std::make_unique<common::ContainerSyncRealms>(std::move(realms_path))),
        allow_full_urls_(allow_full_urls),
        realm_(std::move(realm)),
        cluster_(std::move(cluster)),
        constraints_(constraints),
        info_(info) {
    (void)info_json();  // Swift checks `current` against the realms at start-up too
  }

  // Asked on every /info request: the realms file may have changed (Swift registers the section
  // again for each /info).
  std::optional<std::pair<std::string, std::string>> info() const override {
    return std::make_pair(std::string("container_sync"), info_json());
  }

  net::awaitable<void> call(Exchange& ex, ProxyEnv& env, const Next& next) override {
    const Request& req = ex.request();
    if (req.path() == "/info") co_return co_await next(ex, env);
    auto segs = common::http::split_path(common::http::percent_decode(req.path()), 3, 4, true);
    if (!segs.ok() || !common::valid_api_version(constraints_, (*segs)[0].value_or(""))) {
      co_return co_await next(ex, env);
    }
    const std::string& account = *(*segs)[1];
    const std::string& container = *(*segs)[2];
    const bool object = (*segs)[3] && !(*segs)[3]->empty();
    std::optional<CachedInfo> info;
    const std::string_view sync_to = req.headers.get_or("X-Container-Sync-To", "");
    if ((req.method == "PUT" || req.method == "POST") && !object && !sync_to.empty()) {
      info = co_await info_.container_info(account, container, req, env);
      if (!info->headers.get_or("X-Container-Sysmeta-Versions-Container", "").empty()) {
        co_return co_await ex.reply(common::http::swob_response_with_body(
            400,
            "Cannot configure container sync on a container with object versioning "
            "configured."));
      }
    }
    if (!allow_full_urls_ && !sync_to.empty() && !sync_to.starts_with("//")) {
      co_return co_await ex.reply(common::http::swob_response_with_body(
          400,
          "Full URLs are not allowed for X-Container-Sync-To values. Only realm values of the "
          "format //realm/cluster/account/container are allowed.\n"));
    }
    const std::string_view auth = req.headers.get_or("X-Container-Sync-Auth", "");
    if (auth.empty()) co_return co_await next(ex, env);

    // A signed sync request: let through only with a signature this cluster would make.
    ExchangeWrapper signed_req(ex);
    std::optional<std::string_view> verdict;  // the log_info entry
    bool valid = false;
    const std::vector<std::string_view> words = py_split(auth);
    std::optional<std::string> realm_key, realm_key2;
    if (words.size() == 3) {
      realm_key = realms_->key(words[0]);
      realm_key2 = realms_->key2(words[0]);
    }
    if (words.size() != 3) {
      verdict = "cs:not-3-args";
    } else if (!realm_key) {
      verdict = "cs:no-local-realm-key";
    } else {
      if (!info) info = co_await info_.container_info(account, container, req, env);
      const std::string user_key(info->headers.get_or("X-Container-Sync-Key", ""));
      if (user_key.empty()) {
        verdict = "cs:no-local-user-key";
      } else {
        // The client's X-Timestamp, which gatekeeper set aside, is the write's time again.
        common::http::HeaderMap& h = signed_req.mutable_request().headers;
        if (auto inbound = h.get(kInboundTimestamp)) {
          std::string ts(*inbound);
          h.erase(kInboundTimestamp);
          h.set("X-Timestamp", ts);
        }
        const std::string ts(h.get_or("X-Timestamp", "0"));
        if (!is_ascii(ts)) {
          // Swift's signing encodes the timestamp as ASCII and fails on anything else: its
          // catch_errors answers.
          co_return co_await ex.reply(common::http::text_response(500, "An error occurred"));
        }
        const std::string path = common::http::quote(common::http::percent_decode(req.path()));
        const std::string nonce = latin1_to_utf8(words[1]);
        const std::string expected =
            common::container_sync_sig(req.method, path, ts, nonce, *realm_key, user_key);
        valid = common::crypto::streq_const_time(words[2], expected);
        if (!valid && realm_key2) {
          valid = common::crypto::streq_const_time(
              words[2],
              common::container_sync_sig(req.method, path, ts, nonce, *realm_key2, user_key));
        }
        verdict = valid ? "cs:valid" : "cs:invalid-sig";
      }
    }
    env.log_info[std::string(*verdict)] = "";
    if (!valid) {
      APUS_LOG_DEBUG("container_sync: " + std::string(*verdict) + " " + env.trans_id);
      Response r;
      r.status = 401;
      r.headers.set("Content-Type", "text/plain");
      r.headers.set("Www-Authenticate", "SwiftContainerSync realm=\"" + auth_realm(account) + "\"");
      r.body = "X-Container-Sync-Auth header not valid; contact cluster operator for support.";
      co_return co_await ex.reply(std::move(r));
    }
    env.authorize_override = true;
    // The source cluster checked the manifest and the links already; a manifest may even
    // arrive before its segments.
    env.slo_override = true;
    env.symlink_override = true;
    co_await next(signed_req, env);
  }

 private:
  // The /info section: every realm that has clusters, with the current one marked.
  std::string info_json() const {
    std::shared_ptr<const common::ContainerSyncRealms::Realms> realms = realms_->realms();
    bool current_found = false;
    std::string out = "{\"realms\": {";
    bool first_realm = true;
    for (const auto& [name, realm] : *realms) {
      if (realm.clusters.empty()) continue;
      if (!first_realm) out += ", ";
      first_realm = false;
      common::listing::append_json_string(out, name);
      out += ": {\"clusters\": {";
      bool first_cluster = true;
      for (const auto& [cluster, endpoint] : realm.clusters) {
        if (!first_cluster) out += ", ";
        first_cluster = false;
        common::listing::append_json_string(out, cluster);
        const bool current = name == realm_ && cluster == cluster_;
        current_found = current_found || current;
        out += current ? ": {\"current\": true}" : ": {}";
      }
      out += "}}";
    }
    out += "}}";
    if (!realm_.empty() && !cluster_.empty()) {
      // Swift logs this each time it builds the section; once until it is fixed is enough.
      if (current_found) {
        unknown_current_logged_.store(false);
      } else if (!unknown_current_logged_.exchange(true)) {
        APUS_LOG_ERROR("Unknown current //REALM/CLUSTER (//" + realm_ + "/" + cluster_ + ")");
      }
    }
    return out;
  }

  const std::unique_ptr<common::ContainerSyncRealms> realms_;  // thread-safe
  const bool allow_full_urls_;
  const std::string realm_;    // upper-cased; empty when `current` is unset or bad
  const std::string cluster_;  // upper-cased
  const common::Constraints& constraints_;
  InfoLookup& info_;
  mutable std::atomic<bool> unknown_current_logged_{false};
};

}  // namespace

Result<std::unique_ptr<Middleware>> make_container_sync(const common::Section& section,
                                                        const MiddlewareContext& context) {
  const std::string swift_dir = section.get_string("swift_dir", "/etc/swift");
  const bool allow_full_urls =
      common::config_true_value(section.get_string("allow_full_urls", "true"));
  std::string realm, cluster;
  if (const std::string current = section.get_string("current", ""); !current.empty()) {
    // Swift's current.strip('/').split('/'): exactly two names, else logged and ignored.
    const size_t first = current.find_first_not_of('/');
    const size_t last = current.find_last_not_of('/');
    const std::string_view inner =
        first == std::string::npos ? std::string_view()
                                   : std::string_view(current).substr(first, last - first + 1);
    const size_t slash = inner.find('/');
    if (slash == std::string_view::npos || inner.find('/', slash + 1) != std::string_view::npos) {
      APUS_LOG_ERROR("Invalid current //REALM/CLUSTER (" + current + ")");
    } else {
      realm = ascii_upper(inner.substr(0, slash));
      cluster = ascii_upper(inner.substr(slash + 1));
    }
  }
  return std::unique_ptr<Middleware>(std::make_unique<ContainerSync>(
      swift_dir + "/container-sync-realms.conf", allow_full_urls, std::move(realm),
      std::move(cluster), context.swift.constraints, context.info));
}

}  // namespace apus::proxy
