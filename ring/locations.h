// Swift's print_ring_locations (swift/cli/info.py): the report of where an account, container or
// object lives that swift-get-nodes and swift-object-info print, byte for byte, for
// apus-get-nodes and apus-object-info.
#pragma once

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>

#include "common/hash_path.h"
#include "common/status.h"
#include "ring/ring.h"

namespace apus::ring {

struct RingTarget {
  std::string account, container, object;  // empty: not given
};

// Prints to `out` the partition and hash, the primaries and the first handoffs (every handoff
// with `all_nodes`), a curl HEAD line for each and an ssh ls line for each. `part` is a
// partition given instead of the target's own; `datadir` is "objects", "objects-N",
// "containers" or "accounts"; `policy_index`, when set, goes into the curl lines' headers.
// InvalidArgument when the target cannot be hashed.
common::Status print_ring_locations(std::FILE* out, const RingState& ring,
                                    const common::HashPathConfig& hash,
                                    const std::string& datadir, const RingTarget& target,
                                    std::optional<uint32_t> part, bool all_nodes,
                                    std::optional<int> policy_index);

}  // namespace apus::ring
