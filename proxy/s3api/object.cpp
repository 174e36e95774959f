// s3api's object operations (s3_request.h): GET, HEAD, PUT and DELETE of an object, as Swift's
// s3api ObjectController serves them. GET and PUT stream: the client's exchange goes down the
// pipeline as the Swift request (an ObjectExchange), its body read through (and, for a signed
// payload, hashed on the way), and the answer comes back translated into S3's headers, or
// replaced by S3's XML error.
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>

#include <algorithm>
#include <cstdio>
#include <array>
#include <set>
#include <vector>
#include <cctype>
#include <optional>
#include <string>
#include <variant>

#include "common/async.h"
#include "common/config/config.h"
#include "common/crypto/base64.h"
#include "common/crypto/hmac.h"
#include "common/crypto/md5.h"
#include "common/http/range.h"
#include "common/http/url.h"
#include "common/http/date.h"
#include "common/timestamp.h"
#include "proxy/s3api/aws_chunked.h"
#include "proxy/s3api/checksum.h"
#include "proxy/s3api/s3_request.h"
#include "proxy/s3api/s3_response.h"
#include "proxy/s3api/tagging.h"
#include "proxy/subrequest.h"
#include "proxy/versioned_writes.h"

namespace apus::proxy::s3api {

namespace net = boost::asio;
using common::Status;
using common::http::Exchange;
using common::http::ExchangeWrapper;
using common::http::HeaderMap;
using common::http::Request;
using common::http::Response;

namespace {

constexpr std::string_view kEtagSysmeta = "X-Object-Sysmeta-S3api-Etag";

S3Error make(int status, std::string code, std::string message) {
  return {.status = status, .code = std::move(code), .message = std::move(message), .details = {}};
}
S3Error sha256_mismatch(const std::string& expected, const std::string& computed) {
  S3Error e = make(400, "XAmzContentSHA256Mismatch",
                   "The provided 'x-amz-content-sha256' header does not match what was computed.");
  e.details.emplace_back("ClientComputedContentSHA256", expected);
  e.details.emplace_back("S3ComputedContentSHA256", computed);
  return e;
}

// The S3 error of a failed aws-chunked body (Swift's translate_read_errors).
S3Error chunked_error(const AwsChunkedDecoder::Failure& f, const S3Signature& sig) {
  using E = AwsChunkedDecoder::Error;
  switch (f.error) {
    case E::kSignatureMismatch: {
      S3Error e = S3Error::signature_does_not_match();
      e.details = sig.mismatch_details();
      return e;
    }
    case E::kSize: {
      S3Error e = errors::incomplete_body();
      e.details.emplace_back("NumberBytesExpected", std::to_string(f.expected));
      e.details.emplace_back("NumberBytesProvided", std::to_string(f.provided));
      return e;
    }
    case E::kChunkTooSmall: {
      S3Error e = make(403, "InvalidChunkSizeError",
                       "Only the last chunk is allowed to have a size less than 8192 bytes");
      e.details.emplace_back("Chunk", std::to_string(f.chunk_number));
      e.details.emplace_back("BadChunkSize", std::to_string(f.bad_chunk_size));
      return e;
    }
    case E::kMalformedTrailer:
      return errors::malformed_trailer();
    case E::kIncomplete:
      break;
  }
  return errors::incomplete_body("The request body terminated unexpectedly");
}

// The checksum an upload carries (x-amz-checksum-<algorithm>, as a header or announced by
// x-amz-trailer), as Swift's _validate_checksum_headers reads it.
struct ChecksumPlan {
  ChecksumAlgorithm algorithm;
  std::string name;                  // the header or trailer, lower case
  std::optional<std::string> value;  // the header's digest (raw); nullopt: in the trailers
};

std::variant<std::optional<ChecksumPlan>, S3Error> checksum_plan(const S3Request& s3,
                                                                 bool streaming) {
  const auto& h = s3.client.headers;
  std::vector<std::pair<std::string, std::string>> in_headers;
  for (const auto& [name, value] : h) {
    std::string n = common::http::to_lower(name);
    if (!n.starts_with("x-amz-checksum-") || n == "x-amz-checksum-algorithm" ||
        n == "x-amz-checksum-type") {
      continue;
    }
    if (!checksum_algorithm_of(n)) {
      return S3Error::invalid_request(
          "The algorithm type you specified in x-amz-checksum- header is invalid.");
    }
    in_headers.emplace_back(n, value);
  }
  const std::string multiple =
      "Expecting a single x-amz-checksum- header. Multiple checksum Types are not allowed.";
  if (in_headers.size() > 1) return S3Error::invalid_request(multiple);
  std::vector<std::string> in_trailer;
  std::string trailer = std::string(h.get_or("x-amz-trailer", ""));
  while (!trailer.empty() && std::isspace(static_cast<unsigned char>(trailer.back()))) trailer.pop_back();
  while (!trailer.empty() && std::isspace(static_cast<unsigned char>(trailer.front()))) trailer.erase(0, 1);
  while (!trailer.empty() && trailer.back() == ',') trailer.pop_back();
  if (!trailer.empty()) {
    std::string_view rest = trailer;
    for (;;) {
      size_t comma = rest.find(',');
      std::string item = common::http::to_lower(rest.substr(0, comma));
      item.erase(0, item.find_first_not_of(" \t"));
      item.erase(item.find_last_not_of(" \t") + 1);
      if (!checksum_algorithm_of(item)) {
        return S3Error::invalid_request("The value specified in the x-amz-trailer header is not supported");
      }
      in_trailer.push_back(item);
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
  }
  if (in_trailer.size() > 1) return S3Error::invalid_request(multiple);
  if (in_headers.size() + in_trailer.size() > 1) {
    return S3Error::invalid_request("Expecting a single x-amz-checksum- header");
  }
  std::optional<ChecksumPlan> plan;
  if (!in_headers.empty()) {
    auto algorithm = *checksum_algorithm_of(in_headers[0].first);
    auto raw = decode_checksum(in_headers[0].second, checksum_size(algorithm));
    if (!raw) {
      return S3Error::invalid_request("Value for " + in_headers[0].first + " header is invalid.");
    }
    plan = ChecksumPlan{algorithm, in_headers[0].first, std::move(raw)};
  } else if (!in_trailer.empty()) {
    plan = ChecksumPlan{*checksum_algorithm_of(in_trailer[0]), in_trailer[0], std::nullopt};
  }
  if (auto algo = h.get("x-amz-sdk-checksum-algorithm")) {
    if (!plan) {
      return S3Error::invalid_request(
          "x-amz-sdk-checksum-algorithm specified, but no corresponding x-amz-checksum-* or "
          "x-amz-trailer headers were found.");
    }
    if (common::http::to_lower(*algo) != checksum_name(plan->algorithm)) {
      return S3Error::invalid_request("Value for x-amz-sdk-checksum-algorithm header is invalid.");
    }
  }
  if (plan && !plan->value && !streaming) {
    return errors::malformed_trailer();
  }
  return plan;
}

bool is_hex_sha256(std::string_view v) {
  return v.size() == 64 && std::all_of(v.begin(), v.end(), [](char c) {
           return std::isxdigit(static_cast<unsigned char>(c)) != 0;
         });
}

// 404 from an object request: NoSuchKey when the bucket is there, else NoSuchBucket (Swift's
// not_found_handler; segment buckets count as there).
}  // namespace

S3Error checksum_mismatch(ChecksumAlgorithm a) {
  return S3Error{.status = 400, .code = "BadDigest",
                 .message = "The " + checksum_upper_name(a) +
                            " you specified did not match the calculated checksum.",
                 .details = {}};
}

net::awaitable<S3Error> object_not_found(S3Request& s3) {
  if (s3.bucket.ends_with("+segments")) co_return errors::no_such_key(*s3.key);
  auto head = co_await call_swift(s3, "HEAD", s3.bucket, std::nullopt);
  if (auto* r = std::get_if<Response>(&head); r && r->status >= 200 && r->status < 300) {
    co_return errors::no_such_key(*s3.key);
  }
  co_return errors::no_such_bucket(s3.bucket);
}

namespace {

// A subrequest's header edit: the client's Range and conditions are about its own request, not
// this lookup's.
void drop_conditions(HeaderMap& h) {
  for (const char* name : {"Range", "If-Match", "If-None-Match", "If-Modified-Since",
                           "If-Unmodified-Since"}) {
    h.erase(name);
  }
}

// A GET or HEAD of a key without an object: object_not_found()'s error, saying as S3 does
// whether the key's newest version is a delete marker (x-amz-delete-marker true, with the
// marker's x-amz-version-id) or not (false). Only a bucket that had versioning enabled is
// listed for it: one more request, and only on a 404.
net::awaitable<S3Error> missing_object(S3Request& s3) {
  // object_not_found()'s answer, from the one bucket HEAD this needs anyway.
  if (s3.bucket.ends_with("+segments")) co_return errors::no_such_key(*s3.key);
  auto bucket = co_await call_swift(s3, "HEAD", s3.bucket, std::nullopt);
  const auto* b = std::get_if<Response>(&bucket);
  if (!b || b->status / 100 != 2) co_return errors::no_such_bucket(s3.bucket);
  S3Error e = errors::no_such_key(*s3.key);
  if (s3.has("versionId")) co_return e;
  std::string marker = "false";
  if (b->headers.contains(versioning::kSysContainer)) {
    auto listing = co_await call_swift(
        s3, "GET", s3.bucket, std::nullopt,
        "format=json&versions&limit=1&prefix=" + common::http::quote(*s3.key, ""), 1 << 20,
        drop_conditions);
    const auto* l = std::get_if<Response>(&listing);
    boost::system::error_code ec;
    auto items = l && l->status == 200 ? boost::json::parse(l->body, ec) : boost::json::value();
    if (!ec && items.is_array() && !items.as_array().empty() && items.as_array()[0].is_object()) {
      const auto& newest = items.as_array()[0].as_object();
      const auto* name = newest.if_contains("name");
      const auto* type = newest.if_contains("content_type");
      const auto* id = newest.if_contains("version_id");
      if (name && name->is_string() && name->as_string() == *s3.key && type &&
          type->is_string() && type->as_string() == versioning::kDeleteMarkerType) {
        marker = "true";
        if (id && id->is_string()) e.headers.emplace_back("x-amz-version-id", id->as_string());
      }
    }
  }
  e.headers.emplace_back("x-amz-delete-marker", marker);
  co_return e;
}

// The ETag S3 shows for an object of Swift answer `swift`, without quotes: a multipart upload's
// (kept in sysmeta), an SLO's made by Swift's API (its etag and "-N"), or the Swift one.
std::string s3_etag(const HeaderMap& swift) {
  std::string etag;
  if (auto kept = swift.get(kEtagSysmeta); kept && !kept->empty()) {
    etag = *kept;
  } else {
    etag = swift.get_or("Etag", "");
    if (!etag.empty() && common::config_true_value(swift.get_or("X-Static-Large-Object", ""))) {
      std::erase(etag, '"');
      etag += "-N";
    }
  }
  std::erase(etag, '"');
  return etag;
}

// Whether entity-tag list `condition` (an If-Match value: "*" or tags, quoted or not, W/
// ignored) names `etag`.
bool etag_listed(std::string_view condition, const std::string& etag) {
  for (std::string tag : common::list_from_csv(condition)) {
    if (tag == "*") return true;
    if (tag.starts_with("W/")) tag.erase(0, 2);
    std::erase(tag, '"');
    if (tag == etag) return true;
  }
  return false;
}

enum class Op { kGet, kHead, kPut };

// The client's exchange as the Swift request of an object GET, HEAD or PUT: the Swift answer
// goes back to the client as S3's, an error as S3's XML. A PUT whose payload is signed
// (x-amz-content-sha256 of the body) is hashed as it is read, and a body that does not match
// fails before its last bytes reach the object servers, so nothing is stored (Swift's
// HashingInput).
class ObjectExchange final : public ExchangeWrapper {
 public:
  ObjectExchange(Exchange& client, S3Request& s3, Op op, Request swift)
      : ExchangeWrapper(client, std::move(swift)), s3_(s3), op_(op) {
    if (op == Op::kPut) {
      std::string_view sha = s3.client.headers.get_or("X-Amz-Content-SHA256", "");
      if (sha != "UNSIGNED-PAYLOAD" && !sha.empty() && s3.client.content_length) {
        expected_sha_ = common::http::to_lower(sha);
        left_ = *s3.client.content_length;
      }
    }
  }

  // Decodes the client's aws-chunked body: the Swift request's body is its payload.
  // `trailers`: the lower-case names the body's trailers must have; `signed_chunks`: whether
  // chunks carry signatures (not STREAMING-UNSIGNED-PAYLOAD-TRAILER).
  void decode_chunked(uint64_t decoded_length, std::set<std::string> trailers,
                      bool signed_chunks) {
    decoder_.emplace(decoded_length, std::move(trailers),
                     signed_chunks ? s3_.signature.get() : nullptr);
    decoded_length_ = decoded_length;
  }

  // GetObject/HeadObject of one part (?partNumber): the answer covers `range` (what the
  // Swift request asks for), and says how many parts the object has (nullopt: not a multipart
  // upload, which S3 does not say).
  void answer_part(std::string range, std::optional<size_t> parts_count) {
    part_range_ = std::move(range);
    parts_count_ = parts_count;
  }

  // Server-side encryption: a write's, answered with its headers, or the key a read brings,
  // checked against the object's (and against what the encryption middleware said in `env`).
  void write_sse(Sse sse, const ProxyEnv* env) {
    sse_ = std::move(sse);
    sse_env_ = env;
  }
  void read_sse(Sse sse, const ProxyEnv* env) {
    sse_ = std::move(sse);
    sse_env_ = env;
  }

  // Checks the payload against `plan`'s checksum before its last bytes are handed on.
  void verify_checksum(ChecksumPlan plan, std::optional<uint64_t> length) {
    checksum_.emplace(plan.algorithm);
    plan_ = std::move(plan);
    if (!decoder_ && length) checksum_left_ = *length;
  }

  net::awaitable<common::Result<size_t>> read_body(std::span<char> buf) override {
    if (decoder_) co_return co_await read_decoded(buf);
    auto n = co_await ExchangeWrapper::read_body(buf);
    if (n.ok() && checksum_) {
      checksum_->update(std::string_view(buf.data(), *n));
      bool bad = false;
      if (checksum_left_) {
        // A known length: checked with the read that brings the last byte.
        bad = *n > *checksum_left_ || (*n == 0 && *checksum_left_ > 0);
        if (!bad) {
          *checksum_left_ -= *n;
          bad = *n > 0 && *checksum_left_ == 0 && checksum_->digest() != *plan_->value;
        }
      } else if (*n == 0) {
        bad = checksum_->digest() != *plan_->value;  // a chunked body: at its end
      }
      if (bad) {
        body_error_ = checksum_mismatch(plan_->algorithm);
        co_return Status::invalid_argument("checksum mismatch");
      }
    }
    if (!n.ok() || !expected_sha_) co_return n;
    sha_.update(std::string_view(buf.data(), *n));
    bool bad = false;
    if (*n > left_) {
      bad = true;
    } else {
      left_ -= *n;
      bad = (left_ == 0 && sha_.hex_digest() != *expected_sha_) || (*n == 0 && left_ > 0);
    }
    if (bad) {
      body_error_ = sha256_mismatch(*expected_sha_, sha_.hex_digest());
      co_return Status::invalid_argument("x-amz-content-sha256 mismatch");
    }
    co_return n;
  }

  // The payload of an aws-chunked body, as much as fits in `buf`; 0 at its end. A malformed,
  // truncated or wrongly signed body is an error before its last payload byte is handed on:
  // the last bytes wait until the final chunk (and trailers) checked out, as Swift's
  // StreamingInput reads them with the last payload bytes.
  net::awaitable<common::Result<size_t>> read_decoded(std::span<char> buf) {
    auto holding_last = [&] {
      size_t ready = decoded_.size() - decoded_at_;
      return ready == 0 || (handed_ + ready == decoded_length_ && !decoder_->done());
    };
    while (holding_last() && !decoder_->done()) {
      if (decoded_at_ > 0) {
        decoded_.erase(0, decoded_at_);
        decoded_at_ = 0;
      }
      std::array<char, 65536> raw;
      auto n = co_await ExchangeWrapper::read_body(std::span<char>(raw.data(), raw.size()));
      if (!n.ok()) co_return n.status();
      const size_t before = decoded_.size();
      auto failure = *n == 0 ? decoder_->finish()
                             : decoder_->feed(std::string_view(raw.data(), *n), decoded_);
      if (failure) {
        body_error_ = chunked_error(*failure, *s3_.signature);
        co_return Status::invalid_argument("aws-chunked body: " + body_error_->code);
      }
      if (checksum_) {
        checksum_->update(std::string_view(decoded_).substr(before));
        if (decoder_->done()) {
          if (auto e = checksum_error()) {
            body_error_ = std::move(e);
            co_return Status::invalid_argument("checksum mismatch");
          }
        }
      }
    }
    size_t n = std::min(buf.size(), decoded_.size() - decoded_at_);
    if (n == 0 && !outer_done_) {
      // The aws-chunked body ended; so must the HTTP body around it (a chunked one still has
      // its last chunk to come), or the connection could not be kept. Nothing may follow.
      std::array<char, 512> rest;
      auto more = co_await ExchangeWrapper::read_body(std::span<char>(rest.data(), rest.size()));
      if (!more.ok()) co_return more.status();
      if (*more > 0) {
        body_error_ = errors::incomplete_body("The request body continues after its last chunk.");
        co_return Status::invalid_argument("data after the aws-chunked body");
      }
      outer_done_ = true;
    }
    std::copy_n(decoded_.data() + decoded_at_, n, buf.data());
    decoded_at_ += n;
    handed_ += n;
    co_return n;
  }

  // A checksum that came in a trailer and checked out, base64, once the body was read.
  std::optional<std::string> trailer_checksum() const {
    if (!plan_ || plan_->value || !checksum_ || !decoder_ || !decoder_->done() || body_error_) {
      return std::nullopt;
    }
    return common::crypto::b64encode(checksum_->digest());
  }

  // The payload's checksum against the header's value or the trailer's (once decoded).
  std::optional<S3Error> checksum_error() const {
    std::optional<std::string> want = plan_->value;
    if (!want) {
      for (const auto& [name, value] : decoder_->trailers()) {
        if (common::http::to_lower(name) != plan_->name) continue;
        want = decode_checksum(value, checksum_size(plan_->algorithm));
        if (!want) {
          return S3Error::invalid_request("Value for " + plan_->name +
                                          " trailing header is invalid.");
        }
      }
    }
    if (!want || checksum_->digest() != *want) return checksum_mismatch(plan_->algorithm);
    return std::nullopt;
  }

  net::awaitable<Status> write_body(std::string_view chunk) override {
    if (replaced_) co_return Status();
    co_return co_await ExchangeWrapper::write_body(chunk);
  }
  net::awaitable<Status> finish_response() override {
    if (replaced_) co_return Status();
    co_return co_await ExchangeWrapper::finish_response();
  }

 protected:
  net::awaitable<Status> do_respond(Response r) override {
    auto out = co_await translate(r.status, r.headers);
    if (auto* e = std::get_if<S3Error>(&out)) {
      replaced_ = true;
      co_return co_await inner().respond(s3_.error(*e));
    }
    auto& [status, headers] = std::get<std::pair<int, HeaderMap>>(out);
    r.status = status;
    r.reason.clear();
    r.headers = std::move(headers);
    if (op_ == Op::kPut) r.body.clear();
    co_return co_await inner().respond(std::move(r));
  }

  net::awaitable<Status> do_start_response(int status, HeaderMap headers,
                                           std::optional<uint64_t> length) override {
    auto out = co_await translate(status, headers);
    if (auto* e = std::get_if<S3Error>(&out)) {
      replaced_ = true;
      co_return co_await inner().respond(s3_.error(*e));
    }
    auto& [s, h] = std::get<std::pair<int, HeaderMap>>(out);
    co_return co_await inner().start_response(s, std::move(h), length);
  }

 private:
  using Translated = std::variant<std::pair<int, HeaderMap>, S3Error>;

  net::awaitable<Translated> translate(int status, const HeaderMap& swift) {
    if (body_error_) co_return *body_error_;
    if (op_ != Op::kPut) {
      if (auto denied = co_await check_read_on_answer(s3_, status, swift)) co_return *denied;
    }
    const bool ok = op_ == Op::kPut ? (status == 201 || status == 202)
                                    : (status == 200 || status == 206 || status == 304);
    const std::string refusal =
        sse_env_ && sse_env_->sse_refusal ? *sse_env_->sse_refusal : std::string();
    if (op_ == Op::kPut) {
      if (auto e = write_sse_refusal(refusal)) co_return std::move(*e);
    } else if (ok || !refusal.empty()) {
      if (auto e = read_sse_refusal(swift, sse_, refusal)) co_return std::move(*e);
    }
    if (!ok) co_return co_await error_for(status);
    HeaderMap h = swift_to_s3_headers(swift);
    if (std::string etag = s3_etag(swift); !etag.empty()) h.set("ETag", "\"" + etag + "\"");
    set_request_ids(h, s3_.env.trans_id);
    if (op_ == Op::kPut) {
      h.set("Content-Length", "0");
      // The checksum the upload was checked against, as S3 answers it (SDKs copy a part's into
      // CompleteMultipartUpload).
      if (checksum_) {
        h.set("x-amz-checksum-" + std::string(checksum_name(plan_->algorithm)),
              common::crypto::b64encode(checksum_->digest()));
      }
      add_sse_headers(sse_, h);
      co_return std::make_pair(200, std::move(h));
    }
    if (h.contains("x-amz-meta-deleted")) co_return errors::no_such_key(*s3_.key);
    add_sse_headers(swift, h);
    add_stored_checksum(status, swift, h);
    if (size_t tags = decode_tags(swift.get_or(kObjectTaggingSysmeta, "")).size(); tags > 0) {
      h.set("x-amz-tagging-count", std::to_string(tags));
    }
    add_lock_headers(swift, h);
    for (const char* key : {"content-type", "content-language", "expires", "cache-control",
                            "content-disposition", "content-encoding"}) {
      auto it = s3_.params.find(std::string("response-") + key);
      if (it != s3_.params.end()) h.set(key, it->second);
    }
    if (parts_count_) h.set("x-amz-mp-parts-count", std::to_string(*parts_count_));
    if (op_ == Op::kHead && status == 200) {
      auto range = part_range_ ? std::optional<std::string_view>(*part_range_)
                               : s3_.client.headers.get("Range");
      if (range) {
        auto specs = common::http::parse_range_header(*range);
        auto length = common::parse_python_int(h.get_or("Content-Length", ""));
        if (specs && length && *length > 0) {
          auto ranges = common::http::ranges_for_length(*specs, static_cast<uint64_t>(*length));
          if (ranges.empty()) {
            co_return errors::invalid_range();
          }
          if (ranges.size() == 1) {
            h.set("Content-Range", common::http::content_range_value(ranges[0],
                                                                     static_cast<uint64_t>(*length)));
            h.set("Content-Length", std::to_string(ranges[0].size()));
            co_return std::make_pair(206, std::move(h));
          }
        }
      }
    }
    co_return std::make_pair(status, std::move(h));
  }

  // GetObject and HeadObject with x-amz-checksum-mode: ENABLED: the checksum the whole object
  // was uploaded with, if it was kept (not for a range: it covers the whole object).
  void add_stored_checksum(int status, const HeaderMap& swift, HeaderMap& h) const {
    if (status != 200 || !common::http::iequals(
                             s3_.client.headers.get_or("x-amz-checksum-mode", ""), "ENABLED")) {
      return;
    }
    if (op_ == Op::kHead && s3_.client.headers.contains("Range")) return;
    for (ChecksumAlgorithm a : kChecksumAlgorithms) {
      auto value = swift.get(checksum_sysmeta(a));
      if (!value || value->empty()) continue;
      h.set("x-amz-checksum-" + std::string(checksum_name(a)), *value);
      h.set("x-amz-checksum-type", swift.get_or(kChecksumTypeSysmeta, "FULL_OBJECT"));
      return;
    }
  }

  net::awaitable<S3Error> error_for(int status) {
    if (op_ == Op::kPut) {
      switch (status) {
        case 404:
          co_return errors::no_such_bucket(s3_.bucket);
        case 422: {
          co_return errors::bad_digest();
        }
        case 413:
          co_return errors::entity_too_large();
        case 411:
          co_return errors::missing_content_length();
        case 408:
        case 499:
          co_return errors::request_timeout();
        case 412:
          co_return errors::precondition_failed();
        default:
          break;
      }
    } else {
      if (status == 404) co_return co_await missing_object(s3_);
      if (status == 412) co_return errors::precondition_failed();
      if (status == 416) co_return errors::invalid_range();
    }
    co_return unexpected(s3_, Response{.status = status, .reason = {}, .headers = {}, .body = {}});
  }

  S3Request& s3_;
  const Op op_;
  bool replaced_ = false;  // an S3 error went out instead of the Swift answer
  std::optional<std::string> expected_sha_;
  uint64_t left_ = 0;
  common::crypto::Sha256 sha_;
  std::optional<S3Error> body_error_;
  std::optional<AwsChunkedDecoder> decoder_;
  std::string decoded_;     // payload decoded and not yet handed on (from decoded_at_)
  size_t decoded_at_ = 0;
  uint64_t decoded_length_ = 0;  // x-amz-decoded-content-length
  uint64_t handed_ = 0;          // payload bytes handed on so far
  bool outer_done_ = false;      // the HTTP body around the aws-chunked one was read to its end
  std::optional<Checksum> checksum_;
  std::optional<ChecksumPlan> plan_;
  std::optional<uint64_t> checksum_left_;  // bytes of a plain body still to be checksummed
  std::optional<std::string> part_range_;   // answer_part()
  std::optional<size_t> parts_count_;
  Sse sse_;                                 // write_sse(), read_sse()
  const ProxyEnv* sse_env_ = nullptr;
};

// Swift's validation of Content-MD5: base64 of 16 bytes, as the hex ETag Swift checks.
std::variant<std::string, S3Error> content_md5_etag(std::string_view value) {
  S3Error invalid = make(400, "InvalidDigest", "The Content-MD5 you specified was invalid.");
  invalid.details.emplace_back("ContentMd5", std::string(value));
  // Swift: '^[A-Za-z0-9+/]+={0,2}$', then base64 that must decode to 16 bytes.
  if (value.empty() || value.front() == '=') return invalid;
  auto bytes = common::crypto::strict_b64decode(value);
  if (!bytes || bytes->size() != 16) return invalid;
  std::string hex(32, '\0');
  common::crypto::write_hex({reinterpret_cast<const uint8_t*>(bytes->data()), 16}, hex.data());
  return hex;
}

// GET and HEAD (Swift's GETorHEAD).
// The bytes of one part of an object (GetObject and HeadObject with ?partNumber, as AWS and Swift
// 2.36 serve them): a multipart upload's part N, or all of any other object as its part 1.
struct PartRange {
  std::string range;                 // "bytes=a-b"; empty: the whole (an empty object)
  std::optional<size_t> parts_count;  // a multipart upload's
};

// One part of a multipart upload (a segment of its SLO manifest).
struct ManifestPart {
  std::string name;  // "/<bucket>+segments/<key>/<upload id>/<n>"
  uint64_t size = 0;
};

// The parts of s3's object, an SLO, from its manifest (multipart-manifest=get).
net::awaitable<std::variant<std::vector<ManifestPart>, S3Error>> manifest_parts(
    S3Request& s3, const std::string& version_query) {
  std::string query = "multipart-manifest=get";
  if (!version_query.empty()) query += "&" + version_query;
  auto got = co_await call_swift(s3, "GET", s3.bucket, s3.key, query, 16u << 20, drop_conditions);
  if (auto* e = std::get_if<S3Error>(&got)) co_return std::move(*e);
  const Response& m = std::get<Response>(got);
  if (m.status == 404) co_return co_await missing_object(s3);
  if (m.status != 200) co_return unexpected(s3, m);
  boost::system::error_code ec;
  auto manifest = boost::json::parse(m.body, ec);
  if (ec || !manifest.is_array()) co_return errors::internal_error();
  // A segment's bytes are its range's, when it has one ("first-last").
  auto size_of = [](const boost::json::object& o) -> std::optional<uint64_t> {
    if (const auto* r = o.if_contains("range"); r && r->is_string()) {
      std::string_view text = r->as_string();
      auto dash = text.find('-');
      auto first = common::parse_python_int(text.substr(0, dash));
      auto last = dash == std::string_view::npos ? std::nullopt
                                                 : common::parse_python_int(text.substr(dash + 1));
      if (!first || !last || *last < *first) return std::nullopt;
      return static_cast<uint64_t>(*last - *first + 1);
    }
    const auto* b = o.if_contains("bytes");
    if (!b || !b->is_int64() || b->as_int64() < 0) return std::nullopt;
    return static_cast<uint64_t>(b->as_int64());
  };
  std::vector<ManifestPart> parts;
  for (const auto& v : manifest.as_array()) {
    const auto* o = v.if_object();
    if (!o) co_return errors::internal_error();
    auto size = size_of(*o);
    if (!size) co_return errors::internal_error();
    const auto* name = o->if_contains("name");
    parts.push_back({.name = name && name->is_string() ? std::string(name->as_string()) : "",
                     .size = *size});
  }
  co_return parts;
}

// The PartRange of ?partNumber for the object (`version_query`: its version-id=, if any): a
// HEAD, and for a multipart upload (an SLO) its manifest. InvalidArgument for a number S3 does
// not take, InvalidRequest with a Range, InvalidPartNumber (416) past the last part.
net::awaitable<std::variant<PartRange, S3Error>> part_range(S3Request& s3,
                                                            const std::string& version_query) {
  const std::string text = s3.params.at("partNumber");
  auto number = common::parse_python_int(text);
  if (!number || *number < 1 || *number > 10000) {
    co_return S3Error::invalid_argument("partNumber", text,
                                        "Part number must be an integer between 1 and 10000, "
                                        "inclusive");
  }
  if (s3.client.headers.contains("Range")) {
    co_return S3Error::invalid_request(
        "Cannot specify both Range header and partNumber query parameter");
  }
  const S3Error unsatisfiable{.status = 416, .code = "InvalidPartNumber",
                              .message = "The requested partnumber is not satisfiable",
                              .details = {}};
  auto head = co_await call_swift(s3, "HEAD", s3.bucket, s3.key, version_query, 1 << 16,
                                  drop_conditions);
  if (auto* e = std::get_if<S3Error>(&head)) co_return std::move(*e);
  const Response& object = std::get<Response>(head);
  if (object.status == 404) co_return co_await missing_object(s3);
  if (object.status != 200) co_return unexpected(s3, object);
  if (!common::config_true_value(object.headers.get_or("X-Static-Large-Object", ""))) {
    if (*number != 1) co_return unsatisfiable;
    const int64_t length =
        common::parse_python_int(object.headers.get_or("Content-Length", "0")).value_or(0);
    if (length <= 0) co_return PartRange{};
    co_return PartRange{.range = "bytes=0-" + std::to_string(length - 1), .parts_count = {}};
  }
  auto listed = co_await manifest_parts(s3, version_query);
  if (auto* e = std::get_if<S3Error>(&listed)) co_return std::move(*e);
  const auto& parts = std::get<std::vector<ManifestPart>>(listed);
  if (static_cast<size_t>(*number) > parts.size()) co_return unsatisfiable;
  uint64_t start = 0;
  for (int64_t i = 0; i + 1 < *number; ++i) start += parts[static_cast<size_t>(i)].size;
  const uint64_t n = parts[static_cast<size_t>(*number - 1)].size;
  if (n == 0) co_return unsatisfiable;
  co_return PartRange{.range = "bytes=" + std::to_string(start) + "-" +
                               std::to_string(start + n - 1),
                      .parts_count = parts.size()};
}

net::awaitable<void> get_or_head(Exchange& ex, S3Request& s3, Op op) {
  auto sse = read_sse(s3.client.headers);
  if (auto* e = std::get_if<S3Error>(&sse)) co_return co_await ex.reply(s3.error(*e));
  s3.sse_customer_key = std::get<Sse>(sse).customer_key;
  auto headers = swift_headers(s3);
  if (auto* e = std::get_if<S3Error>(&headers)) co_return co_await ex.reply(s3.error(*e));
  HeaderMap& h = std::get<HeaderMap>(headers);
  // An ETag of a multipart upload ("<md5>-N") is also matched without its -N, and the
  // comparison is made against the stored S3 ETag when there is one.
  bool had_match = false;
  for (const char* name : {"If-Match", "If-None-Match"}) {
    auto value = s3.client.headers.get(name);
    if (!value) continue;
    had_match = true;
    std::string extended(*value);
    for (const auto& item : common::list_from_csv(*value)) {
      std::string tag(common::http::normalize_etag(item));
      if (tag.size() > 2 && tag.ends_with("-N")) extended += ", " + tag.substr(0, tag.size() - 2);
    }
    h.set(name, extended);
  }
  if (had_match) {
    std::string at(h.get_or("X-Backend-Etag-Is-At", ""));
    std::string want = common::http::to_lower(kEtagSysmeta);
    h.set("X-Backend-Etag-Is-At", at.empty() ? want : at + "," + want);
  }
  std::string query;
  if (auto v = s3.params.find("versionId"); v != s3.params.end()) {
    if (v->second != "null") {
      auto info = co_await call_swift(s3, "HEAD", s3.bucket, std::nullopt);
      auto* r = std::get_if<Response>(&info);
      if (!r || !r->headers.contains("X-Container-Sysmeta-Versions-Container")) {
        // (An answer made here, with no object's: a reader the ACLs keep out is told so.)
        if (auto denied = co_await check_read_on_answer(s3, 404, HeaderMap())) {
          co_return co_await ex.reply(s3.error(*denied));
        }
        co_return co_await ex.reply(s3.error(errors::no_such_version(*s3.key, v->second)));
      }
    }
    query = "version-id=" + common::http::quote(v->second, "");
  }
  std::optional<PartRange> part;
  if (s3.has("partNumber")) {
    auto found = co_await part_range(s3, query);
    if (auto* e = std::get_if<S3Error>(&found)) co_return co_await ex.reply(s3.error(*e));
    part = std::move(std::get<PartRange>(found));
    if (!part->range.empty()) h.set("Range", part->range);
  }
  ProxyEnv env = swift_env(s3);
  apply_read_sse(std::get<Sse>(sse), h, env);
  Request swift = swift_request(s3, op == Op::kGet ? "GET" : "HEAD", s3.bucket, s3.key, query,
                                std::move(h));
  ObjectExchange out(ex, s3, op, std::move(swift));
  if (part && !part->range.empty()) out.answer_part(part->range, part->parts_count);
  out.read_sse(std::move(std::get<Sse>(sse)), &env);
  co_await s3.next(out, env);
}

// The payload length of an aws-chunked upload (x-amz-decoded-content-length), or why it is
// refused (Swift's _validate_sha256 for the STREAMING-* forms).
std::variant<uint64_t, S3Error> streaming_length(const S3Request& s3, std::string_view sha) {
  auto decoded = common::parse_python_int(s3.client.headers.get_or("x-amz-decoded-content-length", ""));
  if (!decoded) {
    return errors::missing_content_length();
  }
  if (*decoded < 0) {
    return S3Error::invalid_argument("x-amz-decoded-content-length", std::to_string(*decoded));
  }
  if (sha != "STREAMING-AWS4-HMAC-SHA256-PAYLOAD" &&
      sha != "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER" &&
      sha != "STREAMING-UNSIGNED-PAYLOAD-TRAILER") {
    // ECDSA signing is not served (as in Swift).
    return errors::not_implemented("Don't know how to validate " + std::string(sha) + " streams");
  }
  if (s3.anonymous() || s3.signature->version() != S3Signature::Version::kV4 ||
      s3.signature->presigned()) {
    return errors::not_implemented(
        "Transfering payloads in multiple chunks using aws-chunked is not supported.");
  }
  return static_cast<uint64_t>(*decoded);
}


// CopyObject and UploadPartCopy: a PUT with x-amz-copy-source, served by the copy middleware's
// X-Copy-From after a HEAD of the source (Swift's check_copy_source), answered with a
// CopyObjectResult or CopyPartResult. Only a part copies a range of its source.
net::awaitable<Response> copy_object(S3Request& s3, const PutTarget& target) {
  const std::string source(s3.client.headers.get_or("X-Amz-Copy-Source", ""));
  if (auto range = s3.client.headers.get("X-Amz-Copy-Source-Range"); range && !target.part) {
    co_return s3.error(S3Error::invalid_argument("x-amz-copy-source-range", std::string(*range),
                                                 "Illegal copy header"));
  }
  std::string_view path_part = std::string_view(source).substr(0, source.find('?'));
  std::string_view qs = source.find('?') == std::string::npos
                            ? std::string_view()
                            : std::string_view(source).substr(source.find('?') + 1);
  std::string version_query;
  std::string version;
  if (!qs.empty()) {
    auto parsed = common::http::parse_query(qs);
    if (parsed.size() == 1 && parsed[0].first == "versionId") {
      version = parsed[0].second;
      version_query = "version-id=" + common::http::quote(version, "");
    } else if (!parsed.empty()) {
      co_return s3.error(S3Error::invalid_argument("X-Amz-Copy-Source", source,
                                                   "Unsupported copy source parameter."));
    }
  }
  std::string src = common::http::percent_decode(path_part);
  if (!src.starts_with('/')) src.insert(0, "/");
  auto parts = common::http::split_path(src, 0, 2, true);
  if (!parts.ok() || !(*parts)[0] || !(*parts)[1]) co_return s3.error(errors::internal_error());
  const std::string src_bucket = *(*parts)[0];
  const std::string src_key = *(*parts)[1];
  // The source may be in another account (the global bucket namespace).
  co_await resolve_bucket(s3, src_bucket);
  auto account_of = [&](const std::string& bucket) {
    auto it = s3.bucket_accounts.find(bucket);
    return it != s3.bucket_accounts.end() ? it->second : s3.requester_account();
  };
  const std::string src_account = account_of(src_bucket);
  const bool other_account = src_account != account_of(s3.bucket);
  // The source's SSE-C key, if it was stored with one; the copy's own encryption.
  auto source_key = customer_key(s3.client.headers, /*copy_source=*/true);
  if (auto* e = std::get_if<S3Error>(&source_key)) co_return s3.error(*e);
  const Sse source_sse = std::get<std::optional<Sse>>(source_key).value_or(Sse{});
  Sse sse;
  if (target.sse) {
    sse = *target.sse;
  } else {
    auto wanted = co_await write_encryption(s3);
    if (auto* e = std::get_if<S3Error>(&wanted)) co_return s3.error(*e);
    sse = std::move(std::get<Sse>(wanted));
  }
  // The source's HEAD, with the x-amz-copy-source-if-* conditions as If-* headers.
  std::string refusal;
  auto head = co_await call_swift(s3, "HEAD", src_bucket, src_key, version_query, 1 << 16,
                                  [&](HeaderMap& h) {
    for (const auto& [name, value] : s3.client.headers) {
      if (common::http::istarts_with(name, "x-amz-copy-source-if-")) {
        h.set(std::string(name).substr(std::string_view("x-amz-copy-source-").size()), value);
      }
    }
    drop_sse_headers(h);
  }, [&](ProxyEnv& env) { env.sse_customer_key = source_sse.customer_key; });
  if (auto* e = std::get_if<S3Error>(&head)) co_return s3.error(*e);
  const Response& hr = std::get<Response>(head);
  if (auto e = read_sse_refusal(hr, source_sse)) co_return s3.error(*e);
  if (hr.status == 404) {
    S3Request src_s3{.client = s3.client, .env = s3.env, .next = s3.next, .config = s3.config,
                     .bucket = src_bucket, .key = src_key, .params = {},
                     .signature = s3.signature, .acl_header_used = true,
                     .bucket_accounts = s3.bucket_accounts};
    co_return s3.error(co_await object_not_found(src_s3));
  }
  if (hr.status == 304 || hr.status == 412) co_return s3.error(errors::precondition_failed());
  if (hr.status != 200) co_return s3.error(unexpected(s3, hr));
  if (!co_await may_read_copy_source(s3, src_bucket, src_key, !version.empty(), hr.headers,
                                     src_account)) {
    co_return s3.error(S3Error::access_denied());
  }
  const std::string directive(s3.client.headers.get_or("x-amz-metadata-directive", "COPY"));
  if (!target.part && src_bucket == s3.bucket && src_key == *s3.key && directive == "COPY" &&
      version.empty()) {
    co_return s3.error(S3Error::invalid_request(
        "This copy request is illegal because it is trying to copy an object to itself without "
        "changing the object's metadata, storage class, website redirect location or "
        "encryption attributes."));
  }
  std::optional<std::string> range;  // a part's x-amz-copy-source-range
  if (auto r = s3.client.headers.get("X-Amz-Copy-Source-Range"); r && target.part) {
    auto specs = common::http::parse_range_header(*r);
    if (!specs || specs->size() != 1) {
      co_return s3.error(S3Error::invalid_argument(
          "x-amz-source-range", std::string(*r),
          "The x-amz-copy-source-range value must be of the form bytes=first-last where first "
          "and last are the zero-based offsets of the first and last bytes to copy"));
    }
    const std::string size(hr.headers.get_or("Content-Length", "0"));
    auto length = common::parse_python_int(size);
    if (!length || *length < 0 ||
        common::http::ranges_for_length(*specs, static_cast<uint64_t>(*length)).empty()) {
      co_return s3.error(S3Error::invalid_argument(
          "x-amz-source-range", std::string(*r),
          "Range specified is not valid for source object of size: " + size));
    }
    range = std::string(*r);
  }
  // The copy's tags: the source's (x-amz-tagging-directive COPY, the default) or the request's.
  std::string tags(hr.headers.get_or(kObjectTaggingSysmeta, ""));
  if (!target.part && s3.client.headers.get_or("x-amz-tagging-directive", "COPY") == "REPLACE") {
    auto tagging = tagging_header_sysmeta(s3);
    if (auto* e = std::get_if<S3Error>(&tagging)) co_return s3.error(*e);
    tags = std::get<std::optional<std::string>>(tagging).value_or("");
  }
  LockHeaders lock_headers;
  if (!target.part) {
    auto lock = co_await new_version_lock(s3);
    if (auto* e = std::get_if<S3Error>(&lock)) co_return s3.error(*e);
    lock_headers = std::move(std::get<LockHeaders>(lock));
  }
  const common::Timestamp now = common::Timestamp::now();
  const std::string put_query =
      version.empty() || target.part ? "" : "version-id=" + common::http::quote(version, "");
  ProxyEnv sse_env;  // what apply_write_sse() asks of the keymaster, for the PUT's env
  auto put = co_await call_swift(s3, "PUT", target.container, target.object, put_query, 1 << 16,
                                 [&](HeaderMap& h) {
    for (const auto& [name, value] : s3.client.headers) {
      if (common::http::istarts_with(name, "x-amz-copy-source")) h.erase(name);
    }
    // The copy is encrypted as the request (or the bucket) says, whatever its source was.
    apply_write_sse(sse, h, sse_env);
    for (std::string_view name : {kSseSysmeta, kSseKmsKeySysmeta, kSseCustomerMd5Sysmeta}) {
      if (!h.contains(name)) h.set(name, "");
    }
    h.erase("x-amz-metadata-directive");
    h.erase(kObjectTaggingSysmeta);
    if (!target.part) h.set(kObjectTaggingSysmeta, tags);  // empty: none
    h.set("X-Copy-From", common::http::quote(src));
    if (other_account) h.set("X-Copy-From-Account", common::http::quote(src_account));
    if (!target.part) add_new_acl(s3, kObjectAclSysmeta, h);
    // A copy is a new version: its lock is the request's (or the bucket's default), not the
    // source's.
    for (std::string_view name : {kLockModeSysmeta, kLockUntilSysmeta, kLegalHoldSysmeta}) {
      h.erase(name);
    }
    for (const auto& [name, value] : lock_headers) h.set(name, value);
    h.set("Content-Length", "0");
    h.set("X-Timestamp", now.internal());
    if (range) h.set("Range", *range);
    if (target.part) {
      // A part is a plain object: what made the source a multipart upload or an SLO must not
      // come along (Swift's PartController clears the same headers).
      for (const char* name : {"X-Object-Sysmeta-S3api-Etag", "X-Object-Sysmeta-Swift3-Etag",
                               "X-Object-Sysmeta-Slo-Etag", "X-Object-Sysmeta-Slo-Size",
                               "X-Object-Sysmeta-Container-Update-Override-Etag"}) {
        h.set(name, "");
      }
    }
    if (target.part && range) {
      // The source's checksum is not the range's.
      for (ChecksumAlgorithm a : kChecksumAlgorithms) {
        h.set(checksum_sysmeta(a), "");
      }
    }
    if (directive == "REPLACE") {
      h.set("X-Fresh-Metadata", "True");
      if (h.get_or("Content-Type", "").empty()) h.set("Content-Type", "binary/octet-stream");
    } else {
      // COPY keeps the source's metadata: what the request says of its own goes.
      for (const char* name : {"Content-Disposition", "Content-Encoding", "Content-Language",
                               "Content-Type", "Expires", "Cache-Control", "X-Robots-Tag"}) {
        h.erase(name);
      }
      std::vector<std::string> meta;
      for (const auto& [name, value] : h) {
        if (common::http::istarts_with(name, "X-Object-Meta-")) meta.push_back(name);
      }
      for (const auto& name : meta) h.erase(name);
    }
  }, [&](ProxyEnv& env) {
    env.sse_write_kms_key_id = sse_env.sse_write_kms_key_id;
    env.sse_write_customer_key = sse_env.sse_write_customer_key;
    env.sse_customer_key = source_sse.customer_key;
  });
  if (auto* e = std::get_if<S3Error>(&put)) co_return s3.error(*e);
  const Response& pr = std::get<Response>(put);
  if (pr.status == 400) {
    if (auto e = read_sse_refusal(pr, source_sse)) co_return s3.error(*e);
  }
  if (pr.status == 404) co_return s3.error(errors::no_such_bucket(s3.bucket));
  if (pr.status == 412) co_return s3.error(errors::precondition_failed());
  if (pr.status == 413) {
    co_return s3.error(errors::entity_too_large());
  }
  if (pr.status != 201 && pr.status != 202) co_return s3.error(unexpected(s3, pr));
  HeaderMap h = swift_to_s3_headers(pr.headers);
  std::string etag(h.get_or("ETag", ""));
  std::erase(etag, '"');
  std::vector<std::string> meta;
  for (const auto& [name, value] : h) {
    if (common::http::istarts_with(name, "x-amz-meta-")) meta.push_back(name);
  }
  for (const auto& name : meta) h.erase(name);
  h.erase("ETag");
  pugi::xml_node root;
  auto doc = result_document(target.part ? "CopyPartResult" : "CopyObjectResult", &root);
  add_text(root, "LastModified", s3_xml_time(now.ceil()));  // rounded up to the second
  add_text(root, "ETag", "\"" + etag + "\"");
  Response out = xml_response(200, to_xml(doc), s3.env.trans_id);
  for (const auto& [name, value] : h) {
    if (!out.headers.contains(name)) out.headers.set(name, value);
  }
  out.headers.set("Content-Type", "application/xml");
  out.headers.erase("Content-Length");
  add_sse_headers(sse, out.headers);
  co_return out;
}

// A PutObject with If-Match (ETags; refused with "*" by dispatch): PreconditionFailed when the
// object is none of them, NoSuchKey when there is no object, else nullopt. It is checked
// against a HEAD before the PUT: a write by another client between the two is not seen (Swift's
// object servers take no If-Match on PUT). "If-None-Match: *" (the only one dispatch lets
// through) goes on to the object servers, each of which refuses the PUT if it has the object.
net::awaitable<std::optional<S3Error>> put_conditions_refusal(S3Request& s3,
                                                              const PutTarget& target) {
  auto if_match = s3.client.headers.get("If-Match");
  if (target.part || !if_match) co_return std::nullopt;
  auto head = co_await call_swift(s3, "HEAD", target.container, target.object, "", 1 << 16,
                                  drop_conditions);
  if (auto* e = std::get_if<S3Error>(&head)) co_return *e;
  const Response& current = std::get<Response>(head);
  if (current.status == 404) co_return errors::no_such_key(*s3.key);
  if (current.status != 200) co_return unexpected(s3, current);
  if (!etag_listed(*if_match, s3_etag(current.headers))) co_return errors::precondition_failed();
  co_return std::nullopt;
}

}  // namespace

net::awaitable<void> put_object(Exchange& ex, S3Request& s3, const PutTarget& target) {
  if (!target.part && static_cast<int64_t>(s3.key->size()) > s3.config.max_object_name_length) {
    co_return co_await ex.reply(s3.error(errors::key_too_long()));
  }
  if (s3.client.headers.contains("X-Amz-Copy-Source")) {
    co_return co_await ex.reply(co_await copy_object(s3, target));
  }
  if (auto refusal = co_await put_conditions_refusal(s3, target)) {
    co_return co_await ex.reply(s3.error(*refusal));
  }
  std::string_view sha = s3.client.headers.get_or("X-Amz-Content-SHA256", "");
  std::optional<uint64_t> decoded_length;  // an aws-chunked body's payload length
  if (sha.starts_with("STREAMING-")) {
    auto length = streaming_length(s3, sha);
    if (auto* e = std::get_if<S3Error>(&length)) co_return co_await ex.reply(s3.error(*e));
    decoded_length = std::get<uint64_t>(length);
  } else if (!sha.empty() && sha != "UNSIGNED-PAYLOAD") {
    if (!is_hex_sha256(sha) && !s3.anonymous() &&
        s3.signature->version() == S3Signature::Version::kV4 && !s3.signature->presigned()) {
      co_return co_await ex.reply(s3.error(S3Error::invalid_argument(
          "x-amz-content-sha256", std::string(sha),
          "x-amz-content-sha256 must be UNSIGNED-PAYLOAD, STREAMING-UNSIGNED-PAYLOAD-TRAILER, "
          "STREAMING-AWS4-HMAC-SHA256-PAYLOAD, STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER or a "
          "valid sha256 value.")));
    }
    if (s3.client.content_length == 0 &&
        common::http::to_lower(sha) != common::crypto::sha256_hex("")) {
      co_return co_await ex.reply(s3.error(sha256_mismatch(std::string(sha),
                                                           common::crypto::sha256_hex(""))));
    }
  }
  auto planned = checksum_plan(s3, decoded_length.has_value());
  if (auto* e = std::get_if<S3Error>(&planned)) co_return co_await ex.reply(s3.error(*e));
  std::optional<ChecksumPlan> plan = std::move(std::get<std::optional<ChecksumPlan>>(planned));
  auto headers = swift_headers(s3);
  if (auto* e = std::get_if<S3Error>(&headers)) co_return co_await ex.reply(s3.error(*e));
  HeaderMap& h = std::get<HeaderMap>(headers);
  if (!target.part) {
    auto tagging = tagging_header_sysmeta(s3);
    if (auto* e = std::get_if<S3Error>(&tagging)) co_return co_await ex.reply(s3.error(*e));
    if (auto& stored = std::get<std::optional<std::string>>(tagging); stored && !stored->empty()) {
      h.set(kObjectTaggingSysmeta, *stored);
    }
    add_new_acl(s3, kObjectAclSysmeta, h);
    auto lock = co_await new_version_lock(s3);
    if (auto* e = std::get_if<S3Error>(&lock)) co_return co_await ex.reply(s3.error(*e));
    for (const auto& [name, value] : std::get<LockHeaders>(lock)) h.set(name, value);
  }
  for (const char* name : {"x-amz-object-lock-mode", "x-amz-object-lock-retain-until-date",
                           "x-amz-object-lock-legal-hold", "x-amz-bypass-governance-retention"}) {
    h.erase(name);
  }
  // If-Match was checked (put_conditions_refusal()); "If-None-Match: *" goes on.
  h.erase("If-Match");
  // The checksum is S3's; Swift has no use for these headers.
  for (const char* name : {"x-amz-trailer", "x-amz-sdk-checksum-algorithm"}) h.erase(name);
  // A checksum is kept with the object (GET returns it when asked): one sent as a header here,
  // one in a trailer in the PUT's metadata footer (below).
  h.erase_prefix("X-Object-Sysmeta-S3api-Checksum-");
  if (plan && plan->value) {
    h.set(checksum_sysmeta(plan->algorithm), common::crypto::b64encode(*plan->value));
    h.set(kChecksumTypeSysmeta, "FULL_OBJECT");
  }
  if (auto md5 = s3.client.headers.get("Content-MD5")) {
    auto etag = content_md5_etag(*md5);
    if (auto* e = std::get_if<S3Error>(&etag)) co_return co_await ex.reply(s3.error(*e));
    h.set("ETag", std::get<std::string>(etag));
  }
  Sse sse;
  if (target.sse) {
    sse = *target.sse;
  } else {
    auto wanted = co_await write_encryption(s3);
    if (auto* e = std::get_if<S3Error>(&wanted)) co_return co_await ex.reply(s3.error(*e));
    sse = std::move(std::get<Sse>(wanted));
  }
  ProxyEnv env = swift_env(s3);
  apply_write_sse(sse, h, env);
  h.set("X-Timestamp", common::Timestamp::now().internal());
  if (h.get_or("Content-Type", "").empty()) h.set("Content-Type", "binary/octet-stream");
  Request swift = swift_request(s3, "PUT", target.container, target.object, "", HeaderMap());
  // aws-chunked is how the body came, not what the object is: it leaves Content-Encoding
  // (Swift's _cleanup_content_encoding), whether or not the body is in fact chunked (S3 drops
  // it always).
  if (auto value = h.get("Content-Encoding");
      value && value->find("aws-chunked") != std::string_view::npos) {
    std::string encoding;
    for (const auto& e : common::list_from_csv(*value)) {
      if (e == "aws-chunked") continue;
      encoding += (encoding.empty() ? "" : ", ") + e;
    }
    h.erase("Content-Encoding");
    if (!encoding.empty()) h.set("Content-Encoding", encoding);
  }
  if (decoded_length) {
    // The payload of the aws-chunked body.
    h.erase("x-amz-decoded-content-length");
    h.set("Content-Length", std::to_string(*decoded_length));
    swift.content_length = decoded_length;
  } else {
    // The body is the client's, framed as the client framed it.
    if (s3.client.content_length) h.set("Content-Length", std::to_string(*s3.client.content_length));
    if (s3.client.chunked) h.set("Transfer-Encoding", "chunked");
    swift.content_length = s3.client.content_length;
    swift.chunked = s3.client.chunked;
  }
  swift.headers = std::move(h);
  ObjectExchange out(ex, s3, Op::kPut, std::move(swift));
  if (decoded_length) {
    std::set<std::string> trailers;
    if (sha == "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER") trailers.insert("x-amz-trailer-signature");
    if (plan && !plan->value) trailers.insert(plan->name);
    out.decode_chunked(*decoded_length, std::move(trailers),
                       sha != "STREAMING-UNSIGNED-PAYLOAD-TRAILER");
  }
  if (plan && !plan->value && decoded_length) {
    // A checksum in a trailer is known once the body was sent: it goes to the object servers
    // in the PUT's metadata footer, to be kept as a header's is.
    env.update_footers = [&out, algorithm = plan->algorithm](
                             HeaderMap& footers) -> std::optional<Response> {
      if (auto value = out.trailer_checksum()) {
        footers.set(checksum_sysmeta(algorithm), *value);
        footers.set(kChecksumTypeSysmeta, "FULL_OBJECT");
      }
      return std::nullopt;
    };
  }
  if (plan) out.verify_checksum(std::move(*plan), s3.client.content_length);
  out.write_sse(std::move(sse), &env);
  co_await s3.next(out, env);
}

namespace {

// Swift's gen_multipart_manifest_delete_query: an SLO (a multipart upload) is deleted with its
// segments.
net::awaitable<std::string> manifest_delete_query(S3Request& s3, const std::string& version) {
  if (!s3.config.allow_multipart_uploads) co_return std::string();
  std::string q = "symlink=get";
  if (!version.empty()) q += "&version-id=" + common::http::quote(version, "");
  auto head = co_await call_swift(s3, "HEAD", s3.bucket, s3.key, q);
  auto* r = std::get_if<Response>(&head);
  if (!r || r->status < 200 || r->status >= 300) co_return std::string();
  if (!common::config_true_value(r->headers.get_or("X-Static-Large-Object", ""))) {
    co_return std::string();
  }
  if (!r->headers.get_or(kEtagSysmeta, "").empty()) co_return "multipart-manifest=delete&async=on";
  co_return "multipart-manifest=delete";
}


// What became of one key of a DeleteObjects.
struct DeleteOutcome {
  std::optional<std::pair<std::string, std::string>> error;  // its Error's Code and Message
  std::optional<std::string> delete_marker;  // the version id of a delete marker made or deleted
};

// One key of a DeleteObjects: an error, or deleted (or not there), maybe as a delete marker.
net::awaitable<DeleteOutcome> delete_one(
    S3Request& s3, const std::string& key, const std::optional<std::string>& version) {
  if (!may_delete_key(s3, key, version)) {
    S3Error denied = S3Error::access_denied();
    co_return DeleteOutcome{.error = std::pair(denied.code, denied.message), .delete_marker = {}};
  }
  S3Request one{.client = s3.client, .env = s3.env, .next = s3.next, .config = s3.config,
                .bucket = s3.bucket, .key = key, .params = {}, .signature = s3.signature,
                .acl_header_used = true, .bucket_accounts = s3.bucket_accounts};
  // What check_access() learnt of the bucket holds for each key.
  one.bucket_policy = s3.bucket_policy;
  one.bucket_lock_read = s3.bucket_lock_read;
  if (version) {
    if (auto e = co_await version_delete_refused(one, key, *version)) {
      co_return DeleteOutcome{.error = std::pair(e->code, e->message), .delete_marker = {}};
    }
  }
  std::string query = co_await manifest_delete_query(one, version.value_or(""));
  const bool manifest = !query.empty();
  if (version) {
    query += std::string(query.empty() ? "" : "&") +
             "version-id=" + common::http::quote(*version, "") + "&symlink=get";
  }
  auto answer = co_await call_swift(one, "DELETE", s3.bucket, key, query, 16u << 20,
                                    [](HeaderMap& h) {
    h.erase("Content-Type");
    h.erase("Content-MD5");
    h.set("Accept", "application/json");
  });
  if (auto* e = std::get_if<S3Error>(&answer)) {
    co_return DeleteOutcome{.error = std::make_pair(e->code, e->message), .delete_marker = {}};
  }
  const Response& r = std::get<Response>(answer);
  DeleteOutcome done;
  // object_versioning's answer when the DELETE made a delete marker (even for a key without an
  // object), or deleted one by its id.
  if (r.headers.get_or("X-Backend-Content-Type", "") == versioning::kDeleteMarkerType) {
    done.delete_marker = std::string(r.headers.get_or("X-Object-Version-Id", version.value_or("")));
  }
  if (r.status == 404) co_return done;  // NoSuchKey: deleted as far as S3 goes
  if (r.status != 200 && r.status != 204) {
    S3Error e = unexpected(one, r);
    co_return DeleteOutcome{.error = std::make_pair(e.code, e.message), .delete_marker = {}};
  }
  if (manifest && r.status != 204) {
    // A synchronous SLO delete: bulk's JSON report says whether every segment went.
    boost::system::error_code ec;
    auto report = boost::json::parse(r.body, ec);
    const boost::json::object* o = !ec && report.is_object() ? &report.as_object() : nullptr;
    const boost::json::value* errors = o ? o->if_contains("Errors") : nullptr;
    if (!errors || !errors->is_array()) {
      co_return DeleteOutcome{.error = std::make_pair(std::string("SLODeleteError"),
                                                      std::string("Unexpected swift response")),
                              .delete_marker = {}};
    }
    if (!errors->as_array().empty()) {
      std::string message;
      if (const auto* st = o->if_contains("Response Status"); st && st->is_string()) {
        message = std::string(st->as_string());
      }
      for (const auto& item : errors->as_array()) {
        if (!item.is_array() || item.as_array().size() != 2) continue;
        auto text = [](const boost::json::value& v) {
          return v.is_string() ? std::string(v.as_string()) : boost::json::serialize(v);
        };
        message += "\n" + text(item.as_array()[0]) + ": " + text(item.as_array()[1]);
      }
      co_return DeleteOutcome{.error = std::make_pair(std::string("SLODeleteError"), message),
                              .delete_marker = {}};
    }
  }
  co_return done;
}

// After `version` was made current again: whether its data is still there. A DELETE of that
// version running meanwhile (concurrent deletes of a key's versions, as clients empty a bucket)
// may have taken the data while the link to it was being written: such a link is in no listing
// (Swift's object_versioning leaves links without a version out) and would keep the bucket from
// ever being deleted. It goes, and false says to restore another version.
net::awaitable<bool> still_there(S3Request& s3, const std::string& version) {
  const std::string query = "version-id=" + common::http::quote(version, "");
  auto head = co_await call_swift(s3, "HEAD", s3.bucket, s3.key, query, 1 << 16,
                                  [](HeaderMap& h) { h.erase("Content-Type"); });
  const auto* r = std::get_if<Response>(&head);
  if (!r || r->status != 404) co_return true;
  (void)co_await call_swift(s3, "DELETE", s3.bucket, s3.key, query + "&symlink=get", 1 << 16,
                            [](HeaderMap& h) { h.erase("Content-Type"); });
  co_return false;
}

// Swift's _restore_on_delete: once the current version is deleted by its id, the newest version
// left becomes current again, as in S3 (object_versioning leaves the key without one), unless
// it is a delete marker. The answer of the restoring PUT, or nullopt when there was nothing to
// restore.
net::awaitable<std::optional<Response>> restore_on_delete(S3Request& s3) {
  auto listing = co_await call_swift(
      s3, "GET", s3.bucket, std::nullopt,
      "format=json&versions&limit=1000&prefix=" + common::http::quote(*s3.key, ""), 8u << 20,
      [](HeaderMap& h) { h.erase("Content-Type"); });
  const Response* l = std::get_if<Response>(&listing);
  if (!l || l->status != 200) co_return std::nullopt;
  boost::system::error_code ec;
  auto items = boost::json::parse(l->body, ec);
  if (ec || !items.is_array()) co_return std::nullopt;
  for (const auto& item : items.as_array()) {
    const auto* o = item.if_object();
    const auto* name = o ? o->if_contains("name") : nullptr;
    if (!name || !name->is_string() || name->as_string() != *s3.key) break;  // no more versions
    const auto* type = o->if_contains("content_type");
    if (type && type->is_string() && type->as_string() == versioning::kDeleteMarkerType) break;
    const auto* id = o->if_contains("version_id");
    if (!id || !id->is_string()) continue;
    const std::string version(id->as_string());
    auto put = co_await call_swift(
        s3, "PUT", s3.bucket, s3.key, "version-id=" + common::http::quote(version, ""), 1 << 16,
        [](HeaderMap& h) {
      h.erase("Content-Type");
      h.set("Content-Length", "0");
    });
    auto* r = std::get_if<Response>(&put);
    // 404: the version went since the listing (object_versioning's answer); try the next.
    if (!r || r->status == 404 || r->status == 412) continue;
    if (r->status / 100 == 2 && !co_await still_there(s3, version)) continue;
    co_return std::move(*r);
  }
  co_return std::nullopt;
}

net::awaitable<Response> delete_object(S3Request& s3) {
  std::optional<std::string> version;
  if (auto v = s3.params.find("versionId"); v != s3.params.end()) version = v->second;
  auto reply = [&](int status, HeaderMap h) {
    Response r;
    r.status = status;
    r.headers = std::move(h);
    set_request_ids(r.headers, s3.env.trans_id);
    return r;
  };
  if (version && *version != "null") {
    auto info = co_await call_swift(s3, "HEAD", s3.bucket, std::nullopt);
    auto* r = std::get_if<Response>(&info);
    if (!r || !r->headers.contains("X-Container-Sysmeta-Versions-Container")) {
      HeaderMap h;
      h.set("x-amz-version-id", *version);
      co_return reply(204, std::move(h));
    }
  }
  if (version) {
    if (auto e = co_await version_delete_refused(s3, *s3.key, *version)) co_return s3.error(*e);
  }
  std::string query = co_await manifest_delete_query(s3, version.value_or(""));
  const bool manifest = !query.empty();
  if (version) {
    query += std::string(query.empty() ? "" : "&") +
             "version-id=" + common::http::quote(*version, "") + "&symlink=get";
  }
  auto answer = co_await call_swift(s3, "DELETE", s3.bucket, s3.key, query, 16u << 20);
  if (auto* e = std::get_if<S3Error>(&answer)) co_return s3.error(*e);
  Response& r = std::get<Response>(answer);
  if (r.status == 404) {
    S3Error e = co_await object_not_found(s3);
    if (e.code == "NoSuchBucket") co_return s3.error(e);
    // s3api's own empty answer, with swob's default type.
    HeaderMap h;
    h.set("Content-Type", "text/html; charset=UTF-8");
    h.set("Content-Length", "0");
    co_return reply(204, std::move(h));
  }
  if (r.status != 200 && r.status != 204) co_return s3.error(unexpected(s3, r));
  if (r.headers.get_or("X-Object-Current-Version-Id", "") == "null") {
    if (auto restored = co_await restore_on_delete(s3)) {
      if (restored->status < 200 || restored->status >= 300) {
        co_return s3.error(unexpected(s3, *restored));
      }
      r = std::move(*restored);
      r.status = 204;
    }
  }
  HeaderMap h = swift_to_s3_headers(r.headers);
  int status = r.status;
  if (manifest && status == 200) status = 204;  // the bulk-delete report is not passed on
  h.set("Content-Length", "0");
  co_return reply(status, std::move(h));
}

}  // namespace

net::awaitable<Response> delete_objects(Exchange& ex, S3Request& s3) {
  s3.key.reset();  // a bucket operation (Swift's bucket_operation drops a key)
  // AWS takes at most 1000 keys and Swift names of 1024 bytes: twice that much XML, capped.
  const size_t max_body = std::min<size_t>(
      2 * static_cast<size_t>(s3.config.max_multi_delete_objects) *
          static_cast<size_t>(s3.config.max_object_name_length),
      10u << 20);
  auto read = co_await read_xml_body(ex, max_body);
  if (auto* e = std::get_if<S3Error>(&read)) co_return s3.error(*e);
  const auto& body = std::get<std::optional<std::string>>(read);
  if (!body || body->empty()) {
    co_return s3.error(make(400, "MissingRequestBodyError", "Request body is empty."));
  }
  // Content-MD5 or an x-amz-checksum-* header is required (AWS SDKs send only the latter since
  // 2025, as newer Swift takes it), and must be the body's.
  auto md5 = s3.client.headers.get("Content-MD5");
  auto planned = checksum_plan(s3, false);
  if (auto* e = std::get_if<S3Error>(&planned)) co_return s3.error(*e);
  const auto& plan = std::get<std::optional<ChecksumPlan>>(planned);
  if (!md5 && !plan) {
    co_return s3.error(S3Error::invalid_request(
        "Missing required header for this request: Content-MD5 OR x-amz-checksum-*"));
  }
  if (auto e = content_md5_mismatch(s3, *body)) co_return s3.error(*e);
  if (plan) {
    Checksum sum(plan->algorithm);
    sum.update(*body);
    if (sum.digest() != *plan->value) co_return s3.error(checksum_mismatch(plan->algorithm));
  }
  // <Delete><Quiet>?</Quiet><Object><Key/><VersionId/>?</Object>+</Delete>, as Swift's schema.
  // Whitespace is kept: " " is a key.
  pugi::xml_document doc;
  auto parsed = doc.load_buffer(body->data(), body->size(),
                                pugi::parse_default | pugi::parse_ws_pcdata_single);
  pugi::xml_node root = doc.document_element();
  if (!parsed || std::string_view(root.name()) != "Delete") co_return s3.error(errors::malformed_xml());
  bool quiet = false;
  std::vector<std::pair<std::string, std::optional<std::string>>> keys;
  for (pugi::xml_node child : root.children()) {
    if (child.type() != pugi::node_element) continue;
    std::string_view name = child.name();
    if (name == "Quiet") {
      quiet = common::http::to_lower(child.text().get()) == "true";
    } else if (name == "Object") {
      pugi::xml_node key = child.child("Key");
      if (!key) co_return s3.error(errors::malformed_xml());
      std::string k = key.text().get();
      if (k.empty()) {
        co_return s3.error(make(400, "UserKeyMustBeSpecified",
                                "The bucket POST must contain the specified field name. If it is "
                                "specified, please check the order of the fields."));
      }
      std::optional<std::string> version;
      if (pugi::xml_node v = child.child("VersionId")) version = std::string(v.text().get());
      keys.emplace_back(std::move(k), std::move(version));
    } else {
      co_return s3.error(errors::malformed_xml());
    }
  }
  if (keys.empty() || static_cast<int64_t>(keys.size()) > s3.config.max_multi_delete_objects) {
    co_return s3.error(errors::malformed_xml());
  }
  pugi::xml_node result;
  auto out = result_document("DeleteResult", &result);
  // The bucket must be there; a user who may not see it gets AccessDenied for every key.
  auto head = co_await call_swift(s3, "HEAD", s3.bucket, std::nullopt);
  if (auto* e = std::get_if<S3Error>(&head)) co_return s3.error(*e);
  const Response& hr = std::get<Response>(head);
  if (hr.status == 404) co_return s3.error(errors::no_such_bucket(s3.bucket));
  // A signature that does not check is the request's error (SignatureDoesNotMatch); a user
  // who may not see the bucket gets AccessDenied for every key.
  if (hr.status == 403) {
    S3Error denied = S3Error::access_denied();
    for (const auto& [key, version] : keys) {
      pugi::xml_node e = result.append_child("Error");
      add_text(e, "Key", key);
      if (version) add_text(e, "VersionId", *version);
      add_text(e, "Code", denied.code);
      add_text(e, "Message", denied.message);
    }
    co_return xml_response(200, to_xml(out), s3.env.trans_id);
  }
  if (hr.status != 204) co_return s3.error(unexpected(s3, hr));
  // multi_delete_concurrency keys at a time; the result lists them in the request's order.
  std::vector<DeleteOutcome> outcomes(keys.size());
  auto executor = co_await net::this_coro::executor;
  size_t next = 0, running = 0;
  net::steady_timer all_done(executor, net::steady_timer::time_point::max());
  const size_t workers = std::min<size_t>(keys.size(),
                                          static_cast<size_t>(s3.config.multi_delete_concurrency));
  for (size_t w = 0; w < workers; ++w) {
    ++running;
    common::spawn_logged(
        executor,
        [&]() -> net::awaitable<void> {
          while (next < keys.size()) {
            size_t i = next++;
            outcomes[i] = co_await delete_one(s3, keys[i].first, keys[i].second);
          }
          if (--running == 0) all_done.cancel();
        },
        "s3api DeleteObjects worker", [&] {
          if (--running == 0) all_done.cancel();
        });
  }
  if (running > 0) {
    auto [ec] = co_await all_done.async_wait(net::as_tuple(net::use_awaitable));
    (void)ec;
  }
  for (size_t i = 0; i < keys.size(); ++i) {
    if (const auto& error = outcomes[i].error) {
      pugi::xml_node e = result.append_child("Error");
      add_text(e, "Key", keys[i].first);
      if (keys[i].second) add_text(e, "VersionId", *keys[i].second);
      add_text(e, "Code", error->first);
      add_text(e, "Message", error->second);
    } else if (!quiet) {
      // As S3 answers (Swift's s3api gives the Key alone): the version asked for, and whether a
      // delete marker was made or deleted.
      pugi::xml_node d = result.append_child("Deleted");
      add_text(d, "Key", keys[i].first);
      if (keys[i].second) add_text(d, "VersionId", *keys[i].second);
      if (const auto& marker = outcomes[i].delete_marker) {
        add_text(d, "DeleteMarker", "true");
        add_text(d, "DeleteMarkerVersionId", *marker);
      }
    }
  }
  co_return xml_response(200, to_xml(out), s3.env.trans_id);
}

std::optional<S3Error> content_md5_mismatch(const S3Request& s3, std::string_view body) {
  auto md5 = s3.client.headers.get("Content-MD5");
  if (!md5) return std::nullopt;
  const auto digest = common::crypto::md5(body);
  if (*md5 == common::crypto::b64encode(std::string_view(
                  reinterpret_cast<const char*>(digest.data()), digest.size()))) {
    return std::nullopt;
  }
  S3Error e = errors::bad_digest();
  e.details.emplace_back("ContentMd5", std::string(*md5));
  return e;
}

net::awaitable<Response> object_attributes(S3Request& s3) {
  if (s3.client.method != "GET") {
    co_return s3.error(errors::method_not_allowed(s3.client.method, "OBJECT"));
  }
  // x-amz-object-attributes: which of the five to give (at least one).
  static constexpr std::string_view kAttributes[] = {"ETag", "Checksum", "ObjectParts",
                                                     "StorageClass", "ObjectSize"};
  std::set<std::string> wanted;
  for (const auto& name : common::list_from_csv(s3.client.headers.get_or("x-amz-object-attributes", ""))) {
    if (std::find(std::begin(kAttributes), std::end(kAttributes), name) == std::end(kAttributes)) {
      co_return s3.error(S3Error::invalid_argument("x-amz-object-attributes", name,
                                                   "Invalid attribute name specified."));
    }
    wanted.insert(name);
  }
  if (wanted.empty()) {
    co_return s3.error(S3Error::invalid_argument("x-amz-object-attributes", "",
                                                 "Invalid attribute name specified."));
  }
  auto header_int = [&](const char* name, int64_t def) -> std::optional<int64_t> {
    auto v = s3.client.headers.get(name);
    if (!v) return def;
    auto n = common::parse_python_int(*v);
    if (!n || *n < 0 || *n > kMax32BitInt) return std::nullopt;
    return *n;
  };
  auto max_parts = header_int("x-amz-max-parts", 1000);
  auto marker = header_int("x-amz-part-number-marker", 0);
  if (!max_parts || !marker) {
    co_return s3.error(S3Error::invalid_argument("x-amz-max-parts", "",
                                                 "Argument must be an integer"));
  }
  *max_parts = std::min<int64_t>(*max_parts, 1000);
  auto v = s3.params.find("versionId");
  const std::string version_query =
      v == s3.params.end() ? "" : "version-id=" + common::http::quote(v->second, "");
  auto sse = read_sse(s3.client.headers);
  if (auto* e = std::get_if<S3Error>(&sse)) co_return s3.error(*e);
  s3.sse_customer_key = std::get<Sse>(sse).customer_key;
  auto head = co_await call_swift(s3, "HEAD", s3.bucket, s3.key, version_query, 1 << 16,
                                  drop_conditions);
  if (auto* e = std::get_if<S3Error>(&head)) co_return s3.error(*e);
  const Response& object = std::get<Response>(head);
  if (object.status == 404) co_return s3.error(co_await missing_object(s3));
  if (auto e = read_sse_refusal(object, std::get<Sse>(sse))) co_return s3.error(*e);
  if (object.status != 200) co_return s3.error(unexpected(s3, object));
  const HeaderMap& oh = object.headers;

  pugi::xml_node root;
  auto doc = result_document("GetObjectAttributesResponse", &root);
  if (wanted.contains("ETag")) {
    std::string etag = s3_etag(oh);
    std::erase(etag, '"');
    add_text(root, "ETag", etag);
  }
  const std::string checksum_type(oh.get_or(kChecksumTypeSysmeta, "FULL_OBJECT"));
  if (wanted.contains("Checksum")) {
    pugi::xml_node c;
    for (ChecksumAlgorithm a : kChecksumAlgorithms) {
      auto value = oh.get(checksum_sysmeta(a));
      if (!value || value->empty()) continue;
      if (!c) c = root.append_child("Checksum");
      add_text(c, ("Checksum" + checksum_upper_name(a)).c_str(), *value);
    }
    if (c) add_text(c, "ChecksumType", checksum_type);
  }
  const bool multipart = !oh.get_or(kEtagSysmeta, "").empty() &&
                         common::config_true_value(oh.get_or("X-Static-Large-Object", ""));
  if (wanted.contains("ObjectParts") && multipart) {
    auto listed = co_await manifest_parts(s3, version_query);
    if (auto* e = std::get_if<S3Error>(&listed)) co_return s3.error(*e);
    const auto& parts = std::get<std::vector<ManifestPart>>(listed);
    pugi::xml_node op = root.append_child("ObjectParts");
    const int64_t count = static_cast<int64_t>(parts.size());
    const int64_t first = std::min(*marker, count);  // parts are numbered from 1
    const int64_t last = std::min(count, first + *max_parts);
    add_text(op, "IsTruncated", last < count ? "true" : "false");
    add_text(op, "MaxParts", std::to_string(*max_parts));
    if (last < count) add_text(op, "NextPartNumberMarker", std::to_string(last));
    add_text(op, "PartNumberMarker", std::to_string(*marker));
    for (int64_t i = first; i < last; ++i) {
      pugi::xml_node part = op.append_child("Part");
      // A composite checksum's parts keep their own (a HEAD each, of the page's parts only).
      if (checksum_type == "COMPOSITE") {
        const std::string& name = parts[static_cast<size_t>(i)].name;
        size_t slash = name.find('/', 1);
        if (slash != std::string::npos) {
          auto segment = co_await call_swift(s3, "HEAD", name.substr(1, slash - 1),
                                             name.substr(slash + 1), "", 1 << 16,
                                             [&](HeaderMap& h) { h = own_headers(s3.client.headers); });
          if (const auto* r = std::get_if<Response>(&segment); r && r->status == 200) {
            for (ChecksumAlgorithm a : kChecksumAlgorithms) {
              auto value = r->headers.get(checksum_sysmeta(a));
              if (value && !value->empty()) {
                add_text(part, ("Checksum" + checksum_upper_name(a)).c_str(), *value);
              }
            }
          }
        }
      }
      add_text(part, "PartNumber", std::to_string(i + 1));
      add_text(part, "Size", std::to_string(parts[static_cast<size_t>(i)].size));
    }
    add_text(op, "PartsCount", std::to_string(count));
  }
  if (wanted.contains("StorageClass")) add_text(root, "StorageClass", "STANDARD");
  if (wanted.contains("ObjectSize")) {
    add_text(root, "ObjectSize", std::string(oh.get_or("Content-Length", "0")));
  }
  Response out = xml_response(200, to_xml(doc), s3.env.trans_id);
  if (auto modified = oh.get("Last-Modified")) out.headers.set("Last-Modified", *modified);
  if (auto version = oh.get("X-Object-Version-Id")) out.headers.set("x-amz-version-id", *version);
  co_return out;
}

net::awaitable<void> object_request(Exchange& ex, S3Request& s3) {
  const std::string& method = s3.client.method;
  if (method == "GET") co_return co_await get_or_head(ex, s3, Op::kGet);
  if (method == "HEAD") co_return co_await get_or_head(ex, s3, Op::kHead);
  if (method == "PUT") co_return co_await put_object(ex, s3, {s3.bucket, *s3.key, false});
  if (method == "DELETE") co_return co_await ex.reply(co_await delete_object(s3));
  if (method == "POST") co_return co_await ex.reply(s3.error(errors::not_implemented()));
  co_return co_await ex.reply(s3.error(errors::method_not_allowed(method, "OBJECT")));
}

}  // namespace apus::proxy::s3api
