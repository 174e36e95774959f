// Process-wide logging in Swift's manner: a log name, a level, and one line per message.
//
// Every server logs through the functions below. Lines go to syslog as Swift sends them (a
// datagram "<PRI>log_name: message" to the unix socket `log_address`, /dev/log, or over UDP to
// `log_udp_host`:`log_udp_port`; with Swift's fallback to UDP 127.0.0.1:514 when there is no
// such socket) or, when `log_file` is set (an Apus option; apus-init and the tests use it), to
// that file, reopened on SIGHUP so logrotate works. Lines to a file carry a UTC timestamp and
// the log name; each line is one write(2) (or part of one), so lines never interleave.
//
// Once configure() has run, lines are written by a writer thread of their own: a caller only
// formats its line and queues it, so a slow log disk or syslog daemon never stalls a worker.
// Under load the writer takes the queue at most every 10 ms, so many lines cost one write(2)
// and one wake-up; a line waits at most that long, and one that comes alone is written at once.
// The queue holds at most kMaxQueuedBytes; beyond that lines are dropped and the writer logs
// how many at its next write. flush() waits until what was queued is written; exit() flushes.
//
// Thread-safe. Use the APUS_LOG_* macros so a message is only built when its level is enabled.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace apus::common::log {

enum class Level { kDebug = 10, kInfo = 20, kWarning = 30, kError = 40, kCritical = 50 };

struct Options {
  std::string name = "swift";         // log_name
  Level level = Level::kInfo;         // log_level
  std::string file;                   // log_file: empty = syslog, "-" = stderr
  std::string facility = "LOG_LOCAL0";  // log_facility, for syslog
  std::string address = "/dev/log";   // log_address: syslog's unix socket
  std::string udp_host;               // log_udp_host: syslog over UDP instead (when set)
  int udp_port = 514;                 // log_udp_port
};

// The most queued bytes waiting for the writer thread.
inline constexpr size_t kMaxQueuedBytes = 16 << 20;

// Parses Swift's facility names (LOG_LOCAL0..7, LOG_USER, LOG_DAEMON and the other
// syslog facilities). Returns false for anything else.
bool parse_facility(std::string_view text, int* out);

// Parses Swift's level names (DEBUG, INFO, WARNING/WARN, ERROR, CRITICAL), case-insensitive.
// Returns false and leaves `out` alone for anything else.
bool parse_level(std::string_view text, Level* out);

// Replaces the process's logging setup. Until called, logs go to stderr at INFO.
void configure(const Options& options);

// Reopens the log file (after rotation), after writing what was queued to the old one. Safe to
// call from any thread but the writer, e.g. on SIGHUP.
void reopen();

// Waits until every line queued before the call is written.
void flush();

bool enabled(Level level);
void write(Level level, std::string_view message);

// What a storage server (object, container, account) logs per request. Empty fields print "-".
struct StorageAccessFields {
  std::string_view remote_addr;
  std::string_view method;
  std::string_view path;  // quoted path, no query string
  int status = 0;
  std::optional<uint64_t> content_length;  // of the response
  std::string_view referer;
  std::string_view trans_id;
  std::string_view user_agent;
  double trans_time = 0;  // seconds
  std::string_view additional_info;
  std::string_view policy_index;
  double now = 0;  // Unix seconds, for the bracketed time
  int pid = 0;
};

// What printf's "%.<digits>f" prints for `value` (std::to_chars, which the standard rounds as
// printf does, without printf's cost): the times of access lines, Swift's and the proxy's.
std::string format_fixed(double value, int digits);
// The same into `buf`, for a line built in place; empty if it does not fit (400 bytes always do).
std::string_view format_fixed(std::span<char> buf, double value, int digits);

// Swift's storage-server access log line (its log_format default):
// `ip - - [dd/Mon/YYYY:HH:MM:SS +0000] "METHOD path" status length "referer" "txn" "agent"
// 0.0012 "info" pid policy`.
std::string format_storage_access_line(const StorageAccessFields& f);

}  // namespace apus::common::log

#define APUS_LOG(level, msg)                                                          \
  do {                                                                                \
    if (::apus::common::log::enabled(level)) ::apus::common::log::write(level, (msg)); \
  } while (0)
#define APUS_LOG_DEBUG(msg) APUS_LOG(::apus::common::log::Level::kDebug, msg)
#define APUS_LOG_INFO(msg) APUS_LOG(::apus::common::log::Level::kInfo, msg)
#define APUS_LOG_WARNING(msg) APUS_LOG(::apus::common::log::Level::kWarning, msg)
#define APUS_LOG_ERROR(msg) APUS_LOG(::apus::common::log::Level::kError, msg)
