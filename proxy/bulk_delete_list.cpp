// Bulk-delete bodies (bulk_delete_list.h).
#include "proxy/bulk_delete_list.h"

#include "common/http/url.h"

namespace apus::proxy {

std::string_view strip_ascii_whitespace(std::string_view s) {
  constexpr std::string_view kSpace = " \t\n\r\x0b\x0c";
  size_t b = s.find_first_not_of(kSpace);
  if (b == std::string_view::npos) return {};
  size_t e = s.find_last_not_of(kSpace);
  return s.substr(b, e - b + 1);
}

bool names_object(std::string_view name) {
  size_t b = name.find_first_not_of('/');
  if (b == std::string_view::npos) return false;
  size_t e = name.find_last_not_of('/');
  return name.substr(b, e - b + 1).find('/') != std::string_view::npos;
}

DeleteListParser::DeleteListParser(size_t max_deletes, size_t max_path_length)
    : max_deletes_(max_deletes), block_(max_path_length == 0 ? 1 : max_path_length) {}

std::optional<DeleteListError> DeleteListParser::feed(std::string_view data) {
  if (done_) return error_;
  // Drop what the loop has consumed before growing the buffer, so it stays small.
  if (pending_pos_ > 0) {
    pending_.erase(0, pending_pos_);
    pending_pos_ = 0;
  }
  pending_.append(data);
  return run(false);
}

std::optional<DeleteListError> DeleteListParser::finish() {
  if (done_) return error_;
  return run(true);
}

void DeleteListParser::add_line(std::string_view raw) {
  names_.push_back(common::http::percent_decode(strip_ascii_whitespace(raw)));
}

std::optional<DeleteListError> DeleteListParser::check() {
  // The same two checks, in the same order, after every step of Swift's loop.
  if (names_.size() > max_deletes_) {
    error_ = DeleteListError{
        413, "Maximum Bulk Deletes: " + std::to_string(max_deletes_) + " per request"};
  } else if (line_.size() > block_ * 2) {
    error_ = DeleteListError{400, "Invalid File Name"};
  }
  if (error_) done_ = true;
  return error_;
}

std::optional<DeleteListError> DeleteListParser::run(bool eof) {
  while (!done_) {
    size_t nl = line_.find('\n');
    if (nl != std::string::npos) {
      add_line(std::string_view(line_).substr(0, nl));
      line_.erase(0, nl + 1);
    } else {
      size_t available = pending_.size() - pending_pos_;
      if (available >= block_ || (eof && available > 0)) {
        // A read of block_ bytes: whole blocks until the body ends, then the rest.
        size_t n = std::min(available, block_);
        line_.append(pending_, pending_pos_, n);
        pending_pos_ += n;
      } else if (eof) {
        std::string_view last = strip_ascii_whitespace(line_);
        if (!last.empty()) names_.push_back(common::http::percent_decode(last));
        line_.clear();
        done_ = true;
        return check();
      } else {
        return std::nullopt;  // wait for more of the body
      }
    }
    if (auto e = check()) return e;
  }
  return error_;
}

}  // namespace apus::proxy
