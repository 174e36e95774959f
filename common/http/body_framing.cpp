#include "common/http/body_framing.h"

#include <algorithm>

namespace apus::common::http {

namespace {

// RFC 9110's tchar.
bool is_tchar(char c) {
  const auto u = static_cast<unsigned char>(c);
  if (u >= 0x80 || u <= 0x20 || u == 0x7f) return false;
  return std::string_view("\"(),/:;<=>?@[\\]{}").find(c) == std::string_view::npos;
}

bool is_space(char c) { return c == ' ' || c == '\t'; }

// A field value's bytes: VCHAR, obs-text, SP, HTAB.
bool is_value_char(char c) {
  const auto u = static_cast<unsigned char>(c);
  return c == '\t' || (u >= 0x20 && u != 0x7f);
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void skip_spaces(std::string_view& s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
}

bool take_token(std::string_view& s) {
  if (s.empty() || !is_tchar(s.front())) return false;
  while (!s.empty() && is_tchar(s.front())) s.remove_prefix(1);
  return true;
}

// chunk-ext = *( BWS ";" BWS name [ BWS "=" BWS ( token / quoted-string ) ] ), the whole rest
// of the size line. A quoted string may hold any byte but an unescaped quote (the line already
// ends at its first CRLF), as Beast's parser took it.
bool chunk_extensions(std::string_view s) {
  while (!s.empty()) {
    skip_spaces(s);
    if (s.empty() || s.front() != ';') return false;
    s.remove_prefix(1);
    skip_spaces(s);
    if (!take_token(s)) return false;
    const size_t name_end = s.size();
    skip_spaces(s);
    if (s.empty()) return s.size() == name_end;  // no space may end the line
    if (s.front() == ';') continue;
    if (s.front() != '=') return false;
    s.remove_prefix(1);
    skip_spaces(s);
    if (s.empty()) return false;
    if (s.front() != '"') {
      if (!take_token(s)) return false;
      continue;
    }
    s.remove_prefix(1);
    for (;;) {
      if (s.empty()) return false;
      const char c = s.front();
      s.remove_prefix(1);
      if (c == '"') break;
      if (c == '\\') {
        if (s.empty()) return false;
        s.remove_prefix(1);
      }
    }
  }
  return true;
}

}  // namespace

bool BodyFraming::size_line(std::string_view line) {
  uint64_t size = 0;
  size_t digits = 0;
  for (; digits < line.size(); ++digits) {
    const int d = hex_value(line[digits]);
    if (d < 0) break;
    if (size > (UINT64_MAX >> 4)) return false;  // past 2^64 - 1
    size = (size << 4) | static_cast<uint64_t>(d);
  }
  if (digits == 0 || !chunk_extensions(line.substr(digits))) return false;
  left_ = size;
  state_ = size == 0 ? State::kTrailer : State::kData;
  return true;
}

bool BodyFraming::trailer_line(std::string_view line) {
  if (line.empty()) {
    state_ = State::kDone;
    return true;
  }
  // A line that starts with a space continues the field before it (obs-fold).
  if (is_space(line.front())) {
    return had_trailer_field_ && std::all_of(line.begin(), line.end(), is_value_char);
  }
  std::string_view rest = line;
  if (!take_token(rest) || rest.empty() || rest.front() != ':') return false;
  had_trailer_field_ = true;
  return std::all_of(rest.begin() + 1, rest.end(), is_value_char);
}

size_t BodyFraming::parse(std::string_view in) {
  size_t used = 0;
  for (;;) {
    const std::string_view rest = in.substr(used);
    switch (state_) {
      case State::kData:
        if (left_ > 0) return used;
        state_ = kind_ == Kind::kChunked ? State::kDataEnd : State::kDone;
        continue;
      case State::kDone:
      case State::kFailed:
        return used;
      case State::kDataEnd:
        if (rest.size() < 2) return used;
        if (rest[0] != '\r' || rest[1] != '\n') return fail("no CRLF after a chunk's data", used);
        used += 2;
        state_ = State::kSizeLine;
        continue;
      case State::kSizeLine:
      case State::kTrailer: {
        const size_t eol = rest.substr(0, kMaxLineBytes + 2).find("\r\n");
        // A CR in the line must be its end (Beast's bad_line_ending).
        const size_t cr = rest.substr(0, std::min(eol, kMaxLineBytes + 2)).find('\r');
        if (cr != std::string_view::npos && cr + 1 < rest.size() && cr != eol) {
          return fail("a CR not followed by LF in chunked framing", used);
        }
        if (eol == std::string_view::npos) {
          if (rest.size() >= kMaxLineBytes + 2) return fail("chunked framing line too long", used);
          return used;
        }
        const std::string_view line = rest.substr(0, eol);
        if (state_ == State::kSizeLine) {
          if (!size_line(line)) return fail("bad chunk size line", used);
        } else {
          trailer_bytes_ += eol + 2;
          if (trailer_bytes_ > kMaxTrailerBytes) return fail("chunked trailer too long", used);
          if (!trailer_line(line)) return fail("bad chunked trailer line", used);
        }
        used += eol + 2;
        continue;
      }
    }
  }
}

void BodyFraming::took(uint64_t n) {
  if (kind_ != Kind::kUntilClose) left_ -= std::min(n, left_);
}

void BodyFraming::peer_closed() {
  if (kind_ == Kind::kUntilClose && state_ == State::kData) {
    state_ = State::kDone;
  } else if (state_ != State::kDone && state_ != State::kFailed) {
    fail("the peer closed before the body's end", 0);
  }
}

}  // namespace apus::common::http
