#include "common/http/url.h"

#include <boost/container/small_vector.hpp>

namespace apus::common::http {

namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool always_safe(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == '-' || c == '~';
}

// Python's str.split('/', maxsplit). Inline room for what split_path asks (at most a handful of
// segments): the proxy splits each request's path about ten times, in as many middlewares.
using Segments = boost::container::small_vector<std::string_view, 8>;
Segments split_slash(std::string_view s, int maxsplit) {
  Segments out;
  size_t start = 0;
  while (maxsplit-- > 0) {
    size_t slash = s.find('/', start);
    if (slash == std::string_view::npos) break;
    out.push_back(s.substr(start, slash - start));
    start = slash + 1;
  }
  out.push_back(s.substr(start));
  return out;
}

}  // namespace

std::string percent_decode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size()) {
      int hi = hex_value(s[i + 1]), lo = hex_value(s[i + 2]);
      if (hi >= 0 && lo >= 0) {
        out.push_back(static_cast<char>(hi * 16 + lo));
        i += 2;
        continue;
      }
    }
    out.push_back(s[i]);
  }
  return out;
}

std::string quote(std::string_view s, std::string_view safe) {
  std::string out;
  quote_append(out, s, safe);
  return out;
}

void quote_append(std::string& out, std::string_view s, std::string_view safe) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  out.reserve(out.size() + s.size());
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    if (always_safe(c) || safe.find(ch) != std::string_view::npos) {
      out.push_back(ch);
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
}

Result<std::vector<std::optional<std::string>>> split_path(std::string_view path, int minsegs,
                                                            int maxsegs, bool rest_with_last) {
  if (maxsegs == 0) maxsegs = minsegs;
  if (minsegs > maxsegs) return Status::invalid_argument("minsegs > maxsegs");
  auto invalid = [&] { return Status::invalid_argument("Invalid path: " + quote(path)); };
  int lo = minsegs + 1, hi = maxsegs + 1;
  auto segs = split_slash(path, rest_with_last ? maxsegs : hi);
  int count = static_cast<int>(segs.size());
  if (!segs[0].empty() || count < lo) return invalid();
  if (rest_with_last ? count > hi : (count > hi + 1 || (count == hi + 1 && !segs[hi].empty()))) {
    return invalid();
  }
  for (int i = 1; i < lo && i < count; ++i) {
    if (segs[i].empty()) return invalid();
  }
  std::vector<std::optional<std::string>> out;
  out.reserve(maxsegs);
  for (int i = 1; i < hi && i < count; ++i) out.emplace_back(std::string(segs[i]));
  while (static_cast<int>(out.size()) < maxsegs) out.emplace_back(std::nullopt);
  return out;
}

Status validate_device_partition(std::string_view device, std::string_view partition) {
  auto bad = [](std::string_view v) {
    return v.empty() || v == "." || v == ".." || v.find('/') != std::string_view::npos;
  };
  if (bad(device)) return Status::invalid_argument("Invalid device: " + quote(device));
  if (bad(partition)) return Status::invalid_argument("Invalid partition: " + quote(partition));
  return Status();
}

namespace {

// A query field's name or value as swob reads it: '+' is a space, then percent-decoded.
std::string decode_form(std::string_view s) {
  std::string plus(s);
  for (char& c : plus) {
    if (c == '+') c = ' ';
  }
  return percent_decode(plus);
}

// Calls fn on each '&'-separated field of `query`, empty ones skipped.
template <class Fn>
void for_each_field(std::string_view query, Fn fn) {
  size_t start = 0;
  while (start <= query.size()) {
    size_t amp = query.find('&', start);
    std::string_view field =
        query.substr(start, amp == std::string_view::npos ? std::string_view::npos : amp - start);
    start = amp == std::string_view::npos ? query.size() + 1 : amp + 1;
    if (!field.empty()) fn(field);
  }
}

}  // namespace

std::vector<std::pair<std::string, std::string>> parse_query(std::string_view query) {
  std::vector<std::pair<std::string, std::string>> out;
  for_each_field(query, [&](std::string_view field) {
    size_t eq = field.find('=');
    if (eq == std::string_view::npos) {
      out.emplace_back(decode_form(field), "");
    } else {
      out.emplace_back(decode_form(field.substr(0, eq)), decode_form(field.substr(eq + 1)));
    }
  });
  return out;
}

std::optional<std::string> query_param(std::string_view query, std::string_view name) {
  std::optional<std::string> out;
  for (auto& [k, v] : parse_query(query)) {
    if (k == name) out = std::move(v);
  }
  return out;
}

std::optional<std::pair<std::string, std::string>> split_container_path(std::string_view path) {
  size_t slash = path.find('/');
  if (slash == 0 || slash == std::string_view::npos || slash + 1 == path.size() ||
      path.find('/', slash + 1) != std::string_view::npos) {
    return std::nullopt;
  }
  return std::make_pair(std::string(path.substr(0, slash)), std::string(path.substr(slash + 1)));
}

std::string without_query_param(std::string_view query, std::string_view name) {
  std::string out;
  for_each_field(query, [&](std::string_view field) {
    // A field is named by its decoded name, as parse_query() reads it.
    if (decode_form(field.substr(0, field.find('='))) == name) return;
    out += (out.empty() ? "" : "&") + std::string(field);
  });
  return out;
}

std::string with_query_param(std::string_view query, std::string_view name,
                             std::string_view value) {
  std::string out = without_query_param(query, name);
  return out + (out.empty() ? "" : "&") + quote(name, "") + "=" + quote(value, "");
}

}  // namespace apus::common::http
