// The aws-chunked body encoding of S3's streaming uploads (x-amz-content-sha256 of
// STREAMING-AWS4-HMAC-SHA256-PAYLOAD[-TRAILER] or STREAMING-UNSIGNED-PAYLOAD-TRAILER):
//
//   <hex size>[;chunk-signature=<sig>]\r\n<data>\r\n ... 0[;chunk-signature=<sig>]\r\n
//   [<trailer>:<value>\r\n ... x-amz-trailer-signature:<sig>\r\n]\r\n
//
// AwsChunkedDecoder is a push parser: feed() it the raw body in pieces of any size and it
// appends the payload to `out`, checking each chunk's signature (chained from the request's
// seed signature) as the chunk ends and the trailers' at the end, as Swift's StreamingInput
// does, with the same failures: a truncated or malformed body is kIncomplete (never a wait
// for bytes that cannot come: finish() says the body ended), more payload than
// x-amz-decoded-content-length is kSize, a non-final chunk under 8192 bytes after another is
// kChunkTooSmall, unexpected or missing trailers are kMalformedTrailer, a bad signature is
// kSignatureMismatch. After a failure every call fails the same way.
//
// Memory is bounded whatever the input: a chunk header or trailer line longer than 4 KiB is
// kIncomplete, and payload bytes are handed on as they come, never held.
//
// Thread-compatible.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/crypto/hmac.h"
#include "proxy/s3api/s3_auth.h"

namespace apus::proxy::s3api {

class AwsChunkedDecoder {
 public:
  enum class Error { kIncomplete, kSignatureMismatch, kSize, kChunkTooSmall, kMalformedTrailer };
  struct Failure {
    Error error = Error::kIncomplete;
    uint64_t expected = 0, provided = 0;                 // kSize: payload bytes
    uint64_t chunk_number = 0, bad_chunk_size = 0;       // kChunkTooSmall
  };

  // `decoded_length`: x-amz-decoded-content-length. `expected_trailers`: the lower-case names
  // x-amz-trailer announced (plus x-amz-trailer-signature for the signed TRAILER form).
  // `signature`: the request's checked seed signature for the signed forms, null for
  // STREAMING-UNSIGNED-PAYLOAD-TRAILER; it must outlive the decoder.
  AwsChunkedDecoder(uint64_t decoded_length, std::set<std::string> expected_trailers,
                    S3Signature* signature);

  // Consumes all of `in`, appending payload bytes to `out`. Bytes after the end of the
  // encoding are ignored (Swift never reads them).
  std::optional<Failure> feed(std::string_view in, std::string& out);
  // The raw body ended: a failure unless the encoding ended too.
  std::optional<Failure> finish();

  bool done() const { return state_ == State::kDone; }
  // The trailers as sent (names stripped, case kept), once done().
  const std::vector<std::pair<std::string, std::string>>& trailers() const { return trailers_; }

 private:
  enum class State { kHeader, kData, kDataEnd, kFinalEnd, kTrailers, kDone, kFailed };

  std::optional<Failure> fail(Failure f);
  std::optional<Failure> fail(Error e) { return fail(Failure{.error = e}); }
  std::optional<Failure> start_chunk(std::string_view line);
  std::optional<Failure> end_chunk();
  std::optional<Failure> trailer_line(std::string_view line);
  std::optional<Failure> end_trailers();

  const uint64_t decoded_length_;
  std::set<std::string> expected_trailers_;
  S3Signature* const signature_;
  State state_ = State::kHeader;
  std::optional<Failure> failure_;
  std::string line_;            // a header or trailer line being gathered
  uint64_t to_read_;            // payload bytes still to come
  uint64_t chunk_size_ = 0;
  uint64_t chunk_left_ = 0;
  uint64_t chunk_number_ = 0;
  std::optional<uint64_t> last_chunk_size_;
  std::string chunk_signature_;
  common::crypto::Sha256 chunk_sha_;
  std::vector<std::pair<std::string, std::string>> trailers_;
};

}  // namespace apus::proxy::s3api
