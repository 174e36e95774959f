#include "common/listing_format.h"

#include "common/http/internal/rfc_token.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <vector>

#include <boost/json.hpp>

#include "common/pickle.h"

namespace apus::common::listing {

namespace {

// ---- Accept negotiation (swob's Accept) ------------------------------------------------------

using http::rfc::is_space;
using http::rfc::strip;
constexpr auto spaces = http::rfc::skip_spaces;
constexpr auto token = http::rfc::skip_token;
constexpr auto quoted = http::rfc::skip_quoted;

struct MediaRange {
  std::string type, subtype;
  double quality = 1.0;
  bool exact = true;  // no '*' in type or subtype
};

// One comma-separated piece of an Accept header, or nullopt when swob would reject it.
std::optional<MediaRange> parse_range(std::string_view piece) {
  size_t i = spaces(piece, 0);
  size_t t_end = token(piece, i);
  if (t_end == i || t_end >= piece.size() || piece[t_end] != '/') return std::nullopt;
  size_t s_end = token(piece, t_end + 1);
  if (s_end == t_end + 1) return std::nullopt;
  MediaRange r;
  r.type.assign(piece.substr(i, t_end - i));
  r.subtype.assign(piece.substr(t_end + 1, s_end - t_end - 1));
  std::string_view params = piece.substr(s_end);
  // The rest must be extensions (;name=value) and trailing space.
  for (size_t j = 0;;) {
    size_t k = spaces(params, j);
    if (k == params.size()) break;
    if (params[k] != ';') return std::nullopt;
    k = spaces(params, k + 1);
    size_t n_end = token(params, k);
    if (n_end == k) return std::nullopt;
    k = spaces(params, n_end);
    if (k >= params.size() || params[k] != '=') return std::nullopt;
    k = spaces(params, k + 1);
    size_t v_end = k < params.size() && params[k] == '"' ? quoted(params, k) : token(params, k);
    if (v_end == std::string_view::npos || v_end == k) return std::nullopt;
    j = v_end;
  }
  bool seen_q = false;
  size_t start = 0;
  while (start <= params.size()) {
    size_t semi = params.find(';', start);
    std::string_view p = strip(params.substr(start, semi == std::string_view::npos
                                                        ? std::string_view::npos
                                                        : semi - start));
    start = semi == std::string_view::npos ? params.size() + 1 : semi + 1;
    if (p.empty()) continue;
    size_t eq = p.find('=');
    if (eq == std::string_view::npos || p.find('=', eq + 1) != std::string_view::npos) {
      return std::nullopt;  // Python's `name, value = parm.split('=')` fails
    }
    if (strip(p.substr(0, eq)) != "q") continue;
    if (seen_q) return std::nullopt;  // multiple "q" params
    seen_q = true;
    std::string value(strip(p.substr(eq + 1)));
    char* end = nullptr;
    r.quality = std::strtod(value.c_str(), &end);
    if (value.empty() || *end != '\0') return std::nullopt;
  }
  r.exact = r.type != "*" && r.subtype != "*";
  return r;
}

bool matches(const MediaRange& r, std::string_view option) {
  size_t slash = option.find('/');
  std::string_view type = option.substr(0, slash), subtype = option.substr(slash + 1);
  return (r.type == "*" || r.type == type) && (r.subtype == "*" || r.subtype == subtype);
}

// ---- writers ---------------------------------------------------------------------------------

// Decodes one UTF-8 sequence at s[i]; advances i. Invalid bytes come out as themselves.
uint32_t next_code_point(std::string_view s, size_t& i) {
  auto b = [&](size_t k) { return static_cast<uint32_t>(static_cast<uint8_t>(s[k])); };
  uint32_t c = b(i);
  size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 1;
  if (i + len > s.size()) len = 1;
  if (len == 1) {
    ++i;
    return c;
  }
  uint32_t cp = c & (0xFF >> (len + 1));
  for (size_t k = 1; k < len; ++k) cp = cp << 6 | (b(i + k) & 0x3F);
  i += len;
  return cp;
}

void append_u_escape(std::string& out, uint32_t unit) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += "\\u";
  for (int shift = 12; shift >= 0; shift -= 4) out.push_back(kHex[(unit >> shift) & 0xF]);
}

void append_xml(std::string& out, std::string_view s, bool attribute) {
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += attribute ? "&quot;" : "\""; break;
      case '\n': out += attribute ? "&#10;" : "\n"; break;
      case '\r': out += attribute ? "&#13;" : "\r"; break;
      case '\t': out += attribute ? "&#09;" : "\t"; break;
      default: out.push_back(c);
    }
  }
}

// <tag>text</tag>, or <tag /> for empty text, as ElementTree writes it.
void append_element(std::string& out, std::string_view tag, std::string_view text) {
  out += "<";
  out += tag;
  if (text.empty()) {
    out += " />";
    return;
  }
  out += ">";
  append_xml(out, text, false);
  out += "</";
  out += tag;
  out += ">";
}

constexpr std::string_view kXmlDeclaration = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";

template <class Item, class WriteFields>
std::string json_list(std::span<const Item> items, WriteFields write_fields) {
  std::string out = "[";
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += ", ";
    if (items[i].subdir) {
      out += "{\"subdir\": ";
      append_json_string(out, items[i].name);
      out += "}";
    } else {
      out += "{";
      write_fields(out, items[i]);
      out += "}";
    }
  }
  out += "]";
  return out;
}

template <class Item>
std::string plain_list(std::span<const Item> items) {
  std::string out;
  for (const Item& item : items) {
    out += item.name;
    out += "\n";
  }
  return out;
}

}  // namespace

Result<std::optional<std::string>> best_match(std::optional<std::string_view> accept,
                                              std::span<const std::string_view> offered) {
  std::vector<MediaRange> ranges;
  if (accept && !accept->empty()) {
    std::string_view header = *accept;
    for (size_t start = 0; start <= header.size();) {
      size_t comma = header.find(',', start);
      std::string_view piece = header.substr(
          start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
      start = comma == std::string_view::npos ? header.size() + 1 : comma + 1;
      auto range = parse_range(piece);
      if (!range) return Status::invalid_argument("Invalid Accept header");
      ranges.push_back(std::move(*range));
    }
  }
  if (ranges.empty()) {
    if (offered.empty()) return std::optional<std::string>();
    return std::optional<std::string>(std::string(offered.front()));
  }
  std::stable_sort(ranges.begin(), ranges.end(), [](const MediaRange& a, const MediaRange& b) {
    return std::pair(a.quality, a.exact) > std::pair(b.quality, b.exact);
  });
  for (const MediaRange& r : ranges) {
    for (std::string_view option : offered) {
      if (matches(r, option)) return std::optional<std::string>(std::string(option));
    }
  }
  return std::optional<std::string>();
}

Negotiated negotiate(std::optional<std::string_view> format,
                     std::optional<std::string_view> accept) {
  static const std::array<std::string_view, 4> kOffered = {"text/plain", "application/json",
                                                            "application/xml", "text/xml"};
  std::string forced;
  if (format && !format->empty()) {
    std::string f(*format);
    std::transform(f.begin(), f.end(), f.begin(), [](unsigned char c) { return std::tolower(c); });
    forced = f == "json" ? "application/json" : f == "xml" ? "application/xml" : "text/plain";
    accept = forced;
  }
  Negotiated n;
  auto best = best_match(accept, kOffered);
  if (!best.ok()) {
    n.status = 400;
    n.error_body = "Invalid Accept header";
  } else if (!*best) {
    n.status = 406;
  } else {
    n.content_type = **best;
  }
  return n;
}

void append_json_string(std::string& out, std::string_view utf8) {
  out.push_back('"');
  for (size_t i = 0; i < utf8.size();) {
    uint32_t cp = next_code_point(utf8, i);
    switch (cp) {
      case '"': out += "\\\""; continue;
      case '\\': out += "\\\\"; continue;
      case '\n': out += "\\n"; continue;
      case '\r': out += "\\r"; continue;
      case '\t': out += "\\t"; continue;
      case '\b': out += "\\b"; continue;
      case '\f': out += "\\f"; continue;
      default: break;
    }
    if (cp >= 0x20 && cp < 0x7f) {
      out.push_back(static_cast<char>(cp));
    } else if (cp >= 0x10000) {
      cp -= 0x10000;
      append_u_escape(out, 0xD800 | (cp >> 10));
      append_u_escape(out, 0xDC00 | (cp & 0x3FF));
    } else {
      append_u_escape(out, cp);
    }
  }
  out.push_back('"');
}

std::string to_json(std::span<const ObjectItem> items) {
  return json_list(items, [](std::string& out, const ObjectItem& o) {
    out += "\"bytes\": " + std::to_string(o.bytes) + ", \"hash\": ";
    append_json_string(out, o.hash);
    out += ", \"name\": ";
    append_json_string(out, o.name);
    out += ", \"content_type\": ";
    append_json_string(out, o.content_type);
    out += ", \"last_modified\": ";
    append_json_string(out, o.last_modified);
  });
}

std::string to_json(std::span<const ContainerItem> items) {
  return json_list(items, [](std::string& out, const ContainerItem& c) {
    out += "\"name\": ";
    append_json_string(out, c.name);
    out += ", \"count\": " + std::to_string(c.count) + ", \"bytes\": " + std::to_string(c.bytes);
    out += ", \"last_modified\": ";
    append_json_string(out, c.last_modified);
  });
}

std::string to_xml(std::span<const ObjectItem> items, std::string_view container) {
  std::string out(kXmlDeclaration);
  out += "<container name=\"";
  append_xml(out, container, true);
  if (items.empty()) {
    out += "\" />";
    return out;
  }
  out += "\">";
  for (const ObjectItem& o : items) {
    if (o.subdir) {
      out += "<subdir name=\"";
      append_xml(out, o.name, true);
      out += "\">";
      append_element(out, "name", o.name);
      out += "</subdir>";
      continue;
    }
    out += "<object>";
    append_element(out, "name", o.name);
    append_element(out, "hash", o.hash);
    append_element(out, "bytes", std::to_string(o.bytes));
    append_element(out, "content_type", o.content_type);
    append_element(out, "last_modified", o.last_modified);
    out += "</object>";
  }
  out += "</container>";
  return out;
}

std::string to_xml(std::span<const ContainerItem> items, std::string_view account) {
  std::string out(kXmlDeclaration);
  out += "<account name=\"";
  append_xml(out, account, true);
  out += "\">\n";
  for (const ContainerItem& c : items) {
    if (c.subdir) {
      out += "<subdir name=\"";
      append_xml(out, c.name, true);
      out += "\" />\n";
      continue;
    }
    out += "<container>";
    append_element(out, "name", c.name);
    append_element(out, "count", std::to_string(c.count));
    append_element(out, "bytes", std::to_string(c.bytes));
    append_element(out, "last_modified", c.last_modified);
    out += "</container>\n";
  }
  out += "</account>";
  return out;
}

std::string to_plain(std::span<const ObjectItem> items) { return plain_list(items); }
std::string to_plain(std::span<const ContainerItem> items) { return plain_list(items); }

void append_python_json(std::string& out, const boost::json::value& v) {
  switch (v.kind()) {
    case boost::json::kind::null: out += "null"; break;
    case boost::json::kind::bool_: out += v.get_bool() ? "true" : "false"; break;
    case boost::json::kind::int64: out += std::to_string(v.get_int64()); break;
    case boost::json::kind::uint64: out += std::to_string(v.get_uint64()); break;
    case boost::json::kind::double_: out += pickle::python_float_repr(v.get_double()); break;
    case boost::json::kind::string: {
      const auto& str = v.get_string();
      append_json_string(out, std::string_view(str.data(), str.size()));
      break;
    }
    case boost::json::kind::array: {
      out += '[';
      bool first = true;
      for (const auto& item : v.get_array()) {
        if (!first) out += ", ";
        first = false;
        append_python_json(out, item);
      }
      out += ']';
      break;
    }
    case boost::json::kind::object: {
      out += '{';
      bool first = true;
      for (const auto& [key, item] : v.get_object()) {
        if (!first) out += ", ";
        first = false;
        append_json_string(out, std::string_view(key.data(), key.size()));
        out += ": ";
        append_python_json(out, item);
      }
      out += '}';
      break;
    }
  }
}

namespace {

void append_indented(std::string& out, const boost::json::value& v, int indent, int level) {
  auto newline = [&](int depth) {
    out += '\n';
    out.append(static_cast<size_t>(indent) * static_cast<size_t>(depth), ' ');
  };
  if (const auto* array = v.if_array(); array && !array->empty()) {
    out += '[';
    for (size_t i = 0; i < array->size(); ++i) {
      if (i > 0) out += ',';
      newline(level + 1);
      append_indented(out, (*array)[i], indent, level + 1);
    }
    newline(level);
    out += ']';
  } else if (const auto* object = v.if_object(); object && !object->empty()) {
    std::vector<const boost::json::key_value_pair*> members;
    for (const auto& member : *object) members.push_back(&member);
    // UTF-8 byte order is code point order, Python's order of str keys.
    std::sort(members.begin(), members.end(), [](const auto* a, const auto* b) {
      return a->key() < b->key();
    });
    out += '{';
    for (size_t i = 0; i < members.size(); ++i) {
      if (i > 0) out += ',';
      newline(level + 1);
      append_json_string(out, std::string_view(members[i]->key().data(), members[i]->key().size()));
      out += ": ";
      append_indented(out, members[i]->value(), indent, level + 1);
    }
    newline(level);
    out += '}';
  } else {
    append_python_json(out, v);  // scalars, [] and {}
  }
}

}  // namespace

std::string python_json_indented(const boost::json::value& v, int indent) {
  std::string out;
  append_indented(out, v, indent, 0);
  return out;
}

}  // namespace apus::common::listing
