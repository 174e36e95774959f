#include "common/process.h"

#include <thread>

#include <signal.h>
#include <unistd.h>

#include <string>

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

int wait_for_stop_signal() {
  sigset_t set = stop_signals();
  for (;;) {
    int sig = 0;
    if (sigwait(&set, &sig) != 0) continue;
    if (sig == SIGHUP) {
      log::reopen();
      APUS_LOG_INFO("SIGHUP: log reopened");
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

}  // namespace apus::common
