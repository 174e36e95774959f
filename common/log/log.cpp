#include "common/log/log.h"

#include <algorithm>
#include <fcntl.h>
#include <syslog.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <ctime>

#include "common/thread_annotations.h"

namespace apus::common::log {

namespace {

// The level is read on every log call, so it lives in an atomic; the rest changes only in
// configure()/reopen() and is guarded by g_mutex.
std::atomic<int> g_level{static_cast<int>(Level::kInfo)};
Mutex g_mutex;
// Until configure() is called, logs go to stderr (reopen() keeps it that way).
Options g_options APUS_GUARDED_BY(g_mutex) = [] {
  Options o;
  o.file = "-";
  return o;
}();
int g_fd APUS_GUARDED_BY(g_mutex) = STDERR_FILENO;  // -1 means syslog
bool g_syslog_open APUS_GUARDED_BY(g_mutex) = false;

int syslog_priority(Level level) {
  switch (level) {
    case Level::kDebug: return LOG_DEBUG;
    case Level::kInfo: return LOG_INFO;
    case Level::kWarning: return LOG_WARNING;
    case Level::kError: return LOG_ERR;
    case Level::kCritical: return LOG_CRIT;
  }
  return LOG_INFO;
}

const char* level_name(Level level) {
  switch (level) {
    case Level::kDebug: return "DEBUG";
    case Level::kInfo: return "INFO";
    case Level::kWarning: return "WARNING";
    case Level::kError: return "ERROR";
    case Level::kCritical: return "CRITICAL";
  }
  return "INFO";
}

int syslog_facility(std::string_view name) {
  static constexpr std::pair<std::string_view, int> kFacilities[] = {
      {"LOG_LOCAL0", LOG_LOCAL0}, {"LOG_LOCAL1", LOG_LOCAL1}, {"LOG_LOCAL2", LOG_LOCAL2},
      {"LOG_LOCAL3", LOG_LOCAL3}, {"LOG_LOCAL4", LOG_LOCAL4}, {"LOG_LOCAL5", LOG_LOCAL5},
      {"LOG_LOCAL6", LOG_LOCAL6}, {"LOG_LOCAL7", LOG_LOCAL7}, {"LOG_USER", LOG_USER},
      {"LOG_DAEMON", LOG_DAEMON}};
  for (auto [n, v] : kFacilities) {
    if (n == name) return v;
  }
  return LOG_LOCAL0;
}

void open_destination_locked() APUS_REQUIRES(g_mutex) {
  if (g_fd > STDERR_FILENO) ::close(g_fd);
  g_fd = STDERR_FILENO;
  if (g_options.file.empty()) {
    // openlog keeps a pointer to the ident, so it must outlive the call: g_options does.
    ::openlog(g_options.name.c_str(), LOG_PID | LOG_NDELAY, syslog_facility(g_options.facility));
    g_syslog_open = true;
    g_fd = -1;
  } else if (g_options.file != "-") {
    int fd = ::open(g_options.file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd >= 0) g_fd = fd;
  }
}

}  // namespace

bool parse_level(std::string_view text, Level* out) {
  std::string upper(text);
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  static constexpr std::pair<std::string_view, Level> kLevels[] = {
      {"DEBUG", Level::kDebug},     {"INFO", Level::kInfo},   {"WARNING", Level::kWarning},
      {"WARN", Level::kWarning},    {"ERROR", Level::kError}, {"CRITICAL", Level::kCritical},
      {"NOTICE", Level::kInfo}};
  for (auto [name, level] : kLevels) {
    if (upper == name) {
      *out = level;
      return true;
    }
  }
  return false;
}

void configure(const Options& options) {
  MutexLock lock(&g_mutex);
  g_options = options;
  g_level.store(static_cast<int>(options.level), std::memory_order_relaxed);
  open_destination_locked();
}

void reopen() {
  MutexLock lock(&g_mutex);
  open_destination_locked();
}

bool enabled(Level level) {
  return static_cast<int>(level) >= g_level.load(std::memory_order_relaxed);
}

namespace {

// Appends `message` with control bytes (CR, LF, NUL and the rest below 0x20 but tab, and DEL)
// written as \xNN: names and headers from clients reach log messages from many places, and
// none of them may start a forged line of its own.
void append_one_line(std::string& out, std::string_view message) {
  for (unsigned char c : message) {
    if ((c < 0x20 && c != '\t') || c == 0x7f) {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    } else {
      out += static_cast<char>(c);
    }
  }
}

}  // namespace

void write(Level level, std::string_view message) {
  std::string safe;
  const bool clean = std::none_of(message.begin(), message.end(), [](char ch) {
    const auto c = static_cast<unsigned char>(ch);
    return (c < 0x20 && c != '\t') || c == 0x7f;
  });
  if (!clean) {
    append_one_line(safe, message);
    message = safe;
  }
  MutexLock lock(&g_mutex);
  if (g_fd < 0) {
    ::syslog(syslog_priority(level), "%.*s", static_cast<int>(message.size()), message.data());
    return;
  }
  char stamp[32];
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&now, &tm);
  std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", &tm);
  std::string line;
  line.reserve(message.size() + g_options.name.size() + 48);
  line.append(stamp).append(" ").append(g_options.name).append(" ");
  line.append(level_name(level)).append(": ").append(message).append("\n");
  [[maybe_unused]] ssize_t n = ::write(g_fd, line.data(), line.size());
}

std::string format_storage_access_line(const StorageAccessFields& f) {
  auto or_dash = [](std::string_view v) { return v.empty() ? std::string_view("-") : v; };
  std::time_t now = static_cast<std::time_t>(f.now);
  std::tm tm{};
  ::gmtime_r(&now, &tm);
  char when[40];
  static constexpr const char* kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                            "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  std::snprintf(when, sizeof when, "%02d/%s/%04d:%02d:%02d:%02d +0000", tm.tm_mday,
                kMonths[tm.tm_mon], tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%.4f", f.trans_time);
  std::string line;
  line.reserve(256);
  line.append(or_dash(f.remote_addr)).append(" - - [").append(when).append("] \"");
  line.append(or_dash(f.method)).append(" ").append(or_dash(f.path)).append("\" ");
  line.append(std::to_string(f.status)).append(" ");
  line.append(f.content_length ? std::to_string(*f.content_length) : "-").append(" \"");
  line.append(or_dash(f.referer)).append("\" \"").append(or_dash(f.trans_id)).append("\" \"");
  line.append(or_dash(f.user_agent)).append("\" ").append(seconds).append(" \"");
  line.append(or_dash(f.additional_info)).append("\" ").append(std::to_string(f.pid));
  line.append(" ").append(or_dash(f.policy_index));
  return line;
}

}  // namespace apus::common::log
