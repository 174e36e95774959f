#include "proxy/s3api/s3_response.h"

#include <cstdio>
#include <optional>
#include <sstream>
#include <utility>

#include "common/config/config.h"
#include "common/http/date.h"

namespace apus::proxy::s3api {

namespace {

constexpr const char* kNamespace = "http://s3.amazonaws.com/doc/2006-03-01/";
constexpr std::string_view kDeclaration = "<?xml version='1.0' encoding='UTF-8'?>\n";

// XML 1.0 cannot carry most control characters; lxml refuses such text and Swift writes
// "(invalid string)" instead, which is done here too.
bool xml_safe(std::string_view text) {
  for (unsigned char c : text) {
    if (c < 0x20 && c != '\t' && c != '\n' && c != '\r') return false;
  }
  return true;
}

}  // namespace

pugi::xml_document result_document(const char* name, pugi::xml_node* root) {
  pugi::xml_document doc;
  pugi::xml_node node = doc.append_child(name);
  node.append_attribute("xmlns") = kNamespace;
  if (root) *root = node;
  return doc;
}

std::string to_xml(const pugi::xml_document& doc) {
  std::ostringstream out;
  out << kDeclaration;
  doc.save(out, "", pugi::format_raw | pugi::format_no_declaration, pugi::encoding_utf8);
  return out.str();
}

pugi::xml_node add_text(pugi::xml_node parent, const char* name, std::string_view text) {
  pugi::xml_node node = parent.append_child(name);
  std::string value = xml_safe(text) ? std::string(text) : std::string("(invalid string)");
  node.text().set(value.c_str());
  return node;
}

pugi::xml_node add_optional(pugi::xml_node parent, const char* name,
                            const std::optional<std::string>& text) {
  if (text) return add_text(parent, name, *text);
  return parent.append_child(name);
}

void set_request_ids(common::http::HeaderMap& h, std::string_view trans_id) {
  if (trans_id.empty()) return;
  h.set("x-amz-id-2", trans_id);
  h.set("x-amz-request-id", trans_id);
}

common::http::Response xml_response(int status, std::string body, std::string_view trans_id) {
  common::http::Response r;
  r.status = status;
  r.headers.set("Content-Type", "application/xml");
  set_request_ids(r.headers, trans_id);
  r.body = std::move(body);
  return r;
}

common::http::Response header_response(int status, const common::http::HeaderMap& swift,
                                       std::string_view trans_id) {
  common::http::Response r;
  r.status = status;
  r.headers = swift_to_s3_headers(swift);
  set_request_ids(r.headers, trans_id);
  return r;
}

std::string s3_xml_time(int64_t epoch_seconds) {
  auto c = common::http::civil_from_epoch(epoch_seconds);
  char buf[40];
  std::snprintf(buf, sizeof buf, "%04lld-%02d-%02dT%02d:%02d:%02d.000Z",
                static_cast<long long>(c.year), c.month, c.day, c.hour, c.minute, c.second);
  return buf;
}

common::http::Response error_response(const S3Error& error, std::string_view trans_id) {
  pugi::xml_document doc;
  pugi::xml_node root = doc.append_child("Error");
  add_text(root, "Code", error.code);
  add_text(root, "Message", error.message);
  if (!trans_id.empty()) add_text(root, "RequestId", trans_id);
  for (const auto& [name, value] : error.details) add_text(root, name.c_str(), value);
  common::http::Response r = xml_response(error.status, to_xml(doc), trans_id);
  for (const auto& [name, value] : error.headers) r.headers.set(name, value);
  return r;
}

namespace {

// S3's spelling of a header name: Swift's title case, "ETag", and x-amz-* in lower case.
std::string s3_header_name(std::string_view name) {
  std::string lower = common::http::to_lower(name);
  if (lower == "etag") return "ETag";
  if (lower.starts_with("x-amz-")) return lower;
  return common::http::title_case(lower);
}

std::string meta_key(std::string_view lower_key) {
  if (!lower_key.starts_with("x-object-meta-")) return std::string(lower_key);
  // Metadata names keep their underscores as "=5F" on the way in (WSGI folds '_' into '-').
  std::string rest(lower_key.substr(14));
  std::string out = "x-amz-meta-";
  for (size_t i = 0; i < rest.size(); ++i) {
    if (rest.compare(i, 3, "=5f") == 0) {
      out.push_back('_');
      i += 2;
    } else {
      out.push_back(rest[i]);
    }
  }
  return out;
}

std::optional<std::pair<std::string, std::string>> translate(std::string_view key,
                                                             std::string_view value) {
  static constexpr std::string_view kKept[] = {
      "accept-ranges", "content-length", "content-type", "content-range", "content-encoding",
      "content-disposition", "content-language", "etag", "last-modified", "x-robots-tag",
      "cache-control", "expires"};
  const std::string k = common::http::to_lower(key);
  if (k.starts_with("x-object-meta-")) return std::make_pair(meta_key(k), std::string(value));
  for (std::string_view kept : kKept) {
    if (k == kept) return std::make_pair(std::string(key), std::string(value));
  }
  if (k == "x-object-version-id") return std::make_pair("x-amz-version-id", std::string(value));
  if (k == "x-parts-count") return std::make_pair("x-amz-mp-parts-count", std::string(value));
  if (k == "x-copied-from-version-id") {
    return std::make_pair("x-amz-copy-source-version-id", std::string(value));
  }
  if (k == "x-backend-content-type" && value == "application/x-deleted;swift_versions_deleted=1") {
    return std::make_pair("x-amz-delete-marker", "true");
  }
  if (k == "access-control-expose-headers") {
    std::string out;
    auto add = [&](std::string_view h) {
      if (!out.empty()) out += ", ";
      out += meta_key(h);
    };
    std::string_view rest = value;
    for (;;) {
      size_t sep = rest.find(", ");
      add(rest.substr(0, sep));
      if (sep == std::string_view::npos) break;
      rest.remove_prefix(sep + 2);
    }
    add("x-amz-request-id");
    add("x-amz-id-2");
    return std::make_pair(std::string(key), out);
  }
  if (k == "access-control-allow-methods") {
    std::string out;
    std::string_view rest = value;
    bool dropped = false;
    for (;;) {
      size_t sep = rest.find(", ");
      std::string_view m = rest.substr(0, sep);
      if (m == "COPY" && !dropped) {
        dropped = true;  // not an S3 method (only its first mention goes, as in Swift)
      } else {
        if (!out.empty()) out += ", ";
        out += m;
      }
      if (sep == std::string_view::npos) break;
      rest.remove_prefix(sep + 2);
    }
    return std::make_pair(std::string(key), out);
  }
  if (k.starts_with("access-control-")) return std::make_pair(std::string(key), std::string(value));
  if (k == "x-delete-at") {
    auto at = common::parse_python_int(value);
    if (!at) return std::nullopt;
    return std::make_pair("x-amz-expiration",
                          "expiry-date=\"" + common::http::format_http_date(*at) +
                              "\", rule-id=\"swift-object-expiration\"");
  }
  return std::nullopt;
}

}  // namespace

common::http::HeaderMap swift_to_s3_headers(const common::http::HeaderMap& swift) {
  common::http::HeaderMap out;
  for (const auto& [key, value] : swift) {
    auto pair = translate(key, value);
    if (pair) out.set(s3_header_name(pair->first), pair->second);
  }
  return out;
}

namespace errors {

namespace {
S3Error make(int status, std::string code, std::string message) {
  return {.status = status, .code = std::move(code), .message = std::move(message), .details = {}};
}
S3Error with_bucket(S3Error e, std::string bucket) {
  e.details.emplace_back("BucketName", std::move(bucket));
  return e;
}
}  // namespace

S3Error not_implemented(std::string message) {
  return make(501, "NotImplemented", std::move(message));
}
S3Error invalid_bucket_name(std::string bucket) {
  return with_bucket(make(400, "InvalidBucketName", "The specified bucket is not valid."),
                     std::move(bucket));
}
S3Error no_such_bucket(std::string bucket) {
  return with_bucket(make(404, "NoSuchBucket", "The specified bucket does not exist."),
                     std::move(bucket));
}
S3Error bucket_already_owned_by_you(std::string bucket) {
  return with_bucket(make(409, "BucketAlreadyOwnedByYou",
                          "Your previous request to create the named bucket succeeded and you "
                          "already own it."),
                     std::move(bucket));
}
S3Error bucket_already_exists(std::string bucket) {
  return with_bucket(
      make(409, "BucketAlreadyExists",
           "The requested bucket name is not available. The bucket namespace is shared by all "
           "users of the system. Please select a different name and try again."),
      std::move(bucket));
}
S3Error bucket_not_empty() {
  return make(409, "BucketNotEmpty", "The bucket you tried to delete is not empty");
}
S3Error invalid_location_constraint() {
  return make(400, "InvalidLocationConstraint", "The specified location constraint is not valid.");
}
S3Error malformed_xml() {
  return make(400, "MalformedXML",
              "The XML you provided was not well-formed or did not validate against our "
              "published schema");
}
S3Error internal_error() {
  return make(500, "InternalError", "We encountered an internal error. Please try again.");
}
S3Error service_unavailable() {
  return make(503, "ServiceUnavailable", "Please reduce your request rate.");
}
S3Error slow_down() { return make(503, "SlowDown", "Please reduce your request rate."); }
S3Error method_not_allowed(std::string method, std::string resource_type) {
  S3Error e = make(405, "MethodNotAllowed",
                   "The specified method is not allowed against this resource.");
  e.details.emplace_back("Method", std::move(method));
  e.details.emplace_back("ResourceType", std::move(resource_type));
  return e;
}
S3Error invalid_uri(std::string uri) {
  S3Error e = make(400, "InvalidURI", "Couldn't parse the specified URI.");
  e.details.emplace_back("URI", std::move(uri));
  return e;
}

S3Error no_such_key(std::string key) {
  S3Error e = make(404, "NoSuchKey", "The specified key does not exist.");
  e.details.emplace_back("Key", std::move(key));
  return e;
}
S3Error no_such_version(std::string key, std::string version) {
  S3Error e = make(404, "NoSuchVersion", "The specified version does not exist.");
  e.details.emplace_back("Key", std::move(key));
  e.details.emplace_back("VersionId", std::move(version));
  return e;
}
S3Error precondition_failed() {
  return make(412, "PreconditionFailed",
              "At least one of the preconditions you specified did not hold.");
}
S3Error request_timeout() {
  return make(400, "RequestTimeout",
              "Your socket connection to the server was not read from or written to within the "
              "timeout period.");
}
S3Error invalid_range() {
  return make(416, "InvalidRange", "The requested range cannot be satisfied.");
}
S3Error entity_too_large() {
  return make(400, "EntityTooLarge", "Your proposed upload exceeds the maximum allowed object size.");
}
S3Error missing_content_length() {
  return make(411, "MissingContentLength", "You must provide the Content-Length HTTP header.");
}
S3Error bad_digest() {
  return make(400, "BadDigest", "The Content-MD5 you specified did not match what we received.");
}
S3Error key_too_long() { return make(400, "KeyTooLongError", "Your key is too long."); }
S3Error malformed_trailer() {
  return make(400, "MalformedTrailerError",
              "The request contained trailing data that was not well-formed or did not conform "
              "to our published schema.");
}
S3Error incomplete_body(std::string message) {
  return make(400, "IncompleteBody", std::move(message));
}

}  // namespace errors

}  // namespace apus::proxy::s3api
