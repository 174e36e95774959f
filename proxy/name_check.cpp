// name_check (limits.h): refuses a request whose decoded path holds one of forbidden_chars,
// is longer than maximum_length bytes, or has a substring matching forbidden_regexp, with
// Swift's 400 bodies, before anything else of the pipeline sees it.
//
// forbidden_regexp is Python's `re` syntax; Boost.Regex's Perl syntax reads the same patterns
// (with '^', '$' and '.' as Python has them: no multi-line anchors, '.' not matching a
// newline). A path that would make the matcher run past Boost's complexity bound is refused
// as if it matched: it is a client's input, and it cannot be shown to be harmless.
#include <boost/regex.hpp>

#include "common/config/config.h"
#include "common/http/swob.h"
#include "common/http/url.h"
#include "common/listing_format.h"
#include "proxy/limits.h"

namespace apus::proxy {

namespace net = boost::asio;
using common::Result;
using common::http::Exchange;
using common::http::swob_response_with_body;

namespace {

constexpr std::string_view kForbiddenChars = "'\"`<>";
constexpr int64_t kMaximumLength = 255;
constexpr std::string_view kForbiddenRegexp = R"(/\./|/\.\./|/\.$|/\.\.$)";

class NameCheck final : public Middleware {
 public:
  NameCheck(std::string chars, int64_t max_length, std::string pattern,
            std::optional<boost::regex> regex)
      : chars_(std::move(chars)),
        max_length_(max_length),
        pattern_(std::move(pattern)),
        regex_(std::move(regex)) {}

  std::optional<std::pair<std::string, std::string>> info() const override {
    std::string out = "{\"forbidden_chars\": ";
    common::listing::append_json_string(out, chars_);
    out += ", \"maximum_length\": " + std::to_string(max_length_) + ", \"forbidden_regexp\": ";
    common::listing::append_json_string(out, pattern_);
    out += "}";
    return std::make_pair(std::string("name_check"), std::move(out));
  }

  net::awaitable<void> call(Exchange& ex, ProxyEnv& env, const Next& next) override {
    const std::string path = common::http::percent_decode(ex.request().path());
    if (path.find_first_of(chars_) != std::string::npos) {
      co_return co_await ex.reply(swob_response_with_body(
          400, "Object/Container/Account name contains forbidden chars from " + chars_));
    }
    if (static_cast<int64_t>(path.size()) > max_length_) {
      co_return co_await ex.reply(swob_response_with_body(
          400, "Object/Container/Account name longer than the allowed maximum " +
                   std::to_string(max_length_)));
    }
    if (regex_ && forbidden_substring(path)) {
      co_return co_await ex.reply(swob_response_with_body(
          400, "Object/Container/Account name contains a forbidden substring from regular "
               "expression " + pattern_));
    }
    co_await next(ex, env);
  }

 private:
  bool forbidden_substring(const std::string& path) const {
    try {
      return boost::regex_search(path, *regex_);
    } catch (const std::exception&) {
      return true;  // past the matcher's complexity bound
    }
  }

  const std::string chars_;
  const int64_t max_length_;
  const std::string pattern_;
  const std::optional<boost::regex> regex_;
};

}  // namespace

Result<std::unique_ptr<Middleware>> make_name_check(const common::Section& section,
                                                    const MiddlewareContext&) {
  std::string chars = section.get_string("forbidden_chars", kForbiddenChars);
  int64_t max_length = kMaximumLength;
  if (auto v = section.get("maximum_length")) {
    auto n = common::parse_python_int(*v);
    if (!n) return section.invalid("maximum_length", "is not an integer");
    max_length = *n;
  }
  std::string pattern = section.get_string("forbidden_regexp", kForbiddenRegexp);
  std::optional<boost::regex> regex;
  if (!pattern.empty()) {
    try {
      regex.emplace(pattern, boost::regex::perl | boost::regex::no_mod_m |
                                 boost::regex::no_mod_s);
    } catch (const std::exception& e) {
      return section.invalid("forbidden_regexp",
                             std::string("is not a valid regular expression: ") + e.what());
    }
  }
  return std::unique_ptr<Middleware>(std::make_unique<NameCheck>(
      std::move(chars), max_length, std::move(pattern), std::move(regex)));
}

}  // namespace apus::proxy
