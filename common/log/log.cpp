#include "common/log/log.h"

#include <fcntl.h>
#include <netdb.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <syslog.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "common/thread_annotations.h"

namespace apus::common::log {

namespace {

// The level is read on every log call, so it lives in an atomic.
std::atomic<int> g_level{static_cast<int>(Level::kInfo)};

// Where lines go: owned by whoever writes (the writer thread, or a caller while there is none),
// always under g_dest_mutex.
struct Destination {
  Options options;
  int fd = STDERR_FILENO;  // the file or stderr; -1: syslog over `sock`
  int sock = -1;           // syslog socket (unix or UDP), connected
  int facility = LOG_LOCAL0;
  uint64_t dropped = 0;    // lines the queue had no room for, not yet reported
};
Mutex g_dest_mutex;
Destination g_dest APUS_GUARDED_BY(g_dest_mutex) = [] {
  Destination d;
  d.options.file = "-";  // until configure(): stderr
  return d;
}();

// The queue between callers and the writer thread.
struct Entry {
  Level level;
  std::string message;  // one line, control bytes escaped
  std::time_t when;
};
Mutex g_queue_mutex;
CondVar g_queue_ready;    // lines queued, or stop asked
CondVar g_queue_written;  // the writer finished a batch
std::vector<Entry> g_queue APUS_GUARDED_BY(g_queue_mutex);
size_t g_queued_bytes APUS_GUARDED_BY(g_queue_mutex) = 0;
uint64_t g_queued_total APUS_GUARDED_BY(g_queue_mutex) = 0;   // entries ever queued
uint64_t g_written_total APUS_GUARDED_BY(g_queue_mutex) = 0;  // ... and taken and written
uint64_t g_dropped APUS_GUARDED_BY(g_queue_mutex) = 0;
bool g_writer_running APUS_GUARDED_BY(g_queue_mutex) = false;
bool g_stop APUS_GUARDED_BY(g_queue_mutex) = false;
bool g_writer_done APUS_GUARDED_BY(g_queue_mutex) = false;  // the writer has returned
// The writer waits for lines with none queued: the next line wakes it. Otherwise it is writing
// or pausing between batches, and lines only queue (see writer_loop()).
bool g_writer_sleeping APUS_GUARDED_BY(g_queue_mutex) = false;
bool g_flush_asked APUS_GUARDED_BY(g_queue_mutex) = false;  // flush() waits: no pause
// Under load (a batch less than kBusyGap after the one before), the writer pauses this long
// after a batch before taking the next, so that the lines of many requests go out in one
// write(2) and one wake-up, instead of a wake-up of the writer (a futex call on each side)
// per line: half of an object server's futex calls under a 4 KiB PUT load. A line waits at
// most kBatchPause; a queue past kWakeBytes ends the pause. Lines that come seldom are written
// at once (a pause would only add a timed wait per line).
constexpr auto kBatchPause = std::chrono::milliseconds(10);
constexpr auto kBusyGap = std::chrono::milliseconds(50);
constexpr size_t kWakeBytes = kMaxQueuedBytes / 4;
std::thread* g_writer = nullptr;  // started once by configure(), joined at exit

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

void close_locked(Destination& d) APUS_REQUIRES(g_dest_mutex) {
  if (d.fd > STDERR_FILENO) ::close(d.fd);
  if (d.sock >= 0) ::close(d.sock);
  d.fd = STDERR_FILENO;
  d.sock = -1;
}

// A UDP socket connected to host:port; -1 when the host does not resolve.
int connect_udp(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0) return -1;
  int fd = ::socket(found->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd >= 0 && ::connect(fd, found->ai_addr, found->ai_addrlen) != 0) {
    ::close(fd);
    fd = -1;
  }
  ::freeaddrinfo(found);
  return fd;
}

// Python's SysLogHandler on a unix socket: a datagram socket, else a stream one. -1 with errno
// when neither connects.
int connect_unix(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) {
    errno = ENAMETOOLONG;
    return -1;
  }
  std::memcpy(addr.sun_path, path.data(), path.size());
  for (int type : {SOCK_DGRAM, SOCK_STREAM}) {
    int fd = ::socket(AF_UNIX, type | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
      return fd;
    }
    const int err = errno;
    ::close(fd);
    errno = err;
    if (err != EPROTOTYPE) return -1;
  }
  return -1;
}

void open_locked(Destination& d) APUS_REQUIRES(g_dest_mutex) {
  close_locked(d);
  const Options& o = d.options;
  if (!o.file.empty()) {
    if (o.file != "-") {
      int fd = ::open(o.file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
      if (fd >= 0) d.fd = fd;
    }
    return;
  }
  d.fd = -1;
  if (!parse_facility(o.facility, &d.facility)) d.facility = LOG_LOCAL0;
  if (!o.udp_host.empty()) {
    d.sock = connect_udp(o.udp_host, o.udp_port);
    return;
  }
  d.sock = connect_unix(o.address);
  // As Swift: no such socket (a container without a syslog daemon) means UDP to localhost.
  if (d.sock < 0 && (errno == ENOENT || errno == ENOTSOCK || errno == ECONNREFUSED)) {
    d.sock = connect_udp("127.0.0.1", 514);
  }
}

// Sends one syslog message; a unix socket that went away (syslog restarted) is reconnected
// once. A message that cannot be sent is lost, as with Python's handler.
void send_syslog_locked(Destination& d, Level level, std::string_view message)
    APUS_REQUIRES(g_dest_mutex) {
  std::string datagram = "<" + std::to_string(d.facility | syslog_priority(level)) + ">";
  datagram.append(d.options.name).append(": ").append(message);
  datagram.push_back('\0');  // as Python's SysLogHandler ends each message
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (d.sock >= 0 &&
        ::send(d.sock, datagram.data(), datagram.size(), MSG_NOSIGNAL) ==
            static_cast<ssize_t>(datagram.size())) {
      return;
    }
    if (!d.options.udp_host.empty()) return;
    open_locked(d);
  }
}

std::string file_line(const std::string& name, Level level, std::string_view message,
                      std::time_t when) {
  char stamp[32];
  std::tm tm{};
  ::gmtime_r(&when, &tm);
  std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", &tm);
  std::string line;
  line.reserve(message.size() + name.size() + 48);
  line.append(stamp).append(" ").append(name).append(" ");
  line.append(level_name(level)).append(": ").append(message).append("\n");
  return line;
}

// Writes `batch` to the destination: one write(2) for all of a file's lines.
void write_batch_locked(Destination& d, const std::vector<Entry>& batch)
    APUS_REQUIRES(g_dest_mutex) {
  if (d.fd < 0) {
    for (const Entry& e : batch) send_syslog_locked(d, e.level, e.message);
    return;
  }
  std::string text;
  for (const Entry& e : batch) text += file_line(d.options.name, e.level, e.message, e.when);
  for (std::string_view rest = text; !rest.empty();) {
    ssize_t n = ::write(d.fd, rest.data(), rest.size());
    if (n <= 0 && errno == EINTR) continue;
    if (n <= 0) return;  // a full or failing disk: the lines are lost, the server goes on
    rest.remove_prefix(static_cast<size_t>(n));
  }
}

void writer_loop() {
  std::vector<Entry> batch;
  std::chrono::steady_clock::time_point last_batch;
  for (;;) {
    uint64_t dropped = 0;
    {
      MutexLock lock(&g_queue_mutex);
      while (g_queue.empty() && !g_stop) {
        g_writer_sleeping = true;
        g_queue_ready.wait(&g_queue_mutex);
      }
      g_writer_sleeping = false;
      if (g_queue.empty()) {  // stopping, all written
        g_writer_done = true;
        g_queue_written.signal_all();
        return;
      }
      g_flush_asked = false;
      batch.swap(g_queue);
      g_queued_bytes = 0;
      dropped = std::exchange(g_dropped, 0);
    }
    if (dropped) {
      batch.insert(batch.begin(),
                   Entry{Level::kWarning,
                         std::to_string(dropped) +
                             " log lines dropped: the log destination is too slow",
                         std::time(nullptr)});
    }
    {
      MutexLock lock(&g_dest_mutex);
      write_batch_locked(g_dest, batch);
    }
    {
      MutexLock lock(&g_queue_mutex);
      g_written_total += batch.size() - (dropped ? 1 : 0);
    }
    g_queue_written.signal_all();
    batch.clear();
    const auto now = std::chrono::steady_clock::now();
    const bool busy = now - last_batch < kBusyGap;
    last_batch = now;
    if (!busy) continue;
    MutexLock lock(&g_queue_mutex);
    g_queue_ready.wait_until(&g_queue_mutex, now + kBatchPause, [] {
      g_queue_mutex.assert_held();
      return g_stop || g_flush_asked || g_queued_bytes >= kWakeBytes;
    });
  }
}

// At exit: writes what is queued, then lets callers write for themselves. A destination that
// does not take the lines within 5 s (a stuck syslog daemon) does not hold the exit: the writer
// is left behind and the rest of the queue lost.
void stop_writer() {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  bool done;
  {
    MutexLock lock(&g_queue_mutex);
    g_stop = true;
    g_queue_ready.signal_all();
    done = g_queue_written.wait_until(&g_queue_mutex, deadline, [] {
      g_queue_mutex.assert_held();
      return g_writer_done;
    });
    g_writer_running = false;
  }
  if (done) {
    g_writer->join();
  } else {
    g_writer->detach();
  }
}

void start_writer_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    {
      MutexLock lock(&g_queue_mutex);
      g_writer_running = true;
    }
    g_writer = new std::thread(writer_loop);  // joined by stop_writer, never deleted
    std::atexit(stop_writer);
  });
}

}  // namespace

bool parse_facility(std::string_view text, int* out) {
  static constexpr std::pair<std::string_view, int> kFacilities[] = {
      {"LOG_LOCAL0", LOG_LOCAL0}, {"LOG_LOCAL1", LOG_LOCAL1}, {"LOG_LOCAL2", LOG_LOCAL2},
      {"LOG_LOCAL3", LOG_LOCAL3}, {"LOG_LOCAL4", LOG_LOCAL4}, {"LOG_LOCAL5", LOG_LOCAL5},
      {"LOG_LOCAL6", LOG_LOCAL6}, {"LOG_LOCAL7", LOG_LOCAL7}, {"LOG_USER", LOG_USER},
      {"LOG_DAEMON", LOG_DAEMON}, {"LOG_KERN", LOG_KERN},     {"LOG_MAIL", LOG_MAIL},
      {"LOG_AUTH", LOG_AUTH},     {"LOG_SYSLOG", LOG_SYSLOG}, {"LOG_LPR", LOG_LPR},
      {"LOG_NEWS", LOG_NEWS},     {"LOG_UUCP", LOG_UUCP},     {"LOG_CRON", LOG_CRON},
      {"LOG_AUTHPRIV", LOG_AUTHPRIV}, {"LOG_FTP", LOG_FTP}};
  for (auto [n, v] : kFacilities) {
    if (n == text) {
      *out = v;
      return true;
    }
  }
  return false;
}

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

void flush() {
  MutexLock lock(&g_queue_mutex);
  const uint64_t target = g_queued_total;
  if (g_written_total < target) {
    g_flush_asked = true;  // no pause before the batch that holds these lines
    g_queue_ready.signal();
  }
  while (g_writer_running && g_written_total < target) g_queue_written.wait(&g_queue_mutex);
}

void configure(const Options& options) {
  flush();  // what was logged before goes where it was meant to
  {
    MutexLock lock(&g_dest_mutex);
    g_dest.options = options;
    open_locked(g_dest);
  }
  g_level.store(static_cast<int>(options.level), std::memory_order_relaxed);
  start_writer_once();
}

void reopen() {
  flush();
  MutexLock lock(&g_dest_mutex);
  open_locked(g_dest);
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
  Entry entry{level, {}, std::time(nullptr)};
  append_one_line(entry.message, message);
  {
    MutexLock lock(&g_queue_mutex);
    if (g_writer_running && !g_stop) {
      // Each line counts its bookkeeping too, so a flood of short lines is bounded as well.
      const size_t cost = entry.message.size() + sizeof(Entry);
      if (g_queued_bytes + cost > kMaxQueuedBytes) {
        ++g_dropped;
        return;
      }
      g_queued_bytes += cost;
      ++g_queued_total;
      g_queue.push_back(std::move(entry));
      if (g_writer_sleeping || g_queued_bytes >= kWakeBytes) {
        g_writer_sleeping = false;  // one wake-up, not one per line
        g_queue_ready.signal();
      }
      return;
    }
  }
  // No writer (before configure(), or after exit() stopped it): write here.
  MutexLock lock(&g_dest_mutex);
  write_batch_locked(g_dest, {std::move(entry)});
}

namespace {

// The date of an access line, "14/Nov/2023:22:13:20 +0000": the same for every line of a
// second, so each thread formats it once a second.
std::string_view access_line_date(std::time_t now) {
  thread_local std::time_t formatted_for = -1;
  thread_local char text[40];
  thread_local size_t size = 0;
  if (now != formatted_for) {
    std::tm tm{};
    ::gmtime_r(&now, &tm);
    static constexpr const char* kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                              "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    const int n = std::snprintf(text, sizeof text, "%02d/%s/%04d:%02d:%02d:%02d +0000",
                                tm.tm_mday, kMonths[tm.tm_mon], tm.tm_year + 1900, tm.tm_hour,
                                tm.tm_min, tm.tm_sec);
    size = n > 0 ? std::min(static_cast<size_t>(n), sizeof text - 1) : 0;
    formatted_for = now;
  }
  return {text, size};
}

}  // namespace

std::string format_fixed(double value, int digits) {
  char text[400];  // the longest double in fixed notation, 308 digits and more, fits
  return std::string(format_fixed(text, value, digits));
}

std::string_view format_fixed(std::span<char> buf, double value, int digits) {
  auto [end, ec] =
      std::to_chars(buf.data(), buf.data() + buf.size(), value, std::chars_format::fixed, digits);
  return ec == std::errc() ? std::string_view(buf.data(), end - buf.data()) : std::string_view();
}

std::string format_storage_access_line(const StorageAccessFields& f) {
  auto or_dash = [](std::string_view v) { return v.empty() ? std::string_view("-") : v; };
  // The date and the request time without snprintf: its two calls were two thirds of a line's
  // formatting time in a container server's profile.
  std::string_view when = access_line_date(static_cast<std::time_t>(f.now));
  std::string line;
  line.reserve(256);
  line.append(or_dash(f.remote_addr)).append(" - - [").append(when).append("] \"");
  line.append(or_dash(f.method)).append(" ").append(or_dash(f.path)).append("\" ");
  line.append(std::to_string(f.status)).append(" ");
  line.append(f.content_length ? std::to_string(*f.content_length) : "-").append(" \"");
  line.append(or_dash(f.referer)).append("\" \"").append(or_dash(f.trans_id)).append("\" \"");
  line.append(or_dash(f.user_agent))
      .append("\" ")
      .append(format_fixed(f.trans_time, 4))
      .append(" \"");
  line.append(or_dash(f.additional_info)).append("\" ").append(std::to_string(f.pid));
  line.append(" ").append(or_dash(f.policy_index));
  return line;
}

}  // namespace apus::common::log
