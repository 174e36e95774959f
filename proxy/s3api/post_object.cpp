// Browser-based uploads (S3's POST Object; Swift's s3api has none): a multipart/form-data body
// POSTed to a bucket, whose fields name the key, the ACL, metadata and a signed policy, and
// whose "file" field is the object. The fields before the file are read (at most
// kMaxFieldBytes in all, their header lines included, as S3's 20 KiB); the policy (post_policy.h) and its signature are
// checked, then the bucket's ACL for whoever signed (or for an anonymous writer when the form
// has no policy); the file streams into the object's PUT, which fails before the object is
// stored if the file breaks the policy's size range or its x-amz-checksum-* field. Fields
// after the file are ignored, as S3 does.
#include "proxy/s3api/post_policy.h"

#include <boost/json.hpp>
#include <pugixml.hpp>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <memory>
#include <set>
#include <span>
#include <vector>

#include "common/crypto/base64.h"
#include "common/http/date.h"
#include "common/http/headers.h"
#include "common/http/url.h"
#include "common/timestamp.h"
#include "common/utf8.h"
#include "proxy/form_reader.h"
#include "proxy/s3api/s3_request.h"
#include "proxy/s3api/s3_response.h"
#include "proxy/s3api/tagging.h"
#include "proxy/subrequest.h"

namespace apus::proxy::s3api {

namespace net = boost::asio;
using common::http::Exchange;
using common::http::HeaderMap;
using common::http::Request;
using common::http::Response;

namespace {

S3Error invalid_policy(std::string message) {
  return {.status = 400, .code = "InvalidPolicyDocument", .message = "Invalid Policy: " + message,
          .details = {}};
}

S3Error policy_refusal(std::string message) {
  return S3Error::access_denied("Invalid according to Policy: " + std::move(message));
}

// "2026-12-02T14:00:00Z" or "2026-12-02T14:00:00.000Z" as Unix seconds.
std::optional<int64_t> parse_expiration(std::string_view v) {
  auto digits = [&](size_t pos, size_t n) -> std::optional<int> {
    if (pos + n > v.size()) return std::nullopt;
    int out = 0;
    for (size_t i = pos; i < pos + n; ++i) {
      if (!std::isdigit(static_cast<unsigned char>(v[i]))) return std::nullopt;
      out = out * 10 + (v[i] - '0');
    }
    return out;
  };
  if (v.size() < 20 || v[4] != '-' || v[7] != '-' || v[10] != 'T' || v[13] != ':' ||
      v[16] != ':' || v.back() != 'Z') {
    return std::nullopt;
  }
  auto y = digits(0, 4), mo = digits(5, 2), d = digits(8, 2), h = digits(11, 2),
       mi = digits(14, 2), s = digits(17, 2);
  if (!y || !mo || !d || !h || !mi || !s || *mo < 1 || *mo > 12 || *d < 1 || *d > 31 ||
      *h > 23 || *mi > 59 || *s > 60) {
    return std::nullopt;
  }
  std::string_view rest = v.substr(19, v.size() - 20);  // between the seconds and 'Z'
  if (!rest.empty()) {
    if (rest[0] != '.' || rest.size() < 2 || !digits(20, rest.size() - 1)) return std::nullopt;
  }
  return common::http::epoch_from_civil(*y, *mo, *d, *h, *mi, *s);
}

std::string lower(std::string_view s) { return common::http::to_lower(s); }

// The field a condition names: "$key" → "key".
std::optional<std::string> field_of(const boost::json::value& v) {
  if (!v.is_string()) return std::nullopt;
  std::string_view s = v.as_string();
  if (!s.starts_with('$')) return std::nullopt;
  return lower(s.substr(1));
}

std::optional<int64_t> integer_of(const boost::json::value& v) {
  if (v.is_int64()) return v.as_int64();
  if (v.is_uint64() && v.as_uint64() <= static_cast<uint64_t>(INT64_MAX)) {
    return static_cast<int64_t>(v.as_uint64());
  }
  if (v.is_string()) {
    std::string_view s = v.as_string();
    if (s.empty() || s.size() > 18) return std::nullopt;
    int64_t out = 0;
    for (char c : s) {
      if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
      out = out * 10 + (c - '0');
    }
    return out;
  }
  return std::nullopt;
}

}  // namespace

std::variant<LengthRange, S3Error> check_post_policy(
    std::string_view policy_json, const std::map<std::string, std::string>& fields, double now) {
  boost::system::error_code ec;
  boost::json::value doc = boost::json::parse(policy_json, ec);
  if (ec || !doc.is_object()) return invalid_policy("Invalid JSON.");
  const auto& policy = doc.as_object();
  const auto* expiration = policy.if_contains("expiration");
  if (!expiration) return invalid_policy("Policy missing expiration.");
  if (!expiration->is_string()) return invalid_policy("Invalid 'expiration' value.");
  auto expires = parse_expiration(expiration->as_string());
  if (!expires) {
    return invalid_policy("Invalid 'expiration' value: '" +
                          std::string(expiration->as_string()) + "'");
  }
  const auto* conditions = policy.if_contains("conditions");
  if (!conditions) return invalid_policy("Policy missing conditions.");
  if (!conditions->is_array()) return invalid_policy("Invalid 'conditions' value.");
  if (static_cast<double>(*expires) < now) return policy_refusal("Policy expired.");

  auto value_of = [&](const std::string& field) {
    auto it = fields.find(field);
    return it == fields.end() ? std::string() : it->second;
  };
  std::set<std::string> covered;
  LengthRange range;
  for (const auto& c : conditions->as_array()) {
    std::string text = boost::json::serialize(c);
    if (c.is_object()) {
      // {"field": "value"}: exactly one, matched exactly.
      const auto& o = c.as_object();
      if (o.size() != 1 || !o.begin()->value().is_string()) {
        return invalid_policy(
            "Invalid Simple-Condition: Simple-Conditions must have exactly one property "
            "specified.");
      }
      std::string field = lower(o.begin()->key());
      covered.insert(field);
      if (value_of(field) != std::string_view(o.begin()->value().as_string())) {
        return policy_refusal("Policy Condition failed: [\"eq\", \"$" + field + "\", " +
                              boost::json::serialize(o.begin()->value()) + "]");
      }
      continue;
    }
    if (!c.is_array() || c.as_array().empty() || !c.as_array()[0].is_string()) {
      return invalid_policy("Invalid condition: " + text);
    }
    const auto& a = c.as_array();
    const std::string op = lower(a[0].as_string());
    if (op == "content-length-range") {
      if (a.size() != 3) return invalid_policy("Invalid content-length-range: " + text);
      auto min = integer_of(a[1]), max = integer_of(a[2]);
      if (!min || !max || *min < 0 || *max < *min) {
        return invalid_policy("Invalid content-length-range: " + text);
      }
      range.min = std::max(range.min, *min);
      range.max = std::min(range.max, *max);
      continue;
    }
    if ((op != "eq" && op != "starts-with") || a.size() != 3 || !a[2].is_string()) {
      return invalid_policy("Invalid condition: " + text);
    }
    auto field = field_of(a[1]);
    if (!field) return invalid_policy("Invalid condition: " + text);
    covered.insert(*field);
    const std::string value = value_of(*field);
    std::string_view want = a[2].as_string();
    const bool holds = op == "eq" ? value == want : std::string_view(value).starts_with(want);
    if (!holds) return policy_refusal("Policy Condition failed: " + text);
  }
  for (const auto& [name, value] : fields) {
    // (A checksum field is checked against the file itself, as RGW takes it.)
    if (name == "awsaccesskeyid" || name == "signature" || name == "x-amz-signature" ||
        name == "policy" || name.starts_with("x-ignore-") || name.starts_with("x-amz-checksum-") ||
        covered.contains(name)) {
      continue;
    }
    return policy_refusal("Extra input fields: " + name);
  }
  return range;
}

namespace {

// The pre-file fields a form may have in all (S3's limit).
constexpr size_t kMaxFieldBytes = 20 * 1024;

S3Error malformed_post() {
  return {.status = 400, .code = "MalformedPOSTRequest",
          .message = "The body of your POST request is not well-formed multipart/form-data.",
          .details = {}};
}

S3Error post_argument(std::string name) {
  return S3Error::invalid_argument(
      name, "", "Bucket POST must contain a field named '" + name +
                    "'.  If it is specified, please check the order of the fields.");
}

// The file's data as the PUT's body: sized against the policy's range and checksummed as it
// passes; a failed read (the PUT then stores nothing) when it breaks either.
class PostFileBody final : public BodySource {
 public:
  enum class Broken { kNone, kTooLarge, kTooSmall, kChecksum, kClient };

  PostFileBody(multipart::FormReader& reader, LengthRange range,
               std::optional<ChecksumAlgorithm> algorithm, std::string expected)
      : reader_(reader), range_(range), expected_(std::move(expected)) {
    if (algorithm) checksum_ = std::make_unique<Checksum>(*algorithm);
  }

  net::awaitable<common::Result<size_t>> read(std::span<char> buf) override {
    auto n = co_await reader_.read(buf);
    if (!n.ok()) {
      broken_ = Broken::kClient;
      co_return n;
    }
    total_ += static_cast<int64_t>(*n);
    if (total_ > range_.max) co_return fail(Broken::kTooLarge);
    if (*n > 0) {
      if (checksum_) checksum_->update(std::string_view(buf.data(), *n));
      co_return n;
    }
    if (total_ < range_.min) co_return fail(Broken::kTooSmall);
    if (checksum_ && checksum_->digest() != expected_) co_return fail(Broken::kChecksum);
    co_return n;
  }

  Broken broken() const { return broken_; }
  int64_t size() const { return total_; }

 private:
  common::Status fail(Broken why) {
    broken_ = why;
    return common::Status::invalid_argument("the file breaks the form's policy");
  }

  multipart::FormReader& reader_;
  LengthRange range_;
  std::unique_ptr<Checksum> checksum_;
  std::string expected_;
  int64_t total_ = 0;
  Broken broken_ = Broken::kNone;
};

struct Form {
  std::map<std::string, std::string> fields;  // lower-case names
  std::string filename;
  bool has_file = false;
};

// Reads the fields up to the file's (whose data is next in `reader`).
net::awaitable<std::variant<Form, S3Error>> read_fields(multipart::FormReader& reader) {
  using Step = multipart::Parser::Step;
  auto started = co_await reader.start();
  if (!started.ok()) co_return errors::incomplete_body();
  if (*started != Step::kReady) co_return malformed_post();
  Form form;
  size_t bytes = 0;
  std::vector<char> buf(4096);
  while (true) {
    std::vector<std::string> lines;
    auto got = co_await reader.headers(&lines);
    if (!got.ok()) co_return errors::incomplete_body();
    if (*got != Step::kReady) co_return malformed_post();
    multipart::MimeHeaders headers = multipart::MimeHeaders::parse(lines);
    multipart::Disposition disp =
        multipart::parse_content_disposition(headers.get("Content-Disposition").value_or(""));
    // A field's header lines count too: empty fields must not grow the form without bound.
    for (const auto& line : lines) bytes += line.size();
    std::string name = lower(disp.attrs.contains("name") ? disp.attrs.at("name") : "");
    if (name == "file") {
      form.has_file = true;
      if (auto f = disp.attrs.find("filename"); f != disp.attrs.end()) form.filename = f->second;
      co_return form;
    }
    const S3Error too_large{.status = 400, .code = "MaxPostPreDataLengthExceeded",
                            .message = "Your POST request fields preceeding the upload file was "
                                       "too large.",
                            .details = {}};
    if (bytes > kMaxFieldBytes) co_return too_large;
    std::string value;
    while (true) {
      auto n = co_await reader.read(std::span(buf.data(), buf.size()));
      if (!n.ok()) co_return errors::incomplete_body();
      if (*n == 0) break;
      bytes += *n;
      if (bytes > kMaxFieldBytes) co_return too_large;
      value.append(buf.data(), *n);
    }
    if (!name.empty()) form.fields[name] = std::move(value);
    if (!reader.more_parts()) co_return form;
  }
}

std::string quoted_etag(const HeaderMap& swift) {
  std::string etag(swift.get_or("Etag", ""));
  std::erase(etag, '"');
  return "\"" + etag + "\"";
}

}  // namespace

net::awaitable<void> post_object(Exchange& ex, S3Request& s3) {
  const Request& req = ex.request();
  auto fail = [&](const S3Error& e) -> net::awaitable<void> { co_return co_await ex.reply(s3.error(e)); };
  std::string_view type = req.headers.get_or("Content-Type", "");
  std::string boundary;
  if (size_t at = lower(type).find("boundary="); at != std::string::npos) {
    boundary = std::string(type.substr(at + 9));
    boundary = boundary.substr(0, boundary.find(';'));
    if (boundary.size() >= 2 && boundary.front() == '"' && boundary.back() == '"') {
      boundary = boundary.substr(1, boundary.size() - 2);
    }
  }
  if (boundary.empty() || boundary.size() > 200) co_return co_await fail(malformed_post());
  multipart::FormReader reader(ex, boundary);
  auto read = co_await read_fields(reader);
  if (auto* e = std::get_if<S3Error>(&read)) co_return co_await fail(*e);
  Form& form = std::get<Form>(read);
  auto field = [&](std::string_view name) -> const std::string* {
    auto it = form.fields.find(std::string(name));
    return it == form.fields.end() ? nullptr : &it->second;
  };
  if (!field("key")) co_return co_await fail(post_argument("key"));
  if (!form.has_file) {
    co_return co_await fail(S3Error::invalid_argument(
        "file", "", "POST requires exactly one file upload per request."));
  }
  std::string key = *field("key");
  if (size_t at = key.find("${filename}"); at != std::string::npos) {
    key.replace(at, 11, form.filename);
  }
  if (key.empty()) co_return co_await fail(post_argument("key"));
  if (static_cast<int64_t>(key.size()) > s3.config.max_object_name_length) {
    co_return co_await fail(errors::key_too_long());
  }
  if (!common::valid_utf8(key)) co_return co_await fail(errors::invalid_uri(key));
  s3.key = key;

  LengthRange range;
  if (const std::string* policy = field("policy")) {
    const bool v4 = field("x-amz-credential") || field("x-amz-algorithm");
    const std::string* access_key = field(v4 ? "x-amz-credential" : "awsaccesskeyid");
    const std::string* signature = field(v4 ? "x-amz-signature" : "signature");
    if (!access_key) co_return co_await fail(post_argument(v4 ? "X-Amz-Credential" : "AWSAccessKeyId"));
    if (!signature) co_return co_await fail(post_argument(v4 ? "X-Amz-Signature" : "Signature"));
    if (v4 && (!field("x-amz-algorithm") || *field("x-amz-algorithm") != "AWS4-HMAC-SHA256")) {
      co_return co_await fail(S3Error::invalid_argument(
          "X-Amz-Algorithm", field("x-amz-algorithm") ? *field("x-amz-algorithm") : "",
          "Only AWS4-HMAC-SHA256 is supported"));
    }
    auto json = common::crypto::strict_b64decode(*policy);
    if (!json) co_return co_await fail(invalid_policy("Invalid JSON."));
    auto sig = S3Signature::for_post_policy(v4 ? "" : *access_key, v4 ? *access_key : "",
                                            *signature, *policy, s3.config.auth);
    if (auto* e = std::get_if<S3Error>(&sig)) co_return co_await fail(*e);
    // The conditions are on the key as stored (${filename} replaced).
    std::map<std::string, std::string> checked = form.fields;
    checked["bucket"] = s3.bucket;
    checked["key"] = key;
    const double now = std::chrono::duration<double>(
                           std::chrono::system_clock::now().time_since_epoch()).count();
    auto held = check_post_policy(*json, checked, now);
    if (auto* e = std::get_if<S3Error>(&held)) co_return co_await fail(*e);
    range = std::get<LengthRange>(held);
    s3.signature = std::make_shared<S3Signature>(std::move(std::get<S3Signature>(sig)));
    if (auto e = co_await authenticate(s3)) co_return co_await fail(*e);
  }
  HeaderMap acl_fields;
  for (const auto& [name, value] : form.fields) {
    if (name == "acl") acl_fields.set("x-amz-acl", value);
    if (name.starts_with("x-amz-grant-")) acl_fields.set(name, value);
  }
  if (auto e = co_await check_post_access(s3, key, acl_fields)) co_return co_await fail(*e);

  // The object's headers, from the fields.
  HeaderMap h;
  h.set("Content-Type", field("content-type") && !field("content-type")->empty()
                            ? *field("content-type")
                            : "binary/octet-stream");
  for (const char* name : {"cache-control", "content-disposition", "content-encoding", "expires"}) {
    if (const std::string* v = field(name)) h.set(common::http::title_case(name), *v);
  }
  std::optional<ChecksumAlgorithm> algorithm;
  std::string expected;
  for (const auto& [name, value] : form.fields) {
    if (name.starts_with("x-amz-meta-")) add_user_metadata(name, value, h);
    if (auto a = checksum_algorithm_of(name); a && name != "x-amz-checksum-algorithm") {
      auto digest = decode_checksum(value, checksum_size(*a));
      if (!digest || algorithm) {
        co_return co_await fail(S3Error::invalid_request(
            "Value for " + name + " header is invalid."));
      }
      algorithm = *a;
      expected = *digest;
      h.set(checksum_sysmeta(*a), value);
      h.set(kChecksumTypeSysmeta, "FULL_OBJECT");
    }
  }
  if (const std::string* cls = field("x-amz-storage-class"); cls && *cls != "STANDARD") {
    co_return co_await fail({.status = 400, .code = "InvalidStorageClass",
                             .message = "The storage class you specified is not valid.",
                             .details = {}});
  }
  if (const std::string* tagging = field("tagging")) {
    auto tags = parse_tagging_xml(*tagging, TagTarget::kObject);
    if (auto* e = std::get_if<S3Error>(&tags)) co_return co_await fail(*e);
    std::string stored = encode_tags(std::get<TagSet>(tags));
    if (!stored.empty()) h.set(kObjectTaggingSysmeta, stored);
  }
  add_new_acl(s3, kObjectAclSysmeta, h);
  // Server-side encryption, as the fields (or the bucket's default) ask.
  HeaderMap sse_fields;
  for (const auto& [name, value] : form.fields) {
    if (name.starts_with("x-amz-server-side-encryption")) sse_fields.set(name, value);
  }
  auto sse = co_await write_encryption(s3, sse_fields);
  if (auto* e = std::get_if<S3Error>(&sse)) co_return co_await fail(*e);
  ProxyEnv env = swift_env(s3);
  apply_write_sse(std::get<Sse>(sse), h, env);
  h.set("X-Timestamp", common::Timestamp::now().internal());
  h.set("Transfer-Encoding", "chunked");
  Request put = swift_request(s3, "PUT", s3.bucket, s3.key, "", std::move(h));
  put.content_length.reset();
  put.chunked = true;
  PostFileBody body(reader, range, algorithm, expected);
  auto r = co_await run_subrequest_with_body(s3.next, std::move(put), std::move(env), body,
                                             1 << 16);
  switch (body.broken()) {
    case PostFileBody::Broken::kTooLarge:
      co_return co_await fail({.status = 400, .code = "EntityTooLarge",
                               .message = "Your proposed upload exceeds the maximum allowed size",
                               .details = {{"MaxSizeAllowed", std::to_string(range.max)}}});
    case PostFileBody::Broken::kTooSmall:
      co_return co_await fail({.status = 400, .code = "EntityTooSmall",
                               .message = "Your proposed upload is smaller than the minimum "
                                          "allowed size",
                               .details = {{"MinSizeAllowed", std::to_string(range.min)},
                                           {"ProposedSize", std::to_string(body.size())}}});
    case PostFileBody::Broken::kChecksum:
      co_return co_await fail(checksum_mismatch(*algorithm));
    case PostFileBody::Broken::kClient:
      co_return co_await fail(errors::incomplete_body());
    case PostFileBody::Broken::kNone:
      break;
  }
  if (!r.ok()) co_return co_await fail(errors::internal_error());
  if (r->status == 404) co_return co_await fail(errors::no_such_bucket(s3.bucket));
  if (r->status == 413) co_return co_await fail(errors::entity_too_large());
  if (r->status != 201) co_return co_await fail(unexpected(s3, *r));

  const std::string etag = quoted_etag(r->headers);
  const std::string location = "http://" + std::string(req.headers.get_or("Host", "")) + "/" +
                               common::http::quote(s3.bucket) + "/" + common::http::quote(key);
  Response out;
  set_request_ids(out.headers, s3.env.trans_id);
  out.headers.set("ETag", etag);
  out.headers.set("Location", location);
  if (auto version = r->headers.get("X-Object-Version-Id")) {
    out.headers.set("x-amz-version-id", *version);
  }
  add_sse_headers(std::get<Sse>(sse), out.headers);
  const std::string* redirect = field("success_action_redirect");
  if (!redirect) redirect = field("redirect");
  if (redirect && !redirect->empty()) {
    out.status = 303;
    std::string url = *redirect + (redirect->find('?') == std::string::npos ? "?" : "&") +
                      "bucket=" + common::http::quote(s3.bucket, "") +
                      "&key=" + common::http::quote(key, "") +
                      "&etag=" + common::http::quote(etag, "");
    out.headers.set("Location", url);
    co_return co_await ex.reply(std::move(out));
  }
  const std::string status = field("success_action_status") ? *field("success_action_status") : "";
  if (status == "201") {
    pugi::xml_document doc;
    pugi::xml_node root = doc.append_child("PostResponse");
    add_text(root, "Location", location);
    add_text(root, "Bucket", s3.bucket);
    add_text(root, "Key", key);
    add_text(root, "ETag", etag);
    Response created = xml_response(201, to_xml(doc), s3.env.trans_id);
    for (const auto& [name, value] : out.headers) created.headers.set(name, value);
    co_return co_await ex.reply(std::move(created));
  }
  out.status = status == "200" ? 200 : 204;
  co_return co_await ex.reply(std::move(out));
}

}  // namespace apus::proxy::s3api
