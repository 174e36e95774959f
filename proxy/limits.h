// The small middlewares of Swift that limit or rename what a request may do ("limits and
// naming"): account_quotas and container_quotas (quotas.cpp), name_check (name_check.cpp),
// read_only (read_only.cpp), etag_quoter (etag_quoter.cpp), domain_remap (domain_remap.cpp),
// list_endpoints (list_endpoints.cpp) and cname_lookup (cname_lookup.cpp). Each behaves as
// Swift 2.30.1's does (2.35's where 2.30.1 has none of it): the same options, statuses,
// bodies and /info entries.
//
// The factories build a middleware from its [filter:...] section (merged with [DEFAULT], as
// paste.deploy hands Swift's filters their conf) and a MiddlewareContext; they fail with
// InvalidArgument naming the option when one is bad. The functions in the nested namespaces
// are the pure parts, exposed for tests.
//
// Pure functions: thread-safe. The middlewares keep only their config (thread-safe);
// list_endpoints' rings and cname_lookup's lookup pool are thread-safe themselves.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/config/config.h"
#include "common/http/server.h"
#include "common/status.h"
#include "proxy/pipeline.h"

namespace apus::proxy {

common::Result<std::unique_ptr<Middleware>> make_account_quotas(const common::Section& section,
                                                                const MiddlewareContext& context);
common::Result<std::unique_ptr<Middleware>> make_container_quotas(
    const common::Section& section, const MiddlewareContext& context);
common::Result<std::unique_ptr<Middleware>> make_name_check(const common::Section& section,
                                                            const MiddlewareContext& context);
common::Result<std::unique_ptr<Middleware>> make_read_only(const common::Section& section,
                                                           const MiddlewareContext& context);
common::Result<std::unique_ptr<Middleware>> make_etag_quoter(const common::Section& section,
                                                             const MiddlewareContext& context);
common::Result<std::unique_ptr<Middleware>> make_domain_remap(const common::Section& section,
                                                              const MiddlewareContext& context);
common::Result<std::unique_ptr<Middleware>> make_list_endpoints(
    const common::Section& section, const MiddlewareContext& context);
common::Result<std::unique_ptr<Middleware>> make_cname_lookup(const common::Section& section,
                                                              const MiddlewareContext& context);

namespace quotas {

// Python's str.isdigit() of a header value as WSGI hands it over (each byte a Latin-1
// character): true for a non-empty run of '0'-'9' and the superscripts '¹' '²' '³' (0xB9,
// 0xB2, 0xB3), which Python counts as digits although int() refuses them.
bool python_isdigit(std::string_view value);

// int() of a value python_isdigit() accepted: its ASCII digits, saturating at INT64_MAX (a
// quota beyond that is no quota anyone reaches); nullopt when it holds a superscript.
std::optional<int64_t> digits_value(std::string_view value);

}  // namespace quotas

namespace domain_remap {

// What domain_remap makes of a Host header, as Swift's middleware computes it.
struct Remap {
  enum Kind {
    kPass,       // not a storage domain (or no reseller prefix fits): the request goes on as it is
    kBadDomain,  // more than two names before the storage domain: 400
    kRewrite,    // the path becomes `path`
  };
  Kind kind = kPass;
  std::string path;  // kRewrite: the new decoded path ("/v1/AUTH_a/c/o")
};

struct Options {
  std::vector<std::string> storage_domains;  // each with a leading '.'
  std::string path_root = "v1/";             // stripped of '/', then one '/' added
  std::vector<std::string> reseller_prefixes = {"AUTH"};
  std::optional<std::string> default_reseller_prefix;
  bool mangle_client_paths = false;
};

// The options from a [filter:domain_remap] section (storage_domain, path_root,
// reseller_prefixes, default_reseller_prefix, mangle_client_paths).
Options parse_options(const common::Section& section);

// The remap of a request for the decoded path `path` arriving with Host `host`.
Remap remap(const Options& options, std::string_view host, std::string_view path);

// RewriteContext's Location fix: a `value` of the form "http[s]://<host><rewritten><rest>"
// becomes "http[s]://<host><requested><rest>"; anything else stays as it is.
std::string rewrite_location(std::string_view value, std::string_view rewritten,
                             std::string_view requested);

}  // namespace domain_remap

namespace list_endpoints {

// The parsed path of an /endpoints/ request: the API version (1 or 2) and the decoded names.
struct Target {
  int version = 1;
  std::string account;
  std::optional<std::string> container;
  std::optional<std::string> object;
};

// Swift's _parse_path() of the quoted path `path` (which starts with `endpoints_path`, itself
// ending in '/'): the target, or InvalidArgument with the body of Swift's 400 ("No account
// specified", "Unsupported version 'v3'").
common::Result<Target> parse_path(std::string_view path, std::string_view endpoints_path);

// The JSON bodies: v1 a list of endpoint URLs; v2 {"endpoints": [...], "headers": {...}} with
// X-Backend-Storage-Policy-Index when `policy_index` is set.
std::string v1_body(const std::vector<std::string>& endpoints);
std::string v2_body(const std::vector<std::string>& endpoints,
                    const std::optional<std::string>& policy_index);

}  // namespace list_endpoints

namespace cname_lookup {

// A nameserver of the `nameservers` option: an IPv4 or IPv6 address and a port (53 when
// none).
struct Nameserver {
  std::string ip;
  uint16_t port = 53;
};

// The `nameservers` option as Swift reads it: "ip", "ip:port", "[ipv6]" or "[ipv6]:port",
// comma separated. InvalidArgument with Swift's message when one is not an IP address or the
// port is not an integer.
common::Result<std::vector<Nameserver>> parse_nameservers(std::string_view value);

// What one CNAME query found, as Swift's lookup_cname() returns it: the TTL to cache it for,
// and the target (without the trailing dot). Without a target: ttl 60 for "no such name, or no
// CNAME" (cached as false), ttl 0 for a failed lookup (not cached).
struct Answer {
  uint32_t ttl = 0;
  std::optional<std::string> target;  // nullopt: nothing found
};

// Queries the CNAME of `domain` through the system resolver (libresolv's res_nquery on a
// state read from /etc/resolv.conf), at `nameservers` instead of resolv.conf's when that is
// not empty. Blocking: call on a pool thread.
Answer lookup(const std::string& domain, const std::vector<Nameserver>& nameservers);

// The CNAME answer in a DNS reply `msg` to a query for `domain`: the first CNAME record of
// the answer section owned by `domain`, with the smallest TTL of those records.
Answer parse_reply(std::span<const unsigned char> msg, std::string_view domain);

}  // namespace cname_lookup

}  // namespace apus::proxy
