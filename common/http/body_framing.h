// BodyFraming: where the bytes of an HTTP/1.1 message body are (RFC 9112 §6-7), so that a
// reader can take them from the socket straight into its own buffer. Beast's parser copied
// every body byte from the connection's buffer into the caller's; for a 16 MiB PUT that copy
// was a tenth of each object server's CPU.
//
// A body is one of: none, Content-Length bytes, chunked, or everything until the peer closes
// (a response without a length). The reader alternates parse() (framing at the front of what
// it has buffered: a chunk's size line, the CRLF after its data, the trailer section) with
// taking data_ahead() bytes, from its buffer or from the socket, and reports them with took().
//
// Chunked syntax is checked as Beast's parser checked it (its grammar for chunk extensions;
// trailer lines must be fields), with CRLF line ends only, and bounded: a size line or a
// trailer line longer than kMaxLineBytes, a trailer section longer than kMaxTrailerBytes, or a
// chunk size past 2^64 - 1 is an error. Trailers are checked and dropped (no server of ours
// reads them; Swift's footers travel inside a MIME body). Sans I/O, no allocation.
// Thread-compatible.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace apus::common::http {

class BodyFraming {
 public:
  static BodyFraming none() { return BodyFraming(State::kDone, 0, Kind::kLength); }
  static BodyFraming length(uint64_t n) {
    return BodyFraming(n == 0 ? State::kDone : State::kData, n, Kind::kLength);
  }
  static BodyFraming chunked() { return BodyFraming(State::kSizeLine, 0, Kind::kChunked); }
  static BodyFraming until_close() {
    return BodyFraming(State::kData, UINT64_MAX, Kind::kUntilClose);
  }

  // Consumes the framing at the front of `in`, up to the next body byte or the body's end, and
  // returns how many bytes it consumed. Stops before a line that `in` does not hold whole (the
  // caller reads more and calls again with the line's start).
  size_t parse(std::string_view in);

  // Body bytes that come next, before any framing: the caller may read up to this many
  // straight into its buffer. 0 while framing comes next (or at the end).
  uint64_t data_ahead() const { return state_ == State::kData ? left_ : 0; }
  // `n` body bytes (at most data_ahead()) were taken.
  void took(uint64_t n);
  // The peer closed the connection: the end of a body read until then; for any other body,
  // unless already done, an error (truncated).
  void peer_closed();

  bool done() const { return state_ == State::kDone; }
  bool failed() const { return state_ == State::kFailed; }
  const char* error() const { return error_; }  // why failed(), for the reader's error
  bool is_chunked() const { return kind_ == Kind::kChunked; }

  static constexpr size_t kMaxLineBytes = 4096;
  static constexpr size_t kMaxTrailerBytes = 64 * 1024;

 private:
  enum class State { kSizeLine, kData, kDataEnd, kTrailer, kDone, kFailed };
  enum class Kind { kLength, kChunked, kUntilClose };
  BodyFraming(State s, uint64_t left, Kind k) : state_(s), left_(left), kind_(k) {}

  // Returns `used`: what parse() consumed before the error.
  size_t fail(const char* why, size_t used) {
    state_ = State::kFailed;
    error_ = why;
    return used;
  }
  // Each takes one whole line (without its CRLF) and moves on; false when it is malformed.
  bool size_line(std::string_view line);
  bool trailer_line(std::string_view line);

  State state_;
  uint64_t left_;  // bytes of the current chunk (or of the whole body) still to come
  Kind kind_;
  size_t trailer_bytes_ = 0;
  bool had_trailer_field_ = false;  // a trailer line may continue it (obs-fold)
  const char* error_ = "";
};

}  // namespace apus::common::http
