// The body of a bulk-delete request (Swift's Bulk.get_objs_to_delete()): newline-separated,
// percent-encoded "/container/object" or "/container" names, read as Swift reads them, in
// blocks of max_path_length bytes, with its two limits checked after every step:
// - more than max_deletes names (blank lines count, as in Swift) is 413 "Maximum Bulk Deletes:
//   <n> per request";
// - more than 2 * max_path_length bytes without a newline is 400 "Invalid File Name".
// Each line is stripped of ASCII whitespace and percent-decoded to raw bytes (not checked as
// UTF-8 here: Swift reports a bad name per item, with 412, when it deletes).
//
// Pure (no I/O); thread-compatible. Memory: the names kept (at most max_deletes + 1 of them,
// each at most 3 * max_path_length bytes) plus less than 3 * max_path_length of pending input
// beyond what the caller feeds at once.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace apus::proxy {

// Why a bulk-delete body was refused: the status and the text of Swift's answer body.
struct DeleteListError {
  int status = 0;
  std::string body;
  bool operator==(const DeleteListError&) const = default;
};

class DeleteListParser {
 public:
  // `max_path_length`: Swift's max object name length + max container name length + 2.
  DeleteListParser(size_t max_deletes, size_t max_path_length);

  // Takes the next bytes of the body (any split). Returns the refusal as soon as a limit is
  // exceeded; the parser is then done and further calls return it again.
  std::optional<DeleteListError> feed(std::string_view data);
  // The body ended: takes its last line. Returns a refusal as feed() does.
  std::optional<DeleteListError> finish();

  // The names so far, decoded (raw bytes), blank ones included as empty strings.
  const std::vector<std::string>& names() const { return names_; }
  std::vector<std::string> take_names() { return std::move(names_); }

 private:
  // Runs Swift's loop while it can; `eof` once the body is complete.
  std::optional<DeleteListError> run(bool eof);
  std::optional<DeleteListError> check();
  void add_line(std::string_view raw);

  size_t max_deletes_;
  size_t block_;         // Swift reads the body in blocks of max_path_length
  std::string pending_;  // body bytes not yet "read" by the loop
  size_t pending_pos_ = 0;
  std::string line_;  // read, not yet split
  std::vector<std::string> names_;
  bool done_ = false;
  std::optional<DeleteListError> error_;
};

// Swift's ASCII-whitespace strip (bytes.strip()).
std::string_view strip_ascii_whitespace(std::string_view s);

// Whether a bulk-delete name (after strip('/')) names an object ("c/o") rather than a
// container ("c"): Swift deletes all objects first, then containers.
bool names_object(std::string_view name);

}  // namespace apus::proxy
