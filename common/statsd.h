// StatsdClient: Swift's StatsD metrics (log_statsd_* in a server's section), sent as UDP
// datagrams "<prefix><name>:<value>|<type>[|@<rate>]" to log_statsd_host:log_statsd_port, as
// Swift's StatsdClient sends them, so a StatsD/Graphite setup watching Swift sees Apus's
// servers under the same names: `proxy-server.<type>.<method>.<status>.timing` (and
// `.first-byte.timing`, `.xfer`, and `.policy.<index>.` forms for objects) from the proxy's
// proxy_logging, `<server>.<METHOD>.timing` / `.errors.timing` from the storage servers.
//
// The prefix is log_statsd_metric_prefix and the tail (the server's name), each followed by a
// dot when set. A metric is sent with probability sample_rate * log_statsd_sample_rate_factor
// (the rate then goes with it as "|@rate"); sample_rate defaults to
// log_statsd_default_sample_rate. A datagram that cannot be sent is dropped (at most one
// warning a minute): metrics never slow or fail a request.
//
// Thread-safe: one non-blocking UDP socket, sendto() from any thread.
#pragma once

#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "common/config/config.h"
#include "common/status.h"

namespace apus::common {

class StatsdClient {
 public:
  // From `section`'s log_statsd_host, _port (8125), _default_sample_rate (1),
  // _sample_rate_factor (1) and _metric_prefix; each is first looked up as `<key_prefix><key>`
  // (proxy_logging's access_log_statsd_*). nullptr when no host is set (no metrics).
  // InvalidArgument for a bad number or a host that does not resolve.
  static Result<std::unique_ptr<StatsdClient>> from_section(const Section& section,
                                                            std::string tail_prefix,
                                                            std::string_view key_prefix = {});
  ~StatsdClient();
  StatsdClient(const StatsdClient&) = delete;
  StatsdClient& operator=(const StatsdClient&) = delete;

  // `name` took `ms` milliseconds ("ms").
  void timing(std::string_view name, double ms, std::optional<double> sample_rate = {});
  // Adds `value` to the counter `name` ("c"; increment() is 1).
  void update_stats(std::string_view name, int64_t value,
                    std::optional<double> sample_rate = {});
  void increment(std::string_view name, std::optional<double> sample_rate = {}) {
    update_stats(name, 1, sample_rate);
  }

  const std::string& prefix() const { return prefix_; }

 private:
  StatsdClient() = default;
  void send(std::string_view name, std::string_view value, std::string_view type,
            std::optional<double> sample_rate);

  int fd_ = -1;
  sockaddr_storage target_{};
  socklen_t target_len_ = 0;
  std::string prefix_;
  double default_sample_rate_ = 1;
  double sample_rate_factor_ = 1;
  std::atomic<int64_t> last_warning_{0};  // steady-clock seconds of the last send warning
};

// What a daemon holds to send Swift's daemon metrics (its logger's increment, update_stats and
// timing_since, under the daemon's log_name): a shared StatsdClient, or none, when every call
// does nothing. Cheap to copy.
class StatsdHandle {
 public:
  StatsdHandle() = default;
  explicit StatsdHandle(std::shared_ptr<StatsdClient> client) : client_(std::move(client)) {}
  // From `section`'s log_statsd_* with the daemon's name as the tail (StatsdClient's rules).
  static Result<StatsdHandle> from_section(const Section& section, std::string tail_prefix);

  void increment(std::string_view name) const {
    if (client_) client_->increment(name);
  }
  void update_stats(std::string_view name, int64_t value) const {
    if (client_) client_->update_stats(name, value);
  }
  // The milliseconds from `start` to now, as "ms".
  void timing_since(std::string_view name, std::chrono::steady_clock::time_point start) const {
    if (client_) {
      client_->timing(name, std::chrono::duration<double, std::milli>(
                                std::chrono::steady_clock::now() - start).count());
    }
  }

 private:
  std::shared_ptr<StatsdClient> client_;
};

}  // namespace apus::common
