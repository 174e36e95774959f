#include "proxy/s3api/aws_chunked.h"

#include <algorithm>
#include <cctype>

namespace apus::proxy::s3api {

namespace {

constexpr size_t kMaxLine = 4096;
constexpr uint64_t kMinChunk = 8192;  // AWS's smallest chunk but the last

std::string_view strip(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// Python's int(s, 16) for a chunk size: optional surrounding whitespace and "0x"; nullopt for
// anything else or a negative. Values beyond 64 bits saturate (they exceed any body anyway).
std::optional<uint64_t> hex_size(std::string_view s) {
  s = strip(s);
  if (!s.empty() && s[0] == '+') s.remove_prefix(1);
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) s.remove_prefix(2);
  if (s.empty()) return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    int d = std::isdigit(static_cast<unsigned char>(c)) ? c - '0'
            : (c >= 'a' && c <= 'f')                   ? c - 'a' + 10
            : (c >= 'A' && c <= 'F')                   ? c - 'A' + 10
                                                       : -1;
    if (d < 0) return std::nullopt;
    v = v > (UINT64_MAX >> 4) ? UINT64_MAX : (v << 4) | static_cast<uint64_t>(d);
  }
  return v;
}

}  // namespace

AwsChunkedDecoder::AwsChunkedDecoder(uint64_t decoded_length,
                                     std::set<std::string> expected_trailers,
                                     S3Signature* signature)
    : decoded_length_(decoded_length),
      expected_trailers_(std::move(expected_trailers)),
      signature_(signature),
      to_read_(decoded_length) {}

std::optional<AwsChunkedDecoder::Failure> AwsChunkedDecoder::fail(Failure f) {
  state_ = State::kFailed;
  failure_ = f;
  return f;
}

std::optional<AwsChunkedDecoder::Failure> AwsChunkedDecoder::start_chunk(std::string_view line) {
  ++chunk_number_;
  size_t semi = line.find(';');
  std::string_view params = semi == std::string_view::npos ? std::string_view()
                                                           : line.substr(semi + 1);
  auto size = hex_size(line.substr(0, semi));
  if (!size) return fail(Error::kIncomplete);
  if (last_chunk_size_ && *last_chunk_size_ < kMinChunk && *size != 0) {
    return fail(Failure{.error = Error::kChunkTooSmall,
                        .chunk_number = chunk_number_,
                        .bad_chunk_size = *last_chunk_size_});
  }
  last_chunk_size_ = *size;
  if (*size > to_read_) {
    uint64_t sent = decoded_length_ - to_read_;
    return fail(Failure{.error = Error::kSize,
                        .expected = decoded_length_,
                        .provided = *size > UINT64_MAX - sent ? UINT64_MAX : sent + *size});
  }
  if (signature_ != nullptr) {
    if (params.empty()) return fail(Error::kIncomplete);
    size_t eq = params.find('=');
    std::string_view key = params.substr(0, eq);
    std::string_view sig = eq == std::string_view::npos ? std::string_view() : params.substr(eq + 1);
    if (strip(key) != "chunk-signature") {
      signature_->check_chunk("", "");  // breaks the chain, as Swift's validator call does
      return fail(Error::kSignatureMismatch);
    }
    if (sig.find(';') != std::string_view::npos) return fail(Error::kIncomplete);
    sig = strip(sig);
    if (sig.empty()) return fail(Error::kIncomplete);
    chunk_signature_ = std::string(sig);
  }
  chunk_size_ = chunk_left_ = *size;
  chunk_sha_.reset();
  state_ = State::kData;
  if (chunk_left_ == 0) return end_chunk();
  return std::nullopt;
}

// The chunk's data is all here: its signature, then the separator (or the end of the payload).
std::optional<AwsChunkedDecoder::Failure> AwsChunkedDecoder::end_chunk() {
  if (signature_ != nullptr && !signature_->check_chunk(chunk_sha_.hex_digest(), chunk_signature_)) {
    return fail(Error::kSignatureMismatch);
  }
  state_ = chunk_size_ == 0 ? State::kFinalEnd : State::kDataEnd;
  return std::nullopt;
}

std::optional<AwsChunkedDecoder::Failure> AwsChunkedDecoder::trailer_line(std::string_view line) {
  if (line.empty()) return end_trailers();
  size_t colon = line.find(':');
  std::string_view key = line.substr(0, colon);
  std::string_view value = colon == std::string_view::npos ? std::string_view()
                                                           : line.substr(colon + 1);
  std::string lower(key);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (!expected_trailers_.count(lower)) return fail(Error::kMalformedTrailer);
  std::string name(strip(key));
  std::string val(strip(value));
  auto it = std::find_if(trailers_.begin(), trailers_.end(),
                         [&](const auto& t) { return t.first == name; });
  if (it != trailers_.end()) {
    it->second = std::move(val);
  } else {
    trailers_.emplace_back(std::move(name), std::move(val));
  }
  return std::nullopt;
}

std::optional<AwsChunkedDecoder::Failure> AwsChunkedDecoder::end_trailers() {
  auto has = [&](std::string_view name) {
    return std::any_of(trailers_.begin(), trailers_.end(),
                       [&](const auto& t) { return t.first == name; });
  };
  const bool signed_trailers = expected_trailers_.count("x-amz-trailer-signature") > 0;
  if (signed_trailers && !has("x-amz-trailer-signature")) return fail(Error::kIncomplete);
  std::set<std::string> names;
  for (const auto& t : trailers_) names.insert(t.first);
  if (names != expected_trailers_) return fail(Error::kMalformedTrailer);
  if (signed_trailers && signature_ != nullptr) {
    if (!signature_->check_trailer(trailers_)) return fail(Error::kSignatureMismatch);
    if (trailers_.size() == 1) return fail(Error::kIncomplete);
  }
  if (to_read_ != 0) {
    return fail(Failure{.error = Error::kSize,
                        .expected = decoded_length_,
                        .provided = decoded_length_ - to_read_});
  }
  state_ = State::kDone;
  return std::nullopt;
}

std::optional<AwsChunkedDecoder::Failure> AwsChunkedDecoder::feed(std::string_view in,
                                                                  std::string& out) {
  while (!in.empty()) {
    switch (state_) {
      case State::kFailed:
        return failure_;
      case State::kDone:
        return std::nullopt;
      case State::kData: {
        size_t n = static_cast<size_t>(std::min<uint64_t>(chunk_left_, in.size()));
        std::string_view piece = in.substr(0, n);
        chunk_sha_.update(piece);
        out.append(piece);
        in.remove_prefix(n);
        chunk_left_ -= n;
        to_read_ -= n;
        if (chunk_left_ == 0) {
          if (auto f = end_chunk()) return f;
        }
        break;
      }
      case State::kHeader:
      case State::kDataEnd:
      case State::kFinalEnd:
      case State::kTrailers: {
        // Gather one line (through "\n"); it must end with "\r\n".
        size_t nl = in.find('\n');
        size_t take = nl == std::string_view::npos ? in.size() : nl + 1;
        if (line_.size() + take > kMaxLine) return fail(Error::kIncomplete);
        line_.append(in.substr(0, take));
        in.remove_prefix(take);
        if (nl == std::string_view::npos) break;
        if (line_.size() < 2 || line_[line_.size() - 2] != '\r') return fail(Error::kIncomplete);
        std::string line = line_.substr(0, line_.size() - 2);
        line_.clear();
        std::optional<Failure> f;
        if (state_ == State::kHeader) {
          f = start_chunk(line);
        } else if (state_ == State::kDataEnd) {
          // The separator after a chunk's data is exactly "\r\n".
          if (!line.empty()) return fail(Error::kIncomplete);
          state_ = State::kHeader;
        } else if (state_ == State::kFinalEnd) {
          if (!expected_trailers_.empty()) {
            state_ = State::kTrailers;
            f = trailer_line(line);
          } else if (!line.empty()) {
            return fail(Error::kIncomplete);
          } else {
            f = end_trailers();
          }
        } else {
          f = trailer_line(line);
        }
        if (f) return f;
        break;
      }
    }
  }
  return state_ == State::kFailed ? failure_ : std::nullopt;
}

std::optional<AwsChunkedDecoder::Failure> AwsChunkedDecoder::finish() {
  switch (state_) {
    case State::kDone:
      return std::nullopt;
    case State::kFailed:
      return failure_;
    case State::kFinalEnd:
      // The body may end right after the last chunk (Swift reads b'' there), or after trailers
      // that never came: then what was expected is missing.
    case State::kTrailers:
      if (line_.empty()) return end_trailers();
      return fail(Error::kIncomplete);
    default:
      return fail(Error::kIncomplete);
  }
}

}  // namespace apus::proxy::s3api
