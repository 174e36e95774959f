// s3api's service and bucket operations (s3_request.h): ListBuckets, bucket HEAD, PUT and
// DELETE, ListObjects v1 and v2.
#include <boost/json.hpp>

#include <array>
#include <cstdio>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <variant>

#include "common/config/config.h"
#include "common/crypto/base64.h"
#include "common/http/date.h"
#include "common/http/url.h"
#include "common/timestamp.h"
#include "common/utf8.h"
#include "proxy/acl.h"
#include "proxy/s3api/s3_response.h"
#include "proxy/s3api/s3_request.h"
#include "proxy/s3api/s3api.h"

namespace apus::proxy::s3api {

namespace net = boost::asio;
using common::http::Exchange;
using common::http::HeaderMap;
using common::http::Request;
using common::http::Response;

namespace {

// The largest CreateBucketConfiguration body read (Swift's MAX_PUT_BUCKET_BODY_SIZE).
constexpr size_t kMaxPutBucketBody = 10240;
// The largest account listing read for ListBuckets.
constexpr size_t kMaxAccountListing = 64u << 20;

}  // namespace

// ---- the service: ListBuckets ------------------------------------------------------------------

// ListBuckets: the account's containers that are S3 bucket names, in pages (max-buckets, at
// most and by default 10000, and an opaque continuation-token: the last name answered, in
// base64), with a prefix; the account is listed a page of 10000 at a time until the page is
// full, and at most 100 such listings for one answer (a truncated answer then, which a client
// continues).
net::awaitable<Response> list_buckets(S3Request& s3) {
  constexpr int64_t kMaxBuckets = 10000;
  constexpr int kMaxListings = 100;
  const S3ApiConfig& config = s3.config;
  int64_t max_buckets = kMaxBuckets;
  if (auto it = s3.params.find("max-buckets"); it != s3.params.end()) {
    auto n = common::parse_python_int(it->second);
    if (!n || *n < 1 || *n > kMaxBuckets) {
      co_return s3.error(S3Error::invalid_argument("max-buckets", it->second,
                                                   "Argument max-buckets must be an integer "
                                                   "between 1 and 10000."));
    }
    max_buckets = *n;
  }
  std::string marker;
  if (auto it = s3.params.find("continuation-token"); it != s3.params.end()) {
    auto name = common::crypto::strict_b64decode(it->second);
    if (!name || name->empty()) {
      co_return s3.error(S3Error::invalid_argument("continuation-token", it->second,
                                                   "The continuation token provided is "
                                                   "incorrect"));
    }
    marker = *name;
  }
  const auto prefix = s3.params.find("prefix");
  std::vector<std::string> names;
  bool truncated = false;
  for (int listing = 0; !truncated; ++listing) {
    if (listing == kMaxListings) {
      truncated = true;  // the answer goes on after `marker`
      break;
    }
    std::string query = "format=json&limit=10000";
    if (!marker.empty()) query += "&marker=" + common::http::quote(marker, "");
    if (prefix != s3.params.end()) query += "&prefix=" + common::http::quote(prefix->second, "");
    auto answer = co_await call_swift(s3, "GET", "", std::nullopt, query, kMaxAccountListing);
    if (auto* e = std::get_if<S3Error>(&answer)) co_return s3.error(*e);
    const Response& r = std::get<Response>(answer);
    if (r.status != 200 && r.status != 204) co_return s3.error(unexpected(s3, r));
    boost::system::error_code ec;
    auto page = r.status == 204 ? boost::json::value(boost::json::array())
                                : boost::json::parse(r.body, ec);
    if (ec || !page.is_array()) co_return s3.error(errors::internal_error());
    for (const auto& item : page.as_array()) {
      const auto* o = item.if_object();
      const auto* name = o ? o->if_contains("name") : nullptr;
      if (!name || !name->is_string()) continue;
      std::string n(name->as_string());
      if (!valid_bucket_name(n, config.dns_compliant_bucket_names)) {
        marker = std::move(n);
        continue;
      }
      // check_bucket_owner: only the buckets the user may read (Swift's HEAD of each).
      if (config.s3_acl && config.check_bucket_owner && !co_await may_list_bucket(s3, n)) {
        marker = std::move(n);
        continue;
      }
      if (static_cast<int64_t>(names.size()) == max_buckets) {
        truncated = true;
        marker = names.back();
        break;
      }
      marker = n;
      names.push_back(std::move(n));
    }
    if (page.as_array().size() < 10000) break;
  }
  pugi::xml_node root;
  auto doc = result_document("ListAllMyBucketsResult", &root);
  pugi::xml_node owner = root.append_child("Owner");
  add_text(owner, "ID", s3.user_id());
  add_text(owner, "DisplayName", s3.user_id());
  pugi::xml_node buckets = root.append_child("Buckets");
  for (const auto& n : names) {
    pugi::xml_node b = buckets.append_child("Bucket");
    add_text(b, "Name", n);
    // Swift keeps no creation time a client could use; s3api answers this fixed one.
    add_text(b, "CreationDate", "2009-02-03T16:45:09.000Z");
  }
  if (truncated) add_text(root, "ContinuationToken", common::crypto::b64encode(marker));
  if (prefix != s3.params.end()) add_text(root, "Prefix", prefix->second);
  co_return xml_response(200, to_xml(doc), s3.env.trans_id);
}

// ---- buckets ---------------------------------------------------------------------------------

net::awaitable<Response> head_bucket(S3Request& s3) {
  auto answer = co_await call_swift(s3, "HEAD", s3.bucket, std::nullopt);
  if (auto* e = std::get_if<S3Error>(&answer)) co_return s3.error(*e);
  Response& r = std::get<Response>(answer);
  if (r.status == 404) co_return s3.error(errors::no_such_bucket(s3.bucket));
  if (r.status != 204) co_return s3.error(unexpected(s3, r));
  co_return header_response(200, r.headers, s3.env.trans_id);
}

// The body of a bucket PUT: nothing, or a CreateBucketConfiguration naming this location.
static net::awaitable<std::optional<S3Error>> check_location(Exchange& ex, const S3ApiConfig& config) {
  auto read = co_await read_xml_body(ex, kMaxPutBucketBody);
  if (auto* e = std::get_if<S3Error>(&read)) co_return *e;
  const auto& body = std::get<std::optional<std::string>>(read);
  if (!body || body->empty()) co_return std::nullopt;
  pugi::xml_document doc;
  // pugixml neither fetches nor expands external entities (no XXE).
  auto parsed = doc.load_buffer(body->data(), body->size());
  pugi::xml_node root = doc.document_element();
  if (!parsed || std::string_view(root.name()) != "CreateBucketConfiguration") {
    co_return errors::malformed_xml();
  }
  std::string location = root.child("LocationConstraint").text().get();
  std::string lower = common::http::to_lower(config.auth.location);
  if (location != config.auth.location && location != lower) {
    co_return errors::invalid_location_constraint();
  }
  co_return std::nullopt;
}

net::awaitable<Response> put_bucket(Exchange& ex, S3Request& s3) {
  if (auto e = co_await check_location(ex, s3.config)) co_return s3.error(*e);
  // The name is taken in the global namespace first (a no-op without it).
  auto claim = co_await claim_bucket(s3);
  if (auto* e = std::get_if<S3Error>(&claim)) co_return s3.error(*e);
  const bool claimed = std::get<bool>(claim);
  auto answer = co_await call_swift(s3, "PUT", s3.bucket, std::nullopt);
  if (auto* e = std::get_if<S3Error>(&answer)) {
    if (claimed) co_await release_bucket(s3);
    co_return s3.error(*e);
  }
  Response& r = std::get<Response>(answer);
  if (r.status == 202) {
    // The container was there already (with s3_acl, check_access() answered for one it saw).
    // Without S3 ACLs no other owner is recorded, so it is the user's own (Swift's
    // _bucket_put_accepted_error).
    co_return s3.error(errors::bucket_already_owned_by_you(s3.bucket));
  }
  if (r.status != 201) {
    if (claimed) co_await release_bucket(s3);
    co_return s3.error(unexpected(s3, r));
  }
  if (s3.config.s3_acl) {
    // The ACL goes on once the container is new (as Swift's s3api does): a PUT of one that
    // was made meanwhile must not replace another owner's ACL. Until then the bucket is its
    // account's users' alone.
    auto acl = co_await call_swift(s3, "POST", s3.bucket, std::nullopt, "", 1 << 16,
                                   [&](HeaderMap& h) {
      h = own_headers(s3.client.headers);
      add_new_acl(s3, kBucketAclSysmeta, h);
      // x-amz-object-ownership, checked by check_access().
      if (auto o = s3.client.headers.get("x-amz-object-ownership")) h.set(kOwnershipSysmeta, *o);
    });
    if (auto* e = std::get_if<S3Error>(&acl)) co_return s3.error(*e);
    if (std::get<Response>(acl).status != 204) {
      co_return s3.error(unexpected(s3, std::get<Response>(acl)));
    }
  }
  if (common::http::iequals(s3.client.headers.get_or("x-amz-bucket-object-lock-enabled", ""),
                            "true")) {
    // Object Lock: versioning on for good, and the lock enabled without a default rule.
    auto lock = co_await call_swift(s3, "POST", s3.bucket, std::nullopt, "", 1 << 16,
                                    [&](HeaderMap& h) {
      h = own_headers(s3.client.headers);
      h.set("X-Versions-Enabled", "true");
      h.set(kObjectLockSysmeta, encode_lock_configuration(LockConfiguration{}));
    });
    if (auto* e = std::get_if<S3Error>(&lock)) co_return s3.error(*e);
    if (std::get<Response>(lock).status != 204) {
      co_return s3.error(unexpected(s3, std::get<Response>(lock)));
    }
  }
  Response out = header_response(200, r.headers, s3.env.trans_id);
  out.headers.set("Location", "/" + s3.bucket);
  out.headers.set("Content-Length", "0");
  co_return out;
}


// ---- ListObjects (v1 and v2) ------------------------------------------------------------------

// Swift's get_validated_param(): an integer query parameter in [0, 2^31-1], capped at `limit`.
std::variant<int64_t, S3Error> validated_param(const S3Request& s3, const std::string& name,
                                               int64_t def, int64_t limit) {
  auto it = s3.params.find(name);
  if (it == s3.params.end()) return def;
  auto v = common::parse_python_int(it->second);
  if (v && *v < 0) {
    return S3Error::invalid_argument(name, it->second,
                                     "Argument " + name + " must be an integer between 0 and " +
                                         std::to_string(kMax32BitInt));
  }
  if (!v || *v > kMax32BitInt) {
    return S3Error::invalid_argument(name, it->second,
                                     "Provided " + name + " not an integer or within integer range");
  }
  return std::min(*v, limit);
}

// A query parameter that must be UTF-8 (Swift's _validated_utf8_param).
static std::variant<std::optional<std::string>, S3Error> utf8_param(const S3Request& s3,
                                                             const std::string& name) {
  auto it = s3.params.find(name);
  if (it == s3.params.end()) return std::optional<std::string>();
  if (!it->second.empty() && !common::valid_utf8(it->second)) {
    return S3Error::invalid_argument(name, common::http::quote(it->second));
  }
  return std::optional<std::string>(it->second);
}

// A listing's last_modified ("2026-12-02T01:30:15.123450") as S3 writes times: rounded up to
// the second, "2026-12-02T01:30:16.000Z".
std::string s3_listing_time(std::string_view iso) {
  if (iso.size() < 19) return std::string(iso);
  auto num = [&](size_t pos, size_t len) {
    int v = 0;
    for (size_t i = pos; i < pos + len; ++i) v = v * 10 + (iso[i] - '0');
    return v;
  };
  int64_t t = common::http::epoch_from_civil(num(0, 4), num(5, 2), num(8, 2), num(11, 2),
                                             num(14, 2), num(17, 2));
  bool fraction = false;
  for (size_t i = 20; i < iso.size(); ++i) fraction = fraction || iso[i] != '0';
  return s3_xml_time(fraction ? t + 1 : t);
}


// Python's b64decode(token, validate=True) then UTF-8: nullopt for anything else.
static std::optional<std::string> base64_decode_strict(std::string_view s) {
  if (s.size() % 4 != 0 || s.starts_with('=')) return std::nullopt;
  auto out = common::crypto::strict_b64decode(s);
  if (!out || !common::valid_utf8(*out)) return std::nullopt;
  return out;
}

static std::string json_text(const boost::json::object& o, const char* key) {
  const auto* v = o.if_contains(key);
  if (!v) return {};
  if (v->is_string()) return std::string(v->as_string());
  if (v->is_int64()) return std::to_string(v->as_int64());
  if (v->is_uint64()) return std::to_string(v->as_uint64());
  return {};
}

// The ETag a listing entry shows S3 clients (Swift's _add_object): a multipart upload's own,
// an SLO's "<etag>-N", else the quoted MD5.
static std::string listing_etag(const boost::json::object& o) {
  std::string hash = json_text(o, "hash");
  // "<md5>; s3_etag=<etag>" (s3api's listing filter splits it off, as here).
  if (size_t semi = hash.find(';'); semi != std::string::npos) {
    std::string params = hash.substr(semi);
    if (size_t at = params.find("s3_etag="); at != std::string::npos) {
      std::string v = params.substr(at + 8);
      v = v.substr(0, v.find(';'));
      while (!v.empty() && v.back() == ' ') v.pop_back();
      return "\"" + v + "\"";
    }
    hash = hash.substr(0, semi);
  }
  if (o.contains("slo_etag")) {
    std::string slo = json_text(o, "slo_etag");
    std::erase(slo, '"');
    return "\"" + slo + "-N\"";
  }
  if (hash.size() >= 2 && hash.front() == '"' && hash.back() == '"') return hash;
  return "\"" + hash + "\"";
}

net::awaitable<Response> list_objects(S3Request& s3, bool object_versioning) {
  const S3ApiConfig& config = s3.config;
  auto tag = validated_param(s3, "max-keys", config.max_bucket_listing);
  if (auto* e = std::get_if<S3Error>(&tag)) co_return s3.error(*e);
  const int64_t tag_max_keys = std::get<int64_t>(tag);
  const int64_t max_keys = std::min(tag_max_keys, config.max_bucket_listing);
  std::optional<std::string> encoding;
  if (auto it = s3.params.find("encoding-type"); it != s3.params.end()) {
    if (it->second != "url") {
      co_return s3.error(S3Error::invalid_argument("encoding-type", it->second,
                                                   "Invalid Encoding Method specified in Request"));
    }
    encoding = it->second;
  }
  const bool url = encoding.has_value();
  auto enc = [&](const std::string& v) { return url ? common::http::quote(v, "/") : v; };
  // Swift's query: one more than asked, to tell whether the listing is truncated.
  std::map<std::string, std::string> query = {{"limit", std::to_string(max_keys + 1)}};
  for (const char* name : {"prefix", "delimiter"}) {
    auto v = utf8_param(s3, name);
    if (auto* e = std::get_if<S3Error>(&v)) co_return s3.error(*e);
    if (auto& got = std::get<std::optional<std::string>>(v)) query[name] = *got;
  }
  // ListObjectVersions (?versions): object versioning's listing of every version.
  const bool versions = s3.has("versions");
  int list_type = 1;
  if (versions) {
    auto v = utf8_param(s3, "versions");
    if (auto* e = std::get_if<S3Error>(&v)) co_return s3.error(*e);
    query["versions"] = std::get<std::optional<std::string>>(v).value_or("");
    auto version_marker = utf8_param(s3, "version-id-marker");
    if (auto* e = std::get_if<S3Error>(&version_marker)) co_return s3.error(*e);
    auto& vm = std::get<std::optional<std::string>>(version_marker);
    if (s3.has("key-marker")) {
      auto key_marker = utf8_param(s3, "key-marker");
      if (auto* e = std::get_if<S3Error>(&key_marker)) co_return s3.error(*e);
      query["marker"] = std::get<std::optional<std::string>>(key_marker).value_or("");
      if (vm) {
        if (*vm != "null" && !common::Timestamp::parse(*vm).ok()) {
          co_return s3.error(S3Error::invalid_argument("version-id-marker", *vm,
                                                       "Invalid version id specified"));
        }
        query["version_marker"] = *vm;
      }
    } else if (vm) {
      co_return s3.error(S3Error::invalid_argument(
          "version-id-marker", *vm, "A version-id marker cannot be specified without a key marker."));
    }
  } else if (auto it = s3.params.find("list-type"); it != s3.params.end()) {
    auto v = common::parse_python_int(it->second);
    if (!v) {
      co_return s3.error(S3Error::invalid_argument("list-type", it->second,
                                                   "Argument list-type must be an integer"));
    }
    list_type = *v == 2 ? 2 : 1;
  }
  bool fetch_owner = false;
  if (versions) {
    // the markers are read above
  } else if (list_type == 2) {
    auto start_after = utf8_param(s3, "start-after");
    if (auto* e = std::get_if<S3Error>(&start_after)) co_return s3.error(*e);
    if (auto& got = std::get<std::optional<std::string>>(start_after)) query["marker"] = *got;
    if (auto it = s3.params.find("continuation-token"); it != s3.params.end()) {
      auto decoded = base64_decode_strict(it->second);
      if (!decoded) {
        co_return s3.error(S3Error::invalid_argument("continuation-token",
                                                     common::http::quote(it->second),
                                                     "The continuation token provided is incorrect"));
      }
      query["marker"] = *decoded;
    }
    if (auto it = s3.params.find("fetch-owner"); it != s3.params.end()) {
      fetch_owner = common::config_true_value(it->second);
    }
  } else {
    auto marker = utf8_param(s3, "marker");
    if (auto* e = std::get_if<S3Error>(&marker)) co_return s3.error(*e);
    if (auto& got = std::get<std::optional<std::string>>(marker)) query["marker"] = *got;
  }
  std::string qs = "format=json";
  for (const auto& [k, v] : query) qs += "&" + k + "=" + common::http::quote(v, "");
  auto answer = co_await call_swift(s3, "GET", s3.bucket, std::nullopt, qs, 64u << 20);
  if (auto* e = std::get_if<S3Error>(&answer)) co_return s3.error(*e);
  const Response& r = std::get<Response>(answer);
  if (r.status == 404) co_return s3.error(errors::no_such_bucket(s3.bucket));
  if (r.status != 200 && r.status != 204) co_return s3.error(unexpected(s3, r));
  boost::system::error_code ec;
  auto listing = boost::json::parse(r.body.empty() ? "[]" : r.body, ec);
  if (ec || !listing.is_array()) co_return s3.error(errors::internal_error());
  auto& items = listing.as_array();
  const bool truncated = max_keys > 0 && static_cast<int64_t>(items.size()) > max_keys;
  if (static_cast<int64_t>(items.size()) > max_keys) items.resize(static_cast<size_t>(max_keys));
  auto last_name = [&]() -> std::string {
    const auto& o = items.back().as_object();
    return o.contains("name") ? json_text(o, "name") : json_text(o, "subdir");
  };
  auto param = [&](const char* name) -> std::optional<std::string> {
    auto it = s3.params.find(name);
    if (it == s3.params.end()) return std::nullopt;
    return it->second;
  };

  pugi::xml_node root;
  auto doc = result_document(versions ? "ListVersionsResult" : "ListBucketResult", &root);
  add_text(root, "Name", s3.bucket);
  std::optional<std::string> prefix = param("prefix");
  add_optional(root, "Prefix", prefix && !prefix->empty() ? std::optional(enc(*prefix)) : prefix);
  if (versions) {
    std::optional<std::string> key_marker = param("key-marker");
    add_optional(root, "KeyMarker",
                 key_marker && !key_marker->empty() ? std::optional(enc(*key_marker)) : key_marker);
    add_optional(root, "VersionIdMarker", param("version-id-marker"));
    if (truncated && !items.empty()) {
      const auto& last = items.back().as_object();
      if (last.contains("name")) {
        add_text(root, "NextKeyMarker", json_text(last, "name"));
        std::string v = json_text(last, "version_id");
        add_text(root, "NextVersionIdMarker", v.empty() ? "null" : v);
      }
      if (last.contains("subdir")) {
        add_text(root, "NextKeyMarker", json_text(last, "subdir"));
        add_text(root, "NextVersionIdMarker", "null");
      }
    }
  } else if (list_type == 2) {
    if (truncated && !items.empty()) add_text(root, "NextContinuationToken", common::crypto::b64encode(last_name()));
    if (auto token = param("continuation-token")) add_text(root, "ContinuationToken", *token);
    if (auto start_after = param("start-after")) add_text(root, "StartAfter", enc(*start_after));
    add_text(root, "KeyCount", std::to_string(items.size()));
  } else {
    std::optional<std::string> marker = param("marker");
    add_optional(root, "Marker", marker ? std::optional(enc(*marker)) : std::nullopt);
    if (truncated && s3.has("delimiter") && !items.empty()) {
      add_text(root, "NextMarker", enc(last_name()));
    }
  }
  add_text(root, "MaxKeys", std::to_string(tag_max_keys));
  // (ListObjectVersions names an empty delimiter too; the others only a non-empty one.)
  if (auto delimiter = param("delimiter"); delimiter && (versions || !delimiter->empty())) {
    add_text(root, "Delimiter", enc(*delimiter));
  }
  if (url) add_text(root, "EncodingType", "url");
  add_text(root, "IsTruncated", truncated ? "true" : "false");
  for (const auto& item : items) {
    if (!item.is_object()) continue;
    const auto& o = item.as_object();
    if (o.contains("subdir")) {
      pugi::xml_node p = root.append_child("CommonPrefixes");
      add_text(p, "Prefix", enc(json_text(o, "subdir")));
      continue;
    }
    const bool marker =
        versions && json_text(o, "content_type") == "application/x-deleted;swift_versions_deleted=1";
    pugi::xml_node c = root.append_child(!versions ? "Contents" : marker ? "DeleteMarker" : "Version");
    add_text(c, "Key", enc(json_text(o, "name")));
    if (versions) {
      std::string v = json_text(o, "version_id");
      add_text(c, "VersionId", v.empty() ? "null" : v);
      // Without object versioning every listed object is the latest (Swift says so too).
      const auto* latest = o.if_contains("is_latest");
      add_text(c, "IsLatest",
               !object_versioning || (latest && latest->is_bool() && latest->as_bool()) ? "true"
                                                                                        : "false");
    }
    add_text(c, "LastModified", s3_listing_time(json_text(o, "last_modified")));
    if (!marker) {
      add_text(c, "ETag", listing_etag(o));
      add_text(c, "Size", json_text(o, "bytes"));
    }
    if (fetch_owner || list_type != 2) {
      pugi::xml_node owner = c.append_child("Owner");
      add_text(owner, "ID", s3.user_id());
      add_text(owner, "DisplayName", s3.user_id());
    }
    if (!marker) add_text(c, "StorageClass", "STANDARD");
  }
  co_return xml_response(200, to_xml(doc), s3.env.trans_id);
}

net::awaitable<Response> delete_bucket(S3Request& s3) {
  if (s3.config.allow_multipart_uploads) {
    if (auto e = co_await delete_segments_container(s3)) co_return s3.error(*e);
  }
  auto answer = co_await call_swift(s3, "DELETE", s3.bucket, std::nullopt);
  if (auto* e = std::get_if<S3Error>(&answer)) co_return s3.error(*e);
  Response& r = std::get<Response>(answer);
  if (r.status == 404) co_return s3.error(errors::no_such_bucket(s3.bucket));
  if (r.status == 409) co_return s3.error(errors::bucket_not_empty());
  if (r.status != 204) co_return s3.error(unexpected(s3, r));
  co_await release_bucket(s3);
  co_return header_response(204, r.headers, s3.env.trans_id);
}


net::awaitable<std::optional<S3Error>> bucket_must_exist(S3Request& s3) {
  auto answer = co_await call_swift(s3, "HEAD", s3.bucket, std::nullopt);
  if (auto* e = std::get_if<S3Error>(&answer)) co_return *e;
  const Response& r = std::get<Response>(answer);
  if (r.status == 404) co_return errors::no_such_bucket(s3.bucket);
  if (r.status != 204) co_return unexpected(s3, r);
  co_return std::nullopt;
}

net::awaitable<Response> bucket_location(S3Request& s3) {
  if (s3.client.method != "GET") {
    co_return s3.error(errors::method_not_allowed(s3.client.method, "LOCATION"));
  }
  if (auto e = co_await bucket_must_exist(s3)) co_return s3.error(*e);
  pugi::xml_document doc;
  pugi::xml_node root = doc.append_child("LocationConstraint");
  root.append_attribute("xmlns") = "http://s3.amazonaws.com/doc/2006-03-01/";
  // us-east-1, S3's original region, is named by an empty constraint.
  if (s3.config.auth.location != "us-east-1") root.text().set(s3.config.auth.location.c_str());
  co_return xml_response(200, to_xml(doc), s3.env.trans_id);
}

net::awaitable<Response> bucket_logging(S3Request& s3) {
  if (s3.client.method != "GET" && s3.client.method != "PUT") {
    co_return s3.error(errors::method_not_allowed(s3.client.method, "LOGGING_STATUS"));
  }
  if (s3.key) {
    co_return s3.error({.status = 400,
                        .code = "NoLoggingStatusForKey",
                        .message = "There is no such thing as a logging status sub-resource for a "
                                   "key.",
                        .details = {}});
  }
  if (s3.client.method == "PUT") co_return s3.error(errors::not_implemented());
  if (auto e = co_await bucket_must_exist(s3)) co_return s3.error(*e);
  pugi::xml_node root;
  auto doc = result_document("BucketLoggingStatus", &root);
  co_return xml_response(200, to_xml(doc), s3.env.trans_id);  // logging is never on
}

// ---- versioning --------------------------------------------------------------------------------

net::awaitable<Response> bucket_versioning(Exchange& ex, S3Request& s3, bool object_versioning) {
  const std::string& method = s3.client.method;
  if (method != "GET" && method != "PUT") {
    co_return s3.error(errors::method_not_allowed(method, "VERSIONING"));
  }
  s3.key.reset();  // a bucket operation
  if (method == "GET") {
    auto head = co_await call_swift(s3, "HEAD", s3.bucket, std::nullopt);
    if (auto* e = std::get_if<S3Error>(&head)) co_return s3.error(*e);
    const Response& r = std::get<Response>(head);
    if (r.status == 404) co_return s3.error(errors::no_such_bucket(s3.bucket));
    if (r.status == 503) co_return s3.error(errors::service_unavailable());
    if (r.status < 200 || r.status >= 300) co_return s3.error(unexpected(s3, r));
    pugi::xml_node root;
    auto doc = result_document("VersioningConfiguration", &root);
    if (auto enabled = r.headers.get("X-Container-Sysmeta-Versions-Enabled");
        enabled && !enabled->empty()) {
      add_text(root, "Status", common::config_true_value(*enabled) ? "Enabled" : "Suspended");
    }
    Response out = xml_response(200, to_xml(doc), s3.env.trans_id);
    out.headers.erase("Content-Type");  // Swift's s3api sends this one without a type
    co_return out;
  }
  if (!object_versioning) co_return s3.error(errors::not_implemented());
  auto read = co_await read_xml_body(ex, 10240);
  if (auto* e = std::get_if<S3Error>(&read)) co_return s3.error(*e);
  const auto& body = std::get<std::optional<std::string>>(read);
  pugi::xml_document doc;
  if (!body || !doc.load_buffer(body->data(), body->size()) ||
      std::string_view(doc.document_element().name()) != "VersioningConfiguration") {
    co_return s3.error(errors::malformed_xml());
  }
  std::string status = doc.document_element().child("Status").text().get();
  if (status != "Enabled" && status != "Suspended") co_return s3.error(errors::malformed_xml());
  if (status == "Suspended" && co_await bucket_lock(s3)) {
    co_return s3.error({.status = 409, .code = "InvalidBucketState",
                        .message = "An Object Lock configuration is present on this bucket, so "
                                   "the versioning state cannot be changed."});
  }
  auto answer = co_await call_swift(s3, "POST", s3.bucket, std::nullopt, "", 1 << 16,
                                    [&](common::http::HeaderMap& h) {
    h.set("X-Versions-Enabled", status == "Enabled" ? "true" : "false");
  });
  if (auto* e = std::get_if<S3Error>(&answer)) co_return s3.error(*e);
  const Response& r = std::get<Response>(answer);
  if (r.status == 404) co_return s3.error(errors::no_such_bucket(s3.bucket));
  if (r.status != 204) co_return s3.error(unexpected(s3, r));
  Response out;
  out.status = 200;
  out.headers.set("Content-Type", "text/html; charset=UTF-8");
  set_request_ids(out.headers, s3.env.trans_id);
  co_return out;
}

// ---- ACLs (without s3_acl: Swift's container ACLs shown and set as S3 grants) ---------------

namespace {

constexpr const char* kXsi = "http://www.w3.org/2001/XMLSchema-instance";
constexpr const char* kAllUsers = "http://acs.amazonaws.com/groups/global/AllUsers";

void add_grant(pugi::xml_node list, const char* type, const std::string& who,
               const char* permission) {
  pugi::xml_node grant = list.append_child("Grant");
  pugi::xml_node grantee = grant.append_child("Grantee");
  grantee.append_attribute("xmlns:xsi") = kXsi;
  grantee.append_attribute("xsi:type") = type;
  if (std::string_view(type) == "CanonicalUser") {
    add_text(grantee, "ID", who);
    add_text(grantee, "DisplayName", who);
  } else {
    add_text(grantee, "URI", who);
  }
  add_text(grant, "Permission", permission);
}

// Swift's swift_acl_translate(xml=True): the canned ACL an AccessControlPolicy document
// stands for, or nullopt (MalformedACLError).
std::optional<std::string> canned_acl_of(const std::string& body) {
  pugi::xml_document doc;
  if (!doc.load_buffer(body.data(), body.size())) return std::nullopt;
  pugi::xml_node root = doc.document_element();
  if (std::string_view(root.name()) != "AccessControlPolicy") return std::nullopt;
  std::string acl = "unknown";
  for (pugi::xml_node grant : root.child("AccessControlList").children("Grant")) {
    std::string permission = grant.child("Permission").text().get();
    std::string type = grant.child("Grantee").attribute("xsi:type").value();
    if (permission == "FULL_CONTROL" && type == "CanonicalUser" && acl != "public-read" &&
        acl != "public-read-write") {
      acl = "private";
    } else if (permission == "READ" && type == "Group" && acl != "public-read-write") {
      acl = "public-read";
    } else if (permission == "WRITE" && type == "Group") {
      acl = "public-read-write";
    } else {
      acl = "unsupported";
    }
  }
  if (acl == "unknown" || acl == "unsupported") return std::nullopt;
  return acl;
}

}  // namespace

net::awaitable<Response> acl_request(Exchange& ex, S3Request& s3) {
  const std::string& method = s3.client.method;
  if (method == "GET") {
    auto head = co_await call_swift(s3, "HEAD", s3.bucket, s3.key);
    if (auto* e = std::get_if<S3Error>(&head)) co_return s3.error(*e);
    const Response& r = std::get<Response>(head);
    if (r.status == 404) {
      co_return s3.error(s3.key ? co_await object_not_found(s3) : errors::no_such_bucket(s3.bucket));
    }
    if (r.status < 200 || r.status >= 300) co_return s3.error(unexpected(s3, r));
    pugi::xml_node root;
    auto doc = result_document("AccessControlPolicy", &root);
    pugi::xml_node owner = root.append_child("Owner");
    add_text(owner, "ID", s3.user_id());
    add_text(owner, "DisplayName", s3.user_id());
    pugi::xml_node list = root.append_child("AccessControlList");
    add_grant(list, "CanonicalUser", s3.user_id(), "FULL_CONTROL");
    // The container's own ACLs as S3 grants (Swift 2.30.1 loses these headers on the way and
    // always answers the owner's grant alone).
    if (referrer_allowed("unknown", parse_acl(r.headers.get_or("X-Container-Read", "")).referrers)) {
      add_grant(list, "Group", kAllUsers, "READ");
    }
    if (referrer_allowed("unknown", parse_acl(r.headers.get_or("X-Container-Write", "")).referrers)) {
      add_grant(list, "Group", kAllUsers, "WRITE");
    }
    Response out = xml_response(200, to_xml(doc), s3.env.trans_id);
    out.headers.set("Content-Type", "text/plain");  // as Swift's s3api labels it
    co_return out;
  }
  if (method != "PUT") co_return s3.error(errors::method_not_allowed(method, "ACL"));
  if (s3.key) co_return s3.error(errors::not_implemented());  // object ACLs: Swift has none
  auto read = co_await read_xml_body(ex, 200 * 1024);
  if (auto* e = std::get_if<S3Error>(&read)) co_return s3.error(*e);
  const auto& body = std::get<std::optional<std::string>>(read);
  const bool has_body = body && !body->empty();
  const bool has_header = s3.client.headers.contains("x-amz-acl");
  if (has_body && has_header) {
    co_return s3.error({.status = 400, .code = "UnexpectedContent",
                        .message = "This request does not support content.", .details = {}});
  }
  if (!has_body && !has_header) {
    co_return s3.error({.status = 400, .code = "MissingSecurityHeader",
                        .message = "Your request was missing a required header.",
                        .details = {{"MissingHeaderName", "x-amz-acl"}}});
  }
  std::optional<std::string> canned;
  if (has_body) {
    canned = canned_acl_of(*body);
    if (!canned || *canned == "authenticated-read" || *canned == "log-delivery-write") {
      co_return s3.error({.status = 400, .code = "MalformedACLError",
                          .message = "The XML you provided was not well-formed or did not "
                                     "validate against our published schema.",
                          .details = {}});
    }
  }
  std::optional<S3Error> refused;
  auto answer = co_await call_swift(s3, "POST", s3.bucket, std::nullopt, "", 1 << 16,
                                    [&](common::http::HeaderMap& h) {
    if (!canned) return;
    if (auto e = add_acl_headers(*canned, h)) refused = std::move(e);
  });
  if (refused) co_return s3.error(*refused);
  if (auto* e = std::get_if<S3Error>(&answer)) co_return s3.error(*e);
  const Response& r = std::get<Response>(answer);
  if (r.status == 404) co_return s3.error(errors::no_such_bucket(s3.bucket));
  if (r.status != 204) co_return s3.error(unexpected(s3, r));
  Response out = header_response(200, r.headers, s3.env.trans_id);
  out.headers.set("Location", s3.bucket);
  co_return out;
}

}  // namespace apus::proxy::s3api
