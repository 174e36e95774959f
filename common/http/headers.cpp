#include "common/http/headers.h"

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
