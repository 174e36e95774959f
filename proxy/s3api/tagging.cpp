// S3 tags (tagging.h): the tag set rules and forms, and the ?tagging operations on objects
// (GetObjectTagging, PutObjectTagging, DeleteObjectTagging) and buckets (the same three).
//
// An object's tags change by a Swift POST, which replaces all of an object's user metadata,
// transient sysmeta and content headers at once: the POST sends back what the object's HEAD
// answered along with the new tags. A metadata POST by another client between the two is lost
// (S3 keeps tags apart from metadata; Swift has no conditional POST to close the gap).
#include "proxy/s3api/tagging.h"

#include <boost/asio/awaitable.hpp>

#include <algorithm>
#include <optional>
#include <set>
#include <string>
#include <variant>

#include <pugixml.hpp>

#include "common/http/url.h"
#include "common/utf8.h"
#include "proxy/s3api/s3_request.h"
#include "proxy/s3api/s3_response.h"

namespace apus::proxy::s3api {

namespace net = boost::asio;
using common::http::Exchange;
using common::http::HeaderMap;
using common::http::Response;

namespace {

S3Error invalid_tag(std::string message) {
  return S3Error{.status = 400, .code = "InvalidTag", .message = std::move(message), .details = {}};
}

// Characters, as S3 counts a key's or value's length (valid UTF-8 assumed).
size_t characters(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

std::optional<S3Error> check_tags(const TagSet& tags, TagTarget target) {
  if (target == TagTarget::kObject && tags.size() > kMaxObjectTags) {
    return invalid_tag("Object tags cannot be greater than " + std::to_string(kMaxObjectTags));
  }
  if (target == TagTarget::kBucket && tags.size() > kMaxBucketTags) {
    return invalid_tag("Bucket tag count cannot be greater than " +
                       std::to_string(kMaxBucketTags));
  }
  std::set<std::string_view> keys;
  for (const auto& [key, value] : tags) {
    if (key.empty() || !common::valid_utf8(key)) {
      return invalid_tag("The TagKey you have provided is invalid");
    }
    if (!common::valid_utf8(value)) return invalid_tag("The TagValue you have provided is invalid");
    if (characters(key) > kMaxTagKeyLength) {
      return invalid_tag("The TagKey you have provided is too long, max " +
                         std::to_string(kMaxTagKeyLength));
    }
    if (characters(value) > kMaxTagValueLength) {
      return invalid_tag("The TagValue you have provided is too long, max " +
                         std::to_string(kMaxTagValueLength));
    }
    if (key.starts_with("aws:")) return invalid_tag("Your TagKey cannot be prefixed with aws:");
    if (!keys.insert(key).second) return invalid_tag("Cannot provide multiple Tags with the same key");
  }
  if (encode_tags(tags).size() > kMaxStoredTagsBytes) {
    return invalid_tag("The tag set takes more than " + std::to_string(kMaxStoredTagsBytes) +
                       " bytes encoded, more than Apus can keep");
  }
  return std::nullopt;
}

}  // namespace

std::variant<TagSet, S3Error> parse_tagging_xml(std::string_view body, TagTarget target) {
  pugi::xml_document doc;
  // pugixml reads no DTD and resolves no external entity.
  if (!doc.load_buffer(body.data(), body.size()) ||
      std::string_view(doc.document_element().name()) != "Tagging") {
    return errors::malformed_xml();
  }
  pugi::xml_node set = doc.document_element().child("TagSet");
  if (!set) return errors::malformed_xml();
  TagSet tags;
  for (pugi::xml_node tag : set.children()) {
    if (tag.type() != pugi::node_element) continue;
    if (std::string_view(tag.name()) != "Tag" || !tag.child("Key") || !tag.child("Value")) {
      return errors::malformed_xml();
    }
    // A set longer than any S3 allows is refused before it is all read.
    if (tags.size() > kMaxBucketTags) break;
    tags.emplace_back(tag.child("Key").text().get(), tag.child("Value").text().get());
  }
  if (auto e = check_tags(tags, target)) return *e;
  return tags;
}

std::variant<TagSet, S3Error> parse_tagging_header(std::string_view value) {
  TagSet tags;
  for (auto& [k, v] : common::http::parse_query(value)) {
    tags.emplace_back(std::move(k), std::move(v));
    if (tags.size() > kMaxBucketTags) break;
  }
  if (auto e = check_tags(tags, TagTarget::kObject)) return *e;
  return tags;
}

std::string encode_tags(TagSet tags) {
  std::sort(tags.begin(), tags.end());
  std::string out;
  for (const auto& [key, value] : tags) {
    if (!out.empty()) out += '&';
    out += common::http::quote(key, "") + "=" + common::http::quote(value, "");
  }
  return out;
}

TagSet decode_tags(std::string_view stored) {
  TagSet tags;
  while (!stored.empty()) {
    size_t amp = stored.find('&');
    std::string_view field = stored.substr(0, amp);
    stored = amp == std::string_view::npos ? std::string_view() : stored.substr(amp + 1);
    size_t eq = field.find('=');
    if (eq == std::string_view::npos || eq == 0) continue;
    tags.emplace_back(common::http::percent_decode(field.substr(0, eq)),
                      common::http::percent_decode(field.substr(eq + 1)));
  }
  return tags;
}

std::string tagging_document(const TagSet& tags) {
  pugi::xml_node root;
  auto doc = result_document("Tagging", &root);
  pugi::xml_node set = root.append_child("TagSet");
  for (const auto& [key, value] : tags) {
    pugi::xml_node tag = set.append_child("Tag");
    add_text(tag, "Key", key);
    add_text(tag, "Value", value);
  }
  return to_xml(doc);
}

std::variant<std::optional<std::string>, S3Error> tagging_header_sysmeta(const S3Request& s3) {
  auto value = s3.client.headers.get("x-amz-tagging");
  if (!value) return std::optional<std::string>();
  auto tags = parse_tagging_header(*value);
  if (auto* e = std::get_if<S3Error>(&tags)) return std::move(*e);
  return std::optional<std::string>(encode_tags(std::get<TagSet>(tags)));
}

HeaderMap own_headers(const HeaderMap& client) {
  HeaderMap h;
  for (const char* keep : {"Host", "User-Agent"}) {
    if (auto v = client.get(keep)) h.set(keep, *v);
  }
  return h;
}

void keep_object_metadata(const HeaderMap& head, HeaderMap& post) {
  static constexpr const char* kContentHeaders[] = {
      "Content-Disposition", "Content-Encoding", "Content-Language", "Cache-Control",
      "Expires",             "X-Robots-Tag",     "X-Delete-At",      "X-Object-Manifest"};
  for (const auto& [name, value] : head) {
    bool keep = common::http::istarts_with(name, "X-Object-Meta-") ||
                common::http::istarts_with(name, "X-Object-Transient-Sysmeta-");
    for (const char* content : kContentHeaders) keep = keep || common::http::iequals(name, content);
    if (keep) post.set(name, value);
  }
}

namespace {

std::string version_query(const S3Request& s3) {
  auto v = s3.params.find("versionId");
  return v == s3.params.end() ? std::string()
                              : "version-id=" + common::http::quote(v->second, "");
}

// The tags of the body of a PutObjectTagging or PutBucketTagging request.
net::awaitable<std::variant<TagSet, S3Error>> read_tags(Exchange& ex, S3Request& s3,
                                                        TagTarget target) {
  // Fifty tags of 128 and 256 four-byte characters fit in 80 KiB with their markup.
  auto body = co_await read_configuration(ex, s3, 80 * 1024);
  if (auto* e = std::get_if<S3Error>(&body)) co_return std::move(*e);
  co_return parse_tagging_xml(std::get<std::string>(body), target);
}

net::awaitable<Response> object_tagging(Exchange& ex, S3Request& s3) {
  const std::string& method = s3.client.method;
  std::optional<TagSet> new_tags;  // PUT: the tags to keep; DELETE: none
  if (method == "PUT") {
    auto tags = co_await read_tags(ex, s3, TagTarget::kObject);
    if (auto* e = std::get_if<S3Error>(&tags)) co_return s3.error(*e);
    new_tags = std::move(std::get<TagSet>(tags));
  } else if (method == "DELETE") {
    new_tags.emplace();
  }
  const std::string query = version_query(s3);
  auto head = co_await call_swift(s3, "HEAD", s3.bucket, s3.key, query, 1 << 16,
                                  [&](HeaderMap& h) { h = own_headers(h); });
  if (auto* e = std::get_if<S3Error>(&head)) co_return s3.error(*e);
  const Response& object = std::get<Response>(head);
  if (object.status == 404) co_return s3.error(co_await object_not_found(s3));
  if (object.status != 200) co_return s3.error(unexpected(s3, object));
  const std::string version(object.headers.get_or("X-Object-Version-Id", ""));
  if (!new_tags) {
    Response out = xml_response(
        200, tagging_document(decode_tags(object.headers.get_or(kObjectTaggingSysmeta, ""))),
        s3.env.trans_id);
    if (!version.empty()) out.headers.set("x-amz-version-id", version);
    co_return out;
  }
  if (!query.empty()) {
    // Swift's object_versioning takes a POST for the current version only (the link in the
    // bucket passes it on); an older version's metadata cannot change.
    auto current = co_await call_swift(s3, "HEAD", s3.bucket, s3.key, "", 1 << 16,
                                       [&](HeaderMap& h) { h = own_headers(h); });
    if (auto* e = std::get_if<S3Error>(&current)) co_return s3.error(*e);
    const Response& c = std::get<Response>(current);
    if (c.status != 200 || c.headers.get_or("X-Object-Version-Id", "") != version) {
      co_return s3.error(errors::not_implemented(
          "Changing the tags of a version that is not the current one is not supported."));
    }
  }
  auto post = co_await call_swift(s3, "POST", s3.bucket, s3.key, "", 1 << 16, [&](HeaderMap& h) {
    h = own_headers(h);
    keep_object_metadata(object.headers, h);
    h.erase(kObjectTaggingSysmeta);
    if (!new_tags->empty()) h.set(kObjectTaggingSysmeta, encode_tags(*new_tags));
  });
  if (auto* e = std::get_if<S3Error>(&post)) co_return s3.error(*e);
  const Response& p = std::get<Response>(post);
  if (p.status == 404) co_return s3.error(co_await object_not_found(s3));
  if (p.status != 202 && p.status != 204) co_return s3.error(unexpected(s3, p));
  Response out;
  out.status = method == "PUT" ? 200 : 204;
  if (!version.empty()) out.headers.set("x-amz-version-id", version);
  set_request_ids(out.headers, s3.env.trans_id);
  co_return out;
}

net::awaitable<Response> bucket_tagging(Exchange& ex, S3Request& s3) {
  const std::string& method = s3.client.method;
  if (method == "GET") {
    auto headers = co_await bucket_headers(s3);
    if (auto* e = std::get_if<S3Error>(&headers)) co_return s3.error(*e);
    TagSet tags = decode_tags(std::get<HeaderMap>(headers).get_or(kBucketTaggingSysmeta, ""));
    if (tags.empty()) {
      S3Error e{.status = 404, .code = "NoSuchTagSet", .message = "The TagSet does not exist",
                .details = {{"BucketName", s3.bucket}}};
      co_return s3.error(e);
    }
    co_return xml_response(200, tagging_document(tags), s3.env.trans_id);
  }
  std::string stored;  // DELETE: none
  if (method == "PUT") {
    auto tags = co_await read_tags(ex, s3, TagTarget::kBucket);
    if (auto* e = std::get_if<S3Error>(&tags)) co_return s3.error(*e);
    stored = encode_tags(std::get<TagSet>(tags));
  }
  if (auto e = co_await set_bucket_sysmeta(s3, kBucketTaggingSysmeta, stored)) {
    co_return s3.error(*e);
  }
  Response out = configuration_answer(s3);
  out.status = 204;  // PutBucketTagging too, as S3 answers it
  co_return out;
}

}  // namespace

net::awaitable<Response> tagging_request(Exchange& ex, S3Request& s3) {
  const std::string& method = s3.client.method;
  if (method != "GET" && method != "PUT" && method != "DELETE") {
    co_return s3.error(errors::method_not_allowed(method, "TAGGING"));
  }
  if (s3.key) co_return co_await object_tagging(ex, s3);
  co_return co_await bucket_tagging(ex, s3);
}

}  // namespace apus::proxy::s3api
