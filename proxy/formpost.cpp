// formpost (formpost.h). The client's body goes through a multipart::Parser a chunk at a time;
// each file field's data is the body of a PUT subrequest (pre-authorized, as Swift's
// make_pre_authed_env), capped at the form's max_file_size.
#include "proxy/formpost.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <span>
#include <variant>
#include <vector>

#include "common/http/swob.h"
#include "common/http/url.h"
#include "common/listing_format.h"
#include "common/log/log.h"
#include "common/utf8.h"
#include "proxy/digest.h"
#include "proxy/form_reader.h"
#include "proxy/multipart.h"
#include "proxy/subrequest.h"
#include "proxy/tempurl.h"

namespace apus::proxy {

namespace net = boost::asio;
using common::Result;
using common::Status;
using common::http::Exchange;
using common::http::HeaderMap;
using common::http::Request;
using common::http::Response;

namespace {

using Step = multipart::Parser::Step;
using multipart::FormReader;
// The most of a PUT subrequest's answer body held (it is dropped: Swift 2.30.1 answers with
// the status line).
constexpr size_t kMaxAnswer = 1024 * 1024;

// The form's fields that matter: Swift keeps every field, but reads only these.
constexpr std::string_view kKnownFields[] = {
    "redirect", "max_file_size", "max_file_count", "expires", "signature",
    "x_delete_at", "x_delete_after", "content-type", "content-encoding"};

// A file's data as a PUT body, failing once more than max_file_size bytes were read (checked
// after every read, the last empty one included, as Swift's capped reader does).
class CappedFileBody final : public BodySource {
 public:
  CappedFileBody(FormReader& reader, int64_t max) : reader_(reader), max_(max) {}
  net::awaitable<Result<size_t>> read(std::span<char> buf) override {
    auto n = co_await reader_.read(buf);
    if (!n.ok()) {
      read_failed_ = true;
      co_return n;
    }
    total_ += static_cast<int64_t>(*n);
    if (total_ > max_) {
      exceeded_ = true;
      co_return Status::invalid_argument("max_file_size exceeded");
    }
    if (*n == 0) ended_ = true;
    co_return n;
  }
  bool exceeded() const { return exceeded_; }
  bool ended() const { return ended_; }
  bool read_failed() const { return read_failed_; }

 private:
  FormReader& reader_;
  int64_t max_;
  int64_t total_ = 0;
  bool exceeded_ = false, ended_ = false, read_failed_ = false;
};

// What ends a form early, as Swift's exceptions do.
struct FormError {
  enum Kind { kInvalid, kUnauthorized, kServerError } kind;
  std::string message;
};

Response text_plain(int status, std::string body) {
  Response r;
  r.status = status;
  r.headers.set("Content-Type", "text/plain");
  r.body = std::move(body);
  return r;
}

Response error_response(const FormError& e) {
  switch (e.kind) {
    case FormError::kInvalid:
      return text_plain(400, "FormPost: " + e.message);
    case FormError::kUnauthorized: {
      Response r = common::http::swob_response_with_body(
          401, "FormPost: " + tempurl::python_title(e.message));
      // swob's challenge, made without the request: no account in the realm.
      r.headers.set("Www-Authenticate", "Swift realm=\"unknown\"");
      return r;
    }
    case FormError::kServerError:
      break;
  }
  Response r = common::http::swob_response(500);
  r.body = "An error occurred";  // what catch_errors answers for an exception
  return r;
}

// Python's str.rstrip("\r\n-").
std::string rstrip_form(std::string s) {
  while (!s.empty() && (s.back() == '\r' || s.back() == '\n' || s.back() == '-')) s.pop_back();
  return s;
}

class FormPost final : public Middleware {
 public:
  FormPost(digest::AllowedDigests digests, InfoLookup& info)
      : digests_(std::move(digests)), info_(info) {}

  std::optional<std::pair<std::string, std::string>> info() const override {
    std::string out = "{\"allowed_digests\": [";
    for (size_t i = 0; i < digests_.allowed.size(); ++i) {
      if (i > 0) out += ", ";
      common::listing::append_json_string(out, digests_.allowed[i]);
    }
    out += "]";
    if (!digests_.deprecated.empty()) {
      out += ", \"deprecated_digests\": [";
      for (size_t i = 0; i < digests_.deprecated.size(); ++i) {
        if (i > 0) out += ", ";
        common::listing::append_json_string(out, digests_.deprecated[i]);
      }
      out += "]";
    }
    return std::make_pair(std::string("formpost"), out + "}");
  }

  net::awaitable<void> call(Exchange& ex, ProxyEnv& env, const Next& next) override {
    const Request& req = ex.request();
    if (req.method == "POST") {
      multipart::Disposition ct =
          multipart::parse_content_disposition(req.headers.get_or("Content-Type", ""));
      auto boundary = ct.attrs.find("boundary");
      if (ct.type == "multipart/form-data" && boundary != ct.attrs.end()) {
        co_return co_await translate(ex, env, next, boundary->second);
      }
    }
    co_await next(ex, env);
  }

 private:
  struct Outcome {
    int status = 0;  // 0: no file processed
    std::string reason;
    std::string message;
    HeaderMap headers;  // of the last PUT
  };

  net::awaitable<void> translate(Exchange& ex, ProxyEnv& env, const Next& next,
                                 std::string boundary) {
    const Request& req = ex.request();
    const std::string path_info = common::http::percent_decode(req.path());
    std::vector<std::string> keys = co_await get_keys(req, env, path_info);
    FormReader reader(ex, boundary);
    auto started = co_await reader.start();
    if (!started.ok()) co_return co_await ex.reply(client_gone(started.status()));
    if (*started == Step::kInvalid) {
      co_return co_await ex.reply(text_plain(400, "FormPost: invalid starting boundary"));
    }
    std::map<std::string, std::string> attributes;  // only kKnownFields
    Outcome outcome;
    int64_t file_count = 0;
    while (true) {
      std::vector<std::string> lines;
      auto got = co_await reader.headers(&lines);
      if (!got.ok()) co_return co_await ex.reply(client_gone(got.status()));
      if (*got == Step::kTooLong) {
        co_return co_await ex.reply(text_plain(400, "FormPost: mime headers too long"));
      }
      multipart::MimeHeaders hdrs = multipart::MimeHeaders::parse(lines);
      multipart::Disposition disp =
          multipart::parse_content_disposition(hdrs.get("Content-Disposition").value_or(""));
      auto filename = disp.attrs.find("filename");
      if (disp.type == "form-data" && filename != disp.attrs.end() && !filename->second.empty()) {
        ++file_count;
        auto max_count = field_int(attributes, "max_file_count");
        if (!max_count) {
          co_return co_await ex.reply(
              error_response({FormError::kInvalid, "max_file_count not an integer"}));
        }
        if (file_count > *max_count) {
          outcome.status = 400;
          outcome.reason = "Bad Request";
          outcome.message = "max file count exceeded";
          break;
        }
        std::map<std::string, std::string> file_attributes = attributes;
        file_attributes["filename"] = filename->second;
        if (!attributes.contains("content-type")) {
          if (auto type = hdrs.get("Content-Type")) {
            file_attributes["content-type"] = type->empty() ? "application/octet-stream" : *type;
          }
        }
        if (!attributes.contains("content-encoding")) {
          if (auto enc = hdrs.get("Content-Encoding")) file_attributes["content-encoding"] = *enc;
        }
        auto put = co_await perform_subrequest(ex, env, next, path_info, file_attributes, reader,
                                               keys);
        if (auto* error = std::get_if<FormError>(&put)) {
          co_return co_await ex.reply(error_response(*error));
        }
        outcome = std::move(std::get<Outcome>(put));
        if (outcome.status < 200 || outcome.status >= 300) break;
        // A PUT reads its body to the end; this is only in case one answered before that.
        if (Status s = co_await reader.drain(); !s.ok()) {
          co_return co_await ex.reply(client_gone(s));
        }
      } else {
        std::string data;
        std::vector<char> buf(formpost::kMaxValueLength);
        while (data.size() < formpost::kMaxValueLength) {
          auto n = co_await reader.read(
              std::span(buf.data(), formpost::kMaxValueLength - data.size()));
          if (!n.ok()) co_return co_await ex.reply(client_gone(n.status()));
          if (*n == 0) break;
          data.append(buf.data(), *n);
        }
        if (Status s = co_await reader.drain(); !s.ok()) {
          co_return co_await ex.reply(client_gone(s));
        }
        // Swift decodes every field as UTF-8 and fails (500) on one that is not.
        if (!common::valid_utf8(data)) {
          APUS_LOG_DEBUG("formpost: " + env.trans_id + " field value is not UTF-8");
          co_return co_await ex.reply(error_response({FormError::kServerError, ""}));
        }
        if (auto name = disp.attrs.find("name"); name != disp.attrs.end()) {
          std::string lower = name->second;
          std::transform(lower.begin(), lower.end(), lower.begin(),
                         [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
          if (std::find(std::begin(kKnownFields), std::end(kKnownFields), lower) !=
              std::end(kKnownFields)) {
            attributes[lower] = rstrip_form(std::move(data));
          }
        }
      }
      if (!reader.more_parts()) break;
    }
    co_return co_await ex.reply(answer(outcome, attributes));
  }

  // The answer once the form is read: the last PUT's status (or the refusal), as text or as a
  // redirect.
  static Response answer(Outcome& outcome, const std::map<std::string, std::string>& attributes) {
    if (outcome.status == 0) {
      outcome.status = 400;
      outcome.reason = "Bad Request";
      outcome.message = "no files to process";
    }
    Response r;
    for (const auto& [name, value] : outcome.headers) {
      if (common::http::istarts_with(name, "access-control")) r.headers.add(name, value);
    }
    std::string status_line = std::to_string(outcome.status) + " " + outcome.reason;
    auto redirect = attributes.find("redirect");
    if (redirect == attributes.end() || redirect->second.empty()) {
      r.status = outcome.status;
      r.reason = outcome.reason;
      r.body = status_line;
      if (!outcome.message.empty()) {
        r.body += "\r\nFormPost: " + tempurl::python_title(outcome.message);
      }
      r.headers.set("Content-Type", "text/plain");
      return r;
    }
    std::string location = redirect->second;
    location += location.find('?') == std::string::npos ? "?" : "&";
    location += "status=" + common::http::quote(std::to_string(outcome.status)) +
                "&message=" + common::http::quote(outcome.message);
    r.status = 303;
    r.headers.set("Location", location);
    r.body = "<html><body><p><a href=\"" + location +
             "\">Click to continue...</a></p></body></html>";
    return r;
  }

  // Python's int(attributes.get(name) or 0).
  static std::optional<int64_t> field_int(const std::map<std::string, std::string>& attributes,
                                          std::string_view name) {
    auto it = attributes.find(std::string(name));
    if (it == attributes.end() || it->second.empty()) return 0;
    auto v = tempurl::python_int(it->second);
    if (!v) return std::nullopt;
    return v->value;
  }

  // One file: the checks of Swift's _perform_subrequest(), in its order, then the PUT.
  net::awaitable<std::variant<Outcome, FormError>> perform_subrequest(
      Exchange& ex, ProxyEnv& env, const Next& next, const std::string& path_info,
      const std::map<std::string, std::string>& attributes, FormReader& reader,
      const std::vector<std::string>& keys) {
    using Error = FormError;
    if (keys.empty()) co_return Error{FormError::kUnauthorized, "invalid signature"};
    auto max_file_size = field_int(attributes, "max_file_size");
    if (!max_file_size) co_return Error{FormError::kInvalid, "max_file_size not an integer"};
    const Request& req = ex.request();
    HeaderMap h = subrequest_headers(req, "FormPost");
    h.erase("X-Auth-Token");  // make_env() does not carry it
    std::string path = path_info;
    if (!path.ends_with('/') && std::count(path.begin(), path.end(), '/') < 4) path += '/';
    path += attributes.at("filename");
    auto get = [&](std::string_view name) -> const std::string* {
      auto it = attributes.find(std::string(name));
      return it == attributes.end() ? nullptr : &it->second;
    };
    if (const std::string* v = get("x_delete_at")) {
      auto n = tempurl::python_int(*v);
      if (!n) {
        co_return Error{FormError::kInvalid,
                        "x_delete_at not an integer: Unix timestamp required."};
      }
      h.set("X-Delete-At", n->text);
    }
    if (const std::string* v = get("x_delete_after")) {
      auto n = tempurl::python_int(*v);
      if (!n) {
        co_return Error{FormError::kInvalid,
                        "x_delete_after not an integer: Number of seconds required."};
      }
      h.set("X-Delete-After", n->text);
    }
    if (const std::string* v = get("content-type")) {
      h.set("Content-Type", v->empty() ? "application/octet-stream" : *v);
    }
    if (const std::string* v = get("content-encoding")) h.set("Content-Encoding", *v);
    auto expires = field_int(attributes, "expires");
    if (!expires) co_return Error{FormError::kInvalid, "expired not an integer"};
    const double now =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    if (static_cast<long double>(*expires) < static_cast<long double>(now)) {
      co_return Error{FormError::kUnauthorized, "form expired"};
    }
    auto field_or = [&](std::string_view name, std::string_view def) -> std::string {
      const std::string* v = get(name);
      return v == nullptr || v->empty() ? std::string(def) : *v;
    };
    const std::string hmac_body = path_info + "\n" + field_or("redirect", "") + "\n" +
                                  field_or("max_file_size", "0") + "\n" +
                                  field_or("max_file_count", "0") + "\n" +
                                  field_or("expires", "0");
    const std::string* signature = get("signature");
    auto sig = digest::extract_digest_and_algorithm(signature ? *signature : "");
    if (!sig || !digests_.contains(sig->algorithm)) {
      co_return Error{FormError::kUnauthorized, "invalid signature"};
    }
    bool valid = false;
    for (const std::string& key : keys) {  // every key, match or not
      if (digest::streq_const_time(digest::hmac_hex(sig->algorithm, key, hmac_body), sig->hex)) {
        valid = true;
      }
    }
    if (!valid) co_return Error{FormError::kUnauthorized, "invalid signature"};
    APUS_LOG_DEBUG("formpost: " + env.trans_id + " signature " + sig->algorithm + " ok");

    h.set("Transfer-Encoding", "chunked");
    Request put = make_subrequest("PUT", path, "", std::move(h));
    put.content_length.reset();
    put.chunked = true;
    ProxyEnv sub = pre_authed_env(env, "FP");
    CappedFileBody body(reader, *max_file_size);
    auto r = co_await run_subrequest_with_body(next, std::move(put), std::move(sub), body,
                                               kMaxAnswer);
    if (body.exceeded()) co_return Error{FormError::kInvalid, "max_file_size exceeded"};
    Outcome out;
    if (!r.ok()) {
      out.status = 500;
    } else {
      out.status = r->status;
      out.reason = r->reason;
      out.headers = std::move(r->headers);
    }
    if (out.reason.empty()) out.reason = std::string(common::http::reason_phrase(out.status));
    co_return out;
  }

  // Swift's _get_keys(): none unless the path names a container of a valid API version.
  net::awaitable<std::vector<std::string>> get_keys(const Request& req, const ProxyEnv& env,
                                                    const std::string& path_info) {
    std::vector<std::string> parts;
    std::string_view rest = path_info;
    for (int i = 0; i < 4; ++i) {
      size_t slash = rest.find('/');
      if (slash == std::string_view::npos) break;
      parts.emplace_back(rest.substr(0, slash));
      rest.remove_prefix(slash + 1);
    }
    parts.emplace_back(rest);
    std::vector<std::string> keys;
    if (parts.size() < 4 || !parts[0].empty() || (parts[1] != "v1" && parts[1] != "v1.0") ||
        parts[2].empty() || parts[3].empty()) {
      co_return keys;
    }
    ProxyEnv fp = subrequest_env(env, "FP");
    CachedInfo a = co_await info_.account_info(parts[2], req, fp);
    keys = tempurl::keys_from_headers(a.headers, "X-Account-Meta-");
    CachedInfo c = co_await info_.container_info(parts[2], parts[3], req, fp);
    for (auto& k : tempurl::keys_from_headers(c.headers, "X-Container-Meta-")) {
      keys.push_back(std::move(k));
    }
    co_return keys;
  }

  // The answer when the client's body could not be read: it is gone or too slow.
  static Response client_gone(const Status& s) {
    APUS_LOG_DEBUG("formpost: reading the form failed: " + s.message());
    return common::http::swob_response(s.is_timeout() ? 408 : 499);
  }

  digest::AllowedDigests digests_;
  InfoLookup& info_;
};

}  // namespace

Result<std::unique_ptr<Middleware>> make_formpost(const common::Section& section,
                                                  const MiddlewareContext& context) {
  std::vector<std::string> ignored;
  auto digests = digest::allowed_digests(section.get_string("allowed_digests", ""), &ignored);
  if (!digests.ok()) return section.invalid("allowed_digests", digests.status().message());
  if (!ignored.empty()) {
    std::string names;
    for (const auto& n : ignored) names += (names.empty() ? "" : ", ") + n;
    APUS_LOG_WARNING("formpost: the following digest algorithms are configured but not "
                     "supported: " + names);
  }
  return std::unique_ptr<Middleware>(
      std::make_unique<FormPost>(std::move(*digests), context.info));
}

}  // namespace apus::proxy
