#include "common/statsd.h"

#include <netdb.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <random>

#include "common/log/log.h"
#include "common/pickle.h"

namespace apus::common {

Result<std::unique_ptr<StatsdClient>> StatsdClient::from_section(const Section& s,
                                                                 std::string tail_prefix,
                                                                 std::string_view key_prefix) {
  // proxy_logging's access_log_statsd_* win over log_statsd_* when set (and not empty).
  auto key = [&](const std::string& k) {
    std::string prefixed = std::string(key_prefix) + k;
    return !key_prefix.empty() && !s.get_string(prefixed, "").empty() ? prefixed : k;
  };
  const std::string host = s.get_string(key("log_statsd_host"), "");
  if (host.empty()) return std::unique_ptr<StatsdClient>();
  int64_t port = 8125;
  APUS_ASSIGN_OR_RETURN(port, s.get_int(key("log_statsd_port"), 8125));
  if (port <= 0 || port > 65535) return s.invalid(key("log_statsd_port"), "must be a port");
  std::unique_ptr<StatsdClient> c(new StatsdClient());
  APUS_ASSIGN_OR_RETURN(c->default_sample_rate_,
                        s.get_double(key("log_statsd_default_sample_rate"), 1));
  APUS_ASSIGN_OR_RETURN(c->sample_rate_factor_,
                        s.get_double(key("log_statsd_sample_rate_factor"), 1));
  const std::string base = s.get_string(key("log_statsd_metric_prefix"), "");
  for (const std::string& part : {base, tail_prefix}) {
    if (!part.empty()) c->prefix_ += part + ".";
  }
  // Swift tries IPv4 first, then IPv6.
  addrinfo hints{};
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  for (int family : {AF_INET, AF_INET6}) {
    hints.ai_family = family;
    if (::getaddrinfo(host.c_str(), service.c_str(), &hints, &found) == 0 && found) break;
    found = nullptr;
  }
  if (!found) return s.invalid(key("log_statsd_host"), "cannot resolve " + host);
  std::memcpy(&c->target_, found->ai_addr, found->ai_addrlen);
  c->target_len_ = static_cast<socklen_t>(found->ai_addrlen);
  c->fd_ = ::socket(found->ai_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  ::freeaddrinfo(found);
  if (c->fd_ < 0) return Status::io_error(std::string("statsd socket: ") + std::strerror(errno));
  return c;
}

Result<StatsdHandle> StatsdHandle::from_section(const Section& section, std::string tail_prefix) {
  auto client = StatsdClient::from_section(section, std::move(tail_prefix));
  if (!client.ok()) return client.status();
  return StatsdHandle(std::shared_ptr<StatsdClient>(std::move(*client)));
}

StatsdClient::~StatsdClient() {
  if (fd_ >= 0) ::close(fd_);
}

void StatsdClient::timing(std::string_view name, double ms, std::optional<double> sample_rate) {
  // Swift sends the float as Python's str() writes it ("3.0", "12.5").
  send(name, common::pickle::python_float_repr(ms), "ms", sample_rate);
}

void StatsdClient::update_stats(std::string_view name, int64_t value,
                                std::optional<double> sample_rate) {
  send(name, std::to_string(value), "c", sample_rate);
}

void StatsdClient::send(std::string_view name, std::string_view value, std::string_view type,
                        std::optional<double> sample_rate) {
  const double rate = sample_rate.value_or(default_sample_rate_) * sample_rate_factor_;
  if (rate < 1) {  // decided before anything is built: most sampled-out metrics cost a draw
    thread_local std::mt19937_64 random{std::random_device{}()};
    if (std::uniform_real_distribution<double>(0, 1)(random) >= rate) return;
  }
  std::string datagram;
  datagram.reserve(prefix_.size() + name.size() + value.size() + 32);
  datagram.append(prefix_).append(name).append(":").append(value).append("|").append(type);
  if (rate < 1) datagram.append("|@").append(common::pickle::python_float_repr(rate));
  if (::sendto(fd_, datagram.data(), datagram.size(), MSG_DONTWAIT,
               reinterpret_cast<const sockaddr*>(&target_), target_len_) < 0) {
    const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                            std::chrono::steady_clock::now().time_since_epoch())
                            .count();
    int64_t last = last_warning_.load(std::memory_order_relaxed);
    if (now - last >= 60 && last_warning_.compare_exchange_strong(last, now)) {
      APUS_LOG_WARNING(std::string("Error sending UDP message to statsd: ") +
                       std::strerror(errno));
    }
  }
}

}  // namespace apus::common
