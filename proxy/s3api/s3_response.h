// S3's XML answers: documents written as Swift's s3api writes them (an XML declaration with
// single quotes, a newline, then the document without whitespace; the S3 namespace on result
// documents, none on errors) and the error response of an S3Error.
//
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <pugixml.hpp>

#include "common/http/server.h"
#include "proxy/s3api/s3_auth.h"

namespace apus::proxy::s3api {

// A new result document whose root element `name` carries S3's namespace.
pugi::xml_document result_document(const char* name, pugi::xml_node* root);

// The text of `doc` with Swift's declaration.
std::string to_xml(const pugi::xml_document& doc);

// Adds <name>text</name> under `parent` (an empty `text` gives <name></name>); returns the new
// element.
pugi::xml_node add_text(pugi::xml_node parent, const char* name, std::string_view text);
// Adds <name>text</name>, or <name/> when `text` is nullopt (as lxml writes a None text).
pugi::xml_node add_optional(pugi::xml_node parent, const char* name,
                            const std::optional<std::string>& text);

// An XML response: `status`, Content-Type application/xml, and the x-amz-request-id and
// x-amz-id-2 headers S3 sends (the trans-id, as Swift's s3api sets them).
common::http::Response xml_response(int status, std::string body, std::string_view trans_id);

// An answer made of a Swift answer's headers (translated as swift_to_s3_headers() does) and
// `status`, with the request ids; no body.
common::http::Response header_response(int status, const common::http::HeaderMap& swift,
                                       std::string_view trans_id);
// Sets S3's request id headers (the trans-id, as Swift's s3api sends it in both).
void set_request_ids(common::http::HeaderMap& h, std::string_view trans_id);

// A time as S3's XML writes it: "2026-12-02T01:30:15.000Z".
std::string s3_xml_time(int64_t epoch_seconds);

// The response of an error: <Error><Code/><Message/><RequestId/>details...</Error>.
common::http::Response error_response(const S3Error& error, std::string_view trans_id);

// The headers of a Swift response as an S3 client sees them (Swift's translate_swift_to_s3):
// object metadata as x-amz-meta-*, the content and caching headers, version and parts headers
// renamed, X-Delete-At as x-amz-expiration, CORS headers; everything else dropped. Names are
// spelt as S3 spells them (ETag, lower-case x-amz-*).
common::http::HeaderMap swift_to_s3_headers(const common::http::HeaderMap& swift);

// S3's errors (Swift's s3response classes) beyond those of authentication.
namespace errors {
S3Error not_implemented(std::string message = "Not implemented.");
S3Error invalid_bucket_name(std::string bucket);
S3Error no_such_bucket(std::string bucket);
S3Error bucket_already_owned_by_you(std::string bucket);
S3Error bucket_already_exists(std::string bucket);
S3Error bucket_not_empty();
S3Error invalid_location_constraint();
S3Error malformed_xml();
S3Error internal_error();
S3Error service_unavailable();
S3Error slow_down();
S3Error method_not_allowed(std::string method, std::string resource_type);
S3Error invalid_uri(std::string uri);
S3Error no_such_key(std::string key);
S3Error no_such_version(std::string key, std::string version);
S3Error precondition_failed();
S3Error request_timeout();
S3Error invalid_range();
S3Error entity_too_large();
S3Error missing_content_length();
S3Error bad_digest();  // Content-MD5
S3Error key_too_long();
S3Error malformed_trailer();
S3Error incomplete_body(std::string message = "You did not provide the number of bytes specified "
                                              "by the Content-Length HTTP header");
}  // namespace errors

}  // namespace apus::proxy::s3api
