// multipart/form-data reading (multipart.h).
#include "proxy/multipart.h"

#include <algorithm>

#include "common/assert.h"

namespace apus::proxy::multipart {

namespace {

bool is_ascii_letter(unsigned char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

// bytes.title(): ASCII letters upper-cased after an uncased byte, lower-cased after a letter.
std::string ascii_title(std::string_view s) {
  std::string out(s);
  bool prev = false;
  for (char& c : out) {
    const auto u = static_cast<unsigned char>(c);
    if (is_ascii_letter(u)) {
      c = static_cast<char>(prev ? std::tolower(u) : std::toupper(u));
      prev = true;
    } else {
      prev = false;
    }
  }
  return out;
}

// Python's bytes.strip(): ASCII whitespace at both ends.
std::string_view bytes_strip(std::string_view s) {
  constexpr std::string_view kSpace = " \t\n\r\v\f";
  size_t b = s.find_first_not_of(kSpace);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(kSpace) - b + 1);
}

// Python's str.strip() for the characters that matter here (ASCII and the C1 separators).
std::string_view str_strip(std::string_view s) {
  constexpr std::string_view kSpace = " \t\n\r\v\f\x1c\x1d\x1e\x1f";
  size_t b = s.find_first_not_of(kSpace);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(kSpace) - b + 1);
}

// The email parser's headerRE: "From ", a continuation, or a name of printable ASCII other
// than ':' (possibly empty) followed by ':'.
bool header_line(std::string_view line) {
  if (line.starts_with("From ")) return true;
  if (line[0] == ' ' || line[0] == '\t') return true;
  for (char c : line) {
    if (c == ':') return true;
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x21 || u > 0x7e) return false;
  }
  return false;
}

// A regex \w character; bytes of multi-byte UTF-8 characters count as letters (Python's \w
// takes most of them).
bool is_word(unsigned char c) {
  return is_ascii_letter(c) || (c >= '0' && c <= '9') || c == '_' || c >= 0x80;
}

// Swift's ATTRIBUTES_RE, (\w+)=(".*?"|[^";]+)(; ?|$), matched at the start of `s` with
// Python's backtracking: the name, the value (quotes included) and how much it consumed.
bool match_attribute(std::string_view s, std::string* name, std::string* value, size_t* used) {
  const size_t n = s.size();
  size_t i = 0;
  while (i < n && is_word(static_cast<unsigned char>(s[i]))) ++i;
  if (i == 0 || i >= n || s[i] != '=') return false;
  // (; ?|$) at q: '$' matches at the end and before a final '\n'.
  auto tail = [&](size_t q, size_t* end) {
    if (q < n && s[q] == ';') {
      *end = q + 1 + (q + 1 < n && s[q + 1] == ' ' ? 1 : 0);
      return true;
    }
    if (q == n || (q + 1 == n && s[q] == '\n')) {
      *end = q;
      return true;
    }
    return false;
  };
  const size_t v0 = i + 1;
  size_t end = 0;
  if (v0 < n && s[v0] == '"') {
    for (size_t q = v0 + 1; q < n && s[q] != '\n'; ++q) {
      if (s[q] == '"' && tail(q + 1, &end)) {
        *name = std::string(s.substr(0, i));
        *value = std::string(s.substr(v0, q + 1 - v0));
        *used = end;
        return true;
      }
    }
    return false;
  }
  size_t q = v0;
  while (q < n && s[q] != '"' && s[q] != ';') ++q;
  for (size_t e = q; e > v0; --e) {
    if (tail(e, &end)) {
      *name = std::string(s.substr(0, i));
      *value = std::string(s.substr(v0, e - v0));
      *used = end;
      return true;
    }
  }
  return false;
}

}  // namespace

bool valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t need = 0;
    unsigned char lo = 0x80, hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf) {
      need = 1;
    } else if (c >= 0xe0 && c <= 0xef) {
      need = 2;
      if (c == 0xe0) lo = 0xa0;
      if (c == 0xed) hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
      need = 3;
      if (c == 0xf0) lo = 0x90;
      if (c == 0xf4) hi = 0x8f;
    } else {
      return false;
    }
    if (i + need >= s.size()) return false;
    for (size_t j = 1; j <= need; ++j) {
      const auto d = static_cast<unsigned char>(s[i + j]);
      if (d < (j == 1 ? lo : 0x80) || d > (j == 1 ? hi : 0xbf)) return false;
    }
    i += need + 1;
  }
  return true;
}

std::string latin1_to_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x80) {
      out.push_back(ch);
    } else {
      out.push_back(static_cast<char>(0xc0 | (c >> 6)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3f)));
    }
  }
  return out;
}

// ---- Parser ----------------------------------------------------------------------------------

Parser::Parser(std::string_view boundary) : delim_("\r\n--") {
  delim_.append(boundary);
  buf_.reserve(std::min<size_t>(kBufferCapacity, 16 * 1024));
}

size_t Parser::room() const {
  const size_t cap = kBufferCapacity + delim_.size() + 4;
  const size_t held = buf_.size() - pos_;
  return held >= cap ? 0 : cap - held;
}

void Parser::feed(std::string_view data) {
  APUS_CHECK(!eof_ && data.size() <= room());
  if (pos_ > 0) {
    buf_.erase(0, pos_);
    clean_ = clean_ > pos_ ? clean_ - pos_ : 0;
    pos_ = 0;
  }
  buf_.append(data);
}

// Only moves the start: data handed out by read_data() stays valid until feed() compacts.
void Parser::consume(size_t n) { pos_ += n; }

Parser::Step Parser::start() {
  APUS_CHECK(state_ == State::kStart);
  const size_t blen = delim_.size();  // len("--" + boundary) + 2
  while (true) {
    std::string_view p = pending();
    size_t nl = p.substr(0, blen).find('\n');
    size_t len;
    if (nl != std::string_view::npos) {
      len = nl + 1;
    } else if (p.size() >= blen) {
      len = blen;
    } else if (eof_) {
      len = p.size();
    } else {
      return Step::kNeedMore;
    }
    std::string line(p.substr(0, len));
    consume(len);
    if (line == "\r\n") continue;
    if (bytes_strip(line) != std::string_view(delim_).substr(2)) return Step::kInvalid;
    state_ = State::kHeaders;
    return Step::kReady;
  }
}

Parser::Step Parser::end_part_at(size_t at) {
  std::string_view p = pending();
  const size_t after = at + delim_.size();
  const size_t avail = p.size() - after;
  if (avail < 2 && !eof_) return Step::kNeedMore;
  more_ = !(avail >= 2 && p[after] == '-' && p[after + 1] == '-');
  consume(after + std::min<size_t>(avail, 2));
  part_over_ = true;
  return Step::kReady;
}

Parser::Step Parser::read_headers(std::vector<std::string>* lines) {
  if (state_ == State::kBetween) {
    state_ = State::kHeaders;
    part_over_ = false;
  }
  if (state_ == State::kDone) {
    lines->clear();
    return Step::kReady;
  }
  APUS_CHECK(state_ == State::kHeaders);
  while (true) {
    std::string line;
    bool ended = false;  // readline gave b'' (the part is over)
    if (part_over_) {
      ended = true;
    } else {
      std::string_view p = pending();
      size_t n = p.find("\r\n");
      if (n == std::string_view::npos) {
        // The line is at least this long (a final '\r' may start its "\r\n").
        const size_t at_least = p.size() - (p.ends_with('\r') ? 1 : 0);
        if (header_bytes_ + at_least > kMaxHeaderBytes) return Step::kTooLong;
        if (!eof_) return Step::kNeedMore;
        line = std::string(p);
        consume(p.size());
        part_over_ = true;
        more_ = false;
        ended = line.empty();
      } else {
        if (header_bytes_ + n > kMaxHeaderBytes) return Step::kTooLong;
        std::string_view rest = p.substr(n);
        bool delim = false;
        if (rest.size() >= delim_.size()) {
          delim = rest.starts_with(delim_);
        } else if (!eof_ && std::string_view(delim_).starts_with(rest)) {
          return Step::kNeedMore;  // might be the delimiter
        }
        if (delim) {
          if (p.size() - n - delim_.size() < 2 && !eof_) return Step::kNeedMore;
          line = std::string(p.substr(0, n));
          (void)end_part_at(n);
          ended = line.empty();
        } else {
          line = std::string(p.substr(0, n + 2));
          consume(n + 2);
        }
      }
    }
    if (!line.empty()) {
      header_bytes_ += line.size();
      header_lines_.push_back(line);
    }
    if (ended || line == "\r\n" || line == "\n") {
      *lines = std::move(header_lines_);
      header_lines_.clear();
      header_bytes_ = 0;
      state_ = State::kBody;
      return Step::kReady;
    }
  }
}

Parser::Step Parser::read_data(size_t max, std::string_view* out) {
  APUS_CHECK(max > 0);
  if (state_ == State::kBetween || state_ == State::kDone) return Step::kEnd;
  APUS_CHECK(state_ == State::kBody);
  if (!part_over_) {
    std::string_view p = pending();
    // Where a delimiter can still start: nothing before clean_ was one.
    const size_t from = clean_ > pos_ ? clean_ - pos_ : 0;
    size_t n = p.find(delim_, from);
    if (n == std::string_view::npos) {
      const size_t keep = std::min(p.size(), delim_.size() - 1);
      clean_ = pos_ + (p.size() - keep);
      const size_t safe = eof_ ? p.size() : p.size() - keep;
      if (safe > 0) {
        const size_t len = std::min(safe, max);
        *out = p.substr(0, len);
        consume(len);
        return Step::kReady;
      }
      if (!eof_) return Step::kNeedMore;
      part_over_ = true;
      more_ = false;
    } else if (n > 0) {
      const size_t len = std::min(n, max);
      *out = p.substr(0, len);
      consume(len);
      return Step::kReady;
    } else if (end_part_at(0) == Step::kNeedMore) {
      return Step::kNeedMore;
    }
  }
  state_ = more_ ? State::kBetween : State::kDone;
  part_over_ = false;
  return Step::kEnd;
}

// ---- headers ---------------------------------------------------------------------------------

MimeHeaders MimeHeaders::parse(const std::vector<std::string>& raw_lines) {
  std::string text;
  for (const std::string& l : raw_lines) text += valid_utf8(l) ? l : latin1_to_utf8(l);
  // The email parser's lines: split after "\r\n", "\r" or "\n", terminators kept.
  std::vector<std::string_view> lines;
  std::string_view rest = text;
  while (!rest.empty()) {
    size_t i = rest.find_first_of("\r\n");
    size_t len = i == std::string_view::npos ? rest.size()
                 : (rest[i] == '\r' && i + 1 < rest.size() && rest[i + 1] == '\n') ? i + 2
                                                                                     : i + 1;
    lines.push_back(rest.substr(0, len));
    rest.remove_prefix(len);
  }
  std::vector<std::string_view> headers;
  for (std::string_view line : lines) {
    if (!header_line(line)) break;  // the blank separator, or the first line of a body
    headers.push_back(line);
  }
  std::vector<std::pair<std::string, std::string>> raw;  // as Message keeps them
  std::vector<std::string_view> last;
  auto flush = [&]() {
    if (last.empty()) return;
    std::string_view first = last[0];
    size_t colon = first.find(':');
    std::string value(first.substr(colon + 1));
    size_t b = value.find_first_not_of(" \t");
    value.erase(0, b == std::string::npos ? value.size() : b);
    for (size_t k = 1; k < last.size(); ++k) value.append(last[k]);
    while (!value.empty() && (value.back() == '\r' || value.back() == '\n')) value.pop_back();
    raw.emplace_back(std::string(first.substr(0, colon)), std::move(value));
    last.clear();
  };
  for (size_t k = 0; k < headers.size(); ++k) {
    std::string_view line = headers[k];
    if (line[0] == ' ' || line[0] == '\t') {
      if (!last.empty()) last.push_back(line);
      continue;
    }
    flush();
    if (line.starts_with("From ")) {
      if (k + 1 == headers.size() && k != 0) break;  // pushed back as the body's first line
      continue;                                      // the envelope line, or misplaced
    }
    size_t colon = line.find(':');
    if (colon == 0) continue;  // no name: dropped, with its continuations
    last.push_back(line);
  }
  flush();
  MimeHeaders out;
  for (auto& [name, value] : raw) {
    std::string title = ascii_title(name);
    bool seen = std::any_of(out.fields_.begin(), out.fields_.end(),
                            [&](const auto& f) { return f.first == title; });
    if (!seen) out.fields_.emplace_back(std::move(title), std::move(value));
  }
  return out;
}

std::optional<std::string> MimeHeaders::get(std::string_view name) const {
  const std::string title = ascii_title(name);
  for (const auto& [n, v] : fields_) {
    if (n == title) return v;
  }
  return std::nullopt;
}

Disposition parse_content_disposition(std::string_view header) {
  Disposition d;
  std::string_view attrs;
  if (size_t semi = header.find(';'); semi != std::string_view::npos) {
    d.type = std::string(str_strip(header.substr(0, semi)));
    attrs = str_strip(header.substr(semi + 1));
  } else {
    d.type = std::string(header);
  }
  std::string name, value;
  size_t used = 0;
  while (!attrs.empty() && match_attribute(attrs, &name, &value, &used)) {
    size_t b = value.find_first_not_of('"');
    value = b == std::string::npos ? std::string()
                                   : value.substr(b, value.find_last_not_of('"') - b + 1);
    d.attrs[name] = value;
    attrs.remove_prefix(used);
  }
  return d;
}

}  // namespace apus::proxy::multipart
