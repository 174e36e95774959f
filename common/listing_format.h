// Listing formats: how account and container listings are negotiated and written, byte for
// byte as Swift writes them (swift-protocol.md §11). Storage servers render their own
// listings with these; the proxy's listing_formats middleware renders client formats from the
// JSON the backends send.
//
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "common/status.h"

namespace boost::json {
class value;
}

namespace apus::common::listing {

// The outcome of format negotiation: a content type, or an error status (400 for a bad Accept
// header, 406 when nothing offered is acceptable) with Swift's body.
struct Negotiated {
  int status = 0;            // 0 on success
  std::string content_type;  // "text/plain", "application/json", "application/xml", "text/xml"
  std::string error_body;
};

// Swift's get_listing_content_type(): `format` (json, xml, plain; anything else means plain)
// overrides `accept`; else Accept's best match among text/plain, application/json,
// application/xml and text/xml, text/plain when there is no Accept header.
Negotiated negotiate(std::optional<std::string_view> format, std::optional<std::string_view> accept);

// swob's Accept.best_match(): the first of `offered` that the best-ranked range of `accept`
// matches (nullopt when none does; the first offer when there is no Accept header).
// InvalidArgument for a header swob cannot parse.
Result<std::optional<std::string>> best_match(std::optional<std::string_view> accept,
                                              std::span<const std::string_view> offered);

// A container listing entry: an object, or a subdir (only `name` set).
struct ObjectItem {
  bool subdir = false;
  std::string name;
  int64_t bytes = 0;
  std::string hash;
  std::string content_type;
  std::string last_modified;  // Timestamp::isoformat()
};

// An account listing entry: a container, or a subdir.
struct ContainerItem {
  bool subdir = false;
  std::string name;
  int64_t count = 0;
  int64_t bytes = 0;
  std::string last_modified;
};

// json.dumps() of the listing: ", " and ": " separators, non-ASCII as \uXXXX.
std::string to_json(std::span<const ObjectItem> items);
std::string to_json(std::span<const ContainerItem> items);
// Swift's container_to_xml / account_to_xml (ElementTree output, with the declaration).
std::string to_xml(std::span<const ObjectItem> items, std::string_view container);
std::string to_xml(std::span<const ContainerItem> items, std::string_view account);
// One name per line.
std::string to_plain(std::span<const ObjectItem> items);
std::string to_plain(std::span<const ContainerItem> items);

// Python's json.dumps() of one string (quotes included), ensure_ascii as Swift uses it.
void append_json_string(std::string& out, std::string_view utf8);

// Python's json.dumps() of a parsed JSON value, as Swift writes back JSON it read (SLO
// manifests, listings a middleware rewrites): ", " and ": " separators, members in their
// order, strings as append_json_string(), floats as Python's repr().
void append_python_json(std::string& out, const boost::json::value& v);

// Python's json.dumps(v, indent=`indent`, sort_keys=True, separators=(',', ': ')): each member
// and item on a line of its own, members sorted by name (as swift-object-info prints crypto
// metadata).
std::string python_json_indented(const boost::json::value& v, int indent);

}  // namespace apus::common::listing
