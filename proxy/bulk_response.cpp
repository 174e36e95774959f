// Bulk answers (bulk_response.h).
#include "proxy/bulk_response.h"

#include <algorithm>

#include "common/listing_format.h"

namespace apus::proxy {

namespace net = boost::asio;
using common::Status;
using common::http::HeaderMap;

BulkReport BulkReport::for_extract() {
  BulkReport r;
  r.set("Response Status", status_line(201));
  r.set("Response Body", std::string());
  r.set("Number Files Created", int64_t{0});
  return r;
}

BulkReport BulkReport::for_delete() {
  BulkReport r;
  r.set("Response Status", status_line(200));
  r.set("Response Body", std::string());
  r.set("Number Deleted", int64_t{0});
  r.set("Number Not Found", int64_t{0});
  return r;
}

void BulkReport::set(std::string_view key, Value value) {
  for (auto& [k, v] : fields) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  fields.emplace_back(std::string(key), std::move(value));
}

void BulkReport::add(std::string_view key, int64_t n) {
  const Value* v = get(key);
  int64_t now = v && std::holds_alternative<int64_t>(*v) ? std::get<int64_t>(*v) : 0;
  set(key, now + n);
}

const BulkReport::Value* BulkReport::get(std::string_view key) const {
  for (const auto& [k, v] : fields) {
    if (k == key) return &v;
  }
  return nullptr;
}

void BulkReport::set_status(int status, std::string body) {
  set("Response Status", status_line(status));
  set("Response Body", std::move(body));
}

std::string status_line(int status) {
  return std::to_string(status) + " " + std::string(common::http::reason_phrase(status));
}

std::optional<std::string> bulk_content_type(std::optional<std::string_view> accept) {
  // The same four types, in the same order, as listing negotiation offers; a malformed header
  // (400 there) is as good as none acceptable here.
  auto n = common::listing::negotiate(std::nullopt, accept);
  if (n.status != 0) return std::nullopt;
  return n.content_type;
}

namespace {

std::string value_text(const BulkReport::Value& v) {
  if (const auto* i = std::get_if<int64_t>(&v)) return std::to_string(*i);
  return std::get<std::string>(v);
}

// saxutils.escape(): &, < and > only.
void append_escaped(std::string& out, std::string_view s) {
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      default:
        out.push_back(c);
    }
  }
}

std::vector<const std::pair<std::string, BulkReport::Value>*> sorted_fields(
    const BulkReport& report) {
  std::vector<const std::pair<std::string, BulkReport::Value>*> out;
  for (const auto& f : report.fields) out.push_back(&f);
  std::sort(out.begin(), out.end(),
            [](const auto* a, const auto* b) { return a->first < b->first; });
  return out;
}

std::string json_body(const BulkReport& report) {
  std::string out = "{";
  for (const auto& [k, v] : report.fields) {
    common::listing::append_json_string(out, k);
    out += ": ";
    if (const auto* i = std::get_if<int64_t>(&v)) {
      out += std::to_string(*i);
    } else {
      common::listing::append_json_string(out, std::get<std::string>(v));
    }
    out += ", ";
  }
  out += "\"Errors\": [";
  for (size_t i = 0; i < report.errors.size(); ++i) {
    if (i) out += ", ";
    out += "[";
    common::listing::append_json_string(out, report.errors[i].first);
    out += ", ";
    common::listing::append_json_string(out, report.errors[i].second);
    out += "]";
  }
  out += "]}";
  return out;
}

std::string xml_body(const BulkReport& report, std::string_view root_tag) {
  std::string out = "<" + std::string(root_tag) + ">\n";
  for (const auto* f : sorted_fields(report)) {
    std::string tag = f->first;
    for (char& c : tag)
      c = c == ' ' ? '_' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    out += "<" + tag + ">";
    append_escaped(out, value_text(f->second));
    out += "</" + tag + ">\n";
  }
  out += "<errors>\n";
  for (const auto& [name, status] : report.errors) {
    out += "<object><name>";
    append_escaped(out, name);
    out += "</name><status>";
    append_escaped(out, status);
    out += "</status></object>\n";
  }
  out += "</errors>\n</" + std::string(root_tag) + ">\n";
  return out;
}

std::string text_body(const BulkReport& report) {
  std::string out;
  for (const auto* f : sorted_fields(report)) out += f->first + ": " + value_text(f->second) + "\n";
  out += "Errors:\n";
  for (const auto& [name, status] : report.errors) out += name + ", " + status + "\n";
  return out;
}

}  // namespace

std::string bulk_report_body(std::string_view content_type, const BulkReport& report,
                             std::string_view root_tag) {
  if (content_type == "application/json") return json_body(report);
  if (content_type.ends_with("/xml")) return xml_body(report, root_tag);
  return text_body(report);
}

BulkAnswer::BulkAnswer(common::http::Exchange& ex, std::optional<std::string> content_type,
                       double yield_frequency)
    : ex_(ex),
      content_type_(content_type.value_or("")),
      yield_frequency_(std::chrono::duration_cast<std::chrono::steady_clock::duration>(
          std::chrono::duration<double>(yield_frequency))),
      last_yield_(std::chrono::steady_clock::now()) {}

net::awaitable<Status> BulkAnswer::heartbeat() {
  auto now = std::chrono::steady_clock::now();
  if (now - last_yield_ <= yield_frequency_) co_return Status();
  last_yield_ = now;
  // The first whitespace of an XML answer is its declaration, as Swift sends it.
  std::string chunk = !yielded_ && content_type_.ends_with("/xml")
                          ? "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                          : " ";
  yielded_ = true;
  co_return co_await send(std::move(chunk));
}

net::awaitable<Status> BulkAnswer::finish(const BulkReport& report, std::string_view root_tag) {
  std::string body = yielded_ ? "\r\n\r\n" : "";
  body += bulk_report_body(content_type_, report, root_tag);
  Status s = co_await send(std::move(body));
  if (!s.ok()) co_return s;
  co_return co_await ex_.finish_response();
}

net::awaitable<Status> BulkAnswer::send(std::string chunk) {
  if (!ex_.response_started()) {
    HeaderMap h;
    // swob's default Content-Type stays when no format was acceptable.
    h.set("Content-Type", content_type_.empty() ? "text/html; charset=UTF-8" : content_type_);
    Status s = co_await ex_.start_response(200, std::move(h), std::nullopt);
    if (!s.ok()) co_return s;
  }
  co_return co_await ex_.write_body(chunk);
}

}  // namespace apus::proxy
