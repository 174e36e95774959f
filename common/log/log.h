// Process-wide logging in Swift's manner: a log name, a level, and one line per message.
//
// Every server logs through the functions below. Lines go to syslog (Swift's default,
// `log_address = /dev/log`, `log_facility`) or, when `log_file` is set (an Apus option; apus-init
// and the tests use it), to that file, reopened on SIGHUP so logrotate works. Lines to a file
// carry a UTC timestamp and the log name; each line is one write(2), so lines from several
// threads never interleave.
//
// Thread-safe. Use the APUS_LOG_* macros so a message is only built when its level is enabled.
#pragma once

#include <string>
#include <string_view>

namespace apus::common::log {

enum class Level { kDebug = 10, kInfo = 20, kWarning = 30, kError = 40, kCritical = 50 };

struct Options {
  std::string name = "swift";         // log_name
  Level level = Level::kInfo;         // log_level
  std::string file;                   // log_file: empty = syslog, "-" = stderr
  std::string facility = "LOG_LOCAL0";  // log_facility, for syslog
};

// Parses Swift's level names (DEBUG, INFO, WARNING/WARN, ERROR, CRITICAL), case-insensitive.
// Returns false and leaves `out` alone for anything else.
bool parse_level(std::string_view text, Level* out);

// Replaces the process's logging setup. Until called, logs go to stderr at INFO.
void configure(const Options& options);

// Reopens the log file (after rotation). Safe to call from any thread, e.g. on SIGHUP.
void reopen();

bool enabled(Level level);
void write(Level level, std::string_view message);

}  // namespace apus::common::log

#define APUS_LOG(level, msg)                                                          \
  do {                                                                                \
    if (::apus::common::log::enabled(level)) ::apus::common::log::write(level, (msg)); \
  } while (0)
#define APUS_LOG_DEBUG(msg) APUS_LOG(::apus::common::log::Level::kDebug, msg)
#define APUS_LOG_INFO(msg) APUS_LOG(::apus::common::log::Level::kInfo, msg)
#define APUS_LOG_WARNING(msg) APUS_LOG(::apus::common::log::Level::kWarning, msg)
#define APUS_LOG_ERROR(msg) APUS_LOG(::apus::common::log::Level::kError, msg)
