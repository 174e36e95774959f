// The answer of Swift's bulk operations (extract-archive, bulk-delete, and SLO's
// ?multipart-manifest=delete, which answers with bulk-delete's format): always 200, streamed,
// its body a report in the format the client's Accept header picks (text/plain, JSON, or XML),
// preceded by whitespace that keeps the connection alive while the work goes on.
//
// - BulkReport holds the report: Swift's result dict (its keys in insertion order, each an
//   integer or a string) and the errors ([quoted name, status line] pairs).
// - bulk_report_body() renders it exactly as Swift's get_response_body() does.
// - BulkAnswer streams it: the 200 head and a first space (or an XML declaration) once
//   `yield_frequency` seconds have passed, then a space every `yield_frequency` seconds at the
//   points where the caller checks in (Swift checks between items, not during one), then the
//   report, after "\r\n\r\n" when whitespace went out before.
//
// Pure functions are thread-safe; a BulkAnswer is thread-compatible and used on the request's
// coroutine only.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <boost/asio/awaitable.hpp>

#include "common/http/server.h"
#include "common/status.h"

namespace apus::proxy {

// Swift's result dict and error list of a bulk operation.
struct BulkReport {
  using Value = std::variant<int64_t, std::string>;
  std::vector<std::pair<std::string, Value>> fields;        // in insertion order
  std::vector<std::pair<std::string, std::string>> errors;  // [quoted name, "404 Not Found"]

  // extract-archive's starting dict: Response Status "201 Created", Response Body "",
  // Number Files Created 0.
  static BulkReport for_extract();
  // bulk-delete's: Response Status "200 OK", Response Body "", Number Deleted 0, Number Not
  // Found 0.
  static BulkReport for_delete();

  // Sets field `key` (appended when new).
  void set(std::string_view key, Value value);
  // Adds `n` to integer field `key` (created as 0 when absent).
  void add(std::string_view key, int64_t n = 1);
  // The value of field `key`; nullptr when absent.
  const Value* get(std::string_view key) const;
  // Sets "Response Status" to `status` with its reason ("400 Bad Request") and "Response Body"
  // to `body`.
  void set_status(int status, std::string body = {});
};

// "<status> <reason>" as swob's Response.status reads ("502 Bad Gateway").
std::string status_line(int status);

// Swift's req.accept.best_match(['text/plain', 'application/json', 'application/xml',
// 'text/xml']): the format to answer in; nullopt when the Accept header is invalid or accepts
// none of them (Swift then reports 406 in a text/plain body).
std::optional<std::string> bulk_content_type(std::optional<std::string_view> accept);

// Swift's get_response_body(): the report as JSON for "application/json" (json.dumps, the
// fields in order then "Errors"), as XML under <root_tag> for a type ending in "/xml" (no
// declaration; sorted fields with keys lower-cased and ' ' as '_', then <errors>), else as
// text ("Key: value" lines in sorted order, then "Errors:" and "name, status" lines).
std::string bulk_report_body(std::string_view content_type, const BulkReport& report,
                             std::string_view root_tag);

// Streams a bulk answer to the client. The head goes out with the first bytes of body.
class BulkAnswer {
 public:
  // `content_type` as bulk_content_type() chose it (nullopt: Swift's default text/html head
  // and a text body). `yield_frequency` in seconds.
  BulkAnswer(common::http::Exchange& ex, std::optional<std::string> content_type,
             double yield_frequency);

  // Sends whitespace when `yield_frequency` seconds have passed since the start or the last
  // whitespace. A failed Status means the client is gone.
  boost::asio::awaitable<common::Status> heartbeat();
  // Sends the report and ends the answer.
  boost::asio::awaitable<common::Status> finish(const BulkReport& report,
                                                std::string_view root_tag);

  // The format chosen (empty when none was acceptable).
  const std::string& content_type() const { return content_type_; }

 private:
  boost::asio::awaitable<common::Status> send(std::string chunk);

  common::http::Exchange& ex_;
  std::string content_type_;
  std::chrono::steady_clock::duration yield_frequency_;
  std::chrono::steady_clock::time_point last_yield_;
  bool yielded_ = false;  // whitespace went out: the report follows "\r\n\r\n"
};

}  // namespace apus::proxy
