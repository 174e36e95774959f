#include "common/log/log.h"

#include <doctest/doctest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

namespace log = apus::common::log;

namespace {
std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
}  // namespace

TEST_CASE("log: levels parse as Swift spells them") {
  log::Level level = log::Level::kInfo;
  CHECK(log::parse_level("debug", &level));
  CHECK(level == log::Level::kDebug);
  CHECK(log::parse_level("WARN", &level));
  CHECK(level == log::Level::kWarning);
  CHECK_FALSE(log::parse_level("loud", &level));
  CHECK(level == log::Level::kWarning);
}

TEST_CASE("log: writes to a file, filters by level, reopens after rotation") {
  auto dir = std::filesystem::temp_directory_path() / ("apus-log-test-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  auto file = dir / "server.log";
  log::configure({.name = "object-server", .level = log::Level::kInfo, .file = file.string()});
  APUS_LOG_DEBUG("hidden");
  APUS_LOG_INFO("first line");
  std::filesystem::rename(file, dir / "server.log.1");
  log::reopen();  // what SIGHUP does
  APUS_LOG_ERROR("second line");
  log::flush();  // lines are written by the log's own thread
  std::string rotated = slurp(dir / "server.log.1");
  std::string fresh = slurp(file);
  log::configure({.name = "swift", .level = log::Level::kInfo, .file = "-"});
  std::filesystem::remove_all(dir);
  CHECK(rotated.find("object-server INFO: first line\n") != std::string::npos);
  CHECK(rotated.find("hidden") == std::string::npos);
  CHECK(fresh.find("object-server ERROR: second line\n") != std::string::npos);
  CHECK(fresh.find("first line") == std::string::npos);
}

TEST_CASE("log: lines from busy threads all arrive in order, and a lone line is written unasked") {
  auto dir = std::filesystem::temp_directory_path() / ("apus-log-batch-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  auto file = dir / "server.log";
  log::configure({.name = "proxy-server", .level = log::Level::kInfo, .file = file.string()});
  // A burst from four threads: the writer pauses between batches (it is busy), no line is
  // lost or torn, and each thread's lines keep their order.
  constexpr int kThreads = 4, kLines = 2000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t] {
      for (int i = 0; i < kLines; ++i) {
        APUS_LOG_INFO("t" + std::to_string(t) + " line " + std::to_string(i));
      }
    });
  }
  for (auto& th : threads) th.join();
  log::flush();
  std::vector<int> next(kThreads, 0);
  bool in_order = true;
  int lines = 0;
  {
    std::ifstream in(file);
    for (std::string line; std::getline(in, line);) {
      auto at = line.find("proxy-server INFO: t");
      if (at == std::string::npos) continue;
      int t = 0, i = 0;
      REQUIRE(std::sscanf(line.c_str() + at, "proxy-server INFO: t%d line %d", &t, &i) == 2);
      in_order = in_order && t >= 0 && t < kThreads && i == next[t];
      if (t >= 0 && t < kThreads) next[t] = i + 1;
      ++lines;
    }
  }
  CHECK(lines == kThreads * kLines);
  CHECK(in_order);
  // A line after a quiet spell reaches the file with no flush() (within seconds: the bound is
  // the test's patience, not the writer's pace, which is at most 10 ms).
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  APUS_LOG_WARNING("lone line");
  bool seen = false;
  for (int i = 0; i < 500 && !seen; ++i) {
    seen = slurp(file).find("proxy-server WARNING: lone line\n") != std::string::npos;
    if (!seen) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  log::configure({.name = "swift", .level = log::Level::kInfo, .file = "-"});
  std::filesystem::remove_all(dir);
  CHECK(seen);
}

TEST_CASE("log: storage access line in Swift's default format") {
  log::StorageAccessFields f;
  f.remote_addr = "127.0.0.1";
  f.method = "PUT";
  f.path = "/sda1/7/AUTH_test/c/o%20x";
  f.status = 201;
  f.content_length = 0;
  f.trans_id = "tx0123456789abcdef01234-0065f00000";
  f.user_agent = "proxy-server 4242";
  f.trans_time = 0.01234;
  f.policy_index = "0";
  f.now = 1700000000;  // 2023-11-14 22:13:20 UTC
  f.pid = 99;
  CHECK(log::format_storage_access_line(f) ==
        "127.0.0.1 - - [14/Nov/2023:22:13:20 +0000] \"PUT /sda1/7/AUTH_test/c/o%20x\" 201 0 "
        "\"-\" \"tx0123456789abcdef01234-0065f00000\" \"proxy-server 4242\" 0.0123 \"-\" 99 0");
  f.content_length.reset();
  f.policy_index = "";
  CHECK(log::format_storage_access_line(f).ends_with(" 201 - \"-\" \"tx0123456789abcdef01234-0065f00000\" \"proxy-server 4242\" 0.0123 \"-\" 99 -"));
}

TEST_CASE("log: an access line's times are printf's, at every rounding and second") {
  // The request time is "%.4f" and the date is formatted once a second per thread: both must
  // read as Swift's (printf, strftime) for every value, ties and second changes included.
  log::StorageAccessFields f;
  f.now = 1700000000;
  for (int i = 0; i < 20000; ++i) {
    f.trans_time = i * 0.0000125;  // many exact ties at the fourth decimal
    if (i % 1000 == 0) f.now += 1.5;
    char want_seconds[32];
    std::snprintf(want_seconds, sizeof want_seconds, "%.4f", f.trans_time);
    std::time_t now = static_cast<std::time_t>(f.now);
    std::tm tm{};
    ::gmtime_r(&now, &tm);
    char want_date[40];
    std::strftime(want_date, sizeof want_date, "%d/%b/%Y:%H:%M:%S +0000", &tm);
    const std::string line = log::format_storage_access_line(f);
    REQUIRE(line.find("[" + std::string(want_date) + "]") != std::string::npos);
    REQUIRE(line.find("\" " + std::string(want_seconds) + " \"") != std::string::npos);
  }
}

TEST_CASE("log: a message holding CR, LF or NUL stays one line") {
  // Names and headers from clients reach log messages from many places; a CR LF in one must
  // not forge a line of its own (issue 12).
  auto dir = std::filesystem::temp_directory_path() / ("apus-log-crlf-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  auto file = dir / "server.log";
  log::configure({.name = "proxy-server", .level = log::Level::kInfo, .file = file.string()});
  APUS_LOG_WARNING(std::string("bad name a\r\nproxy-server ERROR: forged\0z\tend", 44));
  log::flush();
  std::string text = slurp(file);
  log::configure({.name = "swift", .level = log::Level::kInfo, .file = "-"});
  std::filesystem::remove_all(dir);
  CHECK(text == text.substr(0, text.find('\n') + 1));  // exactly one line
  CHECK(text.find("bad name a\\x0d\\x0aproxy-server ERROR: forged\\x00z\tend\n") !=
        std::string::npos);
}

using namespace std::string_literals;

namespace {
// One datagram from `fd` (0.5 s at most), or "" when none came.
std::string receive(int fd) {
  timeval tv{0, 500000};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char buf[4096];
  ssize_t n = ::recv(fd, buf, sizeof buf, 0);
  return n > 0 ? std::string(buf, n) : std::string();
}
}  // namespace

TEST_CASE("log: syslog over UDP (log_udp_host) as Python's SysLogHandler sends it") {
  int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  log::configure({.name = "object-server",
                  .level = log::Level::kInfo,
                  .file = "",
                  .facility = "LOG_LOCAL2",
                  .udp_host = "127.0.0.1",
                  .udp_port = ntohs(a.sin_port)});
  APUS_LOG_WARNING("disk sdb1 unmounted");
  APUS_LOG_DEBUG("not at INFO");
  log::flush();
  std::string got = receive(fd);
  std::string none = receive(fd);
  log::configure({.name = "swift", .level = log::Level::kInfo, .file = "-"});
  ::close(fd);
  // LOG_LOCAL2 (18 << 3) | LOG_WARNING (4), then "name: message" and a NUL.
  CHECK(got == "<148>object-server: disk sdb1 unmounted\0"s);
  CHECK(none.empty());
}

TEST_CASE("log: syslog on a unix socket (log_address)") {
  auto path = std::filesystem::temp_directory_path() /
              ("apus-log-sock-" + std::to_string(getpid()));
  std::filesystem::remove(path);
  int fd = ::socket(AF_UNIX, SOCK_DGRAM, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strncpy(a.sun_path, path.c_str(), sizeof a.sun_path - 1);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  log::configure({.name = "proxy-server", .level = log::Level::kInfo, .file = "",
                  .address = path.string()});
  APUS_LOG_INFO("hello");
  log::flush();
  std::string got = receive(fd);
  log::configure({.name = "swift", .level = log::Level::kInfo, .file = "-"});
  ::close(fd);
  std::filesystem::remove(path);
  CHECK(got == "<134>proxy-server: hello\0"s);  // LOCAL0 | INFO
}
