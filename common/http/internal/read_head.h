// Reading one HTTP message for Beast's parser, in both directions (server requests, client
// responses). The head: so that field names Swift's eventlet takes and Beast refuses ('=' in
// s3api's "X-Object-Meta-Foo=5Fbar", '(' in S3 user metadata) pass, the head is read whole,
// such names are masked for the parser (mask_field_names), and the caller puts them back from
// `masked` with unmask_field_name(). The body: parse_buffered_body(). Internal: for .cpp files
// that already include Beast.
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

// After a body read: parses more of the body from what `buffer` already holds (the next chunks
// of a chunked body) into the parser's buffer_body, with no further read from the socket. A
// read of Beast's stops after each chunk's size line and each chunk's data, and each stop is a
// trip through the event loop: a small chunked MIME PUT from the proxy is four chunks. (Beast's
// eager option would parse on too, but then waits for the socket when the buffer ends inside
// a chunk's size line, holding back the body bytes it has: a request and its answer streamed
// against each other, as SSYNC's, would deadlock.) Stops where the buffer ends or the body's
// room is full; returns the parser's error, if any.
template <class Parser>
boost::beast::error_code parse_buffered_body(Parser& parser, boost::beast::flat_buffer& buffer) {
  namespace bhttp = boost::beast::http;
  while (buffer.size() > 0 && !parser.is_done() && parser.get().body().size > 0) {
    boost::beast::error_code ec;
    const size_t used = parser.put(buffer.data(), ec);
    buffer.consume(used);
    if (ec == bhttp::error::need_more || ec == bhttp::error::need_buffer) break;
    if (ec) return ec;
    if (used == 0) break;
  }
  return {};
}

}  // namespace apus::common::http::internal
