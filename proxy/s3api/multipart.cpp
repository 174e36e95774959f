// s3api's multipart uploads (s3_request.h), in Swift's layout, so that Swift's s3api and Apus
// serve the same uploads: an upload is the empty marker object "<key>/<upload id>" in the
// container "<bucket>+segments" (made with the bucket's policy and ACLs at the first upload),
// holding the upload's metadata; its parts are the objects "<key>/<upload id>/<n>" beside it;
// and CompleteMultipartUpload stores an SLO manifest of the parts as the object, with the S3
// ETag ("<md5 of the parts' md5s>-<parts>") in X-Object-Sysmeta-S3api-Etag, then deletes the
// marker. Parts are separate objects, so parallel part uploads never touch each other.
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>

#include <algorithm>
#include <array>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/async.h"
#include "common/config/config.h"
#include "common/crypto/base64.h"
#include "common/crypto/md5.h"
#include "common/crypto/random.h"
#include "common/http/range.h"
#include "common/http/url.h"
#include "common/timestamp.h"
#include "proxy/s3api/checksum.h"
#include "proxy/s3api/s3_request.h"
#include "proxy/s3api/s3_response.h"
#include "proxy/s3api/tagging.h"
#include "proxy/subrequest.h"

namespace apus::proxy::s3api {

namespace net = boost::asio;
using common::http::Exchange;
using common::http::HeaderMap;
using common::http::Response;

namespace {

constexpr int64_t kDefaultMaxUploads = 1000;
constexpr int64_t kDefaultMaxParts = 1000;
constexpr std::string_view kSegmentsSuffix = "+segments";
// A CompleteMultipartUpload document: 10,000 parts of about 200 bytes each, as Swift bounds it.
constexpr size_t kMaxCompleteBody = 2048 * 1024;
constexpr std::string_view kUploadIdSysmeta = "X-Object-Sysmeta-S3api-Upload-Id";
constexpr std::string_view kEtagSysmeta = "X-Object-Sysmeta-S3api-Etag";
constexpr std::string_view kHasContentTypeSysmeta = "X-Object-Sysmeta-S3api-Has-Content-Type";
constexpr std::string_view kContentTypeSysmeta = "X-Object-Sysmeta-S3api-Content-Type";
constexpr std::string_view kOverrideEtag = "X-Object-Sysmeta-Container-Update-Override-Etag";
// The checksum algorithm and type an upload was created with (x-amz-checksum-algorithm and
// -type), kept on its marker.
constexpr std::string_view kChecksumAlgorithmSysmeta = "X-Object-Sysmeta-S3api-Checksum-Algorithm";

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

S3Error no_such_upload(std::string upload_id) {
  return {.status = 404,
          .code = "NoSuchUpload",
          .message = "The specified multipart upload does not exist. The upload ID might be "
                     "invalid, or the multipart upload might have been aborted or completed.",
          .details = {{"UploadId", std::move(upload_id)}}};
}

S3Error invalid_part(std::string upload_id, std::optional<int64_t> part_number = std::nullopt) {
  S3Error e{.status = 400,
            .code = "InvalidPart",
            .message = "One or more of the specified parts could not be found. The part might "
                       "not have been uploaded, or the specified entity tag might not have "
                       "matched the part's entity tag.",
            .details = {{"UploadId", std::move(upload_id)}}};
  if (part_number) e.details.emplace_back("PartNumber", std::to_string(*part_number));
  return e;
}

S3Error invalid_part_order(std::string upload_id) {
  return {.status = 400,
          .code = "InvalidPartOrder",
          .message = "The list of parts was not in ascending order.Parts list must specified in "
                     "order by part number.",
          .details = {{"UploadId", std::move(upload_id)}}};
}

S3Error entity_too_small() {
  return {.status = 400,
          .code = "EntityTooSmall",
          .message = "Your proposed upload is smaller than the minimum allowed object size.",
          .details = {}};
}

// A new upload id, as Swift's unique_id(): the URL-safe base64 of a random UUID's text.
std::string new_upload_id() {
  const std::string hex = common::crypto::uuid4_hex();
  const std::string text = hex.substr(0, 8) + "-" + hex.substr(8, 4) + "-" + hex.substr(12, 4) +
                           "-" + hex.substr(16, 4) + "-" + hex.substr(20);
  std::string id = common::crypto::b64encode(text);
  for (char& c : id) {
    if (c == '+') c = '-';
    if (c == '/') c = '_';
  }
  return id;
}

std::string segments_container(const S3Request& s3) {
  return s3.bucket + std::string(kSegmentsSuffix);
}

std::string marker_name(const S3Request& s3, const std::string& upload_id) {
  return *s3.key + "/" + upload_id;
}

// The HEAD answer of an upload (Swift's _get_upload_info): its marker's, or once it is gone the
// completed object's when that object came from this upload (a retried Complete), with whether
// it is the marker's; NoSuchUpload otherwise.
struct UploadInfo {
  Response head;
  bool is_marker = true;
};
net::awaitable<std::variant<UploadInfo, S3Error>> upload_info(S3Request& s3,
                                                              const std::string& upload_id) {
  // Ids are made of base64url characters: one with a '/' would name a part of another upload
  // (Swift takes it; refusing it keeps a client from aborting or writing into the wrong one).
  if (upload_id.empty() || upload_id.find('/') != std::string::npos) {
    co_return no_such_upload(upload_id);
  }
  // The client's copy source and conditions are for the part or the object, not the marker.
  auto plain = [](HeaderMap& h) {
    for (const char* name : {"X-Amz-Copy-Source", "If-Match", "If-None-Match",
                             "If-Modified-Since", "If-Unmodified-Since", "Range"}) {
      h.erase(name);
    }
  };
  auto marker = co_await call_swift(s3, "HEAD", segments_container(s3),
                                    marker_name(s3, upload_id), "", 1 << 16, plain);
  if (auto* e = std::get_if<S3Error>(&marker)) co_return std::move(*e);
  Response& m = std::get<Response>(marker);
  if (m.status >= 200 && m.status < 300) co_return UploadInfo{std::move(m), true};
  if (m.status != 404) co_return unexpected(s3, m);
  auto object = co_await call_swift(s3, "HEAD", s3.bucket, s3.key, "", 1 << 16, plain);
  if (auto* e = std::get_if<S3Error>(&object)) co_return std::move(*e);
  Response& o = std::get<Response>(object);
  if (o.status >= 200 && o.status < 300 && o.headers.get_or(kUploadIdSysmeta, "") == upload_id) {
    co_return UploadInfo{std::move(o), false};
  }
  co_return no_such_upload(upload_id);
}

// A part's (or a Complete's) encryption: the upload's, whatever the request's SSE headers say,
// and with SSE-C the client's key again, which must be the one the upload was created with.
std::variant<Sse, S3Error> part_encryption(const S3Request& s3, const HeaderMap& upload) {
  const Sse stored = stored_sse(upload);
  auto given = customer_key(s3.client.headers);
  if (auto* e = std::get_if<S3Error>(&given)) return std::move(*e);
  auto& key = std::get<std::optional<Sse>>(given);
  if (stored.kind != SseKind::kCustomer) {
    if (key) {
      return S3Error::invalid_request(
          "The encryption parameters are not applicable to this upload.");
    }
    return stored;
  }
  if (!key) {
    return S3Error::invalid_request(
        "The multipart upload initiate requested encryption. Subsequent part requests must "
        "include the appropriate encryption parameters.");
  }
  if (key->customer_key_md5 != stored.customer_key_md5) {
    return S3Error::invalid_request(
        "The provided encryption parameters did not match the ones used originally.");
  }
  return std::move(*key);
}

// What every operation on an object's upload checks first (Swift's object_operation and
// check_container_existence): a key, and the bucket.
net::awaitable<std::optional<S3Error>> object_and_bucket(S3Request& s3) {
  if (!s3.key) co_return S3Error::invalid_request("A key must be specified");
  co_return co_await bucket_must_exist(s3);
}

// The objects of one listing page of the segments container, or the error; empty at the end.
net::awaitable<std::variant<boost::json::array, S3Error>> list_segments(S3Request& s3,
                                                                         const std::string& qs) {
  auto answer = co_await call_swift(s3, "GET", segments_container(s3), std::nullopt,
                                    "format=json&" + qs, 64u << 20);
  if (auto* e = std::get_if<S3Error>(&answer)) co_return std::move(*e);
  const Response& r = std::get<Response>(answer);
  if (r.status == 404) co_return errors::no_such_bucket(s3.bucket);
  if (r.status != 200 && r.status != 204) co_return unexpected(s3, r);
  boost::system::error_code ec;
  auto listing = boost::json::parse(r.body.empty() ? "[]" : r.body, ec);
  if (ec || !listing.is_array()) co_return errors::internal_error();
  co_return std::move(listing.as_array());
}

std::string json_string(const boost::json::object& o, const char* key) {
  const auto* v = o.if_contains(key);
  return v && v->is_string() ? std::string(v->as_string()) : std::string();
}

// A part's number from its name "<key>/<upload id>/<n>", or nullopt for a name that is not one.
std::optional<int64_t> part_number_of(std::string_view name) {
  size_t slash = name.rfind('/');
  if (slash == std::string_view::npos || !is_part(name)) return std::nullopt;
  std::string_view digits = name.substr(slash + 1);
  if (digits.size() > 9) return std::nullopt;  // beyond any part number
  return common::parse_python_int(digits);
}

}  // namespace

namespace {

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
  std::vector<Upload> uploads;
  std::set<std::string> prefixes;
  // Pages of the segments container until enough uploads (a part is skipped). Swift counts
  // only uploads here, so with a delimiter it may gather every common prefix of the whole
  // container in memory; common prefixes count too here, which bounds the answer by
  // max-uploads.
  while (uploads.size() + prefixes.size() < max_uploads) {
    std::string qs = "marker=" + common::http::quote(marker, "");
    if (prefix) qs += "&prefix=" + common::http::quote(*prefix, "");
    auto page = co_await list_segments(s3, qs);
    if (auto* e = std::get_if<S3Error>(&page)) {
      if (e->code == "NoSuchBucket") break;  // no segments container: no uploads
      co_return s3.error(*e);
    }
    const auto& objects = std::get<boost::json::array>(page);
    if (objects.empty()) break;
    std::string last;
    for (const auto& item : objects) {
      if (!item.is_object()) continue;
      const auto& o = item.as_object();
      std::string name = json_string(o, "name");
      if (name.empty()) continue;
      last = name;
      size_t slash = name.rfind('/');
      if (is_part(name) || slash == std::string::npos) continue;
      Upload u{name.substr(0, slash), name.substr(slash + 1), json_string(o, "last_modified")};
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

// The checksum an upload is created with: x-amz-checksum-algorithm and x-amz-checksum-type
// (COMPOSITE unless said otherwise; CRC64NVME is FULL_OBJECT only, the SHAs COMPOSITE only).
struct UploadChecksum {
  ChecksumAlgorithm algorithm;
  std::string type;
};
std::variant<std::optional<UploadChecksum>, S3Error> upload_checksum(const S3Request& s3) {
  auto name = s3.client.headers.get("x-amz-checksum-algorithm");
  if (!name) return std::optional<UploadChecksum>();
  auto algorithm = checksum_algorithm_of("x-amz-checksum-" + common::http::to_lower(*name));
  if (!algorithm) {
    return S3Error::invalid_request(
        "Checksum algorithm provided is unsupported. Please try again with any of the valid "
        "types: [CRC32, CRC32C, CRC64NVME, SHA1, SHA256]");
  }
  const bool crc64 = *algorithm == ChecksumAlgorithm::kCrc64Nvme;
  const bool sha = *algorithm == ChecksumAlgorithm::kSha1 || *algorithm == ChecksumAlgorithm::kSha256;
  std::string type(s3.client.headers.get_or("x-amz-checksum-type", crc64 ? "FULL_OBJECT" : "COMPOSITE"));
  for (char& c : type) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (type != "COMPOSITE" && type != "FULL_OBJECT") {
    return S3Error::invalid_request("Value for x-amz-checksum-type header is invalid.");
  }
  if ((crc64 && type == "COMPOSITE") || (sha && type == "FULL_OBJECT")) {
    return S3Error::invalid_request("The " + type + " checksum type cannot be used with the " +
                                    checksum_upper_name(*algorithm) + " checksum algorithm.");
  }
  return std::optional<UploadChecksum>(UploadChecksum{*algorithm, type});
}

// A part's checksum element of CompleteMultipartUpload (ChecksumCRC32 ...), as newer Swift's
// schema allows them; any other element is MalformedXML.
bool known_checksum_element(std::string_view name) {
  for (ChecksumAlgorithm a : kChecksumAlgorithms) {
    if (name == "Checksum" + checksum_upper_name(a)) return true;
  }
  return false;
}

// CreateMultipartUpload (POST ?uploads): the segments container when it is not there yet, then
// the upload's marker with the object's metadata and Content-Type (in sysmeta: the marker's own
// is application/directory).
net::awaitable<Response> create_multipart_upload(S3Request& s3) {
  if (!s3.key) co_return s3.error(S3Error::invalid_request("A key must be specified"));
  auto bucket = co_await call_swift(s3, "HEAD", s3.bucket, std::nullopt);
  if (auto* e = std::get_if<S3Error>(&bucket)) co_return s3.error(*e);
  const Response& b = std::get<Response>(bucket);
  if (b.status == 404) co_return s3.error(errors::no_such_bucket(s3.bucket));
  if (b.status < 200 || b.status >= 300) co_return s3.error(unexpected(s3, b));
  if (static_cast<int64_t>(s3.key->size()) > s3.config.max_object_name_length) {
    co_return s3.error(errors::key_too_long());
  }
  auto wanted = upload_checksum(s3);
  if (auto* e = std::get_if<S3Error>(&wanted)) co_return s3.error(*e);
  const std::optional<UploadChecksum> checksum = std::get<std::optional<UploadChecksum>>(wanted);
  // The encryption the parts and the completed object get, kept on the marker.
  auto encryption = co_await write_encryption(s3);
  if (auto* e = std::get_if<S3Error>(&encryption)) co_return s3.error(*e);
  const Sse sse = std::get<Sse>(encryption);
  const std::string upload_id = new_upload_id();
  const std::string segments = segments_container(s3);
  auto seg = co_await call_swift(s3, "HEAD", segments, std::nullopt);
  if (auto* e = std::get_if<S3Error>(&seg)) co_return s3.error(*e);
  if (std::get<Response>(seg).status == 404) {
    // The same storage policy and ACLs as the bucket's.
    auto made = co_await call_swift(s3, "PUT", segments, std::nullopt, "", 1 << 16,
                                    [&](HeaderMap& h) {
      h.set("Content-Length", "0");
      if (auto policy = b.headers.get("X-Storage-Policy")) h.set("X-Storage-Policy", *policy);
      for (const char* acl : {"X-Container-Read", "X-Container-Write"}) {
        if (auto v = b.headers.get(acl); v && !v->empty()) h.set(acl, *v);
      }
    });
    if (auto* e = std::get_if<S3Error>(&made)) co_return s3.error(*e);
    const Response& m = std::get<Response>(made);
    // 202: made at the same time by another upload.
    if (m.status != 201 && m.status != 202) co_return s3.error(unexpected(s3, m));
  }
  auto tagging = tagging_header_sysmeta(s3);
  if (auto* e = std::get_if<S3Error>(&tagging)) co_return s3.error(*e);
  const std::optional<std::string> tags = std::get<std::optional<std::string>>(tagging);
  // The lock the completed object gets, kept on the marker as its tags are.
  auto lock = co_await new_version_lock(s3);
  if (auto* e = std::get_if<S3Error>(&lock)) co_return s3.error(*e);
  auto put = co_await call_swift(s3, "PUT", segments, marker_name(s3, upload_id), "", 1 << 16,
                                 [&](HeaderMap& h) {
    if (tags && !tags->empty()) h.set(kObjectTaggingSysmeta, *tags);
    for (const auto& [name, value] : std::get<LockHeaders>(lock)) h.set(name, value);
    for (const char* name : {"x-amz-object-lock-mode", "x-amz-object-lock-retain-until-date",
                             "x-amz-object-lock-legal-hold"}) {
      h.erase(name);
    }
    add_new_acl(s3, kUploadAclSysmeta, h);
    std::string type(s3.client.headers.get_or("Content-Type", ""));
    h.set(kHasContentTypeSysmeta, type.empty() ? "no" : "yes");
    if (!type.empty()) h.set(kContentTypeSysmeta, type);
    h.set("Content-Type", "application/directory");
    h.set("Content-Length", "0");
    for (const char* name : {"Etag", "Content-MD5", "Transfer-Encoding"}) h.erase(name);
    if (checksum) {
      h.set(kChecksumAlgorithmSysmeta, checksum_upper_name(checksum->algorithm));
      h.set(kChecksumTypeSysmeta, checksum->type);
    }
    ProxyEnv marker_env;  // the empty marker itself is written as any object
    apply_write_sse(sse, h, marker_env);
  });
  if (auto* e = std::get_if<S3Error>(&put)) co_return s3.error(*e);
  const Response& p = std::get<Response>(put);
  if (p.status == 404) co_return s3.error(errors::no_such_bucket(s3.bucket));
  if (p.status != 201) co_return s3.error(unexpected(s3, p));
  pugi::xml_node root;
  auto doc = result_document("InitiateMultipartUploadResult", &root);
  add_text(root, "Bucket", s3.bucket);
  add_text(root, "Key", *s3.key);
  add_text(root, "UploadId", upload_id);
  Response out = xml_response(200, to_xml(doc), s3.env.trans_id);
  if (checksum) {
    out.headers.set("x-amz-checksum-algorithm", checksum_upper_name(checksum->algorithm));
    out.headers.set("x-amz-checksum-type", checksum->type);
  }
  add_sse_headers(sse, out.headers);
  co_return out;
}

// ListParts (GET ?uploadId): the upload's parts after part-number-marker, in number order.
// Swift lists every part and sorts them; only the max-parts + 1 lowest numbers are kept here, so
// a segments container with many odd objects costs no more memory than a normal answer.
net::awaitable<Response> list_parts(S3Request& s3, const std::string& upload_id) {
  std::optional<std::string> encoding = param(s3, "encoding-type");
  if (encoding && *encoding != "url") {
    co_return s3.error(S3Error::invalid_argument("encoding-type", *encoding,
                                                 "Invalid Encoding Method specified in Request"));
  }
  auto info = co_await upload_info(s3, upload_id);
  if (auto* e = std::get_if<S3Error>(&info)) co_return s3.error(*e);
  auto max = validated_param(s3, "max-parts", kDefaultMaxParts, s3.config.max_parts_listing);
  if (auto* e = std::get_if<S3Error>(&max)) co_return s3.error(*e);
  auto marker_param = validated_param(s3, "part-number-marker", 0);
  if (auto* e = std::get_if<S3Error>(&marker_param)) co_return s3.error(*e);
  const auto max_parts = static_cast<size_t>(std::get<int64_t>(max));
  const int64_t part_marker = std::get<int64_t>(marker_param);

  struct Part {
    std::string last_modified, hash;
    int64_t bytes = 0;
  };
  std::map<int64_t, Part> parts;  // the lowest numbers past the marker, at most max_parts + 1
  const std::string prefix = marker_name(s3, upload_id) + "/";
  std::string marker;
  for (;;) {
    auto page = co_await list_segments(
        s3, "prefix=" + common::http::quote(prefix, "") + "&delimiter=%2F&marker=" +
                common::http::quote(marker, ""));
    if (auto* e = std::get_if<S3Error>(&page)) co_return s3.error(*e);
    const auto& objects = std::get<boost::json::array>(page);
    if (objects.empty()) break;
    for (const auto& item : objects) {
      if (!item.is_object()) continue;
      const auto& o = item.as_object();
      std::string name = json_string(o, "name");
      if (name.empty()) name = json_string(o, "subdir");
      marker = name;
      auto number = part_number_of(name);
      if (!number || *number <= part_marker) continue;
      const auto* bytes = o.if_contains("bytes");
      parts[*number] = Part{json_string(o, "last_modified"), json_string(o, "hash"),
                            bytes && bytes->is_int64() ? bytes->as_int64() : 0};
      if (parts.size() > max_parts + 1) parts.erase(std::prev(parts.end()));
    }
    if (marker.empty()) break;
  }
  const bool truncated = parts.size() > max_parts;
  if (truncated) parts.erase(std::prev(parts.end()));

  pugi::xml_node root;
  auto doc = result_document("ListPartsResult", &root);
  add_text(root, "Bucket", s3.bucket);
  add_text(root, "Key", encoding ? common::http::quote(*s3.key, "/") : *s3.key);
  add_text(root, "UploadId", upload_id);
  // The owner the completed object will have (s3_acl keeps it on the marker), else the user.
  const UploadInfo& upload = std::get<UploadInfo>(info);
  auto tmpacl = decode_acl(upload.head.headers.get_or(kUploadAclSysmeta, ""));
  const std::string owner = tmpacl && !tmpacl->owner.empty() ? tmpacl->owner : s3.user_id();
  for (const char* who : {"Initiator", "Owner"}) {
    pugi::xml_node w = root.append_child(who);
    const std::string& id = std::string_view(who) == "Owner" ? owner : s3.user_id();
    add_text(w, "ID", id);
    add_text(w, "DisplayName", id);
  }
  add_text(root, "StorageClass", "STANDARD");
  add_text(root, "PartNumberMarker", std::to_string(part_marker));
  add_text(root, "NextPartNumberMarker", std::to_string(parts.empty() ? 0 : parts.rbegin()->first));
  add_text(root, "MaxParts", std::to_string(max_parts));
  if (encoding) add_text(root, "EncodingType", *encoding);
  add_text(root, "IsTruncated", truncated ? "true" : "false");
  for (const auto& [number, part] : parts) {
    pugi::xml_node e = root.append_child("Part");
    add_text(e, "PartNumber", std::to_string(number));
    add_text(e, "LastModified", s3_listing_time(part.last_modified));
    add_text(e, "ETag", "\"" + part.hash + "\"");
    add_text(e, "Size", std::to_string(part.bytes));
  }
  co_return xml_response(200, to_xml(doc), s3.env.trans_id);
}

// Deletes every object of the segments container listed with `qs_base` (a prefix), page by
// page. A part gone already (a concurrent abort) is no error.
net::awaitable<std::optional<S3Error>> delete_listed_segments(S3Request& s3,
                                                              const std::string& qs_base) {
  std::string marker;
  for (;;) {
    auto page = co_await list_segments(s3, qs_base + "marker=" + common::http::quote(marker, ""));
    if (auto* e = std::get_if<S3Error>(&page)) co_return std::move(*e);
    const auto& objects = std::get<boost::json::array>(page);
    if (objects.empty()) co_return std::nullopt;
    for (const auto& item : objects) {
      if (!item.is_object()) continue;
      std::string name = json_string(item.as_object(), "name");
      if (name.empty()) name = json_string(item.as_object(), "subdir");
      if (name.empty()) continue;
      marker = name;
      if (name.ends_with('/')) continue;  // a subdir: nothing to delete
      auto gone = co_await call_swift(s3, "DELETE", segments_container(s3), name);
      if (auto* e = std::get_if<S3Error>(&gone)) co_return std::move(*e);
      const Response& r = std::get<Response>(gone);
      if (r.status != 204 && r.status != 404) co_return unexpected(s3, r);
    }
    if (marker.empty()) co_return std::nullopt;
  }
}

// AbortMultipartUpload (DELETE ?uploadId): the marker, then every part.
net::awaitable<Response> abort_multipart_upload(S3Request& s3, const std::string& upload_id) {
  auto info = co_await upload_info(s3, upload_id);
  if (auto* e = std::get_if<S3Error>(&info)) co_return s3.error(*e);
  const std::string marker = marker_name(s3, upload_id);
  auto gone = co_await call_swift(s3, "DELETE", segments_container(s3), marker);
  if (auto* e = std::get_if<S3Error>(&gone)) co_return s3.error(*e);
  const Response& r = std::get<Response>(gone);
  // An upload completed already has no marker left: Swift answers its DELETE's NoSuchKey.
  if (r.status == 404) co_return s3.error(errors::no_such_key(marker));
  if (r.status != 204) co_return s3.error(unexpected(s3, r));
  auto e = co_await delete_listed_segments(
      s3, "prefix=" + common::http::quote(marker + "/", "") + "&delimiter=%2F&");
  if (e) co_return s3.error(*e);
  Response out;
  out.status = 204;
  out.headers.set("Content-Type", "text/html; charset=UTF-8");  // swob's HTTPNoContent
  out.headers.set("Content-Length", "0");
  set_request_ids(out.headers, s3.env.trans_id);
  co_return out;
}

// The scheme and authority of the object's URL: the Host header's host and its first port
// (boto's SigV4 signer sends "host:port:port", which Swift mends the same way).
std::string host_url(std::string_view host) {
  std::string_view name = host, port;
  size_t after = host.starts_with('[') ? host.find(']') : 0;  // an IPv6 literal's end
  if (after == std::string_view::npos) after = 0;
  if (size_t colon = host.find(':', after); colon != std::string_view::npos) {
    name = host.substr(0, colon);
    port = host.substr(colon + 1);
    port = port.substr(0, port.find(':'));
  }
  return "http://" + std::string(name) + (port.empty() ? "" : ":" + std::string(port));
}

// The CompleteMultipartUploadResult document.
std::string complete_result(const S3Request& s3, const std::string& s3_etag,
                            const std::optional<std::pair<ChecksumAlgorithm, std::string>>&
                                checksum = std::nullopt,
                            std::string_view checksum_type = "COMPOSITE") {
  pugi::xml_node root;
  auto doc = result_document("CompleteMultipartUploadResult", &root);
  add_text(root, "Location",
           host_url(s3.client.headers.get_or("Host", "")) +
               common::http::quote(common::http::percent_decode(s3.client.path()), "/"));
  add_text(root, "Bucket", s3.bucket);
  add_text(root, "Key", *s3.key);
  add_text(root, "ETag", "\"" + s3_etag + "\"");
  if (checksum) {
    add_text(root, ("Checksum" + checksum_upper_name(checksum->first)).c_str(), checksum->second);
    add_text(root, "ChecksumType", checksum_type);
  }
  return to_xml(doc);
}

}  // namespace

net::awaitable<std::optional<Response>> with_heartbeat(
    Exchange& ex, std::string_view trans_id, std::function<net::awaitable<Response>()> work,
    std::chrono::steady_clock::duration grace, std::chrono::steady_clock::duration interval) {
  auto executor = co_await net::this_coro::executor;
  std::optional<Response> result;
  net::steady_timer tick(executor);
  common::spawn_logged(
      executor,
      [&]() -> net::awaitable<void> {
        result = co_await work();
        tick.cancel();
      },
      "s3api CompleteMultipartUpload", [&] {
        result = error_response(errors::internal_error(), trans_id);
        tick.cancel();
      });
  bool started = false, client_gone = false;
  for (auto wait = grace; !result; wait = interval) {
    tick.expires_after(wait);
    auto [ec] = co_await tick.async_wait(net::as_tuple(net::use_awaitable));
    (void)ec;
    if (result || client_gone) continue;  // done; or nobody to tell, but `work` must end first
    if (!started) {
      started = true;
      HeaderMap h;
      h.set("Content-Type", "application/xml");
      set_request_ids(h, trans_id);
      client_gone = !(co_await ex.start_response(200, std::move(h), std::nullopt)).ok() ||
                    !(co_await ex.write_body("<?xml version='1.0' encoding='UTF-8'?>\n")).ok();
    }
    if (!client_gone) client_gone = !(co_await ex.write_body(" ")).ok();
  }
  if (!started) co_return std::move(result);
  if (client_gone) co_return std::nullopt;
  // The document without its declaration, which went first; an error's after a newline.
  std::string_view doc = result->body;
  if (doc.starts_with("<?xml")) doc.remove_prefix(std::min(doc.size(), doc.find('\n') + 1));
  if (result->status != 200 && !(co_await ex.write_body("\n")).ok()) co_return std::nullopt;
  if ((co_await ex.write_body(doc)).ok()) (void)co_await ex.finish_response();
  co_return std::nullopt;
}

namespace {

// A FULL_OBJECT checksum of an upload (a CRC): the CRCs of its parts (`parts`: number and
// digest, in order) combined by the parts' lengths, which a listing of the upload's parts gives.
// InvalidPart for a part that is not there.
net::awaitable<std::variant<std::string, S3Error>> full_object_checksum(
    S3Request& s3, const std::string& upload_id, ChecksumAlgorithm algorithm,
    const std::vector<std::pair<int64_t, std::string>>& parts) {
  std::map<int64_t, uint64_t> sizes;  // part number -> bytes
  const std::string prefix = marker_name(s3, upload_id) + "/";
  std::string marker;
  for (;;) {
    std::string qs = "limit=10000&prefix=" + common::http::quote(prefix, "");
    if (!marker.empty()) qs += "&marker=" + common::http::quote(marker, "");
    auto page = co_await list_segments(s3, qs);
    if (auto* e = std::get_if<S3Error>(&page)) co_return std::move(*e);
    const auto& items = std::get<boost::json::array>(page);
    for (const auto& item : items) {
      const auto* o = item.if_object();
      if (!o) continue;
      marker = json_string(*o, "name");
      const auto* bytes = o->if_contains("bytes");
      auto number = part_number_of(marker);
      if (number && marker.starts_with(prefix) && bytes && bytes->is_int64() &&
          bytes->as_int64() >= 0) {
        sizes[*number] = static_cast<uint64_t>(bytes->as_int64());
      }
    }
    if (items.size() < 10000) break;  // the last page
  }
  std::string whole;
  for (const auto& [number, digest] : parts) {
    auto size = sizes.find(number);
    if (size == sizes.end()) co_return invalid_part(upload_id, number);
    whole = whole.empty() ? digest : combine_crc(algorithm, whole, digest, size->second);
  }
  co_return whole;
}

// The S3 error of a failed manifest PUT (Swift reads SLO's answer the same way): a part too
// small is EntityTooSmall, a part missing or changed InvalidPart.
S3Error manifest_put_error(const S3Request& s3, const Response& r, const std::string& upload_id,
                           const std::string& too_small) {
  if (r.status == 412) return errors::precondition_failed();
  if (r.status == 413) return errors::entity_too_large();
  if (r.status == 404) return errors::no_such_bucket(s3.bucket);
  if (r.status != 400) return unexpected(s3, r);
  boost::system::error_code ec;
  auto body = boost::json::parse(r.body, ec);
  const boost::json::array* problems = nullptr;
  if (!ec && body.is_object()) {
    if (const auto* v = body.as_object().if_contains("Errors"); v && v->is_array()) {
      problems = &v->as_array();
    }
  }
  if (!problems) return S3Error::invalid_request(r.body);
  std::string message;
  for (const auto& p : *problems) {
    if (!p.is_array() || p.as_array().size() != 2 || !p.as_array()[1].is_string()) continue;
    std::string_view what = p.as_array()[1].as_string();
    if (what == too_small) return entity_too_small();
    if (what == "Etag Mismatch" || what == "404 Not Found" || what == "Checksum Mismatch") {
      return invalid_part(upload_id);
    }
    if (p.as_array()[0].is_string()) {
      if (!message.empty()) message += "\n";
      message += std::string(p.as_array()[0].as_string()) + ": " + std::string(what);
    }
  }
  return S3Error::invalid_request(message);
}

// CompleteMultipartUpload (POST ?uploadId): the parts named in the request, checked by SLO as it
// stores their manifest as the object (with the marker's metadata), then the marker deleted.
// How long a CompleteMultipartUpload may take before the client gets heartbeats, and how
// often then (Swift: a 10 s grace, then SLO's yield_frequency, 10 s).
constexpr std::chrono::seconds kCompleteHeartbeat{10};

// CompleteMultipartUpload: the answer to send, or nullopt when it went out with heartbeats.
net::awaitable<std::optional<Response>> complete_multipart_upload(Exchange& ex, S3Request& s3,
                                                                  const std::string& upload_id) {
  // Conditions would bleed into the marker's HEAD; only If-None-Match: * goes on (to the PUT).
  if (s3.client.headers.get_or("If-None-Match", "*") != "*" ||
      s3.client.headers.contains("If-Match") || s3.client.headers.contains("If-Modified-Since") ||
      s3.client.headers.contains("If-Unmodified-Since")) {
    co_return s3.error(errors::not_implemented("Conditional uploads are not supported."));
  }
  auto found = co_await upload_info(s3, upload_id);
  if (auto* e = std::get_if<S3Error>(&found)) co_return s3.error(*e);
  const UploadInfo& info = std::get<UploadInfo>(found);

  auto read = co_await read_xml_body(ex, kMaxCompleteBody);
  if (auto* e = std::get_if<S3Error>(&read)) co_return s3.error(*e);
  const auto& xml = std::get<std::optional<std::string>>(read);
  if (!xml || xml->empty()) {
    co_return s3.error(S3Error::invalid_request("You must specify at least one part"));
  }
  if (auto e = content_md5_mismatch(s3, *xml)) co_return s3.error(*e);
  // <CompleteMultipartUpload><Part><PartNumber/><ETag/><Checksum*/>?</Part>+ (Swift's schema,
  // with newer Swift's checksum elements). pugixml never loads external entities.
  pugi::xml_document doc;
  auto parsed = doc.load_buffer(xml->data(), xml->size());
  pugi::xml_node root = doc.document_element();
  if (!parsed || std::string_view(root.name()) != "CompleteMultipartUpload") {
    co_return s3.error(errors::malformed_xml());
  }
  const std::string segments = segments_container(s3);
  // The upload's checksum when it was created with one: a COMPOSITE one is the checksum of the
  // parts' checksums, a FULL_OBJECT one (CRCs only) the parts' CRCs combined by their lengths.
  std::optional<ChecksumAlgorithm> algorithm;
  const std::string checksum_type(info.is_marker ? info.head.headers.get_or(kChecksumTypeSysmeta, "")
                                                 : "");
  if (checksum_type == "COMPOSITE" || checksum_type == "FULL_OBJECT") {
    std::string name(info.head.headers.get_or(kChecksumAlgorithmSysmeta, ""));
    algorithm = checksum_algorithm_of("x-amz-checksum-" + common::http::to_lower(name));
  }
  const bool full_object = algorithm && checksum_type == "FULL_OBJECT" && is_crc(*algorithm);
  std::optional<Checksum> composite;
  if (algorithm && !full_object) composite.emplace(*algorithm);
  std::vector<std::pair<int64_t, std::string>> part_digests;  // (part number, raw digest)
  std::vector<std::string> part_checksums;  // as the client names them, in part order
  boost::json::array manifest;
  common::crypto::Md5 s3_etag_hash;
  int64_t previous = 0;
  size_t count = 0;
  for (pugi::xml_node part : root.children()) {
    if (part.type() != pugi::node_element) continue;
    if (std::string_view(part.name()) != "Part") co_return s3.error(errors::malformed_xml());
    std::optional<std::string> number_text, etag_text;
    std::map<std::string, std::string> checksums;  // "ChecksumCRC32" -> its text
    for (pugi::xml_node field : part.children()) {
      if (field.type() != pugi::node_element) continue;
      std::string_view name = field.name();
      std::optional<std::string>* slot = name == "PartNumber" ? &number_text
                                         : name == "ETag"     ? &etag_text
                                                              : nullptr;
      if (slot) {
        if (*slot) co_return s3.error(errors::malformed_xml());  // twice
        *slot = field.text().get();
      } else if (known_checksum_element(name)) {
        checksums[std::string(name)] = field.text().get();
      } else {
        co_return s3.error(errors::malformed_xml());
      }
    }
    if (!number_text || !etag_text) co_return s3.error(errors::malformed_xml());
    auto number = common::parse_python_int(*number_text);
    if (!number || *number < -kMax32BitInt - 1 || *number > kMax32BitInt) {
      co_return s3.error(errors::malformed_xml());  // not an xsd:int
    }
    if (*number <= previous) co_return s3.error(invalid_part_order(upload_id));
    previous = *number;
    const std::string etag(common::http::normalize_etag(*etag_text));
    if (etag.size() != 32 || !std::all_of(etag.begin(), etag.end(), [](char c) {
          return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
        })) {
      co_return s3.error(invalid_part(upload_id, *number));
    }
    manifest.push_back({{"path", "/" + segments + "/" + marker_name(s3, upload_id) + "/" +
                                     std::to_string(*number)},
                        {"etag", etag}});
    std::array<uint8_t, 16> raw;
    for (size_t i = 0; i < raw.size(); ++i) {
      auto nibble = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
      raw[i] = static_cast<uint8_t>(nibble(etag[2 * i]) * 16 + nibble(etag[2 * i + 1]));
    }
    s3_etag_hash.update(std::span<const uint8_t>(raw));
    ++count;
    if (algorithm) {
      // Each part's checksum, as it was uploaded.
      auto it = checksums.find("Checksum" + checksum_upper_name(*algorithm));
      std::optional<std::string> digest;
      if (it != checksums.end()) digest = decode_checksum(it->second, checksum_size(*algorithm));
      if (!digest) {
        co_return s3.error(S3Error::invalid_request(
            "The upload was created using a " + std::string(checksum_name(*algorithm)) +
            " checksum. The complete request must include the checksum for each part. It was "
            "missing for part " + std::to_string(*number) + " in the request."));
      }
      if (composite) composite->update(*digest);
      part_checksums.push_back(common::crypto::b64encode(*digest));
      part_digests.emplace_back(*number, std::move(*digest));
    }
  }
  if (count == 0) co_return s3.error(errors::malformed_xml());
  // The upload's checksum as S3 shows it ("<base64>-<parts>" when COMPOSITE); the client may
  // send the one it expects, as AWS checks it.
  std::optional<std::pair<ChecksumAlgorithm, std::string>> checksum;
  if (algorithm) {
    std::string value;
    if (full_object) {
      auto whole = co_await full_object_checksum(s3, upload_id, *algorithm, part_digests);
      if (auto* e = std::get_if<S3Error>(&whole)) co_return s3.error(*e);
      value = common::crypto::b64encode(std::get<std::string>(whole));
    } else {
      value = common::crypto::b64encode(composite->digest()) + "-" + std::to_string(count);
    }
    const std::string header = "x-amz-checksum-" + std::string(checksum_name(*algorithm));
    if (auto expected = s3.client.headers.get(header); expected && *expected != value) {
      co_return s3.error(checksum_mismatch(*algorithm));
    }
    checksum.emplace(*algorithm, std::move(value));
  }
  const std::string s3_etag = s3_etag_hash.hex_digest() + "-" + std::to_string(count);
  const std::string done_etag(info.head.headers.get_or(kEtagSysmeta, ""));
  if (done_etag == s3_etag) {
    // Completed already (the marker is gone): the same parts give the same answer.
    co_return xml_response(200, complete_result(s3, s3_etag), s3.env.trans_id);
  }
  if (!done_etag.empty()) co_return s3.error(no_such_upload(upload_id));

  // The manifest PUT: the marker's metadata and content headers, the S3 ETag in sysmeta and in
  // the container listing.
  HeaderMap h;
  auto client_headers = swift_headers(s3);
  if (auto* e = std::get_if<S3Error>(&client_headers)) co_return s3.error(*e);
  for (const auto& [name, value] : std::get<HeaderMap>(client_headers)) {
    if (common::http::istarts_with(name, "X-Auth-") || common::http::iequals(name, "Host") ||
        common::http::iequals(name, "If-None-Match") || common::http::iequals(name, "User-Agent")) {
      h.set(name, value);
    }
  }
  h.set("Accept", "application/json");
  h.set(kUploadIdSysmeta, upload_id);
  for (const auto& [name, value] : info.head.headers) {
    if (common::http::istarts_with(name, "X-Object-Meta-") ||
        common::http::iequals(name, kObjectTaggingSysmeta) ||
        common::http::iequals(name, kLockModeSysmeta) ||
        common::http::iequals(name, kLockUntilSysmeta) ||
        common::http::iequals(name, kLegalHoldSysmeta)) {
      h.set(name, value);
    } else if (common::http::iequals(name, kUploadAclSysmeta)) {
      h.set(kObjectAclSysmeta, value);  // the ACL CreateMultipartUpload was asked for
    } else {
      for (const char* keep : {"Content-Encoding", "Content-Language", "Content-Disposition",
                               "Expires", "Cache-Control"}) {
        if (common::http::iequals(name, keep)) h.set(name, value);
      }
    }
  }
  const std::string has_type(info.head.headers.get_or(kHasContentTypeSysmeta, ""));
  if (has_type == "yes") {
    std::string type(info.head.headers.get_or(kContentTypeSysmeta, ""));
    if (!type.empty()) h.set("Content-Type", type);
  } else if (has_type.empty()) {
    std::string type(info.head.headers.get_or("Content-Type", ""));
    if (!type.empty()) h.set("Content-Type", type);
  }
  h.set(kEtagSysmeta, s3_etag);
  if (checksum) {
    h.set(checksum_sysmeta(checksum->first), checksum->second);
    h.set(kChecksumTypeSysmeta, full_object ? "FULL_OBJECT" : "COMPOSITE");
  }
  h.set(kOverrideEtag, "; s3_etag=" + s3_etag);  // slo puts the manifest's etag in front
  // The object is encrypted as its upload: its parts are; the manifest is with the KMS key,
  // or (SSE-C, whose key the manifest's later readers may not send) with the root secrets.
  // SLO's checks of the parts need an SSE-C key, which the request must bring again.
  auto sse = part_encryption(s3, info.head.headers);
  if (auto* e = std::get_if<S3Error>(&sse)) co_return s3.error(*e);
  const Sse& upload_sse = std::get<Sse>(sse);
  Sse manifest_sse = upload_sse;
  manifest_sse.customer_key.clear();
  ProxyEnv env = swift_env(s3);
  apply_write_sse(manifest_sse, h, env);
  env.sse_customer_key = upload_sse.customer_key;
  const std::string body = boost::json::serialize(manifest);
  h.set("Content-Length", std::to_string(body.size()));
  auto put = swift_request(s3, "PUT", s3.bucket, s3.key, "multipart-manifest=put",
                           std::move(h));
  put.content_length = body.size();
  const std::string too_small = "s3api requires that each segment be at least " +
                                std::to_string(s3.config.min_segment_size) + " bytes";
  const int64_t min_size = s3.config.min_segment_size;
  const std::string sysmeta =
      checksum ? checksum_sysmeta(checksum->first) : std::string();
  env.slo_manifest_hook = [too_small, min_size, sysmeta, &part_checksums](
                              const std::vector<ProxyEnv::SloSegment>& segments) {
    std::vector<std::pair<std::string, std::string>> problems;
    for (size_t i = 0; i + 1 < segments.size(); ++i) {
      if (segments[i].bytes < min_size) problems.emplace_back(segments[i].name, too_small);
    }
    // A part's checksum, kept when it was uploaded with it in a header, is the one named.
    for (size_t i = 0; !sysmeta.empty() && i < segments.size() && i < part_checksums.size(); ++i) {
      std::string_view kept = segments[i].headers ? segments[i].headers->get_or(sysmeta, "") : "";
      if (!kept.empty() && kept != part_checksums[i]) {
        problems.emplace_back(segments[i].name, "Checksum Mismatch");
      }
    }
    return problems;
  };
  // SLO checks every part (a HEAD each): with many parts that takes a while, which the client
  // sees as heartbeats.
  auto store = [&]() -> net::awaitable<Response> {
    StringBody source(body);
    auto answer = co_await run_subrequest_with_body(s3.next, std::move(put), std::move(env),
                                                    source, 1 << 20);
    if (!answer.ok()) co_return s3.error(errors::internal_error());
    if (answer->status != 201) {
      co_return s3.error(manifest_put_error(s3, *answer, upload_id, too_small));
    }
    // The marker goes; one gone already (a concurrent or retried Complete) is as good.
    auto gone = co_await call_swift(s3, "DELETE", segments, marker_name(s3, upload_id));
    if (auto* e = std::get_if<S3Error>(&gone)) co_return s3.error(*e);
    Response out = xml_response(
        200, complete_result(s3, s3_etag, checksum, full_object ? "FULL_OBJECT" : "COMPOSITE"),
        s3.env.trans_id);
    // The version the object became, in a versioned bucket (S3 names it; Swift's s3api does
    // not). An answer already under way (heartbeats) has sent its headers without it.
    if (auto v = answer->headers.get("X-Object-Version-Id"); v && !v->empty()) {
      out.headers.set("x-amz-version-id", *v);
    }
    add_sse_headers(upload_sse, out.headers);
    co_return out;
  };
  co_return co_await with_heartbeat(ex, s3.env.trans_id, store, kCompleteHeartbeat,
                                    kCompleteHeartbeat);
}

}  // namespace

net::awaitable<void> uploads_request(Exchange& ex, S3Request& s3) {
  const std::string& method = s3.client.method;
  if (method == "GET") co_return co_await ex.reply(co_await list_multipart_uploads(s3));
  if (method == "POST") co_return co_await ex.reply(co_await create_multipart_upload(s3));
  co_return co_await ex.reply(s3.error(errors::method_not_allowed(method, "UPLOADS")));
}

net::awaitable<void> part_request(Exchange& ex, S3Request& s3) {
  if (s3.client.method != "PUT") {
    co_return co_await ex.reply(s3.error(errors::method_not_allowed(s3.client.method, "PART")));
  }
  if (auto e = co_await object_and_bucket(s3)) co_return co_await ex.reply(s3.error(*e));
  auto upload_id = param(s3, "uploadId");
  if (!upload_id) {
    co_return co_await ex.reply(s3.error(S3Error::invalid_argument(
        "ResourceType", "partNumber", "Unexpected query string parameter")));
  }
  const std::string number_text = param(s3, "partNumber").value_or("");
  auto number = common::parse_python_int(number_text);
  if (!number || *number < 1 || *number > s3.config.max_upload_part_num) {
    co_return co_await ex.reply(s3.error(S3Error::invalid_argument(
        "partNumber", number_text,
        "Part number must be an integer between 1 and " +
            std::to_string(s3.config.max_upload_part_num) + ", inclusive")));
  }
  auto info = co_await upload_info(s3, *upload_id);
  if (auto* e = std::get_if<S3Error>(&info)) co_return co_await ex.reply(s3.error(*e));
  auto sse = part_encryption(s3, std::get<UploadInfo>(info).head.headers);
  if (auto* e = std::get_if<S3Error>(&sse)) co_return co_await ex.reply(s3.error(*e));
  co_await put_object(ex, s3,
                      PutTarget{segments_container(s3),
                                marker_name(s3, *upload_id) + "/" + std::to_string(*number), true,
                                std::move(std::get<Sse>(sse))});
}

net::awaitable<void> upload_request(Exchange& ex, S3Request& s3) {
  const std::string& method = s3.client.method;
  if (method != "GET" && method != "DELETE" && method != "POST") {
    co_return co_await ex.reply(s3.error(errors::method_not_allowed(method, "UPLOAD")));
  }
  if (auto e = co_await object_and_bucket(s3)) co_return co_await ex.reply(s3.error(*e));
  const std::string upload_id = param(s3, "uploadId").value_or("");
  if (method == "GET") co_return co_await ex.reply(co_await list_parts(s3, upload_id));
  if (method == "DELETE") {
    co_return co_await ex.reply(co_await abort_multipart_upload(s3, upload_id));
  }
  auto answer = co_await complete_multipart_upload(ex, s3, upload_id);
  if (answer) co_await ex.reply(std::move(*answer));
}

net::awaitable<std::optional<S3Error>> delete_segments_container(S3Request& s3) {
  auto head = co_await call_swift(s3, "HEAD", s3.bucket, std::nullopt);
  if (auto* e = std::get_if<S3Error>(&head)) co_return std::move(*e);
  const Response& h = std::get<Response>(head);
  if (h.status == 404) co_return std::nullopt;  // the bucket's own DELETE says NoSuchBucket
  if (h.status < 200 || h.status >= 300) co_return unexpected(s3, h);
  if (common::parse_python_int(h.headers.get_or("X-Container-Object-Count", "0")).value_or(0) > 0) {
    S3Error e = errors::bucket_not_empty();
    if (!h.headers.get_or("X-Container-Sysmeta-Versions-Enabled", "").empty()) {
      e.message = "The bucket you tried to delete is not empty. You must delete all versions in "
                  "the bucket.";
    }
    co_return e;
  }
  auto e = co_await delete_listed_segments(s3, "");
  if (e) {
    if (e->code == "NoSuchBucket") co_return std::nullopt;  // no segments container
    co_return errors::service_unavailable();
  }
  auto gone = co_await call_swift(s3, "DELETE", segments_container(s3), std::nullopt);
  if (auto* err = std::get_if<S3Error>(&gone)) co_return std::move(*err);
  const Response& r = std::get<Response>(gone);
  if (r.status == 204 || r.status == 404) co_return std::nullopt;
  co_return errors::service_unavailable();  // a part arrived meanwhile (409), or trouble
}

}  // namespace apus::proxy::s3api
