// Config: Swift's ini files, read the way Swift (ConfigParser + paste.deploy) reads them.
//
// A Config is the parsed, immutable content of one file, one `<name>.conf.d/` directory or one
// string. Syntax follows Python's ConfigParser: `[section]` headers, `key = value` or
// `key: value`, whole-line `#`/`;` comments, indented continuation lines joined with "\n",
// keys lower-cased, values stripped, inline comments kept as part of the value, and a duplicate
// section or key inside one file is an error. `%(name)s` interpolation is not supported.
//
// Section() returns a Section: a merged, self-contained view of [DEFAULT] plus one section.
// Merging follows paste.deploy for paste sections ([app:], [filter:], [pipeline:], [composite:],
// [filter-app:], [server:]): there a plain `key = value` is ignored when [DEFAULT] sets the
// same key, and only `set key = value` overrides it. In every other section the section's own
// value wins. `set key = value` sets `key` in any section.
//
// Typed getters never throw; a bad value yields an InvalidArgument Status whose message names
// the file, the section the value was written in, the key and the value, e.g.
//   /etc/swift/object-server.conf [app:object-server] workers: "abc" is not an integer
//
// Thread-compatible: Config and Section are values with no shared state; after construction
// their const methods may be called from any number of threads.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace apus::common {

// Python's int() of a decimal string (config values, header values Swift reads with int()):
// surrounding whitespace and a sign allowed; nullopt for anything else or out of range.
std::optional<int64_t> parse_python_int(std::string_view s);
// The same for values a client or peer sends where Swift only compares or bounds the number
// (X-Delete-At, X-Delete-After): single underscores between digits as Python 3 allows, and
// values beyond int64 saturate at its limits instead of being refused.
std::optional<int64_t> parse_python_int_saturating(std::string_view s);

// Swift's config_true_value(): true only for (case-insensitive) true, 1, yes, on, t, y.
// Anything else, including garbage, is false.
bool config_true_value(std::string_view value);

// Swift's list_from_csv(): splits on ',', strips each item and drops empty items.
std::vector<std::string> list_from_csv(std::string_view value);
// The items list_from_csv(value) gives, as views into `value`, to `fn` in order, until it
// returns true; whether one did. For lists read per request: no copies.
template <class Fn>
bool any_csv_item(std::string_view value, Fn fn) {
  for (size_t start = 0; start <= value.size();) {
    size_t comma = value.find(',', start);
    if (comma == std::string_view::npos) comma = value.size();
    std::string_view item = value.substr(start, comma - start);
    constexpr std::string_view kWhitespace = " \t\n\r\v\f";  // as list_from_csv strips
    if (size_t first = item.find_first_not_of(kWhitespace); first != std::string_view::npos) {
      item = item.substr(first, item.find_last_not_of(kWhitespace) - first + 1);
      if (fn(item)) return true;
    }
    start = comma + 1;
  }
  return false;
}

// Splits on runs of ASCII whitespace (Python's str.split()).
std::vector<std::string> split_words(std::string_view value);

class Section {
 public:
  // One stored value and where it was written, for error messages.
  struct Entry {
    std::string value;
    std::string file;     // path of the file (or the source name of a parsed string)
    std::string section;  // section it was written in: "DEFAULT" when inherited
    int line = 0;         // 1-based line of the key
  };

  Section() = default;
  Section(std::string name, std::map<std::string, Entry> entries)
      : name_(std::move(name)), entries_(std::move(entries)) {}

  // The section name without brackets, e.g. "app:object-server".
  const std::string& name() const { return name_; }

  // Whether `key` (case-insensitive) has a value in this merged view.
  bool has(std::string_view key) const;
  // The value of `key`, or nullopt.
  std::optional<std::string> get(std::string_view key) const;
  // The value of `key`, or `def` when it is not set. Never fails.
  std::string get_string(std::string_view key, std::string_view def = {}) const;

  // Strict boolean: true/1/yes/on/t/y or false/0/no/off/f/n (any case); `def` when unset.
  // Any other value is InvalidArgument.
  Result<bool> get_bool(std::string_view key, bool def) const;
  // Decimal integer with optional sign; `def` when unset. Junk or overflow: InvalidArgument.
  Result<int64_t> get_int(std::string_view key, int64_t def) const;
  // Decimal floating point number (e.g. "0.5", "3", "1e3"); `def` when unset; else
  // InvalidArgument.
  Result<double> get_double(std::string_view key, double def) const;
  // Comma separated list (list_from_csv) of the value, or of `def` when unset.
  std::vector<std::string> get_list(std::string_view key, std::string_view def = {}) const;
  // Whitespace separated list of the value, or of `def` when unset.
  std::vector<std::string> get_words(std::string_view key, std::string_view def = {}) const;

  // Every key and value of the merged view, sorted by key.
  std::vector<std::pair<std::string, std::string>> items() const;
  // Where `key` was set, or nullptr. Valid while this Section lives and is not reassigned.
  const Entry* entry(std::string_view key) const;

  // An InvalidArgument Status for a value the caller rejects, in the same format as the typed
  // getters: `<file> [<section>] <key>: "<value>" <problem>`. `key` need not be set.
  Status invalid(std::string_view key, std::string_view problem) const;

 private:
  std::string name_;
  std::map<std::string, Entry> entries_;  // keys lower-cased
};

class Config {
 public:
  // Reads `path`: a file, or a directory whose `*.conf` files (names not starting with '.')
  // are read in lexicographic order, later values winning. Fails with NotFound when the path
  // or every file is missing/unreadable, InvalidArgument (naming file and line) on bad syntax.
  static Result<Config> load(const std::string& path);
  // Parses `text`; `source_name` stands for the file in error messages.
  static Result<Config> parse(std::string_view text, std::string source_name = "<string>");

  // The path given to load(), or the source name given to parse().
  const std::string& source() const { return source_; }

  // Whether `[name]` exists. [DEFAULT] is not a section (as in ConfigParser).
  bool has_section(std::string_view name) const;
  // Section names in the order they first appeared, without DEFAULT.
  std::vector<std::string> sections() const;
  // The merged view of [DEFAULT] and `[name]` (see the file comment). A missing section gives
  // a view holding only the DEFAULT values; section("DEFAULT") gives exactly those.
  Section section(std::string_view name) const;

  // The names listed by `pipeline = ...` in `[pipeline:<name>]`, in order (the app last).
  // InvalidArgument when the section or its pipeline option is missing or empty.
  Result<std::vector<std::string>> pipeline(std::string_view name = "main") const;
  // For a pipeline name: the entry point X of `use = egg:swift#X` in `[filter:<name>]`, else
  // in `[app:<name>]`. InvalidArgument naming `name` when neither section exists or `use` is
  // missing or not of that form.
  Result<std::string> entry_point(std::string_view name) const;

 private:
  struct RawSection {
    std::map<std::string, Section::Entry> plain;  // `key = value`
    std::map<std::string, Section::Entry> set;    // `set key = value`, keyed by `key`
  };
  class Parser;

  RawSection* find_raw(std::string_view name);
  const RawSection* find_raw(std::string_view name) const;

  std::string source_;
  RawSection defaults_;
  std::vector<std::pair<std::string, RawSection>> sections_;  // in order of appearance
};

}  // namespace apus::common
