// RingBuilder: builds the partition -> device assignment of a ring, as swift-ring-builder does.
//
// A builder holds the devices (with their region, zone, server address and weight) and, once
// rebalanced, one row per replica mapping every partition to a device. rebalance() follows
// Swift 2.30's algorithm: it plans how many replicas each tier (region, zone, server, device)
// should hold from the weights, the wish to spread replicas as far apart as possible
// (dispersion) and the overload allowance; then it takes partitions off removed devices, off
// tiers holding more replicas of a partition than the plan allows, and off devices holding more
// than their share, and gives each to the tier and device that wants partitions most. A
// partition moved less than min_part_hours ago is not moved again, except off a removed device.
// Where Swift draws random numbers, rebalance() uses a generator compatible with Python's
// `random` module seeded with the given seed, so a rebalance with the same seed on the same
// builder gives exactly the ring swift-ring-builder gives (see ring/FORMAT.md for the one
// documented difference: counts cover every partition of a fractional replica ring).
//
// The builder's persistent state is the plain struct BuilderState, which the builder file
// format (builder_format.cpp, ring/FORMAT.md "## .builder") stores and which an import from a
// `.ring.gz` or a Swift pickle `.builder` produces.
//
// Thread-compatible value type: one thread at a time per builder; no shared state. Only the
// file functions at the end do I/O (blocking).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "ring/ring_data.h"

namespace apus::common::io {
class Fs;
}

namespace apus::ring {

// Marks an unassigned slot inside the builder; never written to a ring (ids are 0..65534).
inline constexpr uint16_t kNoDevice = 0xFFFF;
// Swift's display value for the balance of a zero-weight device that still holds partitions.
inline constexpr double kMaxBalance = 999.99;
// Ring format v1 stores device ids as uint16 and the builder reserves 0xFFFF.
inline constexpr int kMaxDeviceId = 0xFFFE;
// 2^32 partitions is the most a 32-bit hash prefix can address.
inline constexpr int kMaxPartPower = 32;
// A partition cannot have more replicas than there can be devices.
inline constexpr double kMaxReplicas = kMaxDeviceId + 1;

// A device plus what the builder tracks about it.
struct BuilderDevice : Device {
  int64_t parts = 0;          // replicas of partitions assigned to it
  double parts_wanted = 0.0;  // target minus parts, as of the last rebalance (may be negative)
};

// Everything a builder file stores. Field meanings follow Swift's builder dict.
struct BuilderState {
  int part_power = 0;
  std::optional<int> next_part_power;
  double replicas = 1.0;
  int min_part_hours = 0;
  double overload = 0.0;                           // fraction: 0.1 is 10%
  int64_t version = 0;                             // bumped by every change and rebalance
  std::string id;                                  // uuid hex, assigned on first save
  bool devs_changed = false;                       // devices changed since the last rebalance
  std::optional<double> dispersion = 0.0;          // percent, as of the last rebalance
  std::vector<std::optional<BuilderDevice>> devs;  // index = device id; nullopt = hole
  std::vector<int> remove_devs;                    // ids marked for removal at next rebalance
  // [replica row][partition] -> device id; empty until the first rebalance. The last row is
  // shorter when replicas is fractional.
  std::vector<std::vector<uint16_t>> replica2part2dev;
  std::vector<uint8_t> last_part_moves;  // per partition: hours since it moved (255 = long ago)
  int64_t last_part_moves_epoch = 0;     // unix seconds the hours above are counted from
  int64_t last_part_gather_start = 0;    // where the last balance gather started
};

struct RebalanceOptions {
  // Seed for the random choices, as `swift-ring-builder rebalance <seed>` takes it (a string,
  // hashed as Python's random.seed(str) does). Unset: derived from the builder id and version,
  // so a rebalance of the same builder file is repeatable.
  std::optional<std::string> seed;
  // Current time in unix seconds (tests inject it); unset: the system clock.
  std::optional<double> now;
};

struct RebalanceResult {
  int64_t changed_parts = 0;  // partition replicas now on a different device (Swift's count)
  double balance = 0.0;       // get_balance() afterwards
  int removed_devices = 0;    // devices removed from the builder by this rebalance
};

// One row of the dispersion report (`swift-ring-builder X dispersion -v`).
struct TierDispersion {
  std::string name;               // r1, r1z2, r1z2-10.0.0.1, r1z2-10.0.0.1/sdb1
  int max_replicas = 0;           // replicas one partition may have in the tier
  int64_t placed_parts = 0;       // partition replicas placed in the tier
  double dispersion = 0.0;        // percent of those over max_replicas
  std::vector<int64_t> replicas;  // [k] = partitions with k replicas in the tier
};

struct DispersionReport {
  double max_dispersion = 0.0;
  std::string worst_tier;             // empty when no tier has a partition over its max
  std::vector<TierDispersion> graph;  // filled when verbose
};

// Which devices a command applies to; unset fields match anything (Swift's search values).
struct DeviceSearch {
  std::optional<int> id, region, zone, port, replication_port;
  std::optional<std::string> ip, replication_ip;  // normalized addresses
  std::optional<std::string> device;
  std::optional<double> weight;
  std::optional<std::string> meta;  // substring match
};

class RingBuilder {
 public:
  // InvalidArgument unless part_power <= 32, 1 <= replicas <= 65535 and min_part_hours >= 0.
  static common::Result<RingBuilder> create(int part_power, double replicas, int min_part_hours);
  // Wraps a loaded state after checking it (sizes, device ids); recomputes device part counts.
  // Corruption when the state is inconsistent.
  static common::Result<RingBuilder> from_state(BuilderState state);
  // Starts a builder from an existing ring (Swift's `write_builder`): devices and assignment
  // are kept, min_part_hours is given, history (last moves) is lost.
  static common::Result<RingBuilder> from_ring_data(const RingData& ring, int min_part_hours);

  const BuilderState& state() const { return s_; }
  int part_power() const { return s_.part_power; }
  int64_t parts() const { return int64_t{1} << s_.part_power; }
  double replicas() const { return s_.replicas; }
  bool ever_rebalanced() const { return !s_.replica2part2dev.empty(); }
  const std::vector<std::optional<BuilderDevice>>& devs() const { return s_.devs; }
  bool marked_for_removal(int id) const;

  // --- Changes. None rebalances; each bumps the version and sets devs_changed.
  // Adds dev under `id`, or without one under the lowest free id (holes first); dev.id is
  // ignored. An empty replication_ip defaults to ip, a replication_port of 0 to port.
  // InvalidArgument for a negative or non-finite weight, a bad device name, port, region or
  // zone, or a taken id; Conflict when ip:port/device already exists. The builder is unchanged
  // on failure. Returns the id.
  common::Result<int> add_dev(Device dev, std::optional<int> id = std::nullopt);
  // Marks a device for removal: weight 0 now, gone after the next rebalance. NotFound.
  common::Status remove_dev(int id);
  // NotFound; InvalidArgument for a negative or non-finite weight or a device being removed.
  common::Status set_weight(int id, double weight);
  // InvalidArgument when negative.
  common::Status set_overload(double overload);
  common::Status set_min_part_hours(int hours);
  // InvalidArgument unless 1 <= replicas <= 65535. Takes effect at the next rebalance.
  common::Status set_replicas(double replicas);
  // Marks every partition as moved long ago, so the next rebalance may move any of them.
  void pretend_min_part_hours_passed();
  // Assigns the builder id if it has none (Swift does this on first save).
  void ensure_id();

  // Reassigns partitions (see the file comment). InvalidArgument when there are fewer weighted
  // devices than replicas or no weight at all, Conflict while a part-power increase is pending.
  common::Result<RebalanceResult> rebalance(const RebalanceOptions& options = {});

  // --- Reports.
  // Highest |percent| a device is off its weight-based share. InvalidArgument("There are no
  // devices in this ring, or all devices have been deleted") when the total weight is 0.
  common::Result<double> balance() const;
  // Per device id (index), the same percent; 0 for holes.
  common::Result<std::vector<double>> balance_per_dev() const;
  // Smallest overload that would let the plan disperse fully (a fraction).
  common::Result<double> required_overload() const;
  // Dispersion per tier of the current assignment. filter: a regex that tier names must match
  // at their start (Python re.match); empty matches all. Rows only when verbose.
  // InvalidArgument for a bad regex or when never rebalanced.
  common::Result<DispersionReport> dispersion_report(const std::string& filter, bool verbose) const;
  // Recomputes the stored dispersion figure from the current assignment (bumps the version).
  void recalculate_dispersion();
  // Checks the assignment: every slot names a live device, no partition twice on one device,
  // part counts add up. InvalidArgument with Swift's message otherwise.
  common::Status validate() const;
  // Seconds until min_part_hours have passed since the last rebalance that moved partitions.
  int64_t min_part_seconds_left(double now) const;
  // Ids of the devices matching search, in id order.
  std::vector<int> search_devs(const DeviceSearch& search) const;
  // Devices holding the partition, without repeats, in replica order.
  std::vector<int> part_devices(int64_t part) const;

  // The ring to write (`.ring.gz` contents): devices with holes, the assignment, version.
  RingData ring_data() const;

 private:
  class Rebalancer;  // the rebalance pass, in builder.cpp
  RingBuilder() = default;
  double total_weight() const;
  std::vector<int> weighted_device_ids() const;

  BuilderState s_;
};

// --- Builder files (builder_format.cpp; layout in ring/FORMAT.md "## .builder").

// The Apus builder file image of builder (gzip-compressed), and its inverse. decode also reads
// stock Swift `.builder` files (protocol-2 pickles, as swift-ring-builder writes them).
// Corruption with a clear message for a truncated or damaged file, wrong magic, an unsupported
// version or inconsistent contents.
std::string encode_builder(const BuilderState& state);
common::Result<RingBuilder> decode_builder(std::string_view file_bytes);

// Loads a builder file (Apus or Swift pickle). NotFound when missing.
common::Result<RingBuilder> load_builder_file(const std::string& path);
common::Result<RingBuilder> load_builder_file(const std::string& path, common::io::Fs& fs);
// Saves atomically (temp file in the same directory, fsync, rename, directory fsync; mode
// 0644); on failure the old file is left as it was. Assigns the builder id first if unset.
common::Status save_builder_file(RingBuilder& builder, const std::string& path);
common::Status save_builder_file(RingBuilder& builder, const std::string& path, common::io::Fs& fs);
// True when the bytes look like a Swift pickle builder rather than an Apus one.
bool is_swift_pickle_builder(std::string_view file_bytes);

}  // namespace apus::ring
