// Ring: which devices hold an account, container or object, answered exactly as Swift's
// swift.common.ring.Ring answers (swift-protocol.md §2.2-2.3).
//
// A RingState is one loaded ring, immutable, with per-device tier indices precomputed so that
// lookups do no allocation beyond their result vector and no hashing beyond one MD5. A Ring
// owns the current RingState of a `.ring.gz` file and replaces it when the file's mtime (or
// size) changes, checking at most every `reload_time` (Swift: 15 s). A reload builds a new state
// off to the side and publishes it with a generation number; readers keep a per-thread copy of
// the state and take a new one only when the generation moved, so a lookup takes no lock (one
// atomic load and a reference-count increment) and never waits for a reload.
//
// Results point into the RingState that produced them: a Node's `device` lives as long as that
// state. NodeList and HandoffIterator hold a shared_ptr to it for that reason.
//
// Thread-safety: RingState is immutable, so any thread may use it. Ring is thread-safe. With
// `reload_on_lookup` (Swift's behaviour, the default for tools), the lookup that finds the check
// due performs the reload (stat, and on a change read and parse the file) on its own thread
// while other threads go on with the old state. Servers, whose lookups run on network threads,
// open their rings with a RingReloader (ring_reloader.h) instead: its thread does the checks
// and lookups never touch the file.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/hash_path.h"
#include "common/status.h"
#include "ring/ring_data.h"

namespace apus::common::io {
class Fs;
}

namespace apus::ring {

class RingReloader;

// One device in a lookup result.
struct Node {
  const Device* device = nullptr;  // into the RingState that answered; never null
  // Primaries: the position among the partition's primaries, 0..n-1 (Swift's `index`).
  // Handoffs: the position in the handoff order, 0, 1, 2, ... (Swift's `handoff_index`).
  uint32_t index = 0;

  int id() const { return device->id; }
};

class RingState;

// Swift's get_more_nodes() generator: the handoff devices of a partition in Swift's order,
// produced one at a time, so a caller pays only for the handoffs it takes. Typical use:
//   HandoffIterator it = state->get_more_nodes(part);
//   Node n;
//   while (it.next(&n)) { ... }
// Holds the state it walks. Thread-compatible (one thread at a time); cheap to move. Keeps its
// bookkeeping inline for rings of up to kInlineBits devices, regions, zones and servers; a
// bigger ring costs one allocation per iterator.
class HandoffIterator {
 public:
  HandoffIterator(std::shared_ptr<const RingState> state, uint32_t part);

  // Stores the next handoff in *out and returns true, or returns false when there are no more.
  bool next(Node* out);
  // Appends up to n further handoffs to *out; returns how many it appended.
  size_t take(size_t n, std::vector<Node>* out);

  static constexpr size_t kInlineBits = 1024;

 private:
  // A set of small integers with inline storage and a heap fallback.
  class Bits {
   public:
    void reset(size_t bits);
    bool test(uint32_t i) const { return (words()[i >> 6] >> (i & 63)) & 1; }
    void set(uint32_t i) { words()[i >> 6] |= uint64_t{1} << (i & 63); }

   private:
    uint64_t* words() { return heap_ ? heap_.get() : inline_.data(); }
    const uint64_t* words() const { return heap_ ? heap_.get() : inline_.data(); }
    std::array<uint64_t, kInlineBits / 64> inline_{};
    std::unique_ptr<uint64_t[]> heap_;
  };

  // Advances to the next candidate partition of the scan; false at the end of the scan.
  bool advance_candidate();
  // Whether the current pass has seen everything it looks for.
  bool pass_complete() const;
  void start_pass();

  std::shared_ptr<const RingState> state_;
  uint64_t parts_ = 0;  // partitions in the first row
  uint64_t start_ = 0;  // first candidate partition
  uint64_t inc_ = 1;    // step between candidates
  // Scan position: pass 0 (new region), 1 (new zone), 2 (new server), 3 (unused device),
  // 4 (done); segment 0 (start..parts) or 1 (wrapped, below start); candidate; replica row.
  int pass_ = 0;
  int segment_ = 0;
  uint64_t candidate_ = 0;
  size_t row_ = 0;
  bool pass_started_ = false;
  uint32_t next_index_ = 0;  // handoff_index of the next yield
  Bits used_, regions_, zones_, ips_;
  uint32_t used_count_ = 0, region_count_ = 0, zone_count_ = 0, ip_count_ = 0;
};

// One immutable ring: the RingData plus what lookups need precomputed. Create it with
// create(); share it by shared_ptr.
class RingState : public std::enable_shared_from_this<RingState> {
 public:
  // Validates `data` (validate_ring_data: InvalidArgument) and precomputes the tier tables.
  static common::Result<std::shared_ptr<const RingState>> create(RingData data);

  const RingData& data() const { return data_; }
  // Devices by id; removed ids are nullopt.
  const std::vector<std::optional<Device>>& devs() const { return data_.devs; }
  int part_power() const { return data_.part_power(); }
  uint64_t partition_count() const { return parts_; }
  // Full and fractional replicas, as Swift's replica_count.
  double replica_count() const { return data_.replica_count(); }
  // Devices that are not null / that have weight > 0 / that hold at least one partition.
  size_t device_count() const { return num_devs_; }
  size_t weighted_device_count() const { return num_weighted_devs_; }
  size_t assigned_device_count() const { return num_assigned_devs_; }

  // The partition of a name hash (its first 4 bytes, big-endian, shifted by part_shift).
  uint32_t partition_of(const common::PathHash& hash) const;
  // The partition of account [/ container [/ object]]. InvalidArgument for an object without
  // a container (hash_path's rule).
  common::Result<uint32_t> get_part(const common::HashPathConfig& hash, std::string_view account,
                                    std::string_view container = {},
                                    std::string_view object = {}) const;
  // Replaces *out with the primaries of `part`: for each replica row in order the device
  // holding `part`, each device once, `index` = position. Empty for a partition the ring does
  // not have. The Nodes live as long as this state.
  void get_part_nodes(uint32_t part, std::vector<Node>* out) const;
  // The handoff generator for `part` (holds a reference to this state). REQUIRES: this state
  // is owned by a shared_ptr (create() guarantees it).
  HandoffIterator get_more_nodes(uint32_t part) const;
  // Replaces *out with the first n handoffs of `part`.
  void get_handoffs(uint32_t part, size_t n, std::vector<Node>* out) const;

 private:
  friend class HandoffIterator;
  // Dense indices of a device's tiers among the devices that hold partitions: region,
  // (region, zone) and (region, zone, ip), as Swift's tiers_for_dev groups them.
  struct Tiers {
    uint32_t region = 0;
    uint32_t zone = 0;
    uint32_t ip = 0;
  };

  explicit RingState(RingData data) : data_(std::move(data)) {}
  void precompute();

  RingData data_;
  uint64_t parts_ = 0;
  std::vector<Tiers> tiers_;  // by device id; meaningful for assigned devices only
  // Totals over devices holding at least one partition: Swift's early stops in
  // get_more_nodes compare against these.
  uint32_t num_regions_ = 0;
  uint32_t num_zones_ = 0;
  uint32_t num_ips_ = 0;
  uint32_t num_assigned_devs_ = 0;
  size_t num_devs_ = 0;
  size_t num_weighted_devs_ = 0;
};

// Lookup results that keep their RingState alive.
struct NodeList {
  uint32_t partition = 0;
  std::vector<Node> nodes;
  std::shared_ptr<const RingState> state;  // owner of nodes[i].device
};

struct RingOptions {
  // How often at most the file is checked for a change (Swift's reload_time, default 15 s).
  std::chrono::nanoseconds reload_time = std::chrono::seconds(15);
  // Check (and reload) inside lookups, as Swift does. When false only check_reload() reloads.
  // Ignored when `reloader` is set.
  bool reload_on_lookup = true;
  // When set, open() registers the ring with this reloader, whose thread keeps it current at
  // the reloader's own interval (reload_time is then unused), and lookups never reload.
  std::shared_ptr<RingReloader> reloader;
  // Filesystem for stat and read; nullptr means common::io::default_fs().
  common::io::Fs* fs = nullptr;
  // Time source for the reload cadence; empty means std::chrono::steady_clock::now.
  std::function<std::chrono::steady_clock::time_point()> clock;
};

// A `.ring.gz` file kept current. See the file comment for threading and reload behaviour.
class Ring {
 public:
  // Loads `path` (blocking). NotFound if missing, Corruption if unreadable as a ring, the Fs
  // error otherwise. `hash` (swift.conf's prefix and suffix) is copied.
  static common::Result<std::unique_ptr<Ring>> open(std::string path, common::HashPathConfig hash,
                                                    RingOptions options = {});
  // A ring without a file (never reloads), e.g. from a builder. InvalidArgument if `data`
  // is malformed.
  static common::Result<std::unique_ptr<Ring>> from_data(RingData data,
                                                         common::HashPathConfig hash);

  Ring(const Ring&) = delete;
  Ring& operator=(const Ring&) = delete;
  // Unregisters from its reloader (waiting for a check in progress).
  ~Ring();

  // The current state, after a reload check if one is due (see RingOptions). Never null.
  std::shared_ptr<const RingState> state() const;

  // The lookups of Swift's Ring, each on the current state.
  common::Result<uint32_t> get_part(std::string_view account, std::string_view container = {},
                                    std::string_view object = {}) const;
  NodeList get_part_nodes(uint32_t part) const;
  common::Result<NodeList> get_nodes(std::string_view account, std::string_view container = {},
                                     std::string_view object = {}) const;
  HandoffIterator get_more_nodes(uint32_t part) const;

  double replica_count() const { return state()->replica_count(); }
  uint64_t partition_count() const { return state()->partition_count(); }
  int part_power() const { return state()->part_power(); }
  // Set only while the ring's partition power is being increased.
  std::optional<int> next_part_power() const { return state()->data().next_part_power; }
  const std::string& path() const { return path_; }
  const common::HashPathConfig& hash_config() const { return hash_; }

  // Checks the file now if `reload_time` has passed since the last check (or always when
  // `force`), and swaps in a new state when its mtime or size changed. Returns whether it
  // swapped. Blocking; call from a disk pool thread. On failure (file missing, corrupt) the
  // current state stays and the error is returned; the next check retries.
  common::Result<bool> check_reload(bool force = false);

 private:
  Ring(std::string path, common::HashPathConfig hash, RingOptions options);
  int64_t now_ns() const;
  void maybe_reload() const;
  // REQUIRES: reload_mu_ held.
  common::Result<bool> reload_locked(int64_t now) const;

  const std::string path_;  // empty for from_data()
  const common::HashPathConfig hash_;
  const RingOptions options_;
  common::io::Fs& fs_;

  // Swaps in a new state and bumps generation_.
  void publish(std::shared_ptr<const RingState> state) const;

  // The current state. Read and written only through std::atomic_load / std::atomic_store
  // (libstdc++ 12's std::atomic<std::shared_ptr> guards its pointer with a lock bit that
  // ThreadSanitizer cannot see, so every concurrent test would report a false race). Readers
  // go through their thread's cached copy (ring.cpp) and touch current_ only after a reload.
  mutable std::shared_ptr<const RingState> current_;
  mutable std::atomic<uint64_t> generation_{0};  // bumped by publish()
  const uint64_t id_;  // names this ring in the per-thread caches
  // steady-clock nanoseconds before which no check is made.
  mutable std::atomic<int64_t> next_check_ns_{0};
  // Serialises reloads; lookups only try_lock it, so they never wait on a reload.
  mutable std::mutex reload_mu_;
  // Identity of the file behind state_. Guarded by reload_mu_.
  mutable int64_t loaded_mtime_ns_ = 0;
  mutable uint64_t loaded_size_ = 0;
};

// Swift's whataremyips(bind_ip): `bind_ip` itself, or every address of the host's interfaces
// when it is 0.0.0.0 or ::.
std::vector<std::string> local_ips(const std::string& bind_ip);
// Whether `dev` is served here: its replication address is one of `my_ips` and its replication
// port `my_port` (what Swift's replicators take as their own devices).
bool is_local_device(const std::vector<std::string>& my_ips, int my_port, const Device& dev);

}  // namespace apus::ring
