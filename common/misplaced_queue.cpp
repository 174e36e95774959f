#include "common/misplaced_queue.h"

#include <algorithm>
#include <ctime>

#include "common/config/config.h"

namespace apus::common {

std::string misplaced_container_name(const Timestamp& t) {
  const int64_t seconds = t.raw() / Timestamp::kUnitsPerSecond;
  return std::to_string(seconds / kMisplacedObjectsContainerDivisor *
                        kMisplacedObjectsContainerDivisor);
}

std::string misplaced_entry_name(int64_t policy_index, std::string_view account,
                                 std::string_view container, std::string_view object) {
  std::string out = std::to_string(policy_index) + ":/";
  out.append(account).append("/").append(container).append("/").append(object);
  return out;
}

namespace {

// Digits of `text` at [pos, pos + n) as a number; -1 when they are not all digits.
int digits(std::string_view text, size_t pos, size_t n) {
  if (pos + n > text.size()) return -1;
  int v = 0;
  for (size_t i = pos; i < pos + n; ++i) {
    if (text[i] < '0' || text[i] > '9') return -1;
    v = v * 10 + (text[i] - '0');
  }
  return v;
}

}  // namespace

Result<Timestamp> parse_last_modified(std::string_view text) {
  // Python's strptime('%Y-%m-%dT%H:%M:%S.%f'): the fraction has 1 to 6 digits.
  const Status bad = Status::invalid_argument("not a last_modified date: " + std::string(text));
  if (text.size() < 21 || text.size() > 26 || text[4] != '-' || text[7] != '-' ||
      text[10] != 'T' || text[13] != ':' || text[16] != ':' || text[19] != '.') {
    return bad;
  }
  const int year = digits(text, 0, 4), month = digits(text, 5, 2), day = digits(text, 8, 2);
  const int hour = digits(text, 11, 2), minute = digits(text, 14, 2), second = digits(text, 17, 2);
  const size_t fraction_digits = text.size() - 20;
  int micros = digits(text, 20, fraction_digits);
  if (year < 1970 || month < 1 || month > 12 || day < 1 || day > 31 || hour < 0 || hour > 23 ||
      minute < 0 || minute > 59 || second < 0 || second > 59 || micros < 0) {
    return bad;
  }
  for (size_t i = fraction_digits; i < 6; ++i) micros *= 10;
  std::tm tm{};
  tm.tm_year = year - 1900;
  tm.tm_mon = month - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = minute;
  tm.tm_sec = second;
  const int64_t seconds = static_cast<int64_t>(::timegm(&tm));
  if (tm.tm_mday != day) return bad;  // timegm normalized a day the month does not have
  // Swift's Timestamp keeps 10 µs units: the microseconds round to them.
  return Timestamp::from_raw(seconds * Timestamp::kUnitsPerSecond + (micros + 5) / 10);
}

Result<MisplacedEntry> parse_misplaced_entry(std::string_view name, std::string_view content_type,
                                             std::string_view hash,
                                             std::string_view last_modified) {
  MisplacedEntry e;
  const size_t colon = name.find(':');
  if (colon == std::string_view::npos) {
    return Status::invalid_argument("queue entry without a policy index: " + std::string(name));
  }
  std::optional<int64_t> policy = parse_python_int(name.substr(0, colon));
  if (!policy) {
    return Status::invalid_argument("queue entry with a bad policy index: " + std::string(name));
  }
  e.policy_index = *policy;
  // Swift's split_path(path, 3, 3, True): "/<account>/<container>/<object>", none empty, the
  // object keeping any further '/'.
  std::string_view path = name.substr(colon + 1);
  const size_t a_end = path.find('/', 1);
  const size_t c_end = a_end == std::string_view::npos ? a_end : path.find('/', a_end + 1);
  if (path.empty() || path[0] != '/' || a_end == std::string_view::npos || a_end == 1 ||
      c_end == std::string_view::npos || c_end == a_end + 1 || c_end + 1 == path.size()) {
    return Status::invalid_argument("queue entry with an invalid path: " + std::string(name));
  }
  e.account = std::string(path.substr(1, a_end - 1));
  e.container = std::string(path.substr(a_end + 1, c_end - a_end - 1));
  e.object = std::string(path.substr(c_end + 1));
  if (content_type == kMisplacedPutType) {
    e.is_delete = false;
  } else if (content_type == kMisplacedDeleteType) {
    e.is_delete = true;
  } else {
    return Status::invalid_argument("invalid operation type '" + std::string(content_type) + "'");
  }
  auto ts = decode_timestamps(hash);
  if (!ts.ok()) return Status::invalid_argument("queue entry etag is no timestamp: " +
                                                std::string(hash));
  e.timestamp = ts->t1;
  auto queued = parse_last_modified(last_modified);
  if (!queued.ok()) return queued.status();
  e.queued_at = *queued;
  return e;
}

bool policy_claim_wins(const PolicyClaim& ours, const PolicyClaim& other) {
  auto deleted = [](const PolicyClaim& c) {
    return timestamp_or_zero(c.delete_timestamp) > timestamp_or_zero(c.put_timestamp) &&
           c.object_count == 0;
  };
  const bool ours_deleted = deleted(ours);
  const bool other_deleted = deleted(other);
  if (ours_deleted || other_deleted) {
    if (!ours_deleted) return false;
    if (!other_deleted) return true;
    return ours.status_changed_at < other.status_changed_at;
  }
  auto recreated = [](const PolicyClaim& c) {
    const Timestamp del = timestamp_or_zero(c.delete_timestamp);
    return timestamp_or_zero(c.put_timestamp) > del && del > Timestamp();
  };
  const bool other_recreated = recreated(other);
  const bool ours_recreated = recreated(ours);
  if (other_recreated || ours_recreated) {
    if (!ours_recreated) return true;
    if (!other_recreated) return false;
    const std::string& last_delete = std::max(ours.delete_timestamp, other.delete_timestamp);
    if (ours.put_timestamp < last_delete) return true;
    if (other.put_timestamp < last_delete) return false;
  }
  return ours.status_changed_at > other.status_changed_at;
}

}  // namespace apus::common
