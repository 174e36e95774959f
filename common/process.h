// What every Apus program does at start and stop, in one place: load its config file with
// Swift's error message, set up logging from its section (log_name, log_level, log_file,
// log_facility), and wait for SIGTERM/SIGINT while reopening logs on SIGHUP.
//
// Call block_stop_signals() first thing in main(), before any thread starts, so the signals
// reach only wait_for_stop_signal().
#pragma once

#include <string_view>

#include "common/config/config.h"
#include "common/http/server.h"
#include "common/status.h"

namespace apus::common {

// Blocks SIGTERM, SIGINT, SIGHUP and SIGPIPE in the calling thread and threads it creates later.
void block_stop_signals();

// Blocks until SIGTERM or SIGINT arrives and returns it; SIGHUP reopens the log file meanwhile.
// REQUIRES: block_stop_signals() was called before any thread was created.
int wait_for_stop_signal();

// Config::load, with the message Swift prints when a config cannot be read.
Result<Config> load_program_config(const char* path);

// Configures logging from `section`: log_name (default `default_name`), log_level, log_file
// (Apus: a file instead of syslog), log_facility. InvalidArgument for a bad log_level.
Status configure_logging(const Section& section, std::string_view default_name);

// The access logger of a storage server (object, container, account): Swift's storage access
// line for every request, at INFO, with replication requests (REPLICATE, SSYNC, or
// X-Backend-Replication) at DEBUG as Swift logs them.
http::AccessLogger storage_access_logger();

}  // namespace apus::common
