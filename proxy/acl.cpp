#include "proxy/acl.h"

#include "common/http/headers.h"
#include "common/http/url.h"

namespace apus::proxy {

ParsedAcl parse_acl(std::string_view acl) {
  ParsedAcl out;
  if (acl.empty()) return out;
  for (;;) {
    size_t comma = acl.find(',');
    std::string_view v = acl.substr(0, comma);
    if (v.starts_with(".r:")) {
      out.referrers.emplace_back(v.substr(3));
    } else {
      out.groups.push_back(common::http::percent_decode(v));
    }
    if (comma == std::string_view::npos) return out;
    acl.remove_prefix(comma + 1);
  }
}

// Swift's referrer_allowed().
bool referrer_allowed(std::string_view referer, const std::vector<std::string>& acl) {
  if (acl.empty()) return false;
  // urlparse(referer).hostname
  std::string host;
  size_t scheme_end = referer.find("://");
  if (scheme_end != std::string_view::npos) {
    std::string_view rest = referer.substr(scheme_end + 3);
    rest = rest.substr(0, rest.find_first_of("/?#"));
    rest = rest.substr(rest.rfind('@') == std::string_view::npos ? 0 : rest.rfind('@') + 1);
    host = common::http::to_lower(rest.substr(0, rest.find(':')));
  }
  if (host.empty()) host = "unknown";
  bool allow = false;
  for (std::string m : acl) {
    if (m.starts_with("-")) {
      m = m.substr(1);
      if (m == host || (m.starts_with(".") && host.ends_with(m))) allow = false;
    } else if (m == "*" || m == host || (m.starts_with(".") && host.ends_with(m))) {
      allow = true;
    }
  }
  return allow;
}

}  // namespace apus::proxy
