// The runtime options every Apus server reads from its config, beside its own ones.
//
// Each server's from_config() reads bind_ip, bind_port, workers and the like with its own
// defaults; the options below mean the same in every server, so they are read here once:
//   max_clients        Swift's option (default 1024): client connections per worker; at
//                      workers * max_clients the server stops accepting until one closes.
//                      0 or less: no cap.
//   metrics_bind_ip    address of the admin listener serving GET /metrics (default 127.0.0.1)
//   metrics_bind_port  its port; 0 (the default) means no admin listener and no metrics over HTTP
// `section` is the server's app section merged with [DEFAULT], so each may be set in either.
//
// Header-only (it is small); thread-compatible.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "common/config/config.h"
#include "common/http/server.h"
#include "common/status.h"

namespace apus::common::http {

// Fills the options above into *out. InvalidArgument (naming file, section and key) for a value
// that is not a number, or a port out of range.
inline Status read_runtime_options(const Section& section, ServerOptions* out) {
  int64_t max_clients = 1024;
  APUS_ASSIGN_OR_RETURN(max_clients, section.get_int("max_clients", 1024));
  out->max_clients = static_cast<int>(std::clamp<int64_t>(max_clients, 0, 1 << 30));
  out->metrics_bind_ip = section.get_string("metrics_bind_ip", "127.0.0.1");
  int64_t port = 0;
  APUS_ASSIGN_OR_RETURN(port, section.get_int("metrics_bind_port", 0));
  if (port < 0 || port > 65535) return section.invalid("metrics_bind_port", "is not a port");
  if (port == 0) {
    out->metrics_bind_port.reset();
  } else {
    out->metrics_bind_port = static_cast<uint16_t>(port);
  }
  return Status();
}

}  // namespace apus::common::http
