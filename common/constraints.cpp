#include "common/constraints.h"

#include <algorithm>
#include <charconv>

#include "common/config/config.h"
#include "common/utf8.h"

namespace apus::common {

namespace {

using http::HeaderMap;
using http::istarts_with;

// Headers Swift itself and plain HTTP may add to a request, on top of the metadata items.
constexpr int64_t kBaseHeaderCount = 36;

constexpr std::string_view kConstraintsSection = "swift-constraints";

std::string_view meta_prefix(MetadataTarget target) {
  switch (target) {
    case MetadataTarget::kAccount:
      return "x-account-meta-";
    case MetadataTarget::kContainer:
      return "x-container-meta-";
    case MetadataTarget::kObject:
      return "x-object-meta-";
  }
  return "x-object-meta-";
}

// Python int() of a Content-Length header, restricted to plain digits: a sign is never valid
// HTTP and the proxy rejects negative lengths anyway.
bool parse_length(std::string_view v, int64_t* out) {
  size_t b = v.find_first_not_of(" \t");
  size_t e = v.find_last_not_of(" \t");
  if (b == std::string_view::npos) return false;
  v = v.substr(b, e - b + 1);
  auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), *out);
  return ec == std::errc() && ptr == v.data() + v.size() && *out >= 0 && v[0] != '-';
}

// A header name as Swift's WSGI server hands it to the app, and so as Swift's error bodies
// write it: '_' read as '-', then Python's str.title() (a letter is upper case after a
// non-letter, lower case after a letter: "x-container-meta-big_one" -> "X-Container-Meta-Big-One").
std::string wsgi_name(std::string_view name) {
  std::string out(name);
  bool after_letter = false;
  for (char& ch : out) {
    if (ch == '_') ch = '-';
    const bool letter = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z');
    if (letter) {
      ch = after_letter ? static_cast<char>(ch | 0x20) : static_cast<char>(ch & ~0x20);
    }
    after_letter = letter;
  }
  return out;
}

// How Swift names a metadata header in its errors: the prefix in lower case, then the rest
// as WSGI spelt it ("Metadata value longer than 256: x-container-meta-Big").
std::string shown_name(std::string_view prefix, std::string_view name) {
  return std::string(prefix) + wsgi_name(name).substr(prefix.size());
}

}  // namespace

int64_t Constraints::max_header_count() const {
  return max_meta_count + kBaseHeaderCount + std::max<int64_t>(extra_header_count, 0);
}

int64_t Constraints::backend_max_header_count() const {
  // Integer form of floor(n * 1.6), free of floating point rounding.
  return max_header_count() * 16 / 10;
}

Result<Constraints> Constraints::from_config(const Config& swift_conf) {
  Constraints c;
  if (!swift_conf.has_section(kConstraintsSection)) return c;
  Section s = swift_conf.section(kConstraintsSection);
  struct IntOption {
    std::string_view key;
    int64_t* field;
  };
  const IntOption ints[] = {
      {"max_file_size", &c.max_file_size},
      {"max_meta_name_length", &c.max_meta_name_length},
      {"max_meta_value_length", &c.max_meta_value_length},
      {"max_meta_count", &c.max_meta_count},
      {"max_meta_overall_size", &c.max_meta_overall_size},
      {"max_header_size", &c.max_header_size},
      {"max_object_name_length", &c.max_object_name_length},
      {"container_listing_limit", &c.container_listing_limit},
      {"account_listing_limit", &c.account_listing_limit},
      {"max_account_name_length", &c.max_account_name_length},
      {"max_container_name_length", &c.max_container_name_length},
      {"extra_header_count", &c.extra_header_count},
  };
  for (const IntOption& opt : ints) {
    Result<int64_t> v = s.get_int(opt.key, *opt.field);
    if (!v.ok()) return v.status();
    *opt.field = *v;
  }
  if (s.has("valid_api_versions")) c.valid_api_versions = s.get_list("valid_api_versions");
  c.auto_create_account_prefix =
      s.get_string("auto_create_account_prefix", c.auto_create_account_prefix);
  return c;
}

CheckResult check_metadata(const Constraints& c, const HeaderMap& headers, MetadataTarget target) {
  const std::string_view prefix = meta_prefix(target);
  const bool need_utf8 = target != MetadataTarget::kObject;
  int64_t count = 0;
  int64_t size = 0;
  for (const auto& [name, value] : headers) {
    if (static_cast<int64_t>(value.size()) > c.max_header_size) {
      size_t keep = static_cast<size_t>(std::max<int64_t>(c.max_meta_name_length, 0));
      return CheckResult::fail(400, "Header value too long: " + wsgi_name(name).substr(0, keep));
    }
    if (!istarts_with(name, prefix)) continue;
    std::string_view key = std::string_view(name).substr(prefix.size());
    if (key.empty()) return CheckResult::fail(400, "Metadata name cannot be empty");
    if (need_utf8 && (!check_utf8(key) || (!value.empty() && !check_utf8(value)))) {
      return CheckResult::fail(400, "Metadata must be valid UTF-8");
    }
    ++count;
    size += static_cast<int64_t>(key.size() + value.size());
    if (static_cast<int64_t>(key.size()) > c.max_meta_name_length) {
      return CheckResult::fail(400, "Metadata name too long: " + shown_name(prefix, name));
    }
    if (static_cast<int64_t>(value.size()) > c.max_meta_value_length) {
      return CheckResult::fail(400, "Metadata value longer than " +
                                        std::to_string(c.max_meta_value_length) + ": " +
                                        shown_name(prefix, name));
    }
    if (count > c.max_meta_count) {
      return CheckResult::fail(400,
                               "Too many metadata items; max " + std::to_string(c.max_meta_count));
    }
    if (size > c.max_meta_overall_size) {
      return CheckResult::fail(
          400, "Total metadata too large; max " + std::to_string(c.max_meta_overall_size));
    }
  }
  return CheckResult::pass();
}

CheckResult check_object_creation(const Constraints& c, const HeaderMap& headers,
                                  std::string_view object_name) {
  // Swift's Request.message_length(): a Transfer-Encoding must be a single coding, "chunked"
  // in any case; only without one does Content-Length count.
  std::optional<std::string_view> te = headers.get("Transfer-Encoding");
  std::optional<std::string_view> cl = headers.get("Content-Length");
  bool chunked = false;
  if (te && !te->empty()) {
    if (te->find(',') != std::string_view::npos) {
      return CheckResult::fail(501,
                               "Unsupported Transfer-Coding header value specified in "
                               "Transfer-Encoding header");
    }
    if (!http::iequals(*te, "chunked")) {
      return CheckResult::fail(400, "Invalid Transfer-Encoding header value");
    }
    chunked = true;
  }
  if (!chunked && cl) {
    int64_t length = 0;
    if (!parse_length(*cl, &length)) {
      return CheckResult::fail(400, "Invalid Content-Length header value");
    }
    if (length > c.max_file_size) return CheckResult::fail(413, "Your request is too large.");
  }
  // Swift compares the raw header here, so "Chunked" without a Content-Length is a 411.
  if (!cl && te.value_or("") != "chunked") {
    return CheckResult::fail(411, "Missing Content-Length header.");
  }
  if (static_cast<int64_t>(object_name.size()) > c.max_object_name_length) {
    return CheckResult::fail(400, "Object name length of " + std::to_string(object_name.size()) +
                                      " longer than " + std::to_string(c.max_object_name_length));
  }
  std::optional<std::string_view> content_type = headers.get("Content-Type");
  if (!content_type) return CheckResult::fail(400, "No content type");
  if (!check_utf8(*content_type)) return CheckResult::fail(400, "Invalid Content-Type");
  return check_metadata(c, headers, MetadataTarget::kObject);
}

CheckResult check_content_type(const HeaderMap& headers) {
  std::string_view ct = headers.get_or("Content-Type", "");
  size_t semi = ct.find(';');
  while (semi != std::string_view::npos) {
    size_t next = ct.find(';', semi + 1);
    std::string_view param = ct.substr(
        semi + 1, next == std::string_view::npos ? std::string_view::npos : next - semi - 1);
    size_t b = param.find_first_not_of(" \t\n\r\v\f");
    if (b != std::string_view::npos && param.substr(b).starts_with("swift_")) {
      return CheckResult::fail(400, "Invalid Content-Type, swift_* is not a valid parameter name.");
    }
    semi = next;
  }
  return CheckResult::pass();
}

bool check_utf8(std::string_view s, bool internal) {
  if (s.empty() || !valid_utf8(s)) return false;
  return internal || s.find('\0') == std::string_view::npos;
}

CheckResult check_path_utf8(std::string_view path, bool allow_reserved) {
  if (check_utf8(path, allow_reserved)) return CheckResult::pass();
  return CheckResult::fail(412, "Invalid UTF8 or contains NULL");
}

bool valid_api_version(const Constraints& c, std::string_view version) {
  return std::find(c.valid_api_versions.begin(), c.valid_api_versions.end(), version) !=
         c.valid_api_versions.end();
}

}  // namespace apus::common
