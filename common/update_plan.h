// Which object server tells which container replica (X-Container-Host/-Device) and which
// replica of the expirer's queue container (X-Delete-At-Host/-Device) about an object write,
// as Swift's proxy spreads them (obj.py _backend_requests): enough container updates that a
// write that reached a quorum also reached a container quorum (num_container_updates), each
// container replica named at least once, the queue updates paired in reverse so they fall on
// other object servers than the first container updates. Used by the proxy and by
// apus-object-expirer, which makes the requests a proxy would.
//
// Thread-safe: pure functions.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/config/config.h"

namespace apus::common {

// The most hosts one backend request may name for updates (X-Account-Host on a container
// write): a proxy names one per replica. More is refused rather than sent one by one.
inline constexpr size_t kMaxUpdateHosts = 32;

// "ip:port" of an X-Container-Host, X-Account-Host or X-Delete-At-Host item; nullopt unless the
// port is 1..65535.
inline std::optional<std::pair<std::string, uint16_t>> split_host_port(std::string_view host) {
  auto colon = host.rfind(':');
  if (colon == std::string_view::npos) return std::nullopt;
  std::optional<int64_t> port = parse_python_int(host.substr(colon + 1));
  if (!port || *port < 1 || *port > 65535) return std::nullopt;
  return std::make_pair(std::string(host.substr(0, colon)), static_cast<uint16_t>(*port));
}

// Swift's num_container_updates(): at least a container quorum must survive the object
// requests that may fail (replicas - quorum), and every container replica is named once.
inline size_t num_container_updates(size_t container_replicas, size_t container_quorum,
                                    size_t object_replicas, size_t object_quorum) {
  size_t needed = container_quorum + object_replicas;
  needed = needed > object_quorum ? needed - object_quorum : 0;
  return std::max(needed, container_replicas);
}

// For each of `n_outgoing` object requests, the indices of the container replicas and of the
// queue container replicas it names (in the order they go into the comma-separated headers).
struct UpdatePlan {
  std::vector<std::vector<size_t>> container;
  std::vector<std::vector<size_t>> delete_at;
};

// `containers` and `queue_nodes` are the replica counts of the object's container and of its
// queue container (0 when the write sets no X-Delete-At); `object_quorum` the policy's quorum.
inline UpdatePlan plan_updates(size_t n_outgoing, size_t containers, size_t queue_nodes,
                               size_t object_quorum, size_t container_quorum) {
  UpdatePlan plan;
  plan.container.resize(n_outgoing);
  plan.delete_at.resize(n_outgoing);
  if (n_outgoing == 0 || containers == 0) return plan;
  const size_t needed =
      num_container_updates(containers, container_quorum, n_outgoing, object_quorum);
  for (size_t k = 0; k < needed; ++k) {
    const size_t index = k % n_outgoing;
    plan.container[index].push_back(k % containers);
    if (queue_nodes > 0) plan.delete_at[n_outgoing - 1 - index].push_back(k % queue_nodes);
  }
  return plan;
}

}  // namespace apus::common
