// Reading one HTTP message for Beast's parser, in both directions (server requests, client
// responses). The head: so that field names Swift's eventlet takes and Beast refuses ('=' in
// s3api's "X-Object-Meta-Foo=5Fbar", '(' in S3 user metadata) pass, the head is read whole,
// such names are masked for the parser (mask_field_names), and the caller puts them back from
// `masked` with unmask_field_name(). The body: parse_buffered_body() and read_body_bytes().
// Internal: for .cpp files that already include Beast.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/read_size.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/error.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

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

// A message's body is fed to Beast's parser from `buffer` by the two functions below, which
// share `starved`: set when the parser asked for more than the buffer holds. It must then not
// be given the same bytes again before more arrive (its chunk parser asserts that a final
// chunk's size line it already saw has grown; Beast's own async_read_some would re-feed them
// first, which is why the socket read here is ours). The caller clears `starved` with each
// new parser.

// Parses more of the body from what `buffer` already holds (what came with the head, the next
// chunks of a chunked body) into the parser's buffer_body, with no read from the socket. A
// read of Beast's stops after each chunk's size line and each chunk's data, and each stop is a
// trip through the event loop: a small chunked MIME PUT from the proxy is four chunks. (Beast's
// eager option would parse on too, but then waits for the socket when the buffer ends inside
// a chunk's size line, holding back the body bytes it has: a request and its answer streamed
// against each other, as SSYNC's, would deadlock.) Stops where the buffer ends or the body's
// room is full; returns the parser's error, if any.
template <class Parser>
boost::beast::error_code parse_buffered_body(Parser& parser, boost::beast::flat_buffer& buffer,
                                             bool& starved) {
  namespace bhttp = boost::beast::http;
  while (!starved && buffer.size() > 0 && !parser.is_done() && parser.get().body().size > 0) {
    boost::beast::error_code ec;
    const size_t used = parser.put(buffer.data(), ec);
    buffer.consume(used);
    if (ec == bhttp::error::need_more) starved = true;
    if (ec == bhttp::error::need_more || ec == bhttp::error::need_buffer) break;
    if (ec) return ec;
    if (used == 0) break;
  }
  return {};
}

// One read from `stream` into `buffer` (its free room, at least 512 bytes, at most 64 KiB, as
// Beast's reads size it), then parse_buffered_body(). The peer's close ends a body read to
// the close (a response without a length) and is partial_message for any other.
template <class Parser>
boost::asio::awaitable<boost::beast::error_code> read_body_bytes(
    boost::beast::tcp_stream& stream, boost::beast::flat_buffer& buffer, Parser& parser,
    bool& starved) {
  namespace beast = boost::beast;
  const size_t room = beast::read_size(buffer, 65536);
  if (room == 0) co_return beast::http::error::buffer_overflow;  // at the buffer's max_size()
  auto [ec, n] = co_await stream.async_read_some(buffer.prepare(room), kAsTuple);
  if (ec == boost::asio::error::eof) {
    beast::error_code eof_ec;
    parser.put_eof(eof_ec);
    co_return eof_ec;
  }
  if (ec) co_return ec;
  buffer.commit(n);
  starved = false;
  co_return parse_buffered_body(parser, buffer, starved);
}

}  // namespace apus::common::http::internal
