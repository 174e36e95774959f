// s3api's multipart uploads (s3_request.h), in Swift's layout: an upload is the marker object
// "<key>/<upload id>" in the container "<bucket>+segments", its parts "<key>/<upload id>/<n>"
// beside it, and a completed upload an SLO manifest. So far: ListMultipartUploads.
#include <boost/json.hpp>

#include <algorithm>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/http/url.h"
#include "proxy/s3api/s3_request.h"
#include "proxy/s3api/s3_response.h"

namespace apus::proxy::s3api {

namespace net = boost::asio;
using common::http::Response;

namespace {

constexpr int64_t kDefaultMaxUploads = 1000;
constexpr std::string_view kSegmentsSuffix = "+segments";

struct Upload {
  std::string key;
  std::string upload_id;
  std::string last_modified;
};

// A part's name ends in "/<digits>"; an upload's marker does not.
bool is_part(std::string_view name) {
  size_t slash = name.rfind('/');
  if (slash == std::string_view::npos || slash + 1 == name.size()) return false;
  return std::all_of(name.begin() + static_cast<std::ptrdiff_t>(slash) + 1, name.end(),
                     [](char c) { return c >= '0' && c <= '9'; });
}

std::optional<std::string> param(const S3Request& s3, const char* name) {
  auto it = s3.params.find(name);
  if (it == s3.params.end()) return std::nullopt;
  return it->second;
}

}  // namespace

net::awaitable<Response> list_multipart_uploads(S3Request& s3) {
  if (s3.key) {
    co_return s3.error(
        S3Error::invalid_request("Key is not expected for the GET method ?uploads subresource"));
  }
  auto head = co_await call_swift(s3, "HEAD", s3.bucket, std::nullopt);
  if (auto* e = std::get_if<S3Error>(&head)) co_return s3.error(*e);
  if (const Response& r = std::get<Response>(head); r.status == 404) {
    co_return s3.error(errors::no_such_bucket(s3.bucket));
  } else if (r.status < 200 || r.status >= 300) {
    co_return s3.error(unexpected(s3, r));
  }
  std::optional<std::string> encoding = param(s3, "encoding-type");
  if (encoding && *encoding != "url") {
    co_return s3.error(S3Error::invalid_argument("encoding-type", *encoding,
                                                 "Invalid Encoding Method specified in Request"));
  }
  const std::string key_marker = param(s3, "key-marker").value_or("");
  const std::string upload_marker = param(s3, "upload-id-marker").value_or("");
  auto max = validated_param(s3, "max-uploads", kDefaultMaxUploads, kDefaultMaxUploads);
  if (auto* e = std::get_if<S3Error>(&max)) co_return s3.error(*e);
  const size_t max_uploads = static_cast<size_t>(std::get<int64_t>(max));
  std::optional<std::string> prefix = param(s3, "prefix");
  std::optional<std::string> delimiter = param(s3, "delimiter");

  std::string marker;
  if (!upload_marker.empty() && !key_marker.empty()) {
    marker = key_marker + "/" + upload_marker;
  } else if (!key_marker.empty()) {
    marker = key_marker + "/~";  // past every upload of that key
  }
  const std::string segments = s3.bucket + std::string(kSegmentsSuffix);
  std::vector<Upload> uploads;
  std::set<std::string> prefixes;
  // Pages of the segments container until enough uploads (a part is skipped). Swift counts
  // only uploads here, so with a delimiter it may gather every common prefix of the whole
  // container in memory; common prefixes count too here, which bounds the answer by
  // max-uploads.
  while (uploads.size() + prefixes.size() < max_uploads) {
    std::string qs = "format=json&marker=" + common::http::quote(marker, "");
    if (prefix) qs += "&prefix=" + common::http::quote(*prefix, "");
    auto answer = co_await call_swift(s3, "GET", segments, std::nullopt, qs, 64u << 20);
    if (auto* e = std::get_if<S3Error>(&answer)) co_return s3.error(*e);
    const Response& r = std::get<Response>(answer);
    if (r.status == 404) break;  // no segments container: no uploads
    if (r.status != 200 && r.status != 204) co_return s3.error(unexpected(s3, r));
    boost::system::error_code ec;
    auto listing = boost::json::parse(r.body.empty() ? "[]" : r.body, ec);
    if (ec || !listing.is_array()) co_return s3.error(errors::internal_error());
    if (listing.as_array().empty()) break;
    std::string last;
    for (const auto& item : listing.as_array()) {
      if (!item.is_object() || !item.as_object().contains("name")) continue;
      const auto& o = item.as_object();
      std::string name(o.at("name").as_string());
      last = name;
      size_t slash = name.rfind('/');
      if (is_part(name) || slash == std::string::npos) continue;
      Upload u{name.substr(0, slash), name.substr(slash + 1), ""};
      if (const auto* lm = o.if_contains("last_modified"); lm && lm->is_string()) {
        u.last_modified = std::string(lm->as_string());
      }
      if (delimiter) {
        const std::string& p = prefix.value_or("");
        size_t end = u.key.find(*delimiter, p.size());
        if (end != std::string::npos && !delimiter->empty()) {
          prefixes.insert(u.key.substr(0, end + delimiter->size()));
          continue;
        }
      }
      uploads.push_back(std::move(u));
    }
    if (last.empty()) break;
    marker = last;
  }
  const bool truncated = uploads.size() + prefixes.size() >= max_uploads;
  if (uploads.size() > max_uploads) uploads.resize(max_uploads);
  std::string next_key, next_upload;
  if (uploads.size() > 1) {  // (Swift's condition)
    next_key = uploads.back().key;
    next_upload = uploads.back().upload_id;
  }
  pugi::xml_node root;
  auto doc = result_document("ListMultipartUploadsResult", &root);
  add_text(root, "Bucket", s3.bucket);
  add_text(root, "KeyMarker", key_marker);
  add_text(root, "UploadIdMarker", upload_marker);
  add_text(root, "NextKeyMarker", next_key);
  add_text(root, "NextUploadIdMarker", next_upload);
  if (delimiter) add_text(root, "Delimiter", *delimiter);
  if (prefix) add_text(root, "Prefix", *prefix);
  add_text(root, "MaxUploads", std::to_string(max_uploads));
  if (encoding) add_text(root, "EncodingType", *encoding);
  add_text(root, "IsTruncated", truncated ? "true" : "false");
  for (const auto& u : uploads) {
    pugi::xml_node e = root.append_child("Upload");
    add_text(e, "Key", encoding ? common::http::quote(u.key, "/") : u.key);
    add_text(e, "UploadId", u.upload_id);
    for (const char* who : {"Initiator", "Owner"}) {
      pugi::xml_node w = e.append_child(who);
      add_text(w, "ID", s3.user_id());
      add_text(w, "DisplayName", s3.user_id());
    }
    add_text(e, "StorageClass", "STANDARD");
    add_text(e, "Initiated", s3_listing_time(u.last_modified));
  }
  for (const auto& p : prefixes) add_text(root.append_child("CommonPrefixes"), "Prefix", p);
  co_return xml_response(200, to_xml(doc), s3.env.trans_id);
}

}  // namespace apus::proxy::s3api
