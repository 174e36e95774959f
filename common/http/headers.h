// HeaderMap: HTTP header fields with case-insensitive names, in arrival order.
//
// Requests carry a few dozen headers at most, so a flat vector with linear, case-insensitive
// lookup beats any hashed map in both speed and memory. Names keep the spelling they were set
// with (Swift echoes metadata names as stored, title-cased by the proxy). A name may repeat
// (add()); set() replaces every field of that name.
//
// Thread-compatible.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace apus::common::http {

// ASCII case-insensitive comparisons, as HTTP field names need.
bool iequals(std::string_view a, std::string_view b);
bool istarts_with(std::string_view s, std::string_view prefix);
std::string to_lower(std::string_view s);
// Python's str.title(): how Swift spells the header names it stores and returns
// ("x-object-meta-foo_bar" -> "X-Object-Meta-Foo_Bar").
std::string title_case(std::string_view s);

// Whether `text` may be written into a response head as a header name, value or reason phrase:
// false when it holds CR, LF or NUL. Such a byte would end the line early and let what follows
// (perhaps chosen by a client) read as a header of its own: response splitting.
bool is_safe_header_text(std::string_view text);

// Swift's parse_content_type(): "text/plain; charset=UTF-8; level=1" splits into the type
// ("text/plain") and its parameters, each (name, value) trimmed; a parameter without a value
// has an empty one. Text that does not parse as a parameter is skipped, as Swift's regex does.
struct ContentType {
  std::string type;
  std::vector<std::pair<std::string, std::string>> params;
};
ContentType parse_content_type(std::string_view value);

// Swift's extract_swift_bytes(): the content type without its swift_bytes parameter (the other
// parameters re-joined as ";k=v"), and that parameter's value, if any.
std::pair<std::string, std::optional<std::string>> extract_swift_bytes(std::string_view value);

class HeaderMap {
 public:
  using Field = std::pair<std::string, std::string>;

  // The first value of `name`, or nullopt. The view lives until the map is next changed.
  std::optional<std::string_view> get(std::string_view name) const;
  // get(name) or `fallback`.
  std::string_view get_or(std::string_view name, std::string_view fallback) const;
  bool contains(std::string_view name) const { return get(name).has_value(); }

  // Replaces every field named `name` by one field.
  void set(std::string_view name, std::string_view value);
  // Appends a field, keeping any others of the same name.
  void add(std::string_view name, std::string_view value);
  // Removes every field named `name`; returns how many were removed.
  size_t erase(std::string_view name);
  // Removes every field whose name starts with `prefix` (case-insensitive).
  size_t erase_prefix(std::string_view prefix);

  size_t size() const { return fields_.size(); }
  bool empty() const { return fields_.empty(); }
  void clear() { fields_.clear(); }
  void reserve(size_t n) { fields_.reserve(n); }

  const std::vector<Field>& fields() const { return fields_; }
  auto begin() const { return fields_.begin(); }
  auto end() const { return fields_.end(); }

 private:
  friend void add_wsgi_field(HeaderMap& map, std::string_view name, std::string_view value);
  std::vector<Field> fields_;
};

// Adds a request header field to `map` as Swift's WSGI layer (eventlet's environ, read back
// through swob) would present it, so every Apus server sees the names Swift's code sees:
// - the name is title-cased with each '_' turned into '-' ("x-object-meta-under_score" becomes
//   "X-Object-Meta-Under-Score");
// - a name already present (after that change) gets this value appended after a ',' (no space),
//   so "X-Object-Meta-Dup: a" and "x-object-meta-dup: b" give "X-Object-Meta-Dup: a,b";
// - Content-Type and Content-Length keep their first value, and are dropped when spelled with an
//   underscore (eventlet takes them from the real headers only).
// Verified against Swift 2.30.1 with eventlet 0.33.1.
void add_wsgi_field(HeaderMap& map, std::string_view name, std::string_view value);

// Between Apus's proxy and Apus's object servers. A GET carrying this header asks the object
// server, when it reads the whole object, to check the body's MD5 against its ETag before the
// last chunk goes out and, on a mismatch, to hold that chunk back (the body ends short, and the
// file goes to quarantine). The answer carries the header back when that promise holds, so the
// reader need not hash the body again. Swift's object servers neither take nor send it, and
// the gatekeeper keeps it (an X-Backend- header) off the client's side.
inline constexpr std::string_view kVerifiedReadHeader = "X-Backend-Apus-Verified-Read";

// Between Apus's proxy and Apus's object servers: an object PUT carrying
// `kBodyChecksumHeader: crc32c` is a MIME body with a metadata footer, and that footer holds
// the MD5 the proxy computed of the body (kBodyMd5Footer) and its CRC32C (kBodyCrc32cFooter).
// An Apus object server then checks the cheap CRC32C of what it received against the footer
// and takes the proxy's MD5 as the body's, instead of hashing the body again: one MD5 pass per
// PUT instead of one per replica more. Swift's object servers ignore the header and both
// footers (they are not metadata) and hash as ever; the footer's Etag (always sent) is
// compared with the MD5 either way, as Swift compares it.
inline constexpr std::string_view kBodyChecksumHeader = "X-Backend-Apus-Body-Checksum";
inline constexpr std::string_view kBodyMd5Footer = "X-Backend-Apus-Body-Md5";
inline constexpr std::string_view kBodyCrc32cFooter = "X-Backend-Apus-Body-Crc32c";

// Field names outside RFC 9110's tokens that Swift's WSGI server (eventlet) takes and Beast's
// parser refuses: any visible ASCII but ':' ('=' in s3api's "X-Object-Meta-Foo=5Fbar", '(' in
// S3 user metadata). `head` is a request head (request line to the empty line); when a name
// there has such a byte, the head comes back with that name replaced by
// kMaskedFieldPrefix + "<n>", the original being names[n]; nullopt when nothing needs it (a
// name with a control byte, space or byte >= 0x80 stays, for the parser to refuse).
inline constexpr std::string_view kMaskedFieldPrefix = "Apus-Masked-Field-";
std::optional<std::string> mask_field_names(std::string_view head, std::vector<std::string>& names);
// The original of a name mask_field_names() put in, or `name` itself.
std::string_view unmask_field_name(std::string_view name, const std::vector<std::string>& names);

}  // namespace apus::common::http
