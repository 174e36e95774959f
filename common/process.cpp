#include "common/process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <cstddef>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "common/http/url.h"
#include "common/log/log.h"
#include "common/statsd.h"
#include "common/thread_annotations.h"

namespace apus::common {

namespace {
sigset_t stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  sigaddset(&set, SIGUSR1);
  sigaddset(&set, SIGUSR2);
  return set;
}

// This program's file, by its name: the kernel names a process after the file it exec'd (what
// ps -C, pgrep and top show), and /proc/self/exe would make every server "exe" (one started
// through a symlink takes its target's name). The link itself when the file is gone (replaced by
// an upgrade while the old one runs: "path (deleted)").
std::string own_file() {
  constexpr std::string_view kSelf = "/proc/self/exe";
  std::array<char, PATH_MAX> buf;
  const ssize_t n = ::readlink(kSelf.data(), buf.data(), buf.size());
  if (n <= 0 || static_cast<size_t>(n) >= buf.size()) return std::string(kSelf);
  std::string path(buf.data(), static_cast<size_t>(n));
  if (path.ends_with(" (deleted)")) return std::string(kSelf);
  return path;
}
}  // namespace

void block_stop_signals() {
  sigset_t set = stop_signals();
  sigaddset(&set, SIGPIPE);  // a peer closing mid-write is an error code, not a death
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

void tune_malloc(char** argv) {
  const char* preload = std::getenv("LD_PRELOAD");
  if (preload && *preload) return;
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  std::string value = tunables ? tunables : "";
  if (value.find("glibc.malloc.tcache_count=") != std::string::npos) return;
  value += value.empty() ? "" : ":";
  value += kMallocTunables;
  if (setenv("GLIBC_TUNABLES", value.c_str(), 1) != 0) return;
  execv(own_file().c_str(), argv);
  // Still here: the exec failed. Run as we are; the variable is left set, so a program this
  // one starts (a reload's successor) does not try again.
}

void run_until_stopped(std::string_view started,
                       const std::function<void(const std::atomic<bool>& stop)>& loop) {
  std::atomic<bool> stop{false};
  std::thread signals([&stop] {
    wait_for_stop_signal();
    stop = true;
  });
  APUS_LOG_INFO(std::string(started));
  loop(stop);
  signals.join();
}

int wait_for_stop_signal(const std::function<void()>& on_pass_request,
                         const std::function<bool()>& on_reload) {
  sigset_t set = stop_signals();
  for (;;) {
    int sig = 0;
    if (sigwait(&set, &sig) != 0) continue;
    if (sig == SIGHUP) {
      log::reopen();
      APUS_LOG_INFO("SIGHUP: log reopened");
      continue;
    }
    if (sig == SIGUSR1) {
      if (!on_reload) {
        APUS_LOG_INFO("SIGUSR1: this program does not reload; ignored");
        continue;
      }
      APUS_LOG_INFO("SIGUSR1: reloading");
      if (on_reload()) return sig;
      continue;
    }
    if (sig == SIGUSR2) {
      if (on_pass_request) {
        APUS_LOG_INFO("SIGUSR2: pass requested");
        on_pass_request();
      }
      continue;
    }
    APUS_LOG_INFO("signal " + std::to_string(sig) + ": stopping");
    return sig;
  }
}

Result<Config> load_program_config(const char* path) {
  auto conf = Config::load(path);
  if (!conf.ok()) {
    return Status::invalid_argument(std::string("Error trying to load config from ") + path +
                                    ": " + conf.status().message());
  }
  return conf;
}

Status configure_logging(const Section& section, std::string_view default_name) {
  log::Options options;
  options.name = section.get_string("log_name", std::string(default_name));
  options.file = section.get_string("log_file", "");
  options.facility = section.get_string("log_facility", "LOG_LOCAL0");
  options.address = section.get_string("log_address", "/dev/log");
  options.udp_host = section.get_string("log_udp_host", "");
  int64_t udp_port = 514;
  APUS_ASSIGN_OR_RETURN(udp_port, section.get_int("log_udp_port", 514));
  if (udp_port <= 0 || udp_port > 65535) return section.invalid("log_udp_port", "must be a port");
  options.udp_port = static_cast<int>(udp_port);
  std::string level = section.get_string("log_level", "INFO");
  if (!log::parse_level(level, &options.level)) {
    return section.invalid("log_level", "is not a log level");
  }
  log::configure(options);
  return Status();
}

http::AccessLogger with_request_timing(std::shared_ptr<StatsdClient> statsd,
                                       std::string_view server, http::AccessLogger inner) {
  if (!statsd) return inner;
  // Swift's @timing_stats per method and server: the sample rate, or no entry (not timed).
  static const std::map<std::string, double, std::less<>> kObject = {
      {"POST", 1}, {"PUT", 1}, {"GET", 1}, {"HEAD", 0.8}, {"DELETE", 1}, {"REPLICATE", 0.1},
      {"SSYNC", 0.1}};
  static const std::map<std::string, double, std::less<>> kContainer = {
      {"DELETE", 1}, {"PUT", 1}, {"HEAD", 0.1}, {"GET", 1}, {"REPLICATE", 0.01},
      {"UPDATE", 1}, {"POST", 1}};
  static const std::map<std::string, double, std::less<>> kAccount = {
      {"DELETE", 1}, {"PUT", 1}, {"HEAD", 1}, {"GET", 1}, {"REPLICATE", 1}, {"POST", 1}};
  const auto* rates = server == "object" ? &kObject : server == "container" ? &kContainer
                                                                             : &kAccount;
  return [statsd = std::move(statsd), rates, inner = std::move(inner)](
             const http::RequestRecord& r) {
    const std::string& method = r.request->method;
    if (auto it = rates->find(method); it != rates->end()) {
      // A default rate of 1 leaves the method's own; Swift passes it as the sample rate.
      statsd->timing(method + (r.status >= 500 ? ".errors.timing" : ".timing"),
                     r.seconds * 1000, it->second < 1 ? std::optional<double>(it->second)
                                                      : std::nullopt);
    }
    if (inner) inner(r);
  };
}

http::AccessLogger storage_access_logger() {
  int pid = ::getpid();
  return [pid](const http::RequestRecord& r) {
    const auto& req = *r.request;
    bool replication = req.method == "REPLICATE" || req.method == "SSYNC" ||
                       req.headers.contains("X-Backend-Replication");
    auto level = replication ? log::Level::kDebug : log::Level::kInfo;
    if (!log::enabled(level)) return;
    std::string path = http::quote(http::percent_decode(req.path()));
    log::StorageAccessFields f;
    f.remote_addr = req.remote_addr;
    f.method = req.method;
    f.path = path;
    f.status = r.status;
    f.content_length = r.content_length;
    f.referer = req.headers.get_or("Referer", "");
    f.trans_id = req.headers.get_or("X-Trans-Id", "");
    f.user_agent = req.headers.get_or("User-Agent", "");
    f.trans_time = r.seconds;
    f.policy_index = req.headers.get_or("X-Backend-Storage-Policy-Index", "");
    f.now = r.start_time + r.seconds;
    f.pid = pid;
    log::write(level, log::format_storage_access_line(f));
  };
}

void sleep_until_or_stopped(std::chrono::steady_clock::time_point deadline,
                            const std::atomic<bool>& stop) {
  while (!stop.load() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(
        std::chrono::seconds(1), deadline - std::chrono::steady_clock::now()));
  }
}

std::chrono::steady_clock::time_point seconds_from_now(double seconds) {
  return std::chrono::steady_clock::now() +
         std::chrono::duration_cast<std::chrono::steady_clock::duration>(
             std::chrono::duration<double>(seconds));
}

std::optional<DaemonArgs> parse_daemon_args(int argc, char** argv, bool with_partitions) {
  auto usage = [&] {
    std::fprintf(stderr, "usage: %s CONFIG_FILE [--once] [--devices D,...]%s\n", argv[0],
                 with_partitions ? " [--partitions P,...]" : "");
    return std::nullopt;
  };
  if (argc < 2) return usage();
  DaemonArgs args;
  args.config = argv[1];
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--once" || arg == "-o" || arg == "once") {
      args.once = true;
    } else if ((arg == "--devices" || arg == "-d") && i + 1 < argc) {
      for (auto& d : list_from_csv(argv[++i])) args.devices.insert(d);
    } else if (with_partitions && (arg == "--partitions" || arg == "-p") && i + 1 < argc) {
      for (auto& p : list_from_csv(argv[++i])) args.partitions.insert(p);
    } else {
      std::fprintf(stderr, "unknown argument %s\n", arg.c_str());
      return usage();
    }
  }
  return args;
}

void run_passes(double interval, const std::atomic<bool>& stop,
                const std::function<void()>& pass) {
  while (!stop.load()) {
    const auto next = seconds_from_now(interval);
    pass();
    sleep_until_or_stopped(next, stop);
  }
}

Result<CommandResult> run_command(const std::vector<std::string>& argv, double timeout_seconds,
                                  size_t max_output) {
  if (argv.empty()) return Status::invalid_argument("run_command: no command");
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return Status::io_error(std::strerror(errno));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 1);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2, SIGPIPE}) {
    sigaddset(&defaults, sig);
  }
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  int spawned = ::posix_spawnp(&pid, args[0], &actions, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  ::close(pipe_fds[1]);
  if (spawned != 0) {
    ::close(pipe_fds[0]);
    return Status::io_error("cannot run " + argv[0] + ": " + std::strerror(spawned));
  }
  CommandResult result;
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(timeout_seconds));
  char buf[16384];
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now())
                    .count();
    if (left <= 0) {
      result.timed_out = true;
      ::kill(pid, SIGKILL);
      break;
    }
    pollfd p{pipe_fds[0], POLLIN, 0};
    int ready = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1000)));
    if (ready < 0 && errno != EINTR) break;
    if (ready <= 0) continue;
    ssize_t n = ::read(pipe_fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // EOF: the command (and whatever it started) closed its output
    size_t room = max_output - std::min(max_output, result.output.size());
    result.output.append(buf, std::min(room, static_cast<size_t>(n)));
  }
  ::close(pipe_fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  result.exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

// ---- seamless reload ----------------------------------------------------------------------

namespace {

constexpr std::string_view kInheritPrefix = "APUS_INHERIT_";
constexpr std::string_view kReadyVariable = "APUS_READY_FD";

// This process's arguments, from /proc/self/cmdline.
std::vector<std::string> own_arguments() {
  std::vector<std::string> args;
  int fd = ::open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return args;
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) text.append(buf, static_cast<size_t>(n));
  ::close(fd);
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find('\0', start);
    if (end == std::string::npos) end = text.size();
    args.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return args;
}

std::optional<int> fd_from_environment(std::string_view variable) {
  const char* value = std::getenv(std::string(variable).c_str());
  if (!value) return std::nullopt;
  int fd = -1;
  auto [end, ec] = std::from_chars(value, value + std::strlen(value), fd);
  if (ec != std::errc() || *end != '\0' || fd < 3 || ::fcntl(fd, F_GETFD) < 0) {
    return std::nullopt;
  }
  return fd;
}

}  // namespace

Result<int> start_successor(const std::vector<std::pair<std::string, int>>& sockets,
                            double timeout_seconds) {
  std::vector<std::string> args = own_arguments();
  if (args.empty()) return Status::io_error("cannot read /proc/self/cmdline");
  int ready[2];
  if (::pipe2(ready, O_CLOEXEC) != 0) {
    return Status::io_error(std::string("pipe: ") + std::strerror(errno));
  }
  // The successor finds each socket at a descriptor above every one handed over, so no dup2
  // overwrites a descriptor still to be handed.
  int next = ready[1];
  for (const auto& [name, fd] : sockets) next = std::max(next, fd);
  ++next;
  posix_spawn_file_actions_t actions;
  ::posix_spawn_file_actions_init(&actions);
  std::vector<std::string> env;
  for (const auto& [name, fd] : sockets) {
    if (fd < 0) continue;
    ::posix_spawn_file_actions_adddup2(&actions, fd, next);
    env.push_back(std::string(kInheritPrefix) + name + "=" + std::to_string(next++));
  }
  ::posix_spawn_file_actions_adddup2(&actions, ready[1], next);
  env.push_back(std::string(kReadyVariable) + "=" + std::to_string(next));
  for (char** e = environ; *e; ++e) {
    std::string_view entry = *e;
    if (entry.starts_with(kInheritPrefix) || entry.starts_with(std::string(kReadyVariable) + "=")) {
      continue;
    }
    env.emplace_back(entry);
  }
  // The successor starts with no signal blocked and every signal at its default, as a program
  // started from a shell.
  posix_spawnattr_t attr;
  ::posix_spawnattr_init(&attr);
  sigset_t none, defaults = stop_signals();
  sigemptyset(&none);
  sigaddset(&defaults, SIGPIPE);
  ::posix_spawnattr_setsigmask(&attr, &none);
  ::posix_spawnattr_setsigdefault(&attr, &defaults);
  ::posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  std::vector<char*> argv, envp;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (std::string& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t pid = -1;
  const int rc = ::posix_spawnp(&pid, argv[0], &actions, &attr, argv.data(), envp.data());
  ::posix_spawn_file_actions_destroy(&actions);
  ::posix_spawnattr_destroy(&attr);
  ::close(ready[1]);
  if (rc != 0) {
    ::close(ready[0]);
    return Status::io_error("cannot start " + args[0] + ": " + std::strerror(rc));
  }
  // One byte when the successor serves; end of file when it exited first.
  pollfd p{ready[0], POLLIN, 0};
  const int waited = ::poll(&p, 1, static_cast<int>(timeout_seconds * 1000));
  char byte = 0;
  const bool serving = waited > 0 && ::read(ready[0], &byte, 1) == 1;
  ::close(ready[0]);
  if (serving) return static_cast<int>(pid);
  if (waited == 0) ::kill(pid, SIGTERM);
  ::waitpid(pid, nullptr, 0);
  return Status::io_error(waited == 0 ? "the new process did not start serving in time"
                                      : "the new process exited before serving (see its log)");
}

std::optional<int> take_inherited_socket(std::string_view name) {
  static Mutex mutex;
  static std::set<std::string, std::less<>> taken APUS_GUARDED_BY(mutex);
  MutexLock lock(&mutex);
  if (!taken.insert(std::string(name)).second) return std::nullopt;
  auto fd = fd_from_environment(std::string(kInheritPrefix) + std::string(name));
  if (fd) ::fcntl(*fd, F_SETFD, FD_CLOEXEC);
  return fd;
}

void tell_parent_ready() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (auto fd = fd_from_environment(kReadyVariable)) {
      [[maybe_unused]] ssize_t n = ::write(*fd, "1", 1);
      ::close(*fd);
    }
  });
}

void tell_service_manager_ready() {
  const char* path = std::getenv("NOTIFY_SOCKET");
  if (!path || (path[0] != '/' && path[0] != '@')) return;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const size_t length = std::strlen(path);
  if (length >= sizeof addr.sun_path) return;
  std::memcpy(addr.sun_path, path, length);
  if (addr.sun_path[0] == '@') addr.sun_path[0] = '\0';  // an abstract socket
  int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  const std::string state = "READY=1\nMAINPID=" + std::to_string(::getpid());
  ::sendto(fd, state.data(), state.size(), MSG_NOSIGNAL, reinterpret_cast<sockaddr*>(&addr),
           static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + length));
  ::close(fd);
}

}  // namespace apus::common
