#include "proxy/slo_manifest.h"

#include "common/crypto/base64.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>

#include <boost/json.hpp>

#include "common/config/config.h"
#include "common/crypto/md5.h"
#include "common/http/headers.h"
#include "common/http/swob.h"
#include "common/http/url.h"
#include "common/listing_format.h"
#include "proxy/bulk_response.h"

namespace apus::proxy::slo {

namespace json = boost::json;
using common::Result;
using common::Status;
using common::http::OrRefusal;
using common::http::Response;

namespace {

// The most bytes a stored segment may claim (4 PiB): far above any object, far below overflow.
constexpr int64_t kMaxSegmentBytes = int64_t{1} << 52;



// Python's truthiness of a JSON value (what `if seg_dict.get('range'):` tests).
bool truthy(const json::value& v) {
  switch (v.kind()) {
    case json::kind::null: return false;
    case json::kind::bool_: return v.get_bool();
    case json::kind::int64: return v.get_int64() != 0;
    case json::kind::uint64: return v.get_uint64() != 0;
    case json::kind::double_: return v.get_double() != 0;
    case json::kind::string: return !v.get_string().empty();
    case json::kind::array: return !v.get_array().empty();
    case json::kind::object: return !v.get_object().empty();
  }
  return false;
}

// Python's int() of a JSON value, saturating at int64: nullopt where int() raises ValueError
// or TypeError. `overflow` is set for an infinite float (OverflowError, which Swift lets
// escape).
std::optional<int64_t> python_int(const json::value& v, bool& overflow) {
  switch (v.kind()) {
    case json::kind::bool_: return v.get_bool() ? 1 : 0;
    case json::kind::int64: return v.get_int64();
    case json::kind::uint64:
      return static_cast<int64_t>(
          std::min<uint64_t>(v.get_uint64(), std::numeric_limits<int64_t>::max()));
    case json::kind::double_: {
      double d = v.get_double();
      if (std::isnan(d)) return std::nullopt;
      if (std::isinf(d)) {
        overflow = true;
        return std::nullopt;
      }
      if (d >= 9.2e18) return std::numeric_limits<int64_t>::max();
      if (d <= -9.2e18) return std::numeric_limits<int64_t>::min();
      return static_cast<int64_t>(std::trunc(d));
    }
    case json::kind::string: {
      const json::string& s = v.get_string();
      return common::parse_python_int_saturating(std::string_view(s.data(), s.size()));
    }
    default: return std::nullopt;
  }
}

// How many ranges swob's ranges_for_length() keeps of the single spec `r` for an object of
// `length` bytes (which a client's size_bytes may make negative).
int satisfiable_count(const common::http::RangeSpec& r, int64_t length) {
  if (!r.first) return *r.last == 0 ? 0 : 1;
  return static_cast<int64_t>(std::min<uint64_t>(*r.first, INT64_MAX)) < length ? 1 : 0;
}

std::string_view sv(const json::string& s) { return {s.data(), s.size()}; }

std::string index_prefix(size_t i) { return "Index " + std::to_string(i) + ": "; }

// The error line for one object-backed entry, or "" when it is valid (filling `out`).
std::string check_path_entry(const json::object& o, size_t index, size_t count,
                             std::string_view object_path, InputSegment& out) {
  const json::value& path = o.at("path");
  if (!path.is_string()) return "\"path\" must be a string";
  if (const json::value* etag = o.if_contains("etag"); etag && !etag->is_null()) {
    if (!etag->is_string()) return "\"etag\" must be a string or null (if provided)";
    out.etag = std::string(sv(etag->get_string()));
  }
  out.path = std::string(sv(path.get_string()));
  std::string_view p = out.path;
  std::string_view trimmed = p;
  while (!trimmed.empty() && trimmed.front() == '/') trimmed.remove_prefix(1);
  std::string_view no_lead = trimmed;
  while (!trimmed.empty() && trimmed.back() == '/') trimmed.remove_suffix(1);
  if (trimmed.find('/') == std::string_view::npos) {
    return "path does not refer to an object. Path must be of the form /container/object.";
  }
  if (const json::value* size = o.if_contains("size_bytes"); size && !size->is_null()) {
    bool overflow = false;
    out.size_bytes = python_int(*size, overflow);
    if (overflow) return "\x01";  // Swift fails with an uncaught OverflowError
    if (!out.size_bytes) return "invalid size_bytes";
    if (*out.size_bytes < 1 && index != count - 1) {
      return "too small; each segment must be at least 1 byte.";
    }
  }
  // The manifest may not name itself: compare "/<version>/<account>/<path>" with its own path.
  auto parts = common::http::split_path(object_path, 3, 3, true);
  if (parts.ok()) {
    std::string self = "/" + *(*parts)[0] + "/" + *(*parts)[1] + "/" + std::string(no_lead);
    if (self == object_path) return "manifest must not include itself as a segment";
  }
  if (const json::value* range = o.if_contains("range"); range && truthy(*range)) {
    if (!range->is_string()) return "invalid range";
    auto specs = common::http::parse_range_header("bytes=" + std::string(sv(range->get_string())));
    if (!specs) return "invalid range";
    if (specs->size() > 1) return "multiple ranges (only one allowed)";
    out.range = specs->front();
    if (out.size_bytes && satisfiable_count(*out.range, *out.size_bytes) != 1) {
      return "unsatisfiable range";
    }
  }
  return "";
}

// The error line for one inline-data entry, or "" when it is valid.
std::string check_data_entry(const json::object& o, InputSegment& out) {
  const json::value& data = o.at("data");
  std::optional<std::string> bytes;
  if (data.is_string()) bytes = strict_b64decode(sv(data.get_string()));
  if (!bytes) return "data must be valid base64";
  if (bytes->empty()) return "too small; each segment must be at least 1 byte.";
  out.is_data = true;
  out.data = std::move(*bytes);
  return "";
}

// Python's `'data' in d` for an entry that is not an object: a substring test on a string,
// membership in a list; nullopt where Python raises TypeError.
std::optional<bool> contains_data(const json::value& v) {
  if (v.is_object()) return v.get_object().contains("data");
  if (v.is_string()) return sv(v.get_string()).find("data") != std::string_view::npos;
  if (v.is_array()) {
    for (const json::value& e : v.get_array()) {
      if (e.is_string() && sv(e.get_string()) == "data") return true;
    }
    return false;
  }
  return std::nullopt;
}

Response internal_error() { return common::http::text_response(500, "An error occurred"); }

void append_json(std::string& out, std::string_view s) {
  common::listing::append_json_string(out, s);
}

}  // namespace


OrRefusal<std::vector<InputSegment>> parse_manifest_input(std::string_view body,
                                                           std::string_view object_path) {
  boost::system::error_code ec;
  json::value doc = json::parse(body, ec);
  if (ec) return common::http::swob_response_with_body(400, "Manifest must be valid JSON.\n");
  if (!doc.is_array()) {
    return common::http::swob_response_with_body(400, "Manifest must be a list.\n");
  }
  const json::array& list = doc.get_array();
  std::vector<InputSegment> out;
  out.reserve(list.size());
  std::string errors;
  for (size_t i = 0; i < list.size(); ++i) {
    const json::value& entry = list[i];
    if (!entry.is_object()) {
      errors += index_prefix(i) + "not a JSON object\n";
      continue;
    }
    const json::object& o = entry.get_object();
    // "data" is looked for first: an entry with both keys is inline data with an extra key.
    const bool is_data = o.contains("data");
    if (!is_data && !o.contains("path")) return internal_error();  // Swift 2.30's bytes/str bug
    std::vector<std::string_view> extra;
    for (const auto& kv : o) {
      std::string_view k = kv.key();
      bool allowed = is_data ? k == "data"
                             : (k == "path" || k == "range" || k == "etag" || k == "size_bytes");
      if (!allowed) extra.push_back(k);
    }
    if (!extra.empty()) {
      std::sort(extra.begin(), extra.end());
      std::string line = index_prefix(i) + "extraneous keys ";
      for (size_t k = 0; k < extra.size(); ++k) {
        if (k > 0) line += ", ";
        append_json(line, extra[k]);
      }
      errors += line + "\n";
      continue;
    }
    InputSegment seg;
    std::string problem = is_data ? check_data_entry(o, seg)
                                  : check_path_entry(o, i, list.size(), object_path, seg);
    if (problem == "\x01") return internal_error();
    if (!problem.empty()) {
      errors += index_prefix(i) + problem + "\n";
      continue;
    }
    out.push_back(std::move(seg));
  }
  if (!list.empty()) {
    bool all_data = true;
    for (const json::value& entry : list) {
      std::optional<bool> has = contains_data(entry);
      if (!has) return internal_error();  // Swift: TypeError on `'data' in <number or null>`
      if (!*has) {
        all_data = false;
        break;
      }
    }
    if (all_data) errors += "Inline data segments require at least one object-backed segment.\n";
  }
  if (!errors.empty()) return common::http::text_response(400, std::move(errors));
  return out;
}

int64_t StoredSegment::length() const {
  if (is_data) return static_cast<int64_t>(data.size());
  if (range) return range->second - range->first + 1;
  return bytes;
}

std::string to_stored_json(const std::vector<StoredSegment>& segments) {
  std::string out = "[";
  for (size_t i = 0; i < segments.size(); ++i) {
    const StoredSegment& s = segments[i];
    if (i > 0) out += ", ";
    if (s.is_data) {
      out += "{\"data\": ";
      append_json(out, b64encode(s.data));
      out += "}";
      continue;
    }
    out += "{\"name\": ";
    append_json(out, s.name);
    out += ", \"bytes\": " + std::to_string(s.bytes) + ", \"hash\": ";
    append_json(out, s.hash);
    out += ", \"content_type\": ";
    append_json(out, s.content_type);
    out += ", \"last_modified\": ";
    append_json(out, s.last_modified);
    if (s.range) {
      out += ", \"range\": \"" + std::to_string(s.range->first) + "-" +
             std::to_string(s.range->second) + "\"";
    }
    if (s.sub_slo) out += ", \"sub_slo\": true";
    out += "}";
  }
  out += "]";
  return out;
}

Result<std::vector<StoredSegment>> parse_stored(std::string_view text) {
  boost::system::error_code ec;
  json::value doc = json::parse(text, ec);
  if (ec || !doc.is_array()) return Status::invalid_argument("manifest is not a JSON list");
  std::vector<StoredSegment> out;
  out.reserve(doc.get_array().size());
  for (const json::value& entry : doc.get_array()) {
    if (!entry.is_object()) return Status::invalid_argument("manifest entry is not an object");
    const json::object& o = entry.get_object();
    StoredSegment s;
    if (const json::value* d = o.if_contains("data")) {
      std::optional<std::string> bytes;
      if (d->is_string()) bytes = strict_b64decode(sv(d->get_string()));
      if (!bytes) return Status::invalid_argument("manifest data is not base64");
      s.is_data = true;
      s.data = std::move(*bytes);
      out.push_back(std::move(s));
      continue;
    }
    const json::value* name = o.if_contains("name");
    const json::value* bytes = o.if_contains("bytes");
    if (!name || !name->is_string() || !bytes) {
      return Status::invalid_argument("manifest entry lacks name or bytes");
    }
    s.name = std::string(sv(name->get_string()));
    bool overflow = false;
    std::optional<int64_t> n = python_int(*bytes, overflow);
    if (!n || *n < 0 || *n > kMaxSegmentBytes) {
      return Status::invalid_argument("manifest bytes is not a length");
    }
    s.bytes = *n;
    if (const json::value* h = o.if_contains("hash"); h && h->is_string()) {
      s.hash = std::string(sv(h->get_string()));
    }
    if (const json::value* ct = o.if_contains("content_type"); ct && ct->is_string()) {
      s.content_type = std::string(sv(ct->get_string()));
    }
    if (const json::value* lm = o.if_contains("last_modified"); lm && lm->is_string()) {
      s.last_modified = std::string(sv(lm->get_string()));
    }
    if (const json::value* r = o.if_contains("range"); r && truthy(*r)) {
      if (!r->is_string()) return Status::invalid_argument("manifest range is not a string");
      std::string_view rs = sv(r->get_string());
      size_t dash = rs.find('-');
      auto a = common::parse_python_int(rs.substr(0, dash));
      auto b = dash == std::string_view::npos ? std::nullopt
                                              : common::parse_python_int(rs.substr(dash + 1));
      if (!a || !b || *a < 0 || *b < *a || *b > kMaxSegmentBytes) {
        return Status::invalid_argument("manifest range is not N-M");
      }
      s.range = std::make_pair(*a, *b);
    }
    if (const json::value* sub = o.if_contains("sub_slo")) {
      s.sub_slo = sub->is_bool() ? sub->get_bool()
                  : sub->is_string() ? common::config_true_value(sv(sub->get_string()))
                  : sub->is_int64() ? sub->get_int64() == 1
                                    : false;
    }
    if (s.sub_slo) {
      // Old sub-SLO entries keep the large object's length in swift_bytes.
      auto [clean, swift_bytes] = common::http::extract_swift_bytes(s.content_type);
      if (swift_bytes) {
        auto v = common::parse_python_int(*swift_bytes);
        if (v && *v >= 0 && *v <= kMaxSegmentBytes) s.bytes = *v;
        s.content_type = clean;
      }
    }
    out.push_back(std::move(s));
  }
  return out;
}

std::string to_raw_json(const std::vector<StoredSegment>& segments) {
  // sort_keys: data; or etag, path, range, size_bytes.
  std::string out = "[";
  for (size_t i = 0; i < segments.size(); ++i) {
    const StoredSegment& s = segments[i];
    if (i > 0) out += ", ";
    if (s.is_data) {
      out += "{\"data\": ";
      append_json(out, b64encode(s.data));
      out += "}";
      continue;
    }
    out += "{\"etag\": ";
    append_json(out, s.hash);
    out += ", \"path\": ";
    append_json(out, s.name);
    if (s.range) {
      out += ", \"range\": \"" + std::to_string(s.range->first) + "-" +
             std::to_string(s.range->second) + "\"";
    }
    out += ", \"size_bytes\": " + std::to_string(s.bytes) + "}";
  }
  out += "]";
  return out;
}

std::string slo_etag(const std::vector<StoredSegment>& segments) {
  common::crypto::Md5 md5;
  for (const StoredSegment& s : segments) {
    if (s.is_data) {
      md5.update(common::crypto::md5_hex(s.data));
    } else if (s.range) {
      md5.update(s.hash + ":" + std::to_string(s.range->first) + "-" +
                 std::to_string(s.range->second) + ";");
    } else {
      md5.update(s.hash);
    }
  }
  return md5.hex_digest();
}

int64_t total_length(const std::vector<StoredSegment>& segments) {
  int64_t total = 0;
  for (const StoredSegment& s : segments) {
    if (__builtin_add_overflow(total, s.length(), &total)) return INT64_MAX;
  }
  return total;
}

std::vector<Piece> pieces_for_range(const std::vector<StoredSegment>& segments, int64_t first,
                                    int64_t last) {
  std::vector<Piece> out;
  for (size_t i = 0; i < segments.size(); ++i) {
    const StoredSegment& s = segments[i];
    const int64_t len = s.length();
    if (len <= 0) continue;  // an empty segment adds no bytes (and has no byte to point at)
    if (first >= len) {
      first -= len;
      last -= len;
      continue;
    }
    if (last < 0) break;
    if (s.is_data) {
      out.push_back({i, std::max<int64_t>(0, first), std::min(len - 1, last)});
    } else {
      int64_t start = s.range ? s.range->first : 0;
      int64_t end = s.range ? s.range->second : len - 1;
      out.push_back({i, start + std::max<int64_t>(0, first), std::min(end, start + last)});
    }
    first -= len;
    last -= len;
  }
  return out;
}

std::string bulk_response_body(std::string_view content_type, std::vector<BulkField> fields,
                               const std::vector<BulkError>& errors, std::string_view root_tag) {
  // bulk's formatter is the one writer of Swift's get_response_body(); this only adapts SLO's
  // fields to its report.
  BulkReport report;
  for (BulkField& f : fields) {
    if (f.number) {
      report.set(f.key, static_cast<int64_t>(std::strtoll(f.value.c_str(), nullptr, 10)));
    } else {
      report.set(f.key, std::move(f.value));
    }
  }
  for (const BulkError& e : errors) report.errors.emplace_back(e.name, e.status);
  return bulk_report_body(content_type, report, root_tag);
}

}  // namespace apus::proxy::slo
