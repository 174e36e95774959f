#include "common/http/headers.h"

#include "common/http/internal/rfc_token.h"

#include <algorithm>

namespace apus::common::http {

namespace {
inline char lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c; }
}  // namespace

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

bool istarts_with(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && iequals(s.substr(0, prefix.size()), prefix);
}

std::string to_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = lower(c);
  return out;
}

std::string title_case(std::string_view s) {
  std::string out(s);
  bool start = true;
  for (char& c : out) {
    bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    if (letter) c = start ? static_cast<char>(c & ~0x20) : lower(c);
    start = !letter;
  }
  return out;
}

bool is_safe_header_text(std::string_view text) {
  return text.find_first_of(std::string_view("\r\n\0", 3)) == std::string_view::npos;
}

std::optional<std::string_view> HeaderMap::get(std::string_view name) const {
  for (const auto& [n, v] : fields_) {
    if (iequals(n, name)) return std::string_view(v);
  }
  return std::nullopt;
}

std::string_view HeaderMap::get_or(std::string_view name, std::string_view fallback) const {
  auto v = get(name);
  return v ? *v : fallback;
}

void HeaderMap::set(std::string_view name, std::string_view value) {
  auto it = std::find_if(fields_.begin(), fields_.end(),
                         [&](const Field& f) { return iequals(f.first, name); });
  if (it == fields_.end()) {
    fields_.emplace_back(name, value);
    return;
  }
  it->second.assign(value);
  fields_.erase(std::remove_if(std::next(it), fields_.end(),
                               [&](const Field& f) { return iequals(f.first, name); }),
                fields_.end());
}

void HeaderMap::add(std::string_view name, std::string_view value) {
  fields_.emplace_back(name, value);
}

void add_wsgi_field(HeaderMap& map, std::string_view name, std::string_view value) {
  std::string wsgi = title_case(name);
  bool had_underscore = false;
  for (char& c : wsgi) {
    if (c == '_') {
      c = '-';
      had_underscore = true;
    }
  }
  bool framing = iequals(wsgi, "Content-Type") || iequals(wsgi, "Content-Length");
  if (framing && had_underscore) return;
  for (auto& [n, v] : map.fields_) {
    if (iequals(n, wsgi)) {
      if (!framing) v.append(",").append(value);
      return;
    }
  }
  map.fields_.emplace_back(std::move(wsgi), value);
}

size_t HeaderMap::erase(std::string_view name) {
  size_t before = fields_.size();
  std::erase_if(fields_, [&](const Field& f) { return iequals(f.first, name); });
  return before - fields_.size();
}

size_t HeaderMap::erase_prefix(std::string_view prefix) {
  size_t before = fields_.size();
  std::erase_if(fields_, [&](const Field& f) { return istarts_with(f.first, prefix); });
  return before - fields_.size();
}

}  // namespace apus::common::http

namespace apus::common::http {

namespace {

using rfc::is_space;
using rfc::skip_quoted;
using rfc::skip_spaces;
using rfc::skip_token;
using rfc::strip;

// One match of Swift's parameter pattern  \s*;\s*(token)\s*(?:=\s*(token|"quoted"))?  at `i`:
// the end of the match, or npos.
size_t match_param(std::string_view s, size_t i, std::string& key, std::string& value) {
  i = skip_spaces(s, i);
  if (i >= s.size() || s[i] != ';') return std::string_view::npos;
  i = skip_spaces(s, i + 1);
  size_t key_end = skip_token(s, i);
  if (key_end == i) return std::string_view::npos;
  key.assign(s.substr(i, key_end - i));
  value.clear();
  size_t end = skip_spaces(s, key_end);
  if (end < s.size() && s[end] == '=') {
    size_t v = skip_spaces(s, end + 1);
    size_t v_end = v < s.size() && s[v] == '"' ? skip_quoted(s, v) : skip_token(s, v);
    if (v_end != std::string_view::npos && v_end > v) {
      value.assign(s.substr(v, v_end - v));
      return v_end;
    }
  }
  return end;
}

}  // namespace

ContentType parse_content_type(std::string_view value) {
  ContentType ct;
  size_t semi = value.find(';');
  if (semi == std::string_view::npos) {
    ct.type.assign(value);
    return ct;
  }
  ct.type.assign(value.substr(0, semi));
  std::string_view params = value.substr(semi);
  std::string key, val;
  for (size_t i = 0; i < params.size();) {
    size_t end = match_param(params, i, key, val);
    if (end == std::string_view::npos) {
      ++i;  // like re.findall: try the next position
      continue;
    }
    ct.params.emplace_back(std::string(strip(key)), std::string(strip(val)));
    i = end;
  }
  return ct;
}

std::pair<std::string, std::optional<std::string>> extract_swift_bytes(std::string_view value) {
  ContentType ct = parse_content_type(value);
  std::optional<std::string> swift_bytes;
  std::string out = std::move(ct.type);
  for (auto& [k, v] : ct.params) {
    if (k == "swift_bytes") {
      swift_bytes = std::move(v);
    } else {
      out += ";" + k + "=" + v;
    }
  }
  return {std::move(out), std::move(swift_bytes)};
}

namespace {
// RFC 9110's tchar, as Beast's parser checks field names.
bool is_tchar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}
}  // namespace

std::optional<std::string> mask_field_names(std::string_view head,
                                            std::vector<std::string>& names) {
  std::optional<std::string> out;
  size_t copied = 0;  // bytes of `head` already in *out
  size_t line = head.find("\r\n");
  while (line != std::string_view::npos) {
    const size_t start = line + 2;
    const size_t end = head.find("\r\n", start);
    if (end == std::string_view::npos || end == start) break;  // the empty line ends the head
    line = end;
    std::string_view field = head.substr(start, end - start);
    const size_t colon = field.find(':');
    if (colon == std::string_view::npos || colon == 0 || field[0] == ' ' || field[0] == '\t') {
      continue;  // continuation lines and malformed ones are the parser's to judge
    }
    std::string_view name = field.substr(0, colon);
    bool visible = true, token = true;
    for (char c : name) {
      visible = visible && c > 0x20 && c < 0x7f;
      token = token && is_tchar(c);
    }
    if (token || !visible) continue;
    if (!out) out.emplace();
    out->append(head.substr(copied, start - copied));
    out->append(kMaskedFieldPrefix).append(std::to_string(names.size()));
    names.emplace_back(name);
    copied = start + colon;
  }
  if (out) out->append(head.substr(copied));
  return out;
}

std::string_view unmask_field_name(std::string_view name, const std::vector<std::string>& names) {
  if (names.empty() || !name.starts_with(kMaskedFieldPrefix)) return name;
  std::string_view digits = name.substr(kMaskedFieldPrefix.size());
  size_t n = 0;
  if (digits.empty() || digits.size() > 6) return name;
  for (char c : digits) {
    if (c < '0' || c > '9') return name;
    n = n * 10 + static_cast<size_t>(c - '0');
  }
  return n < names.size() ? std::string_view(names[n]) : name;
}

}  // namespace apus::common::http
