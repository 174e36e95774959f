// RFC 2616 token scanning, as Swift's regexes match tokens, spaces and quoted strings in
// Content-Type parameters and Accept headers. Private to common/.
#pragma once

#include <string_view>

namespace apus::common::http::rfc {

// Token characters as Swift's _rfc_token has them (bytes >= 0x80 included).
inline bool is_token_char(unsigned char c) {
  if (c <= 0x20 || c == 0x7f) return false;
  return std::string_view("()<>@,;:\\\"/[]?={}").find(static_cast<char>(c)) ==
         std::string_view::npos;
}
// Python's \s for ASCII.
inline bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}
// The position after the spaces, the token, or the quoted string starting at `i` (npos when
// a quoted string never closes).
inline size_t skip_spaces(std::string_view s, size_t i) {
  while (i < s.size() && is_space(s[i])) ++i;
  return i;
}
inline size_t skip_token(std::string_view s, size_t i) {
  while (i < s.size() && is_token_char(static_cast<unsigned char>(s[i]))) ++i;
  return i;
}
inline size_t skip_quoted(std::string_view s, size_t i) {  // s[i] == '"'
  for (++i; i < s.size(); ++i) {
    if (s[i] == '\\') {
      if (++i == s.size()) return std::string_view::npos;
    } else if (s[i] == '"') {
      return i + 1;
    }
  }
  return std::string_view::npos;
}
inline std::string_view strip(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

}  // namespace apus::common::http::rfc
