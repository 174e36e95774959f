#include "proxy/s3api/bucket_policy.h"

#include <arpa/inet.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <ctime>

#include <boost/json.hpp>

#include "common/crypto/base64.h"
#include "common/http/headers.h"
#include "proxy/s3api/s3_request.h"
#include "proxy/s3api/s3_response.h"

namespace apus::proxy::s3api {

namespace json = boost::json;

namespace {

constexpr std::string_view kArnPrefix = "arn:aws:s3:::";

S3Error malformed(std::string message) {
  return {.status = 400, .code = "MalformedPolicy", .message = std::move(message)};
}

std::string lower(std::string_view s) { return common::http::to_lower(s); }

// S3's actions (lower-cased), for the check of a policy's Action names.
bool known_action(std::string_view a) {
  static constexpr std::string_view kActions[] = {
      "abortmultipartupload", "bypassgovernanceretention", "createbucket", "deletebucket",
      "deletebucketownershipcontrols", "deletebucketpolicy", "deletebucketwebsite",
      "deleteobject", "deleteobjecttagging", "deleteobjectversion",
      "deleteobjectversiontagging", "getaccelerateconfiguration", "getbucketacl",
      "getbucketcors", "getbucketlocation", "getbucketlogging", "getbucketnotification",
      "getbucketobjectlockconfiguration", "getbucketownershipcontrols", "getbucketpolicy",
      "getbucketpolicystatus", "getbucketpublicaccessblock", "getbucketrequestpayment",
      "getbuckettagging", "getbucketversioning", "getbucketwebsite",
      "getencryptionconfiguration", "getlifecycleconfiguration", "getobject", "getobjectacl",
      "getobjectattributes", "getobjectlegalhold", "getobjectretention", "getobjecttagging",
      "getobjecttorrent", "getobjectversion", "getobjectversionacl",
      "getobjectversionattributes", "getobjectversiontagging", "getreplicationconfiguration",
      "listallmybuckets", "listbucket", "listbucketmultipartuploads", "listbucketversions",
      "listmultipartuploadparts", "putaccelerateconfiguration", "putbucketacl",
      "putbucketcors", "putbucketlogging", "putbucketnotification",
      "putbucketobjectlockconfiguration", "putbucketownershipcontrols", "putbucketpolicy",
      "putbucketpublicaccessblock", "putbucketrequestpayment", "putbuckettagging",
      "putbucketversioning", "putbucketwebsite", "putencryptionconfiguration",
      "putlifecycleconfiguration", "putobject", "putobjectacl", "putobjectlegalhold",
      "putobjectretention", "putobjecttagging", "putobjectversionacl",
      "putobjectversiontagging", "putreplicationconfiguration", "restoreobject"};
  return std::find(std::begin(kActions), std::end(kActions), a) != std::end(kActions);
}

// The condition operators (lower-cased, without IfExists).
bool known_operator(std::string_view op) {
  static constexpr std::string_view kOperators[] = {
      "stringequals", "stringnotequals", "stringequalsignorecase", "stringnotequalsignorecase",
      "stringlike", "stringnotlike", "numericequals", "numericnotequals", "numericlessthan",
      "numericlessthanequals", "numericgreaterthan", "numericgreaterthanequals", "dateequals",
      "datenotequals", "datelessthan", "datelessthanequals", "dategreaterthan",
      "dategreaterthanequals", "bool", "binaryequals", "ipaddress", "notipaddress",
      "arnequals", "arnlike", "arnnotequals", "arnnotlike", "null"};
  return std::find(std::begin(kOperators), std::end(kOperators), op) != std::end(kOperators);
}

// The negated operators hold when the request has no value for their key (AWS's rule).
bool negated(std::string_view op) {
  return op == "stringnotequals" || op == "stringnotequalsignorecase" || op == "stringnotlike" ||
         op == "numericnotequals" || op == "datenotequals" || op == "notipaddress" ||
         op == "arnnotequals" || op == "arnnotlike";
}

// A JSON string, or an array of strings, as a list (nullopt: neither). Condition values may
// also be numbers and booleans, written as JSON writes them.
std::optional<std::vector<std::string>> strings_of(const json::value& v, bool scalars = false) {
  auto one = [&](const json::value& e) -> std::optional<std::string> {
    if (e.is_string()) return std::string(e.get_string());
    if (scalars && (e.is_number() || e.is_bool())) return json::serialize(e);
    return std::nullopt;
  };
  std::vector<std::string> out;
  if (v.is_array()) {
    for (const json::value& e : v.get_array()) {
      auto s = one(e);
      if (!s) return std::nullopt;
      out.push_back(std::move(*s));
    }
    return out;
  }
  auto s = one(v);
  if (!s) return std::nullopt;
  out.push_back(std::move(*s));
  return out;
}

// One entry of {"AWS": ...}, as an account or a user of Apus's.
void add_aws_principal(std::string_view p, BucketPolicy::Principal& out) {
  if (p == "*") {
    out.everyone = true;
    return;
  }
  constexpr std::string_view kIam = "arn:aws:iam::";
  if (p.starts_with(kIam)) {
    std::string_view rest = p.substr(kIam.size());
    size_t colon = rest.find(':');
    if (colon == std::string_view::npos) return;
    std::string_view account = rest.substr(0, colon), what = rest.substr(colon + 1);
    if (what == "root") {
      out.accounts.emplace_back(account);
    } else if (what.starts_with("user/")) {
      std::string_view name = what.substr(5);
      if (size_t slash = name.rfind('/'); slash != std::string_view::npos) {
        name = name.substr(slash + 1);  // a user path: the name is its last part
      }
      out.users.push_back(std::string(account) + ":" + std::string(name));
    }
    return;
  }
  if (p.find(':') != std::string_view::npos) {
    out.users.emplace_back(p);
  } else {
    out.accounts.emplace_back(p);
  }
}

std::optional<S3Error> parse_principal(const json::value& v, BucketPolicy::Principal& out) {
  if (v.is_string()) {
    if (v.get_string() != "*") return malformed("Invalid principal in policy");
    out.everyone = true;
    return std::nullopt;
  }
  if (!v.is_object()) return malformed("Invalid principal in policy");
  for (const auto& [kind, value] : v.get_object()) {
    auto names = strings_of(value);
    if (!names) return malformed("Invalid principal in policy");
    if (kind == "AWS") {
      for (const std::string& n : *names) add_aws_principal(n, out);
    } else if (kind == "CanonicalUser") {
      for (const std::string& n : *names) out.users.push_back(n);
    } else if (kind != "Service" && kind != "Federated") {
      return malformed("Invalid principal in policy");
    }
  }
  return std::nullopt;
}

// Whether a resource pattern is about `bucket` or objects in it (the bucket part, up to the
// first '/', may have wildcards: "arn:aws:s3:::*/*" covers every bucket).
bool resource_of_bucket(std::string_view resource, std::string_view bucket) {
  if (!resource.starts_with(kArnPrefix)) return false;
  std::string_view rest = resource.substr(kArnPrefix.size());
  // A '*' before the first '/' may also run over it ("arn:aws:s3:::buck*").
  return policy_wildcard_match(rest.substr(0, rest.find('/')), bucket) ||
         policy_wildcard_match(rest, bucket) ||
         policy_wildcard_match(rest, std::string(bucket) + "/x");
}

std::optional<S3Error> parse_conditions(const json::value& v,
                                        std::vector<BucketPolicy::Condition>& out) {
  if (!v.is_object()) return malformed("Invalid Condition block");
  for (const auto& [op_name, block] : v.get_object()) {
    BucketPolicy::Condition base;
    std::string op = lower(op_name);
    if (op.starts_with("foranyvalue:")) {
      base.set = BucketPolicy::Condition::Set::kForAnyValue;
      op.erase(0, std::strlen("foranyvalue:"));
    } else if (op.starts_with("forallvalues:")) {
      base.set = BucketPolicy::Condition::Set::kForAllValues;
      op.erase(0, std::strlen("forallvalues:"));
    }
    if (op.ends_with("ifexists") && op != "null") {
      base.if_exists = true;
      op.resize(op.size() - std::strlen("ifexists"));
    }
    if (!known_operator(op)) {
      return malformed("Invalid Condition type : " + std::string(op_name));
    }
    base.op = op;
    if (!block.is_object()) return malformed("Invalid Condition block");
    for (const auto& [key, values] : block.get_object()) {
      auto list = strings_of(values, true);
      if (!list || list->empty()) return malformed("Invalid Condition value for " + std::string(key));
      BucketPolicy::Condition c = base;
      c.key = lower(key);
      c.values = std::move(*list);
      out.push_back(std::move(c));
    }
  }
  return std::nullopt;
}

std::variant<BucketPolicy::Statement, S3Error> parse_statement(const json::value& v,
                                                               std::string_view bucket) {
  if (!v.is_object()) return malformed("Policy has an invalid statement");
  const json::object& o = v.as_object();
  BucketPolicy::Statement s;
  const json::value* effect = o.if_contains("Effect");
  if (!effect) return malformed("Missing required field Effect");
  if (!effect->is_string() || (effect->get_string() != "Allow" && effect->get_string() != "Deny")) {
    return malformed("Invalid effect: " + (effect->is_string() ? std::string(effect->get_string())
                                                               : json::serialize(*effect)));
  }
  s.allow = effect->get_string() == "Allow";

  const json::value* principal = o.if_contains("Principal");
  const json::value* not_principal = o.if_contains("NotPrincipal");
  if (!principal == !not_principal) return malformed("Missing required field Principal");
  s.not_principal = not_principal != nullptr;
  if (auto e = parse_principal(principal ? *principal : *not_principal, s.principal)) return *e;
  // AWS allows NotPrincipal with Deny only.
  if (s.not_principal && s.allow) return malformed("NotPrincipal is not supported with Allow");

  const json::value* action = o.if_contains("Action");
  const json::value* not_action = o.if_contains("NotAction");
  if (!action == !not_action) return malformed("Missing required field Action");
  s.not_action = not_action != nullptr;
  auto actions = strings_of(action ? *action : *not_action);
  if (!actions || actions->empty()) return malformed("Policy has invalid action");
  for (const std::string& a : *actions) {
    std::string name = lower(a);
    const bool wildcard = name.find_first_of("*?") != std::string::npos;
    if (name != "*" && (!name.starts_with("s3:") || (!wildcard && !known_action(name.substr(3))))) {
      return malformed("Policy has invalid action");
    }
    s.actions.push_back(std::move(name));
  }

  const json::value* resource = o.if_contains("Resource");
  const json::value* not_resource = o.if_contains("NotResource");
  if (!resource == !not_resource) return malformed("Missing required field Resource");
  s.not_resource = not_resource != nullptr;
  auto resources = strings_of(resource ? *resource : *not_resource);
  if (!resources || resources->empty()) return malformed("Policy has invalid resource");
  for (const std::string& r : *resources) {
    if (r != "*" && !resource_of_bucket(r, bucket)) return malformed("Policy has invalid resource");
    s.resources.push_back(r);
  }

  if (const json::value* c = o.if_contains("Condition")) {
    if (auto e = parse_conditions(*c, s.conditions)) return *e;
  }
  if (const json::value* sid = o.if_contains("Sid"); sid && !sid->is_string()) {
    return malformed("Statement IDs (SID) must be strings");
  }
  return s;
}

// ---- evaluation ----

bool principal_matches(const BucketPolicy::Principal& p, std::string_view user) {
  if (p.everyone) return true;
  if (user.empty()) return false;
  if (std::find(p.users.begin(), p.users.end(), user) != p.users.end()) return true;
  std::string_view account = user.substr(0, user.find(':'));
  return std::find(p.accounts.begin(), p.accounts.end(), account) != p.accounts.end();
}

std::optional<double> number_of(std::string_view s) {
  if (s.empty() || s.size() > 64) return std::nullopt;
  std::string text(s);
  char* end = nullptr;
  double d = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size()) return std::nullopt;
  return d;
}

// A date as policies write them: ISO 8601 ("2026-12-02T15:00:00Z", fractions ignored), or
// seconds since the epoch.
std::optional<double> date_of(std::string_view s) {
  if (auto n = number_of(s)) return n;
  std::tm tm{};
  std::string text(s);
  const char* rest = strptime(text.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (!rest) {
    rest = strptime(text.c_str(), "%Y-%m-%d", &tm);
    if (!rest || *rest) return std::nullopt;
  }
  return static_cast<double>(timegm(&tm));
}

// Whether `ip` is in `cidr` ("10.0.0.0/8", "2001:db8::/32", or one address).
bool ip_in(std::string_view ip, std::string_view cidr) {
  std::string net(cidr.substr(0, cidr.find('/')));
  int bits = -1;
  if (size_t slash = cidr.find('/'); slash != std::string_view::npos) {
    auto n = number_of(cidr.substr(slash + 1));
    if (!n || *n < 0 || *n > 128 || *n != static_cast<int>(*n)) return false;
    bits = static_cast<int>(*n);
  }
  std::array<unsigned char, 16> a{}, b{};
  std::string addr(ip);
  size_t len = 0;
  if (inet_pton(AF_INET, addr.c_str(), a.data()) == 1 &&
      inet_pton(AF_INET, net.c_str(), b.data()) == 1) {
    len = 4;
  } else if (inet_pton(AF_INET6, addr.c_str(), a.data()) == 1 &&
             inet_pton(AF_INET6, net.c_str(), b.data()) == 1) {
    len = 16;
  } else {
    return false;
  }
  if (bits < 0) bits = static_cast<int>(len * 8);
  if (bits > static_cast<int>(len * 8)) return false;
  for (int i = 0; i < bits; ++i) {
    const int mask = 0x80 >> (i % 8);
    if ((a[i / 8] & mask) != (b[i / 8] & mask)) return false;
  }
  return true;
}

// One request value against one policy value, by a positive operator (the negated ones are
// evaluated as "no positive match").
bool value_matches(std::string_view op, std::string_view policy, std::string_view request) {
  if (op == "stringequals" || op == "stringnotequals" || op == "binaryequals") {
    return policy == request;
  }
  if (op == "stringequalsignorecase" || op == "stringnotequalsignorecase") {
    return common::http::iequals(policy, request);
  }
  if (op == "stringlike" || op == "stringnotlike" || op.starts_with("arn")) {
    return policy_wildcard_match(policy, request);
  }
  if (op == "bool") return common::http::iequals(policy, request);
  if (op == "ipaddress" || op == "notipaddress") return ip_in(request, policy);
  const bool numeric = op.starts_with("numeric");
  auto p = numeric ? number_of(policy) : date_of(policy);
  auto r = numeric ? number_of(request) : date_of(request);
  if (!p || !r) return false;
  std::string_view cmp = op.substr(numeric ? std::strlen("numeric") : std::strlen("date"));
  if (cmp == "equals" || cmp == "notequals") return *r == *p;
  if (cmp == "lessthan") return *r < *p;
  if (cmp == "lessthanequals") return *r <= *p;
  if (cmp == "greaterthan") return *r > *p;
  if (cmp == "greaterthanequals") return *r >= *p;
  return false;
}

bool condition_holds(const BucketPolicy::Condition& c, const PolicyRequest& request) {
  std::optional<std::vector<std::string>> values =
      request.value_of ? request.value_of(c.key) : std::nullopt;
  if (c.op == "null") {
    const bool absent = !values || values->empty();
    return common::http::iequals(c.values.front(), "true") ? absent : !absent;
  }
  const bool neg = negated(c.op);
  if (!values || values->empty()) {
    if (c.set == BucketPolicy::Condition::Set::kForAllValues) return true;
    if (c.set == BucketPolicy::Condition::Set::kForAnyValue) return false;
    return c.if_exists || neg;
  }
  auto one = [&](const std::string& v) {
    bool any = std::any_of(c.values.begin(), c.values.end(),
                           [&](const std::string& p) { return value_matches(c.op, p, v); });
    return neg ? !any : any;
  };
  if (c.set == BucketPolicy::Condition::Set::kForAllValues) {
    return std::all_of(values->begin(), values->end(), one);
  }
  return std::any_of(values->begin(), values->end(), one);
}

bool statement_applies(const BucketPolicy::Statement& s, const PolicyRequest& request) {
  if (principal_matches(s.principal, request.user) == s.not_principal) return false;
  const std::string action = lower(request.action);
  bool action_named = std::any_of(s.actions.begin(), s.actions.end(), [&](const std::string& a) {
    return policy_wildcard_match(a, action);
  });
  if (action_named == s.not_action) return false;
  bool resource_named =
      std::any_of(s.resources.begin(), s.resources.end(), [&](const std::string& r) {
        return policy_wildcard_match(r, request.resource);
      });
  if (resource_named == s.not_resource) return false;
  return std::all_of(s.conditions.begin(), s.conditions.end(),
                     [&](const BucketPolicy::Condition& c) { return condition_holds(c, request); });
}

// Condition keys that pin a public statement to known callers (AWS's rule for "public").
bool pins_caller(const BucketPolicy::Condition& c) {
  if (c.key == "aws:sourceip") {
    // A range wider than one /8 of IPv4 (or /32 of IPv6) still counts as public.
    return std::all_of(c.values.begin(), c.values.end(), [](const std::string& v) {
      size_t slash = v.find('/');
      if (slash == std::string::npos) return true;
      auto bits = number_of(std::string_view(v).substr(slash + 1));
      const bool v6 = v.find(':') != std::string::npos;
      return bits && *bits >= (v6 ? 32 : 8);
    });
  }
  return c.key == "aws:sourcearn" || c.key == "aws:sourcevpc" || c.key == "aws:sourcevpce" ||
         c.key == "aws:sourceaccount" || c.key == "aws:principalaccount" ||
         c.key == "aws:principalarn" || c.key == "aws:principalorgid" ||
         c.key == "aws:userid" || c.key == "s3:dataaccesspointaccount";
}

}  // namespace

bool policy_wildcard_match(std::string_view pattern, std::string_view text, bool fold) {
  // Iterative glob match: backtrack only to the last '*'.
  size_t p = 0, t = 0, star = std::string_view::npos, mark = 0;
  auto same = [fold](char a, char b) {
    if (!fold) return a == b;
    auto l = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
    return l(a) == l(b);
  };
  while (t < text.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || same(pattern[p], text[t]))) {
      ++p;
      ++t;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      mark = t;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      t = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

std::variant<BucketPolicy, S3Error> BucketPolicy::parse(std::string_view text,
                                                        std::string_view bucket) {
  if (text.size() > kMaxPolicyBytes) {
    return malformed("Policies must be less than 20 KB");
  }
  boost::system::error_code ec;
  json::parse_options options;
  options.max_depth = 16;
  json::value doc = json::parse(text, ec, {}, options);
  if (ec || !doc.is_object()) {
    return malformed("Policies must be valid JSON and the first byte must be '{'");
  }
  const json::object& o = doc.get_object();
  if (const json::value* version = o.if_contains("Version")) {
    if (!version->is_string() ||
        (version->get_string() != "2012-10-17" && version->get_string() != "2008-10-17")) {
      return malformed("The policy must contain a valid version string");
    }
  }
  if (const json::value* id = o.if_contains("Id"); id && !id->is_string()) {
    return malformed("Policy Id must be a string");
  }
  const json::value* statements = o.if_contains("Statement");
  if (!statements) return malformed("Missing required field Statement");
  BucketPolicy policy;
  policy.text_ = std::string(text);
  auto add = [&](const json::value& v) -> std::optional<S3Error> {
    auto s = parse_statement(v, bucket);
    if (auto* e = std::get_if<S3Error>(&s)) return std::move(*e);
    policy.statements_.push_back(std::move(std::get<Statement>(s)));
    return std::nullopt;
  };
  if (statements->is_array()) {
    if (statements->get_array().empty()) return malformed("Missing required field Statement");
    for (const json::value& v : statements->get_array()) {
      if (auto e = add(v)) return std::move(*e);
    }
  } else if (auto e = add(*statements)) {
    return std::move(*e);
  }
  return policy;
}

PolicyEffect BucketPolicy::evaluate(const PolicyRequest& request) const {
  PolicyEffect verdict = PolicyEffect::kNone;
  for (const Statement& s : statements_) {
    if (!statement_applies(s, request)) continue;
    if (!s.allow) return PolicyEffect::kDeny;
    verdict = PolicyEffect::kAllow;
  }
  return verdict;
}

bool BucketPolicy::is_public() const {
  return std::any_of(statements_.begin(), statements_.end(), [](const Statement& s) {
    if (!s.allow || s.not_principal || !s.principal.everyone) return false;
    return std::none_of(s.conditions.begin(), s.conditions.end(), pins_caller);
  });
}

bool BucketPolicy::reads_key(std::string_view prefix) const {
  return std::any_of(statements_.begin(), statements_.end(), [&](const Statement& s) {
    return std::any_of(s.conditions.begin(), s.conditions.end(),
                       [&](const Condition& c) { return c.key.starts_with(prefix); });
  });
}

std::vector<std::pair<std::string, std::string>> encode_policy_sysmeta(std::string_view text) {
  const std::string encoded = text.empty() ? std::string() : common::crypto::b64encode(text);
  // Four chunks of 7168 characters hold base64 of 21,504 bytes, past the 20 KiB limit.
  constexpr size_t kChunk = 7168;
  std::vector<std::pair<std::string, std::string>> out;
  for (int i = 0; i < kPolicySysmetaChunks; ++i) {
    size_t start = static_cast<size_t>(i) * kChunk;
    out.emplace_back(std::string(kPolicySysmetaPrefix) + std::to_string(i),
                     start < encoded.size() ? encoded.substr(start, kChunk) : std::string());
  }
  return out;
}

namespace {

// The stored form: the chunk headers' values, joined.
std::string encoded_policy(const common::http::HeaderMap& h) {
  std::string encoded;
  for (int i = 0; i < kPolicySysmetaChunks; ++i) {
    encoded += h.get_or(std::string(kPolicySysmetaPrefix) + std::to_string(i), "");
  }
  return encoded;
}

}  // namespace

std::optional<std::string> decode_policy_sysmeta(const common::http::HeaderMap& h) {
  std::string encoded = encoded_policy(h);
  if (encoded.empty()) return std::nullopt;
  return common::crypto::strict_b64decode(encoded);
}

std::shared_ptr<const BucketPolicy> policy_from_sysmeta(const common::http::HeaderMap& h,
                                                        std::string_view bucket) {
  std::string encoded = encoded_policy(h);
  if (encoded.empty()) return nullptr;
  struct Entry {
    std::string bucket, encoded;
    std::shared_ptr<const BucketPolicy> policy;  // null: the stored form does not parse
  };
  constexpr size_t kEntries = 32;
  thread_local std::vector<Entry> recent;  // most recently used last
  for (size_t i = recent.size(); i-- > 0;) {
    if (recent[i].bucket == bucket && recent[i].encoded == encoded) {
      std::rotate(recent.begin() + static_cast<std::ptrdiff_t>(i),
                  recent.begin() + static_cast<std::ptrdiff_t>(i) + 1, recent.end());
      return recent.back().policy;
    }
  }
  std::shared_ptr<const BucketPolicy> policy;
  if (auto text = common::crypto::strict_b64decode(encoded)) {
    auto parsed = BucketPolicy::parse(*text, bucket);
    if (auto* p = std::get_if<BucketPolicy>(&parsed)) {
      policy = std::make_shared<const BucketPolicy>(std::move(*p));
    }
  }
  if (recent.size() == kEntries) recent.erase(recent.begin());
  recent.push_back(Entry{std::string(bucket), std::move(encoded), policy});
  return policy;
}

}  // namespace apus::proxy::s3api

// ---- ?policy and ?policyStatus -----------------------------------------------------------------

namespace apus::proxy::s3api {

namespace net = boost::asio;
using common::http::Exchange;
using common::http::HeaderMap;
using common::http::Response;

net::awaitable<Response> bucket_policy_request(Exchange& ex, S3Request& s3) {
  const std::string& method = s3.client.method;
  if (method == "GET") {
    auto headers = co_await bucket_headers(s3);
    if (auto* e = std::get_if<S3Error>(&headers)) co_return s3.error(*e);
    auto text = decode_policy_sysmeta(std::get<HeaderMap>(headers));
    if (!text) {
      co_return s3.error({.status = 404, .code = "NoSuchBucketPolicy",
                          .message = "The bucket policy does not exist",
                          .details = {{"BucketName", s3.bucket}}});
    }
    Response out;
    out.status = 200;
    out.headers.set("Content-Type", "application/json");
    set_request_ids(out.headers, s3.env.trans_id);
    out.body = std::move(*text);
    co_return out;
  }
  std::string text;  // DELETE: none
  if (method == "PUT") {
    auto body = co_await read_xml_body(ex, kMaxPolicyBytes);
    if (auto* e = std::get_if<S3Error>(&body)) {
      if (e->code == "MalformedXML") {
        co_return s3.error({.status = 400, .code = "MalformedPolicy",
                            .message = "Policies must be less than 20 KB"});
      }
      co_return s3.error(*e);
    }
    auto& read = std::get<std::optional<std::string>>(body);
    if (!read || read->empty()) {
      co_return s3.error({.status = 400, .code = "MalformedPolicy",
                          .message = "Policies must be valid JSON and the first byte must be '{'"});
    }
    if (auto e = content_md5_mismatch(s3, *read)) co_return s3.error(*e);
    auto parsed = BucketPolicy::parse(*read, s3.bucket);
    if (auto* e = std::get_if<S3Error>(&parsed)) co_return s3.error(*e);
    // BlockPublicPolicy: a public policy is refused.
    if (s3.public_block && s3.public_block->block_public_policy &&
        std::get<BucketPolicy>(parsed).is_public()) {
      co_return s3.error(S3Error::access_denied());
    }
    text = std::move(*read);
  } else if (method != "DELETE") {
    co_return s3.error(errors::method_not_allowed(method, "POLICY"));
  }
  if (auto e = co_await set_bucket_sysmeta(s3, encode_policy_sysmeta(text))) {
    co_return s3.error(*e);
  }
  Response out = configuration_answer(s3);
  if (method == "PUT") out.status = 204;  // S3 answers PutBucketPolicy with 204 No Content
  co_return out;
}

net::awaitable<Response> bucket_policy_status(S3Request& s3) {
  if (s3.client.method != "GET") {
    co_return s3.error(errors::method_not_allowed(s3.client.method, "POLICYSTATUS"));
  }
  auto headers = co_await bucket_headers(s3);
  if (auto* e = std::get_if<S3Error>(&headers)) co_return s3.error(*e);
  const HeaderMap& h = std::get<HeaderMap>(headers);
  bool public_policy = false;
  if (auto text = decode_policy_sysmeta(h)) {
    auto parsed = BucketPolicy::parse(*text, s3.bucket);
    if (auto* p = std::get_if<BucketPolicy>(&parsed)) public_policy = p->is_public();
  }
  // As RGW, and the tests written against it: a public ACL makes the bucket public too.
  auto acl = decode_acl(h.get_or(kBucketAclSysmeta, ""));
  const bool is = public_policy || (acl && is_public(*acl));
  pugi::xml_node root;
  pugi::xml_document doc = result_document("PolicyStatus", &root);
  add_text(root, "IsPublic", is ? "true" : "false");
  co_return xml_response(200, to_xml(doc), s3.env.trans_id);
}

}  // namespace apus::proxy::s3api
