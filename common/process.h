// What every Apus program does at start and stop, in one place: load its config file with
// Swift's error message, set up logging from its section (log_name, log_level, log_file,
// log_facility), and wait for SIGTERM/SIGINT while reopening logs on SIGHUP.
//
// Call block_stop_signals() first thing in main(), before any thread starts, so the signals
// reach only wait_for_stop_signal().
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/config/config.h"
#include "common/http/server.h"
#include "common/statsd.h"
#include "common/status.h"

namespace apus::common {

// Blocks SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2 and SIGPIPE in the calling thread and
// threads it creates later.
void block_stop_signals();

// glibc's malloc keeps, per thread, a cache of freed chunks of each size up to 1032 bytes:
// 7 of each by default. Past that a free goes to the arena's bins, under its lock, and a
// malloc searches them. A request allocates and frees dozens of small objects of a few sizes
// (headers, strings, coroutine frames), tens of requests at a time per worker, so 7 is far
// too few: with kMallocTunables a 4 KiB GET or HEAD costs the servers 10-14% less CPU (a PUT,
// mostly the filesystem's work, about the same; bench/results/2026-12-07-malloc-tcache.md),
// for a few MiB more RSS per server. glibc reads its tunables only when a program
// starts, from GLIBC_TUNABLES; so, called first thing in main(), this starts the program
// again (execv of its own file: the same pid, name, arguments, environment and descriptors) with
// kMallocTunables added to GLIBC_TUNABLES. Nothing when GLIBC_TUNABLES already sets the
// cache's size (an operator's own choice, or this program after its exec), when LD_PRELOAD
// brings a library (which may be an allocator of its own: jemalloc, valgrind's), or when the
// exec fails (the program then runs with glibc's defaults).
inline constexpr const char* kMallocTunables = "glibc.malloc.tcache_count=256";
void tune_malloc(char** argv);

// Blocks until SIGTERM or SIGINT arrives and returns it; SIGHUP reopens the log file meanwhile,
// and SIGUSR2 calls `on_pass_request` (when given): an operator's "run your sweep now", as
// `swift-container-updater once` is for Swift's separate daemon. SIGUSR1 (Swift's seamless
// reload) calls `on_reload` when given: when it returns true (a successor serves now), SIGUSR1
// is returned; otherwise it is logged and the wait goes on.
// REQUIRES: block_stop_signals() was called before any thread was created.
int wait_for_stop_signal(const std::function<void()>& on_pass_request = {},
                         const std::function<bool()>& on_reload = {});

// ---- seamless reload ----
// A server hands its listening sockets to a new copy of its program (the same argv[0], found on
// PATH when it has no slash, so an upgraded binary takes over; the same arguments), which
// serves on them as soon as it has started: connections waiting in the kernel's queue are
// never refused, and the old process then stops accepting and finishes its requests.

// Starts the successor with each (name, fd) of `sockets` inherited (fd -1: skipped) and waits
// until it calls tell_parent_ready() or `timeout_seconds` pass. Its pid, or why not (it
// exited: a config error; it is then reaped, or stopped at the timeout).
Result<int> start_successor(const std::vector<std::pair<std::string, int>>& sockets,
                            double timeout_seconds);
// In a successor: the socket its predecessor handed over as `name`, once (close-on-exec
// from then on), or nullopt.
std::optional<int> take_inherited_socket(std::string_view name);
// In a successor: tells the predecessor this process serves (at most once; nothing elsewhere).
void tell_parent_ready();
// Under systemd (Type=notify, NotifyAccess=all: etc/systemd/): tells it this process serves
// and is the service's main process ("READY=1", "MAINPID="), which a reload's successor does
// too. Nothing when NOTIFY_SOCKET is not set.
void tell_service_manager_ready();

// Config::load, with the message Swift prints when a config cannot be read.
Result<Config> load_program_config(const char* path);

// Configures logging from `section`: log_name (default `default_name`), log_level, log_file
// (Apus: a file instead of syslog), log_facility, log_address, log_udp_host, log_udp_port.
// InvalidArgument for a bad log_level or log_udp_port.
Status configure_logging(const Section& section, std::string_view default_name);

// A daemon's start: loads the config file at `path`, reads the daemon's settings from it with
// `parse` (its from_config) and sets up logging from `section`, log_name defaulting to the
// settings' own. The settings, or the message to print before exiting.
template <class Settings, class Parse>
Result<Settings> load_daemon(const char* path, std::string_view section, Parse parse) {
  auto conf = load_program_config(path);
  if (!conf.ok()) return conf.status();
  Result<Settings> settings = parse(*conf);
  if (!settings.ok()) return settings.status();
  Status logging = configure_logging(conf->section(section), settings->log_name);
  if (!logging.ok()) return logging;
  if constexpr (requires { settings->statsd; }) {  // a daemon that sends StatsD metrics
    APUS_ASSIGN_OR_RETURN(settings->statsd,
                          StatsdHandle::from_section(conf->section(section), settings->log_name));
  }
  return settings;
}

// How a daemon waits for its next pass: until `deadline` (steady clock), in steps of at most
// one second so a stop request is seen promptly; returns early once `stop` is set. That wake-up
// a second is the whole cost of an idle daemon between passes.
void sleep_until_or_stopped(std::chrono::steady_clock::time_point deadline,
                            const std::atomic<bool>& stop);
// The steady-clock time `seconds` from now.
std::chrono::steady_clock::time_point seconds_from_now(double seconds);

// A daemon's passes: runs `pass` at once and then every `interval` seconds (start to start;
// a pass longer than that is followed at once by the next), until `stop` is set.
void run_passes(double interval, const std::atomic<bool>& stop, const std::function<void()>& pass);

// A daemon's command line: CONFIG_FILE [--once|-o|once] [--devices|-d D,...]
// [--partitions|-p P,...] (the last only when `with_partitions`). nullopt, after printing a
// usage line to stderr, for anything else.
struct DaemonArgs {
  std::string config;
  bool once = false;
  std::set<std::string> devices;
  std::set<std::string> partitions;
};
std::optional<DaemonArgs> parse_daemon_args(int argc, char** argv, bool with_partitions);

// A daemon's life after its start: logs `started` (say the cadence) at INFO, then runs `loop`
// (its run_forever) until SIGTERM or SIGINT sets the flag `loop` watches.
void run_until_stopped(std::string_view started,
                       const std::function<void(const std::atomic<bool>& stop)>& loop);

// What a command run by run_command() did.
struct CommandResult {
  int exit_status = -1;   // the exit code, or 128 + the signal that ended it
  bool timed_out = false;  // killed (SIGKILL) after the timeout
  std::string output;      // stdout and stderr together, the first `max_output` bytes
};

// Runs `argv` (argv[0] found on PATH) with stdin from /dev/null, its output captured, its
// signal mask and dispositions reset (a daemon blocks its stop signals); waits at most
// `timeout_seconds`, then kills it. IOError when it cannot be started. Blocks the caller.
Result<CommandResult> run_command(const std::vector<std::string>& argv, double timeout_seconds,
                                  size_t max_output = 1 << 20);

// The access logger of a storage server (object, container, account): Swift's storage access
// line for every request, at INFO, with replication requests (REPLICATE, SSYNC, or
// X-Backend-Replication) at DEBUG as Swift logs them.
http::AccessLogger storage_access_logger();

// `inner` (may be empty) with a storage server's request timings sent to `statsd` (Swift's
// timing_stats): "<METHOD>.timing", or "<METHOD>.errors.timing" for a 5xx, for the methods
// Swift times on that server (`server`: "object", "container" or "account") at Swift's sample
// rate for each (an object HEAD 0.8, REPLICATE and SSYNC 0.1; a container HEAD 0.1, REPLICATE
// 0.01). Without `statsd`, `inner` itself.
http::AccessLogger with_request_timing(std::shared_ptr<StatsdClient> statsd,
                                       std::string_view server, http::AccessLogger inner);

}  // namespace apus::common
