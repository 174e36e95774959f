#include "ring/ring.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>

#include <algorithm>
#include <charconv>
#include <map>
#include <tuple>
#include <utility>

#include "common/crypto/md5.h"
#include "common/io/fs.h"
#include "common/log/log.h"
#include "ring/ring_reloader.h"

namespace apus::ring {

using common::Result;
using common::Status;

// --- HandoffIterator

void HandoffIterator::Bits::reset(size_t bits) {
  const size_t words = (bits + 63) / 64;
  if (words <= inline_.size()) {
    heap_.reset();
    inline_.fill(0);
  } else {
    heap_.reset(new uint64_t[words]());
  }
}

HandoffIterator::HandoffIterator(std::shared_ptr<const RingState> state, uint32_t part)
    : state_(std::move(state)) {
  const RingState& s = *state_;
  const auto& rows = s.data_.replica2part2dev;
  if (rows.empty()) {
    // Swift fails here (an empty ring has no first row); there is simply nothing to hand off to.
    pass_ = 4;
    return;
  }
  used_.reset(s.data_.devs.size());
  regions_.reset(s.num_regions_);
  zones_.reset(s.num_zones_);
  ips_.reset(s.num_ips_);
  // The primaries and their tiers count as already seen.
  for (const auto& row : rows) {
    if (part >= row.size()) continue;
    const uint16_t id = row[part];
    if (used_.test(id)) continue;
    used_.set(id), ++used_count_;
    const RingState::Tiers& t = s.tiers_[id];
    if (!regions_.test(t.region)) regions_.set(t.region), ++region_count_;
    if (!zones_.test(t.zone)) zones_.set(t.zone), ++zone_count_;
    if (!ips_.test(t.ip)) ips_.set(t.ip), ++ip_count_;
  }
  // The scan starts at a partition derived from MD5 of the partition number's decimal text,
  // and steps so that at most 65536 partitions are visited per pass.
  char text[16];
  const auto r = std::to_chars(text, text + sizeof(text), part);
  const common::crypto::Md5Digest d =
      common::crypto::md5(std::string_view(text, static_cast<size_t>(r.ptr - text)));
  const uint64_t top =
      (uint64_t{d[0]} << 24) | (uint64_t{d[1]} << 16) | (uint64_t{d[2]} << 8) | uint64_t{d[3]};
  parts_ = rows.front().size();
  start_ = top >> s.data_.part_shift;  // a 64-bit shift, so part_shift 32 gives 0 as in Python
  inc_ = parts_ / 65536;
  if (inc_ == 0) inc_ = 1;
}

void HandoffIterator::start_pass() {
  segment_ = 0;
  candidate_ = start_;
  row_ = 0;
  pass_started_ = true;
}

bool HandoffIterator::advance_candidate() {
  row_ = 0;
  candidate_ += inc_;
  if (segment_ == 0 && candidate_ >= parts_) {
    // Wrap around to the partitions below start_ in the same residue class. Swift's formula,
    // kept literally: when (parts - start) is a multiple of inc it begins at inc, not 0.
    segment_ = 1;
    candidate_ = inc_ - ((parts_ - start_) % inc_);
  }
  return !(segment_ == 1 && candidate_ >= start_);
}

bool HandoffIterator::pass_complete() const {
  const RingState& s = *state_;
  switch (pass_) {
    case 0:
      return region_count_ == s.num_regions_;
    case 1:
      return zone_count_ == s.num_zones_;
    case 2:
      return ip_count_ == s.num_ips_;
    default:
      return used_count_ == s.num_assigned_devs_;
  }
}

bool HandoffIterator::next(Node* out) {
  const RingState& s = *state_;
  const auto& rows = s.data_.replica2part2dev;
  while (pass_ < 4) {
    if (!pass_started_) start_pass();
    for (;;) {
      // Swift re-checks "everything seen" before each candidate partition.
      if (row_ == 0 && pass_complete()) break;
      while (row_ < rows.size()) {
        const auto& row = rows[row_++];
        if (candidate_ >= row.size()) continue;
        const uint16_t id = row[candidate_];
        if (used_.test(id)) continue;
        const RingState::Tiers& t = s.tiers_[id];
        // Pass 0 wants a new region, 1 a new zone, 2 a new server, 3 any unused device. Each
        // pass records what later passes look at, as Swift's sets do.
        if (pass_ == 0 && regions_.test(t.region)) continue;
        if (pass_ == 1 && zones_.test(t.zone)) continue;
        if (pass_ == 2 && ips_.test(t.ip)) continue;
        used_.set(id), ++used_count_;
        if (pass_ == 0) regions_.set(t.region), ++region_count_;
        if (pass_ <= 1 && !zones_.test(t.zone)) zones_.set(t.zone), ++zone_count_;
        if (pass_ <= 2 && !ips_.test(t.ip)) ips_.set(t.ip), ++ip_count_;
        out->device = &*s.data_.devs[id];
        out->index = next_index_++;
        return true;
      }
      if (!advance_candidate()) break;
    }
    ++pass_;
    pass_started_ = false;
  }
  return false;
}

size_t HandoffIterator::take(size_t n, std::vector<Node>* out) {
  size_t got = 0;
  Node node;
  while (got < n && next(&node)) {
    out->push_back(node);
    ++got;
  }
  return got;
}

// --- RingState

Result<std::shared_ptr<const RingState>> RingState::create(RingData data) {
  APUS_RETURN_IF_ERROR(validate_ring_data(data));
  // Not make_shared: the constructor is private.
  std::shared_ptr<RingState> state(new RingState(std::move(data)));
  state->precompute();
  return std::shared_ptr<const RingState>(std::move(state));
}

void RingState::precompute() {
  const auto& rows = data_.replica2part2dev;
  parts_ = rows.empty() ? (uint64_t{1} << part_power()) : rows.front().size();
  std::vector<uint8_t> assigned(data_.devs.size(), 0);
  for (const auto& row : rows) {
    for (const uint16_t id : row) assigned[id] = 1;
  }
  // Number the tiers in order of first appearance; only equality matters to the lookups.
  std::map<int, uint32_t> regions;
  std::map<std::pair<int, int>, uint32_t> zones;
  std::map<std::tuple<int, int, std::string>, uint32_t> ips;
  tiers_.assign(data_.devs.size(), Tiers{});
  for (size_t id = 0; id < data_.devs.size(); ++id) {
    const auto& dev = data_.devs[id];
    if (!dev) continue;
    ++num_devs_;
    if (dev->weight > 0) ++num_weighted_devs_;
    if (!assigned[id]) continue;
    ++num_assigned_devs_;
    Tiers& t = tiers_[id];
    t.region =
        regions.try_emplace(dev->region, static_cast<uint32_t>(regions.size())).first->second;
    t.zone = zones.try_emplace({dev->region, dev->zone}, static_cast<uint32_t>(zones.size()))
                 .first->second;
    t.ip = ips.try_emplace({dev->region, dev->zone, dev->ip}, static_cast<uint32_t>(ips.size()))
               .first->second;
  }
  num_regions_ = static_cast<uint32_t>(regions.size());
  num_zones_ = static_cast<uint32_t>(zones.size());
  num_ips_ = static_cast<uint32_t>(ips.size());
}

uint32_t RingState::partition_of(const common::PathHash& hash) const {
  return common::partition_of(hash, static_cast<unsigned>(part_power()));
}

Result<uint32_t> RingState::get_part(const common::HashPathConfig& hash, std::string_view account,
                                     std::string_view container, std::string_view object) const {
  Result<common::PathHash> digest = common::hash_path(hash, account, container, object);
  if (!digest.ok()) return digest.status();
  return partition_of(*digest);
}

void RingState::get_part_nodes(uint32_t part, std::vector<Node>* out) const {
  out->clear();
  for (const auto& row : data_.replica2part2dev) {
    if (part >= row.size()) continue;
    const uint16_t id = row[part];
    bool seen = false;
    for (const Node& n : *out) seen = seen || n.device->id == id;
    if (!seen) out->push_back(Node{&*data_.devs[id], static_cast<uint32_t>(out->size())});
  }
}

HandoffIterator RingState::get_more_nodes(uint32_t part) const {
  return HandoffIterator(shared_from_this(), part);
}

void RingState::get_handoffs(uint32_t part, size_t n, std::vector<Node>* out) const {
  out->clear();
  HandoffIterator it = get_more_nodes(part);
  it.take(n, out);
}

// --- Ring

namespace {

// Each thread keeps its last copy of each ring's state with the generation it had. While the
// generation is unchanged (every lookup but the first after a reload) a lookup costs one atomic
// load and a reference-count increment: no lock. A few rings per process, so a small vector.
struct CachedState {
  uint64_t ring_id;
  uint64_t generation;
  std::shared_ptr<const RingState> state;
};
thread_local std::vector<CachedState> t_cached_states;

std::atomic<uint64_t> g_next_ring_id{1};

}  // namespace

Ring::Ring(std::string path, common::HashPathConfig hash, RingOptions options)
    : path_(std::move(path)),
      hash_(std::move(hash)),
      options_(std::move(options)),
      fs_(options_.fs != nullptr ? *options_.fs : common::io::default_fs()),
      id_(g_next_ring_id.fetch_add(1, std::memory_order_relaxed)) {}

Result<std::unique_ptr<Ring>> Ring::open(std::string path, common::HashPathConfig hash,
                                         RingOptions options) {
  std::unique_ptr<Ring> ring(new Ring(std::move(path), std::move(hash), std::move(options)));
  Result<bool> loaded = ring->check_reload(/*force=*/true);
  if (!loaded.ok()) return loaded.status();
  if (ring->options_.reloader) ring->options_.reloader->add(ring.get());
  return ring;
}

Ring::~Ring() {
  if (options_.reloader) options_.reloader->remove(this);
}

Result<std::unique_ptr<Ring>> Ring::from_data(RingData data, common::HashPathConfig hash) {
  Result<std::shared_ptr<const RingState>> state = RingState::create(std::move(data));
  if (!state.ok()) return state.status();
  RingOptions options;
  options.reload_on_lookup = false;
  std::unique_ptr<Ring> ring(new Ring(std::string(), std::move(hash), std::move(options)));
  ring->publish(std::move(*state));
  return ring;
}

int64_t Ring::now_ns() const {
  const auto now = options_.clock ? options_.clock() : std::chrono::steady_clock::now();
  return std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count();
}


std::shared_ptr<const RingState> Ring::state() const {
  maybe_reload();
  const uint64_t generation = generation_.load(std::memory_order_acquire);
  for (CachedState& c : t_cached_states) {
    if (c.ring_id != id_) continue;
    if (c.generation != generation) {
      c.state = std::atomic_load(&current_);  // rare: the first lookup after a swap
      c.generation = generation;
    }
    return c.state;
  }
  t_cached_states.push_back({id_, generation, std::atomic_load(&current_)});
  return t_cached_states.back().state;
}

void Ring::publish(std::shared_ptr<const RingState> state) const {
  std::atomic_store(&current_, std::move(state));
  // Readers that see the new generation reload their cached copy, which is then the new state.
  generation_.fetch_add(1, std::memory_order_release);
}

void Ring::maybe_reload() const {
  if (!options_.reload_on_lookup || options_.reloader || path_.empty()) return;
  const int64_t now = now_ns();
  if (now < next_check_ns_.load(std::memory_order_relaxed)) return;
  // Whoever gets the lock checks; everyone else carries on with the current state.
  std::unique_lock<std::mutex> lock(reload_mu_, std::try_to_lock);
  if (!lock.owns_lock()) return;
  if (now < next_check_ns_.load(std::memory_order_relaxed)) return;  // checked meanwhile
  Result<bool> r = reload_locked(now);
  if (!r.ok()) {
    APUS_LOG_WARNING("ring " + path_ +
                     ": reload failed, keeping the loaded ring: " + r.status().to_string());
  }
}

Result<bool> Ring::check_reload(bool force) {
  if (path_.empty()) return false;
  std::lock_guard<std::mutex> lock(reload_mu_);
  const int64_t now = now_ns();
  if (!force && now < next_check_ns_.load(std::memory_order_relaxed)) return false;
  return reload_locked(now);
}

Result<bool> Ring::reload_locked(int64_t now) const {
  next_check_ns_.store(now + options_.reload_time.count(), std::memory_order_relaxed);
  // stat before reading: if the file changes while we read, the recorded identity is the
  // older one and the next check loads again.
  Result<common::io::FileStat> st = fs_.stat(path_);
  if (!st.ok()) return st.status();
  if (!st->exists) return Status::not_found("ring file " + path_ + " does not exist");
  const bool have_state = std::atomic_load(&current_) != nullptr;
  if (have_state && st->mtime_ns == loaded_mtime_ns_ && st->size == loaded_size_) return false;
  Result<RingData> data = load_ring_file(path_, fs_);
  if (!data.ok()) return data.status();
  Result<std::shared_ptr<const RingState>> state = RingState::create(std::move(*data));
  if (!state.ok()) {
    return Status::corruption("ring file " + path_ + ": " + state.status().message());
  }
  publish(std::move(*state));
  loaded_mtime_ns_ = st->mtime_ns;
  loaded_size_ = st->size;
  return true;
}

Result<uint32_t> Ring::get_part(std::string_view account, std::string_view container,
                                std::string_view object) const {
  return state()->get_part(hash_, account, container, object);
}

NodeList Ring::get_part_nodes(uint32_t part) const {
  NodeList list;
  list.partition = part;
  list.state = state();
  list.state->get_part_nodes(part, &list.nodes);
  return list;
}

Result<NodeList> Ring::get_nodes(std::string_view account, std::string_view container,
                                 std::string_view object) const {
  NodeList list;
  list.state = state();
  Result<uint32_t> part = list.state->get_part(hash_, account, container, object);
  if (!part.ok()) return part.status();
  list.partition = *part;
  list.state->get_part_nodes(*part, &list.nodes);
  return list;
}

HandoffIterator Ring::get_more_nodes(uint32_t part) const { return state()->get_more_nodes(part); }

std::vector<std::string> local_ips(const std::string& bind_ip) {
  if (bind_ip != "0.0.0.0" && bind_ip != "::" && !bind_ip.empty()) return {bind_ip};
  std::vector<std::string> out;
  struct ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return out;
  for (struct ifaddrs* i = list; i; i = i->ifa_next) {
    if (!i->ifa_addr) continue;
    char buf[INET6_ADDRSTRLEN] = {};
    if (i->ifa_addr->sa_family == AF_INET) {
      auto* a = reinterpret_cast<struct sockaddr_in*>(i->ifa_addr);
      if (::inet_ntop(AF_INET, &a->sin_addr, buf, sizeof buf)) out.emplace_back(buf);
    } else if (i->ifa_addr->sa_family == AF_INET6) {
      auto* a = reinterpret_cast<struct sockaddr_in6*>(i->ifa_addr);
      if (::inet_ntop(AF_INET6, &a->sin6_addr, buf, sizeof buf)) out.emplace_back(buf);
    }
  }
  ::freeifaddrs(list);
  return out;
}

bool is_local_device(const std::vector<std::string>& my_ips, int my_port, const Device& dev) {
  return dev.replication_port == my_port &&
         std::find(my_ips.begin(), my_ips.end(), dev.replication_ip) != my_ips.end();
}

}  // namespace apus::ring
