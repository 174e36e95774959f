#include "common/config/config.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <limits>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <system_error>

#include "common/http/headers.h"

namespace apus::common {

namespace {

using http::to_lower;

constexpr std::string_view kDefaultSection = "DEFAULT";
constexpr std::string_view kWhitespace = " \t\n\r\v\f";

// Sections paste.deploy loads; they get its "DEFAULT wins over a plain key" rule.
constexpr std::array<std::string_view, 6> kPasteKinds = {"app",       "filter",     "pipeline",
                                                         "composite", "filter-app", "server"};

std::string_view strip(std::string_view s) {
  size_t b = s.find_first_not_of(kWhitespace);
  if (b == std::string_view::npos) return {};
  size_t e = s.find_last_not_of(kWhitespace);
  return s.substr(b, e - b + 1);
}

std::string_view rstrip(std::string_view s) {
  size_t e = s.find_last_not_of(kWhitespace);
  return e == std::string_view::npos ? std::string_view{} : s.substr(0, e + 1);
}

bool is_paste_section(std::string_view name) {
  size_t colon = name.find(':');
  if (colon == std::string_view::npos) return false;
  std::string_view kind = name.substr(0, colon);
  return std::find(kPasteKinds.begin(), kPasteKinds.end(), kind) != kPasteKinds.end();
}

bool in_set(std::string_view value, std::initializer_list<std::string_view> words) {
  std::string lower = to_lower(value);
  return std::find(words.begin(), words.end(), lower) != words.end();
}

// Splits on "\n", "\r\n" and "\r", as Python's universal-newline text mode does.
std::vector<std::string_view> split_lines(std::string_view text) {
  std::vector<std::string_view> lines;
  size_t start = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\n' && text[i] != '\r') continue;
    lines.push_back(text.substr(start, i - start));
    if (text[i] == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
    start = i + 1;
  }
  if (start < text.size()) lines.push_back(text.substr(start));
  return lines;
}

Result<std::string> read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::io_error("Unable to read config from " + path.string());
  std::ostringstream buf;
  buf << in.rdbuf();
  if (in.bad()) return Status::io_error("Unable to read config from " + path.string());
  return std::move(buf).str();
}

}  // namespace

std::optional<int64_t> parse_python_int(std::string_view s) {
  size_t b = s.find_first_not_of(" \t\n\r\v\f");
  if (b == std::string_view::npos) return std::nullopt;
  s = s.substr(b, s.find_last_not_of(" \t\n\r\v\f") - b + 1);
  bool negative = false;
  if (s[0] == '+' || s[0] == '-') {
    negative = s[0] == '-';
    s.remove_prefix(1);
  }
  if (s.empty() || s[0] == '+' || s[0] == '-') return std::nullopt;
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size()) return std::nullopt;
  return negative ? -v : v;
}

std::optional<int64_t> parse_python_int_saturating(std::string_view s) {
  size_t b = s.find_first_not_of(" \t\n\r\v\f");
  if (b == std::string_view::npos) return std::nullopt;
  s = s.substr(b, s.find_last_not_of(" \t\n\r\v\f") - b + 1);
  bool negative = false;
  if (s[0] == '+' || s[0] == '-') {
    negative = s[0] == '-';
    s.remove_prefix(1);
  }
  if (s.empty() || s.front() == '_' || s.back() == '_') return std::nullopt;
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  int64_t v = 0;
  bool after_underscore = false;
  for (char c : s) {
    if (c == '_') {
      if (after_underscore) return std::nullopt;
      after_underscore = true;
      continue;
    }
    if (c < '0' || c > '9') return std::nullopt;
    after_underscore = false;
    const int digit = c - '0';
    v = v > (kMax - digit) / 10 ? kMax : v * 10 + digit;
  }
  return negative ? -v : v;
}

bool config_true_value(std::string_view value) {
  return in_set(value, {"true", "1", "yes", "on", "t", "y"});
}

std::vector<std::string> list_from_csv(std::string_view value) {
  std::vector<std::string> out;
  any_csv_item(value, [&](std::string_view item) {
    out.emplace_back(item);
    return false;
  });
  return out;
}

std::vector<std::string> split_words(std::string_view value) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (true) {
    size_t b = value.find_first_not_of(kWhitespace, pos);
    if (b == std::string_view::npos) break;
    size_t e = value.find_first_of(kWhitespace, b);
    if (e == std::string_view::npos) e = value.size();
    out.emplace_back(value.substr(b, e - b));
    pos = e;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Section

const Section::Entry* Section::entry(std::string_view key) const {
  auto it = entries_.find(to_lower(key));
  return it == entries_.end() ? nullptr : &it->second;
}

bool Section::has(std::string_view key) const { return entry(key) != nullptr; }

std::optional<std::string> Section::get(std::string_view key) const {
  const Entry* e = entry(key);
  if (e == nullptr) return std::nullopt;
  return e->value;
}

std::string Section::get_string(std::string_view key, std::string_view def) const {
  const Entry* e = entry(key);
  return e == nullptr ? std::string(def) : e->value;
}

Status Section::invalid(std::string_view key, std::string_view problem) const {
  const Entry* e = entry(key);
  std::string msg;
  if (e != nullptr) {
    msg = e->file + " [" + e->section + "] " + to_lower(key) + ": \"" + e->value + "\" ";
  } else {
    msg = "[" + name_ + "] " + to_lower(key) + ": ";
  }
  msg += problem;
  return Status::invalid_argument(std::move(msg));
}

Result<bool> Section::get_bool(std::string_view key, bool def) const {
  const Entry* e = entry(key);
  if (e == nullptr) return def;
  if (config_true_value(e->value)) return true;
  if (in_set(e->value, {"false", "0", "no", "off", "f", "n"})) return false;
  return invalid(key, "is not a boolean (use true/false, yes/no, on/off or 1/0)");
}

Result<int64_t> Section::get_int(std::string_view key, int64_t def) const {
  const Entry* e = entry(key);
  if (e == nullptr) return def;
  std::string_view v = e->value;
  // from_chars takes '-' but not '+'; Python's int() takes both.
  if (!v.empty() && v[0] == '+') v.remove_prefix(1);
  if (v.empty() || v[0] == '+' || (v[0] == '-' && v.size() == 1)) {
    return invalid(key, "is not an integer");
  }
  int64_t out = 0;
  auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  if (ec == std::errc::result_out_of_range) return invalid(key, "is out of range");
  if (ec != std::errc() || ptr != v.data() + v.size()) return invalid(key, "is not an integer");
  return out;
}

Result<double> Section::get_double(std::string_view key, double def) const {
  const Entry* e = entry(key);
  if (e == nullptr) return def;
  std::string_view v = e->value;
  if (!v.empty() && v[0] == '+') v.remove_prefix(1);
  if (v.empty() || v[0] == '+') return invalid(key, "is not a number");
  double out = 0;
  auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  if (ec == std::errc::result_out_of_range) return invalid(key, "is out of range");
  if (ec != std::errc() || ptr != v.data() + v.size()) return invalid(key, "is not a number");
  return out;
}

std::vector<std::string> Section::get_list(std::string_view key, std::string_view def) const {
  const Entry* e = entry(key);
  return list_from_csv(e == nullptr ? def : std::string_view(e->value));
}

std::vector<std::string> Section::get_words(std::string_view key, std::string_view def) const {
  const Entry* e = entry(key);
  return split_words(e == nullptr ? def : std::string_view(e->value));
}

std::vector<std::pair<std::string, std::string>> Section::items() const {
  std::vector<std::pair<std::string, std::string>> out;
  out.reserve(entries_.size());
  for (const auto& [k, e] : entries_) out.emplace_back(k, e.value);
  return out;
}

// ---------------------------------------------------------------------------------------------
// Parser: one file (or string) into a Config, following Python's ConfigParser._read with
// strict=True and empty_lines_in_values=True. State that ConfigParser keeps per read() call
// (current section, indentation, duplicate tracking) lives here, so every file of a conf.d
// directory starts afresh while values accumulate in the Config.

class Config::Parser {
 public:
  Parser(Config& config, std::string file) : config_(config), file_(std::move(file)) {}

  Status run(std::string_view text) {
    int lineno = 0;
    for (std::string_view line : split_lines(text)) {
      ++lineno;
      Status s = handle_line(line, lineno);
      if (!s.ok()) return s;
    }
    finish_value();
    return Status();
  }

 private:
  Status error(int lineno, const std::string& what) const {
    return Status::invalid_argument(file_ + ":" + std::to_string(lineno) + ": " + what);
  }

  // Joins the lines of the value being read, like ConfigParser's _join_multiline_values.
  void finish_value() {
    if (value_ == nullptr) return;
    std::string joined;
    for (size_t i = 0; i < lines_.size(); ++i) {
      if (i > 0) joined += '\n';
      joined += lines_[i];
    }
    value_->value = std::string(rstrip(joined));
    value_ = nullptr;
    lines_.clear();
  }

  Status handle_line(std::string_view line, int lineno) {
    std::string_view stripped = strip(line);
    bool comment = !stripped.empty() && (stripped[0] == '#' || stripped[0] == ';');
    if (stripped.empty() || comment) {
      // A truly blank line becomes part of a multi-line value (trailing ones are stripped when
      // the value is joined); a comment line is skipped without ending the value.
      if (!comment && value_ != nullptr) lines_.emplace_back();
      return Status();
    }
    size_t indent = line.find_first_not_of(kWhitespace);
    if (value_ != nullptr && indent > indent_level_) {
      lines_.emplace_back(stripped);
      return Status();
    }
    indent_level_ = indent;
    finish_value();

    if (stripped[0] == '[') {
      size_t close = stripped.rfind(']');
      if (close != std::string_view::npos && close >= 2) {
        return start_section(std::string(stripped.substr(1, close - 1)), lineno);
      }
    }
    if (section_ == nullptr) {
      return error(lineno, "no [section] header before \"" + std::string(stripped) + "\"");
    }
    size_t delim = stripped.find_first_of("=:");
    if (delim == std::string_view::npos || delim == 0) {
      return error(lineno, "cannot parse line \"" + std::string(stripped) + "\"");
    }
    std::string option = to_lower(rstrip(stripped.substr(0, delim)));
    if (!seen_.insert(section_name_ + '\n' + option).second) {
      return error(lineno,
                   "duplicate option \"" + option + "\" in section [" + section_name_ + "]");
    }
    auto& target = option.starts_with("set ") ? section_->set : section_->plain;
    std::string key = option.starts_with("set ") ? std::string(strip(option.substr(4))) : option;
    Section::Entry& entry = target[key];
    entry = Section::Entry{{}, file_, section_name_, lineno};
    value_ = &entry;
    lines_.emplace_back(strip(stripped.substr(delim + 1)));
    return Status();
  }

  Status start_section(std::string name, int lineno) {
    if (name == kDefaultSection) {
      section_ = &config_.defaults_;
    } else {
      if (!seen_.insert(name).second) {
        return error(lineno, "duplicate section [" + name + "]");
      }
      section_ = config_.find_raw(name);
      if (section_ == nullptr) {
        config_.sections_.emplace_back(name, RawSection{});
        section_ = &config_.sections_.back().second;
      }
    }
    section_name_ = std::move(name);
    return Status();
  }

  Config& config_;
  const std::string file_;
  RawSection* section_ = nullptr;  // the section being read; points into config_
  std::string section_name_;
  Section::Entry* value_ = nullptr;  // the option whose value is being read, if any
  std::vector<std::string> lines_;   // its lines so far
  size_t indent_level_ = 0;          // indentation of its key line
  std::set<std::string> seen_;       // sections and "section\noption" seen in this file
};

// ---------------------------------------------------------------------------------------------
// Config

Config::RawSection* Config::find_raw(std::string_view name) {
  for (auto& [n, raw] : sections_) {
    if (n == name) return &raw;
  }
  return nullptr;
}

const Config::RawSection* Config::find_raw(std::string_view name) const {
  return const_cast<Config*>(this)->find_raw(name);
}

Result<Config> Config::parse(std::string_view text, std::string source_name) {
  Config config;
  config.source_ = source_name;
  Parser parser(config, std::move(source_name));
  APUS_RETURN_IF_ERROR(parser.run(text));
  return config;
}

Result<Config> Config::load(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st)) {
    return Status::not_found("Unable to read config from " + path + ": no such file");
  }
  Config config;
  config.source_ = path;
  if (!fs::is_directory(st)) {
    Result<std::string> text = read_file(path);
    if (!text.ok()) return text.status();
    APUS_RETURN_IF_ERROR(Parser(config, path).run(*text));
    return config;
  }

  // A conf.d directory: unreadable entries are skipped as ConfigParser.read() skips them, but
  // reading nothing at all is an error.
  std::vector<fs::path> files;
  for (const auto& de : fs::directory_iterator(path, ec)) {
    std::string fname = de.path().filename().string();
    if (fname.ends_with(".conf") && !fname.starts_with(".")) files.push_back(de.path());
  }
  if (ec) return Status::io_error("Unable to read config from " + path + ": " + ec.message());
  std::sort(files.begin(), files.end());
  int read = 0;
  for (const fs::path& f : files) {
    if (fs::is_directory(f, ec)) continue;
    Result<std::string> text = read_file(f);
    if (!text.ok()) continue;
    APUS_RETURN_IF_ERROR(Parser(config, f.string()).run(*text));
    ++read;
  }
  if (read == 0) {
    return Status::not_found("Unable to read config from " + path + ": no readable *.conf file");
  }
  return config;
}

bool Config::has_section(std::string_view name) const { return find_raw(name) != nullptr; }

std::vector<std::string> Config::sections() const {
  std::vector<std::string> out;
  out.reserve(sections_.size());
  for (const auto& s : sections_) out.push_back(s.first);
  return out;
}

Section Config::section(std::string_view name) const {
  std::map<std::string, Section::Entry> merged = defaults_.plain;
  for (const auto& [k, e] : defaults_.set) merged[k] = e;
  const RawSection* raw = name == kDefaultSection ? nullptr : find_raw(name);
  if (raw != nullptr) {
    bool paste = is_paste_section(name);
    for (const auto& [k, e] : raw->set) merged[k] = e;
    for (const auto& [k, e] : raw->plain) {
      if (paste && (defaults_.plain.count(k) != 0 || defaults_.set.count(k) != 0)) {
        continue;  // paste.deploy: a plain key cannot override [DEFAULT]; `set key` can
      }
      merged[k] = e;
    }
  }
  return Section(std::string(name), std::move(merged));
}

Result<std::vector<std::string>> Config::pipeline(std::string_view name) const {
  std::string section_name = "pipeline:" + std::string(name);
  if (!has_section(section_name)) {
    return Status::invalid_argument(source_ + ": no [" + section_name + "] section");
  }
  Section s = section(section_name);
  std::vector<std::string> names = s.get_words("pipeline");
  if (names.empty()) {
    return Status::invalid_argument(source_ + " [" + section_name + "]: no pipeline names");
  }
  return names;
}

Result<std::string> Config::entry_point(std::string_view name) const {
  std::string section_name = "filter:" + std::string(name);
  if (!has_section(section_name)) section_name = "app:" + std::string(name);
  if (!has_section(section_name)) {
    return Status::invalid_argument(source_ + ": \"" + std::string(name) +
                                    "\" has no [filter:" + std::string(name) +
                                    "] or [app:" + std::string(name) + "] section");
  }
  Section s = section(section_name);
  std::optional<std::string> use = s.get("use");
  if (!use) {
    return Status::invalid_argument(source_ + " [" + section_name + "]: missing \"use\" option");
  }
  constexpr std::string_view kEggPrefix = "egg:swift#";
  if (!use->starts_with(kEggPrefix) || use->size() == kEggPrefix.size()) {
    return s.invalid("use", "is not of the form egg:swift#<entry>");
  }
  return use->substr(kEggPrefix.size());
}

}  // namespace apus::common
