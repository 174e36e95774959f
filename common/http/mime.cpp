#include "common/http/mime.h"

#include <algorithm>

#include <string.h>

namespace apus::common::http {

namespace {

// Where `delimiter` first starts in `data`, or npos. string_view::find stops at each byte equal
// to the delimiter's first ('\r': once per 256 bytes of a random body) and compares from there;
// glibc's memmem skips ahead by what it has seen, which matters for a body of many MiB.
size_t find_delimiter(std::string_view data, std::string_view delimiter) {
  const void* at = memmem(data.data(), data.size(), delimiter.data(), delimiter.size());
  return at ? static_cast<size_t>(static_cast<const char*>(at) - data.data())
            : std::string_view::npos;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() &&
         (s.front() == ' ' || s.front() == '\t' || s.front() == '\r' || s.front() == '\n')) {
    s.remove_prefix(1);
  }
  while (!s.empty() &&
         (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\n')) {
    s.remove_suffix(1);
  }
  return s;
}

// "Name: value" lines; lines without a colon are ignored.
void parse_header_lines(std::string_view block, HeaderMap& out) {
  while (!block.empty()) {
    size_t eol = block.find("\r\n");
    std::string_view line = block.substr(0, eol);
    block.remove_prefix(eol == std::string_view::npos ? block.size() : eol + 2);
    size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    std::string_view name = trim(line.substr(0, colon));
    if (!name.empty()) out.add(name, trim(line.substr(colon + 1)));
  }
}

}  // namespace

MimeSplitter::MimeSplitter(std::string_view boundary)
    : start_line_("--" + std::string(boundary)), delimiter_("\r\n" + start_line_) {}

void MimeSplitter::feed(std::string_view bytes) {
  if (pos_ > 0 && pos_ * 2 >= buffer_.size()) {
    buffer_.erase(0, pos_);
    pos_ = 0;
  }
  buffer_.append(bytes);
}

void MimeSplitter::finish() { finished_ = true; }

std::optional<std::string_view> MimeSplitter::take_body_tail() {
  if (state_ != State::kBody || finished_ || !error_.empty() || buffered() >= delimiter_.size()) {
    return std::nullopt;
  }
  std::string_view tail = unread();
  pos_ = buffer_.size();
  return tail;
}

size_t MimeSplitter::body_in_place(std::string_view region) {
  // As read_body() decides: body up to a delimiter, or all but a tail that could start one.
  size_t delim = find_delimiter(region, delimiter_);
  size_t keep = delimiter_.size() - 1;
  size_t body = delim != std::string_view::npos ? delim
                : region.size() > keep          ? region.size() - keep
                                                : 0;
  feed(region.substr(body));
  return body;
}

MimeSplitter::Event MimeSplitter::fail(std::string why) {
  error_ = std::move(why);
  state_ = State::kDone;
  return Event::kError;
}

MimeSplitter::Event MimeSplitter::next() {
  data_ = {};
  if (!error_.empty()) return Event::kError;
  switch (state_) {
    case State::kStart:
      return start();
    case State::kHeaders:
      return read_headers();
    case State::kBody:
      return read_body();
    case State::kAfterDelimiter:
      return after_delimiter();
    case State::kDone:
      break;
  }
  return Event::kEnd;
}

MimeSplitter::Event MimeSplitter::start() {
  // Swift reads lines of at most len("--<boundary>\r\n") bytes, skips bare CRLFs and wants the
  // first other line to be the boundary, whitespace stripped.
  const size_t limit = start_line_.size() + 2;
  for (;;) {
    std::string_view u = unread();
    size_t nl = u.find('\n');
    std::string_view line;
    if (nl != std::string_view::npos && nl < limit) {
      line = u.substr(0, nl + 1);
    } else if (u.size() >= limit || finished_) {
      line = u.substr(0, std::min(u.size(), limit));
    } else {
      return Event::kNeedMore;
    }
    pos_ += line.size();
    if (line == "\r\n") continue;
    if (trim(line) != start_line_) {
      return fail("invalid starting boundary: wanted '" + start_line_ + "', got '" +
                  std::string(line.substr(0, 80)) + "'");
    }
    state_ = State::kHeaders;
    return read_headers();
  }
}

MimeSplitter::Event MimeSplitter::read_headers() {
  std::string_view u = unread();
  headers_ = HeaderMap();
  if (u.starts_with("\r\n")) {  // no headers at all
    pos_ += 2;
    state_ = State::kBody;
    return Event::kHeaders;
  }
  size_t end = u.find("\r\n\r\n");
  size_t delim = find_delimiter(u, delimiter_);
  if (delim != std::string_view::npos && (end == std::string_view::npos || delim < end)) {
    // The document ends before its headers do: headers only, an empty body.
    parse_header_lines(u.substr(0, delim), headers_);
    pos_ += delim;
    state_ = State::kBody;
    return Event::kHeaders;
  }
  if (end == std::string_view::npos) {
    if (u.size() > kMaxHeaderBytes) return fail("MIME document headers too long");
    if (!finished_) return Event::kNeedMore;
    parse_header_lines(u, headers_);
    pos_ += u.size();
    state_ = State::kBody;
    return Event::kHeaders;
  }
  parse_header_lines(u.substr(0, end), headers_);
  pos_ += end + 4;
  state_ = State::kBody;
  return Event::kHeaders;
}

MimeSplitter::Event MimeSplitter::read_body() {
  std::string_view u = unread();
  size_t delim = find_delimiter(u, delimiter_);
  if (delim == 0) {
    pos_ += delimiter_.size();
    state_ = State::kAfterDelimiter;
    return after_delimiter();
  }
  if (delim != std::string_view::npos) {
    data_ = u.substr(0, delim);
    pos_ += delim;
    return Event::kData;
  }
  if (finished_) {
    if (u.empty()) {
      state_ = State::kDone;
      return Event::kEndOfDocument;
    }
    data_ = u;
    pos_ += u.size();
    return Event::kData;
  }
  // Everything but a tail that could be the start of a delimiter is body.
  size_t keep = delimiter_.size() - 1;
  if (u.size() <= keep) return Event::kNeedMore;
  data_ = u.substr(0, u.size() - keep);
  pos_ += data_.size();
  return Event::kData;
}

MimeSplitter::Event MimeSplitter::after_delimiter() {
  std::string_view u = unread();
  if (u.size() < 2 && !finished_) return Event::kNeedMore;
  if (u.starts_with("--") || u.size() < 2) {
    pos_ = buffer_.size();  // the epilogue, if any, is ignored
    state_ = State::kDone;
  } else {
    pos_ += 2;  // "\r\n" (Swift skips any two bytes)
    state_ = State::kHeaders;
  }
  return Event::kEndOfDocument;
}

}  // namespace apus::common::http
