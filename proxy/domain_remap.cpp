// domain_remap (limits.h): a request to <account>.<storage domain> or
// <container>.<account>.<storage domain> is served as /<path_root>/<account>[/<container>]
// plus its own path, as Swift's middleware maps it: an account written with '-' for its
// reseller prefix's '_' ("AUTH-test") is read with '_', a prefix in another case is
// written as configured, and an account of no configured prefix gets default_reseller_prefix
// (or is left alone). Location headers of the answer are mapped back to the client's path.
#include "common/config/config.h"
#include "common/http/headers.h"
#include "common/http/swob.h"
#include "common/http/url.h"
#include "common/listing_format.h"
#include "proxy/limits.h"

namespace apus::proxy {

namespace net = boost::asio;
using common::Result;
using common::http::Exchange;
using common::http::HeaderMap;
using common::http::Request;

namespace domain_remap {

namespace {

std::string_view strip_dots(std::string_view s) {
  while (!s.empty() && s.front() == '.') s.remove_prefix(1);
  while (!s.empty() && s.back() == '.') s.remove_suffix(1);
  return s;
}

std::string lower(std::string_view s) { return common::http::to_lower(s); }

}  // namespace

Options parse_options(const common::Section& section) {
  Options o;
  // Names without a leading '.' first, then those written with one, as Swift orders them.
  auto domains = common::list_from_csv(section.get_string("storage_domain", "example.com"));
  for (const auto& d : domains) {
    if (!d.starts_with('.')) o.storage_domains.push_back("." + d);
  }
  for (const auto& d : domains) {
    if (d.starts_with('.')) o.storage_domains.push_back(d);
  }
  const std::string root = section.get_string("path_root", "v1");
  std::string_view r(root);
  while (!r.empty() && r.front() == '/') r.remove_prefix(1);
  while (!r.empty() && r.back() == '/') r.remove_suffix(1);
  o.path_root = std::string(r) + "/";
  o.reseller_prefixes = common::list_from_csv(section.get_string("reseller_prefixes", "AUTH"));
  o.default_reseller_prefix = section.get("default_reseller_prefix");
  o.mangle_client_paths =
      common::config_true_value(section.get_string("mangle_client_paths", ""));
  return o;
}

Remap remap(const Options& o, std::string_view host, std::string_view path) {
  if (o.storage_domains.empty()) return {};
  std::string_view domain = host;
  if (size_t colon = domain.rfind(':'); colon != std::string_view::npos) {
    domain = domain.substr(0, colon);
  }
  const std::string* storage_domain = nullptr;
  for (const auto& d : o.storage_domains) {
    if (domain.ends_with(d)) {
      storage_domain = &d;
      break;
    }
  }
  if (!storage_domain) return {};
  std::string_view names = strip_dots(domain.substr(0, domain.size() - storage_domain->size()));
  std::vector<std::string_view> parts;
  for (size_t start = 0;;) {
    size_t dot = names.find('.', start);
    parts.push_back(names.substr(start, dot == std::string_view::npos ? dot : dot - start));
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  std::optional<std::string> container;
  std::string account;
  if (parts.size() == 2) {
    container = std::string(parts[0]);
    account = std::string(parts[1]);
  } else if (parts.size() == 1) {
    account = std::string(parts[0]);
  } else {
    return {Remap::kBadDomain, {}};
  }
  if (!o.reseller_prefixes.empty()) {
    if (account.find('_') == std::string::npos) {
      if (size_t dash = account.find('-'); dash != std::string::npos) account[dash] = '_';
    }
    const std::string account_prefix = lower(account.substr(0, account.find('_')));
    const std::string* real_prefix = nullptr;
    for (const auto& p : o.reseller_prefixes) {
      if (lower(p) == account_prefix) {
        real_prefix = &p;
        break;
      }
    }
    if (real_prefix) {
      if (!account.starts_with(*real_prefix)) {
        account = *real_prefix + account.substr(std::min(account.size(), real_prefix->size()));
      }
    } else if (o.default_reseller_prefix && !o.default_reseller_prefix->empty()) {
      account = *o.default_reseller_prefix + "_" + account;
    } else {
      return {};
    }
  }
  std::string_view rest = path.empty() ? path : path.substr(1);
  std::string out = "/" + o.path_root.substr(0, o.path_root.size() - 1) + "/" + account;
  if (container) out += "/" + *container;
  if (o.mangle_client_paths && (std::string(rest) + "/").starts_with(o.path_root)) {
    rest = rest.substr(std::min(rest.size(), o.path_root.size()));
  }
  out += "/";
  out += rest;
  return {Remap::kRewrite, std::move(out)};
}

std::string rewrite_location(std::string_view value, std::string_view rewritten,
                             std::string_view requested) {
  size_t scheme = value.starts_with("http://") ? 7 : value.starts_with("https://") ? 8 : 0;
  if (scheme == 0) return std::string(value);
  size_t host_end = value.find('/', scheme);
  if (host_end == std::string_view::npos || host_end == scheme) return std::string(value);
  std::string_view after = value.substr(host_end);
  // Python's '.*$' stops at a newline (a header value holds none).
  if (!after.starts_with(rewritten) || after.find('\n') != std::string_view::npos) {
    return std::string(value);
  }
  return std::string(value.substr(0, host_end)) + std::string(requested) +
         std::string(after.substr(rewritten.size()));
}

}  // namespace domain_remap

namespace {

class DomainRemap final : public Middleware {
 public:
  explicit DomainRemap(domain_remap::Options options) : o_(std::move(options)) {}

  std::optional<std::pair<std::string, std::string>> info() const override {
    std::string out = "{\"default_reseller_prefix\": ";
    if (o_.default_reseller_prefix) {
      common::listing::append_json_string(out, *o_.default_reseller_prefix);
    } else {
      out += "null";
    }
    return std::make_pair(std::string("domain_remap"), out + "}");
  }

  net::awaitable<void> call(Exchange& ex, ProxyEnv& env, const Next& next) override {
    const Request& req = ex.request();
    // Without a Host header Swift reads SERVER_NAME, the proxy's own address: never a storage
    // domain.
    const std::string requested = common::http::percent_decode(req.path());
    auto m = domain_remap::remap(o_, req.headers.get_or("Host", ""), requested);
    if (m.kind == domain_remap::Remap::kPass) co_return co_await next(ex, env);
    if (m.kind == domain_remap::Remap::kBadDomain) {
      co_return co_await ex.reply(common::http::text_response(400, "Bad domain in host header"));
    }
    const std::string quoted_requested = common::http::quote(requested);
    const std::string quoted_new = common::http::quote(m.path);
    HeaderEditor out(ex, [quoted_requested, quoted_new](int, HeaderMap& h) {
      for (const char* name : {"Location", "Content-Location"}) {
        if (auto v = h.get(name)) {
          h.set(name, domain_remap::rewrite_location(*v, quoted_new, quoted_requested));
        }
      }
    });
    Request& r = out.mutable_request();
    const std::string query(r.query());
    r.target = quoted_new + (query.empty() ? "" : "?" + query);
    co_await next(out, env);
  }

 private:
  const domain_remap::Options o_;
};

}  // namespace

Result<std::unique_ptr<Middleware>> make_domain_remap(const common::Section& section,
                                                      const MiddlewareContext&) {
  return std::unique_ptr<Middleware>(
      std::make_unique<DomainRemap>(domain_remap::parse_options(section)));
}

}  // namespace apus::proxy
