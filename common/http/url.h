// URL helpers with Python's semantics, as Swift applies them to request paths: percent
// decoding (urllib.parse.unquote), quoting (urllib.parse.quote), and Swift's split_path().
//
// Pure functions; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace apus::common::http {

// Decodes %XX escapes; malformed escapes are kept as they are (Python's unquote does the same).
// '+' is not a space here: paths are not form data.
std::string percent_decode(std::string_view s);

// Percent-encodes every byte except ASCII letters, digits, "_.-~" and the bytes in `safe`,
// with upper-case hex, as Python's urllib.parse.quote(s, safe).
std::string quote(std::string_view s, std::string_view safe = "/");
// quote(), appended to `out`.
void quote_append(std::string& out, std::string_view s, std::string_view safe = "/");

// Swift's split_path: splits "/a/c/o" into between `minsegs` and `maxsegs` segments (missing
// trailing ones are nullopt). With `rest_with_last`, the last segment takes the rest of the path,
// slashes included (object names). InvalidArgument "Invalid path: <quoted path>" otherwise.
Result<std::vector<std::optional<std::string>>> split_path(std::string_view path, int minsegs,
                                                            int maxsegs = 0,
                                                            bool rest_with_last = false);

// Python's urllib.parse.parse_qsl(query, keep_blank_values=True) as swob reads a query string:
// fields split on '&', '+' as a space, then percent-decoded to raw bytes; a field without '='
// has an empty value; empty fields are skipped. Fields keep their order (duplicates too).
std::vector<std::pair<std::string, std::string>> parse_query(std::string_view query);

// The value of parameter `name` in `query` as swob's req.params gives it (the last one wins),
// or nullopt when absent.
std::optional<std::string> query_param(std::string_view query, std::string_view name);

// `query` without any field named `name` (by its decoded name); the other fields are kept
// byte for byte.
std::string without_query_param(std::string_view query, std::string_view name);
// without_query_param() and "name=value" appended, `value` quoted: what setting
// req.params[name] sends on in Swift.
std::string with_query_param(std::string_view query, std::string_view name,
                             std::string_view value);

// "<account>/<container>" (a shard container's path, a pending's container_path) split as
// Swift's split_path("/" + path, 2, 2) splits it: both parts non-empty, no other '/'. nullopt
// otherwise.
std::optional<std::pair<std::string, std::string>> split_container_path(std::string_view path);

// Swift's validate_device_partition: neither empty, ".", ".." nor containing '/'.
Status validate_device_partition(std::string_view device, std::string_view partition);

}  // namespace apus::common::http
