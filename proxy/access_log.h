// The proxy's access line: Swift's proxy_logging `log_msg_template`, its fields, and what it
// hides (tokens, signatures). The template is Python format syntax limited to what Swift's
// fields take: literal text, "{{" and "}}", "{field}" and "{field.attribute}".
//
//   times (start_time, end_time): "%.9f" seconds; .s .ms .us .ns (parts of that text),
//     .datetime (dd/Mon/YYYY/HH/MM/SS), .iso8601, .asctime, or one strftime letter (.Y, .H...)
//   client_ip, remote_addr, domain, path, referer, user_agent, headers, client_etag, account,
//     container, object: the value, or .anonymized ("{MD5}<hex>" of it, "{SMD5}" with a salt,
//     by log_anonymization_method)
//   method, protocol, status_int, auth_token, bytes_recvd, bytes_sent, transaction_id,
//     request_time, source, log_info, policy_index, ttfb, pid, wire_status_int
//
// Each value is URL-quoted (safe: "/:{}") and an empty one (or 0) prints "-", as Swift's
// LogStringFormatter does. Unlike Swift, a format spec or conversion ("{status_int:>5}",
// "{path!r}") is refused at startup rather than half supported.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/http/server.h"
#include "common/status.h"

namespace apus::proxy {

// Swift's default log_msg_template.
inline constexpr std::string_view kDefaultLogTemplate =
    "{client_ip} {remote_addr} {end_time.datetime} {method} {path} {protocol} {status_int} "
    "{referer} {user_agent} {auth_token} {bytes_recvd} {bytes_sent} {client_etag} "
    "{transaction_id} {headers} {request_time} {source} {log_info} {start_time} {end_time} "
    "{policy_index}";

// What one access line may show, unquoted. Strings empty when unknown.
struct AccessLogFields {
  double start_time = 0, end_time = 0;  // Unix seconds
  std::string client_ip, remote_addr, domain, path, referer, user_agent, headers, client_etag;
  std::string account, container, object;
  std::string method, protocol, auth_token, transaction_id, source, log_info, policy_index;
  int status_int = 0, wire_status_int = 0;
  uint64_t bytes_recvd = 0, bytes_sent = 0;
  double ttfb = 0;  // seconds to the response head; 0: none
  int pid = 0;
};

class AccessLogTemplate {
 public:
  // InvalidArgument "Cannot interpolate log_msg_template: ..." for a template Swift would refuse
  // or that uses a format spec, and "Unsupported hashing method" for a bad
  // log_anonymization_method.
  static common::Result<AccessLogTemplate> parse(std::string_view text,
                                                 std::string anonymization_method = "md5",
                                                 std::string anonymization_salt = "");
  std::string format(const AccessLogFields& f) const;

 private:
  // What a part prints, resolved when the template is parsed: a line is formatted per request.
  enum class Kind {
    kLiteral,
    kTime,
    kText,
    kStatus,
    kWireStatus,
    kBytesRecvd,
    kBytesSent,
    kPid,
    kTtfb,
    kRequestTime
  };
  // A time's attribute: the "%.9f" text or a part of it, the zone, or a strftime format.
  enum class TimeText { kFull, kSeconds, kMs, kUs, kNs, kZone, kStrftime };
  struct Part {
    Kind kind = Kind::kLiteral;
    std::string literal;  // kLiteral: the text; kTime with kStrftime: the strftime format
    double AccessLogFields::*time = nullptr;       // kTime
    TimeText time_text = TimeText::kFull;          // kTime
    std::string AccessLogFields::*text = nullptr;  // kText
    bool anonymized = false;                       // kText
  };
  // The part `{field.attribute}` prints; nullopt for one Swift would refuse.
  static std::optional<Part> resolve(std::string_view field, std::string_view attribute);
  // Appends the part's value to `line`: URL-quoted, or "-" when empty.
  void append_value(std::string& line, const Part& p, const AccessLogFields& f) const;
  std::vector<Part> parts_;
  std::string method_, salt_;
  std::string anonymized_prefix_;  // before an anonymized value's digest
};

// Swift's reveal_sensitive_prefix: a value longer than `prefix` bytes cut to them plus "...".
std::string obscure_sensitive(std::string_view value, size_t prefix);

// The request target with sensitive query values (temp_url_sig, Signature, X-Amz-Signature)
// obscured, as Swift rewrites req.params before logging.
std::string obscure_target(std::string_view target, size_t prefix);

// Swift's {headers}: "Name: value" lines of the request, names title-cased as a WSGI environ
// gives them, sensitive ones (X-Auth-Token, X-Storage-Token, Authorization) obscured; only the
// names in `only` (title-cased) when it is not empty.
std::string logged_headers(const common::http::HeaderMap& headers,
                           const std::vector<std::string>& only, size_t prefix);

}  // namespace apus::proxy
