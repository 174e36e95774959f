// Swift's container ACLs (swift/common/middleware/acl.py), as tempauth authorizes with them and
// s3api shows them as S3 grants: parse_acl() of an X-Container-Read/-Write value and
// referrer_allowed().
//
// Pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace apus::proxy {

struct ParsedAcl {
  std::vector<std::string> referrers;  // the ".r:" designations, without ".r:"
  std::vector<std::string> groups;     // everything else, unquoted
};

// Swift's parse_acl_v1(): the comma-separated items of `acl`.
ParsedAcl parse_acl(std::string_view acl);

// Swift's referrer_allowed(): whether a request with Referer `referer` (the host of its URL,
// "unknown" when it has none) passes `referrers`.
bool referrer_allowed(std::string_view referer, const std::vector<std::string>& referrers);

}  // namespace apus::proxy
