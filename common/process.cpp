#include "common/process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include "common/http/url.h"
#include "common/log/log.h"

namespace apus::common {

namespace {
sigset_t stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  sigaddset(&set, SIGUSR2);
  return set;
}
}  // namespace

void block_stop_signals() {
  sigset_t set = stop_signals();
  sigaddset(&set, SIGPIPE);  // a peer closing mid-write is an error code, not a death
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
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

int wait_for_stop_signal(const std::function<void()>& on_pass_request) {
  sigset_t set = stop_signals();
  for (;;) {
    int sig = 0;
    if (sigwait(&set, &sig) != 0) continue;
    if (sig == SIGHUP) {
      log::reopen();
      APUS_LOG_INFO("SIGHUP: log reopened");
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
  std::string level = section.get_string("log_level", "INFO");
  if (!log::parse_level(level, &options.level)) {
    return section.invalid("log_level", "is not a log level");
  }
  log::configure(options);
  return Status();
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
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGUSR2, SIGPIPE}) sigaddset(&defaults, sig);
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

}  // namespace apus::common
