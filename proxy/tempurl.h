// tempurl: Swift's temporary URL middleware (egg:swift#tempurl). A request whose query has
// temp_url_sig and temp_url_expires is allowed without a token when the signature is an HMAC,
// with one of the account's or the container's Temp-URL keys, of the method, the expiry and the
// object's path (or "prefix:" and a path prefix with temp_url_prefix, with "ip=<range>" in front
// for temp_url_ip_range). The request then runs with an authorize callback limited to that
// account (account key) or container (container key); anything wrong is a 401 with Swift's
// body. GET and HEAD answers get a Content-Disposition (inline / filename / the object's name)
// and an Expires header; configured request and response headers are removed.
//
// Swift 2.30.1 is followed where 2.35 differs in what a client sees (X-Copy-From refused on
// a PUT, the path_prefix option, x-timestamp alone removed by default); 2.35's carve-out for a
// container's root (staticweb behind a prefix signature) and the query it passes on are kept.
//
// The functions in namespace `tempurl` are the pure parts, exposed for tests and the fuzzer.
// Pure functions: thread-safe. The middleware keeps only its config (thread-safe).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/config/config.h"
#include "common/http/headers.h"
#include "common/status.h"
#include "proxy/digest.h"
#include "proxy/pipeline.h"

namespace apus::proxy {

// The tempurl middleware from its [filter:...] section (methods, incoming_remove_headers,
// incoming_allow_headers, outgoing_remove_headers, outgoing_allow_headers, allowed_digests,
// path_prefix). InvalidArgument when no allowed digest is left.
common::Result<std::unique_ptr<Middleware>> make_tempurl(const common::Section& section,
                                                         const MiddlewareContext& context);

namespace tempurl {

inline constexpr std::string_view kDefaultMethods = "GET HEAD PUT POST DELETE";
inline constexpr std::string_view kDefaultIncomingRemove = "x-timestamp";
inline constexpr std::string_view kDefaultIncomingAllow = "";
inline constexpr std::string_view kDefaultOutgoingRemove = "x-object-meta-*";
inline constexpr std::string_view kDefaultOutgoingAllow = "x-object-meta-public-*";
// Headers a PUT, POST or DELETE through a temp URL may not carry (Swift 2.30.1's list): a
// manifest, link or copy source would reach data the signature does not cover.
inline constexpr std::string_view kDisallowedIncoming[] = {"X-Object-Manifest",
                                                           "X-Symlink-Target", "X-Copy-From"};
// The body of Swift's 401 for a bad, expired or misplaced temp URL (none for HEAD).
inline constexpr std::string_view kInvalidBody = "401 Unauthorized: Temp URL invalid\n";

// Python's parse_qs(query, keep_blank_values=True) as a str, and the first value of each field:
// '&'-separated fields, '+' as a space, %XX runs decoded as UTF-8 with U+FFFD for bad bytes,
// raw bytes above 0x7f kept as the Latin-1 characters WSGI reads them as. Values are UTF-8.
std::vector<std::pair<std::string, std::string>> python_parse_qs(std::string_view query);

// Swift's get_temp_url_info(): the temp URL fields of a query (first value of each).
struct QueryInfo {
  std::optional<std::string> sig, expires, prefix, filename, ip_range;
  bool inline_disposition = false;
};
QueryInfo parse_query_info(std::string_view query);

// An integer as Python's int() reads a str: its str() ("-12" for " -0_12 ") and its value,
// saturated to int64.
struct PythonInt {
  std::string text;
  int64_t value = 0;
};
std::optional<PythonInt> python_int(std::string_view s);

// time.strptime(value, "%Y-%m-%dT%H:%M:%SZ") then calendar.timegm(): epoch seconds, or nullopt
// where Python raises ValueError (Python's lenient field widths and case-insensitive T and Z
// included; impossible dates refused).
std::optional<int64_t> parse_iso8601(std::string_view value);

// Swift's normalize_temp_url_expires(): nullopt for no value; 0 for a value that is neither an
// integer nor an ISO 8601 date, or is before `now` (Unix seconds); else the expiry.
std::optional<PythonInt> normalize_expires(const std::optional<std::string>& value, double now);

// Whether `client` (an address) is inside `range` as Python's ip_address(client) in
// ip_network(range) says (IPv4 or IPv6, prefix length or IPv4 netmask/hostmask); false where
// Python raises (host bits set, bad text).
bool ip_in_range(std::string_view range, std::string_view client);

// Python's str.title() over ASCII, as HeaderKeyDict spells header names.
std::string python_title(std::string_view s);

// swob's header_to_environ_key(): "HTTP_" + upper-cased name with '_' for '-', except
// CONTENT_TYPE and CONTENT_LENGTH.
std::string environ_key(std::string_view header_name);

// A remove list with its exceptions, as the four *_headers options give them: names, or
// prefixes ending in '*'. Incoming rules compare WSGI environ keys, outgoing rules title-cased
// names, as Swift does.
class HeaderRules {
 public:
  HeaderRules() = default;
  HeaderRules(const std::vector<std::string>& remove, const std::vector<std::string>& allow,
              bool incoming);
  // Whether the header `name` (as the client or the app spelled it) goes.
  bool removes(std::string_view name) const;

 private:
  std::string key(std::string_view name) const;
  bool incoming_ = true;
  std::vector<std::string> remove_, remove_prefixes_, allow_, allow_prefixes_;
};

// Swift's disposition_format(): '<type>; filename="<quoted>"; filename*=UTF-8''<quoted>'.
std::string disposition_format(std::string_view type, std::string_view filename);

// The Temp-URL keys of an account's or container's metadata (`meta_prefix` "X-Account-Meta-"
// or "X-Container-Meta-"): the values of Temp-Url-Key and Temp-Url-Key-2, in header order.
std::vector<std::string> keys_from_headers(const common::http::HeaderMap& headers,
                                           std::string_view meta_prefix);

// The middleware's options.
struct Options {
  std::vector<std::string> methods, incoming_remove, incoming_allow, outgoing_remove,
      outgoing_allow;
  digest::AllowedDigests digests;
  std::optional<std::string> path_prefix;  // Swift 2.30.1's path_prefix option
};
common::Result<Options> parse_options(const common::Section& section);
// The /info "tempurl" object as Swift registers it.
std::string info_json(const Options& options);

}  // namespace tempurl

}  // namespace apus::proxy
