// Reading one HTTP message for Beast's parser, in both directions (server requests, client
// responses). The head: so that field names Swift's eventlet takes and Beast refuses ('=' in
// s3api's "X-Object-Meta-Foo=5Fbar", '(' in S3 user metadata) pass, the head is read whole,
// such names are masked for the parser (mask_field_names), and the caller puts them back from
// `masked` with unmask_field_name(). The body: read_framed_body().
// Internal: for .cpp files that already include Beast.
#pragma once

#include <array>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/read_size.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/error.hpp>

#include "common/http/body_framing.h"
#include "common/http/headers.h"
#include "common/http/internal/asio_util.h"

namespace apus::common::http::internal {

// Reads from `stream` into `buffer` until it holds a whole head (at most `limit` bytes: then
// header_limit), and parses it with `parser`, consuming it from `buffer`; what follows (a
// body, a pipelined request) stays there. Errors as Beast's async_read_header gives them:
// end_of_stream for a close before any byte, partial_message for one mid-head.
template <class Parser>
boost::asio::awaitable<boost::beast::error_code> read_head(boost::beast::tcp_stream& stream,
                                                           boost::beast::flat_buffer& buffer,
                                                           Parser& parser, size_t limit,
                                                           std::vector<std::string>& masked) {
  namespace beast = boost::beast;
  namespace bhttp = boost::beast::http;
  masked.clear();
  size_t head_size = 0;
  size_t searched = 0;  // bytes of `buffer` known to hold no end of head
  for (;;) {
    std::string_view data(static_cast<const char*>(buffer.data().data()), buffer.size());
    size_t end = data.find("\r\n\r\n", searched > 3 ? searched - 3 : 0);
    if (end != std::string_view::npos) {
      head_size = end + 4;
      break;
    }
    searched = data.size();
    if (data.size() >= limit) co_return bhttp::error::header_limit;
    // As Beast's own reads size them: the buffer's room, at least 512 bytes, at most 64 KiB.
    auto [ec, n] =
        co_await stream.async_read_some(buffer.prepare(beast::read_size(buffer, 65536)), kAsTuple);
    if (ec == boost::asio::error::eof) {
      co_return buffer.size() == 0 ? bhttp::error::end_of_stream : bhttp::error::partial_message;
    }
    if (ec) co_return ec;
    buffer.commit(n);
  }
  std::string_view head(static_cast<const char*>(buffer.data().data()), head_size);
  std::optional<std::string> masked_head = mask_field_names(head, masked);
  if (masked_head) head = *masked_head;
  beast::error_code ec;
  size_t used = parser.put(boost::asio::buffer(head.data(), head.size()), ec);
  if (!ec && (used != head.size() || !parser.is_header_done())) ec = bhttp::error::bad_value;
  if (!ec) buffer.consume(head_size);
  co_return ec;
}

// Where the body of the message whose head `parser` read is: none (Beast saw it complete: a
// request without a length, HEAD's answer, 204, 304), chunked, a Content-Length, or a response
// read until the peer closes.
template <class Parser>
BodyFraming body_framing_of(const Parser& parser) {
  if (parser.is_done()) return BodyFraming::none();
  if (parser.chunked()) return BodyFraming::chunked();
  if (auto length = parser.content_length()) return BodyFraming::length(*length);
  return BodyFraming::until_close();
}

// Reads the next bytes of a body framed by `framing` into `dest` and returns how many (0 at the
// body's end, or with an error). What `buffer` holds is taken first (the body's start came
// with the head; framing lines and what follows them); then, with nothing buffered, one read
// from the socket straight into `dest`, at most to the end of the current chunk (or body), so
// a body's bytes are not copied in this process. A chunk that ends within that read has its
// CRLF and the next size line read into `buffer` in the same call (a vector read), with room
// for kFramingRead bytes: the few body bytes that come with them are the only ones copied.
// `before_read()` runs before each socket read (the caller's timeout). Errors: bad_chunk for
// malformed chunked framing, partial_message for a close before the end, buffer_overflow when
// a framing line does not fit `buffer`'s max_size, the socket's own.
template <class Stream, class BeforeRead>
boost::asio::awaitable<std::pair<boost::beast::error_code, size_t>> read_framed_body(
    Stream& stream, boost::beast::flat_buffer& buffer, BodyFraming& framing, std::span<char> dest,
    BeforeRead before_read) {
  namespace beast = boost::beast;
  namespace bhttp = boost::beast::http;
  constexpr size_t kFramingRead = 1024;
  using Result = std::pair<beast::error_code, size_t>;
  if (dest.empty()) co_return Result{bhttp::error::buffer_overflow, 0};
  size_t got = 0;
  for (;;) {
    // Framing and body bytes already buffered.
    for (;;) {
      std::string_view held(static_cast<const char*>(buffer.data().data()), buffer.size());
      buffer.consume(framing.parse(held));
      if (framing.failed()) co_return Result{bhttp::error::bad_chunk, got};
      const size_t take = static_cast<size_t>(
          std::min<uint64_t>(framing.data_ahead(), std::min(buffer.size(), dest.size() - got)));
      if (take == 0) break;
      std::memcpy(dest.data() + got, buffer.data().data(), take);
      buffer.consume(take);
      framing.took(take);
      got += take;
    }
    if (got > 0 || framing.done()) co_return Result{{}, got};
    // Nothing buffered to give: one read from the socket.
    std::array<boost::asio::mutable_buffer, 2> to;
    size_t parts = 0;
    const uint64_t ahead = framing.data_ahead();
    const size_t direct = static_cast<size_t>(std::min<uint64_t>(ahead, dest.size()));
    if (direct > 0) to[parts++] = boost::asio::buffer(dest.data(), direct);
    if (direct == 0 || (framing.is_chunked() && direct == ahead)) {
      const size_t room = std::min(kFramingRead, buffer.max_size() - buffer.size());
      if (room == 0) co_return Result{bhttp::error::buffer_overflow, 0};
      to[parts++] = buffer.prepare(room);
    }
    before_read();
    auto [ec, n] = co_await stream.async_read_some(std::span(to.data(), parts), kAsTuple);
    if (ec == boost::asio::error::eof) {
      framing.peer_closed();
      co_return Result{framing.done() ? beast::error_code() : bhttp::error::partial_message, 0};
    }
    if (ec) co_return Result{ec, 0};
    got = std::min(n, direct);
    buffer.commit(n - got);
    framing.took(got);
  }
}

}  // namespace apus::common::http::internal
