// list_endpoints (limits.h): GET /endpoints/[v1/|v2/]<account>[/<container>[/<object>]]
// answers with the primary storage nodes of that name as URLs
// "http://<ip>:<port>/<device>/<partition>/<account>[/<container>[/<object>]]", from the
// account, container or object ring (the object ring of the container's policy): a JSON list
// (v1), or {"endpoints": [...], "headers": {...}} (v2, with the policy index an object request
// to those nodes needs). Not authenticated, as in Swift: for services inside the cluster.
#include <cerrno>
#include <cstdlib>
#include <map>

#include "common/config/config.h"
#include "common/hash_path.h"
#include "common/http/swob.h"
#include "common/http/url.h"
#include "common/listing_format.h"
#include "proxy/limits.h"
#include "proxy/symlink.h"
#include "ring/ring.h"
#include "ring/ring_reloader.h"

namespace apus::proxy {

namespace net = boost::asio;
using common::Result;
using common::Status;
using common::http::Exchange;
using common::http::Request;
using common::http::Response;
using common::http::swob_response;
using common::http::swob_response_with_body;

namespace list_endpoints {

namespace {

// Python's float() of a version string ("1", "2.0", "1e0", "+1", "0_1"), or nullopt.
std::optional<double> python_float(std::string_view s) {
  std::string digits;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '_') {
      // Only between two digits, as Python 3 allows.
      auto digit = [](char d) { return d >= '0' && d <= '9'; };
      if (i == 0 || i + 1 == s.size() || !digit(s[i - 1]) || !digit(s[i + 1])) {
        return std::nullopt;
      }
      continue;
    }
    if (c == 'x' || c == 'X' || c == ' ' || c == '\t' || c == '\n') return std::nullopt;
    digits += c;
  }
  if (digits.empty()) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  double v = std::strtod(digits.c_str(), &end);
  if (end != digits.c_str() + digits.size()) return std::nullopt;
  return v;
}

Result<int> parse_version(std::string_view raw) {
  std::string_view s = raw;
  while (!s.empty() && s.front() == 'v') s.remove_prefix(1);
  auto v = python_float(s);
  if (v && *v == 1.0) return 1;
  if (v && *v == 2.0) return 2;
  return Status::invalid_argument("Unsupported version " + symlink::python_repr(raw));
}

}  // namespace

Result<Target> parse_path(std::string_view path, std::string_view endpoints_path) {
  const std::string clean(path.substr(endpoints_path.size() - 1));
  const Status no_account = Status::invalid_argument("No account specified");
  auto first = common::http::split_path(clean, 1, 2, true);
  if (!first.ok()) return no_account;
  const std::string raw_version = *(*first)[0];
  std::string rest;
  Target t;
  auto version = parse_version(raw_version);
  if (!version.ok()) {
    if (raw_version.starts_with('v') && raw_version.find('_') == std::string::npos) {
      return version.status();
    }
    // Most likely no version, just an account name.
    t.version = 1;
    rest = clean;
  } else {
    t.version = *version;
    rest = "/" + (*first)[1].value_or("");
  }
  auto names = common::http::split_path(rest, 1, 3, true);
  if (!names.ok()) return no_account;
  t.account = common::http::percent_decode(*(*names)[0]);
  if ((*names)[1]) t.container = common::http::percent_decode(*(*names)[1]);
  if ((*names)[2]) t.object = common::http::percent_decode(*(*names)[2]);
  return t;
}

std::string v1_body(const std::vector<std::string>& endpoints) {
  std::string out = "[";
  for (size_t i = 0; i < endpoints.size(); ++i) {
    if (i) out += ", ";
    common::listing::append_json_string(out, endpoints[i]);
  }
  return out + "]";
}

std::string v2_body(const std::vector<std::string>& endpoints,
                    const std::optional<std::string>& policy_index) {
  std::string out = "{\"endpoints\": " + v1_body(endpoints) + ", \"headers\": {";
  if (policy_index) {
    out += "\"X-Backend-Storage-Policy-Index\": ";
    common::listing::append_json_string(out, *policy_index);
  }
  return out + "}}";
}

}  // namespace list_endpoints

namespace {

class ListEndpoints final : public Middleware {
 public:
  ListEndpoints(std::string path, std::unique_ptr<ring::Ring> account,
                std::unique_ptr<ring::Ring> container,
                std::map<int, std::unique_ptr<ring::Ring>> objects, InfoLookup& info)
      : path_(std::move(path)),
        account_(std::move(account)),
        container_(std::move(container)),
        objects_(std::move(objects)),
        info_(info) {}

  net::awaitable<void> call(Exchange& ex, ProxyEnv& env, const Next& next) override {
    const Request& req = ex.request();
    const std::string path = common::http::quote(common::http::percent_decode(req.path()));
    if (!path.starts_with(path_)) co_return co_await next(ex, env);
    if (req.method != "GET") {
      Response r = swob_response(405);
      r.headers.set("Allow", "GET");
      co_return co_await ex.reply(std::move(r));
    }
    auto target = list_endpoints::parse_path(path, path_);
    if (!target.ok()) {
      co_return co_await ex.reply(
          swob_response_with_body(400, std::string(target.status().message())));
    }
    const ring::Ring* ring = nullptr;
    std::optional<std::string> policy_index;
    if (target->object) {
      CachedInfo info = co_await info_.container_info(target->account, *target->container, req,
                                                      env);
      policy_index = std::string(info.headers.get_or("X-Backend-Storage-Policy-Index", "0"));
      auto index = policy_index->empty() ? std::optional<int64_t>(0)
                                         : common::parse_python_int(*policy_index);
      auto it = index ? objects_.find(static_cast<int>(*index)) : objects_.end();
      if (!index || it == objects_.end()) {
        // Swift's POLICIES.get_object_ring() raises for a policy it does not know.
        co_return co_await ex.reply(server_error());
      }
      ring = it->second.get();
    } else if (target->container) {
      ring = container_.get();
    } else {
      ring = account_.get();
    }
    auto nodes = ring->get_nodes(target->account, target->container.value_or(""),
                                 target->object.value_or(""));
    if (!nodes.ok()) co_return co_await ex.reply(server_error());
    std::string names = "/" + common::http::quote(target->account);
    if (target->container) names += "/" + common::http::quote(*target->container);
    if (target->object) names += "/" + common::http::quote(*target->object);
    std::vector<std::string> endpoints;
    for (const ring::Node& node : nodes->nodes) {
      endpoints.push_back("http://" + node.device->ip + ":" + std::to_string(node.device->port) +
                          "/" + node.device->device + "/" + std::to_string(nodes->partition) +
                          names);
    }
    Response r;
    r.status = 200;
    r.headers.set("Content-Type", "application/json");
    r.body = target->version == 2 ? list_endpoints::v2_body(endpoints, policy_index)
                                   : list_endpoints::v1_body(endpoints);
    co_await ex.reply(std::move(r));
  }

 private:
  static Response server_error() {
    Response r = swob_response(500);
    r.headers.set("Content-Type", "text/plain");
    r.body = "An error occurred";
    return r;
  }

  const std::string path_;
  const std::unique_ptr<ring::Ring> account_;
  const std::unique_ptr<ring::Ring> container_;
  const std::map<int, std::unique_ptr<ring::Ring>> objects_;
  InfoLookup& info_;
};

}  // namespace

Result<std::unique_ptr<Middleware>> make_list_endpoints(const common::Section& section,
                                                        const MiddlewareContext& context) {
  const std::string swift_dir = section.get_string("swift_dir", context.swift_dir);
  std::string path = section.get_string("list_endpoints_path", "/endpoints/");
  if (!path.ends_with('/')) path += '/';
  common::HashPathConfig hash{context.swift.hash_path_prefix, context.swift.hash_path_suffix};
  // Kept current by the shared reloader's thread, never reloaded inside a lookup.
  ring::RingOptions options;
  options.reloader = ring::RingReloader::shared();
  auto open = [&](const std::string& name) {
    return ring::Ring::open(swift_dir + "/" + name + ".ring.gz", hash, options);
  };
  auto account = open("account");
  if (!account.ok()) return account.status();
  auto container = open("container");
  if (!container.ok()) return container.status();
  std::map<int, std::unique_ptr<ring::Ring>> objects;
  for (const auto& policy : context.swift.policies.all()) {
    auto r = open(policy.policy_string("object"));
    if (!r.ok()) return r.status();
    objects[policy.index] = std::move(*r);
  }
  return std::unique_ptr<Middleware>(std::make_unique<ListEndpoints>(
      std::move(path), std::move(*account), std::move(*container), std::move(objects),
      context.info));
}

}  // namespace apus::proxy
