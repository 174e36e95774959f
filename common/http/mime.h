// MimeSplitter: splits a multipart MIME body into its documents, as Swift's
// iter_multipart_mime_documents and parse_mime_headers read them (the object server's PUT with
// metadata footers and multiphase commit, swift-protocol.md §6).
//
// The body looks like
//
//   --<boundary>\r\n
//   X-Document: object body\r\n
//   \r\n
//   <bytes>\r\n--<boundary>\r\n
//   X-Document: object metadata\r\n
//   ...\r\n
//   \r\n
//   <bytes>\r\n--<boundary>--
//
// Blank lines before the first boundary are skipped. A document ends at the next
// "\r\n--<boundary>"; the two bytes after it are "--" for the last one (anything else is
// skipped, as Swift does). A body that ends without a closing boundary ends its last document.
//
// Sans I/O: the caller feeds bytes as they arrive and pulls events; nothing here blocks or
// allocates per event beyond the buffered input. Body bytes may be split across any number of
// kData events. Thread-compatible.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "common/http/headers.h"

namespace apus::common::http {

class MimeSplitter {
 public:
  enum class Event {
    kNeedMore,       // feed() more input (or finish())
    kHeaders,        // a document starts: headers() holds its MIME headers
    kData,           // data() holds the next bytes of the current document's body
    kEndOfDocument,  // the current document is complete
    kEnd,            // no more documents
    kError,          // malformed: error() says why; nothing more comes
  };

  explicit MimeSplitter(std::string_view boundary);

  void feed(std::string_view bytes);
  void finish();  // the input has ended

  Event next();

  const HeaderMap& headers() const { return headers_; }
  // Valid until the next call of feed() or next().
  std::string_view data() const { return data_; }
  const std::string& error() const { return error_; }
  // Bytes buffered and not yet handed out (bounds memory: a document's body never waits here
  // longer than it takes to rule out a boundary).
  size_t buffered() const { return buffer_.size() - pos_; }

  // The in-place path for a large document body, which saves copying every byte into this
  // splitter and out again. take_body_tail(): in a document's body with fewer than
  // delimiter_size() bytes buffered (what might start a delimiter) and input not finished,
  // hands those bytes out and forgets them (valid until the next feed()); nullopt otherwise.
  // The reader puts them in front of new input in its own buffer and calls
  // body_in_place(region) on the whole: it returns how many leading bytes of `region` are the
  // document's body, and feeds the rest (a possible delimiter's start, or the delimiter and
  // what follows) here, where next() goes on as if all of it had been fed.
  std::optional<std::string_view> take_body_tail();
  size_t body_in_place(std::string_view region);
  size_t delimiter_size() const { return delimiter_.size(); }

  // A header block longer than this is an error (it would otherwise buffer without end).
  static constexpr size_t kMaxHeaderBytes = 64 * 1024;

 private:
  enum class State { kStart, kHeaders, kBody, kAfterDelimiter, kDone };
  std::string_view unread() const { return std::string_view(buffer_).substr(pos_); }
  Event fail(std::string why);
  Event start();
  Event read_headers();
  Event read_body();
  Event after_delimiter();

  std::string start_line_;  // "--<boundary>"
  std::string delimiter_;   // "\r\n--<boundary>"
  std::string buffer_;
  size_t pos_ = 0;
  bool finished_ = false;
  State state_ = State::kStart;
  HeaderMap headers_;
  std::string_view data_;
  std::string error_;
};

}  // namespace apus::common::http
