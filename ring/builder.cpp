#include "ring/builder.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <map>
#include <random>
#include <regex>
#include <string>
#include <tuple>
#include <utility>

#include <arpa/inet.h>
#include <openssl/evp.h>

#include "ring/internal/builder_util.h"

namespace apus::ring {

using common::Result;
using common::Status;

namespace internal {

// --- PyRandom: the reference MT19937 with Python's seeding.

void PyRandom::init_genrand(uint32_t s) {
  mt_[0] = s;
  for (int i = 1; i < kN; ++i) {
    mt_[i] = 1812433253u * (mt_[i - 1] ^ (mt_[i - 1] >> 30)) + static_cast<uint32_t>(i);
  }
  mti_ = kN;
}

void PyRandom::init_by_array(const std::vector<uint32_t>& key) {
  init_genrand(19650218u);
  int i = 1;
  std::size_t j = 0;
  const std::size_t len = key.size();
  for (std::size_t k = std::max<std::size_t>(kN, len); k > 0; --k) {
    mt_[i] = (mt_[i] ^ ((mt_[i - 1] ^ (mt_[i - 1] >> 30)) * 1664525u)) + key[j] +
             static_cast<uint32_t>(j);
    ++i;
    ++j;
    if (i >= kN) {
      mt_[0] = mt_[kN - 1];
      i = 1;
    }
    if (j >= len) j = 0;
  }
  for (int k = kN - 1; k > 0; --k) {
    mt_[i] =
        (mt_[i] ^ ((mt_[i - 1] ^ (mt_[i - 1] >> 30)) * 1566083941u)) - static_cast<uint32_t>(i);
    ++i;
    if (i >= kN) {
      mt_[0] = mt_[kN - 1];
      i = 1;
    }
  }
  mt_[0] = 0x80000000u;
}

void PyRandom::seed_int(uint64_t n) {
  std::vector<uint32_t> key;
  if (n == 0) {
    key.push_back(0);
  } else {
    while (n != 0) {
      key.push_back(static_cast<uint32_t>(n & 0xFFFFFFFFu));
      n >>= 32;
    }
  }
  init_by_array(key);
}

void PyRandom::seed_str(std::string_view s) {
  // Python: int.from_bytes(s + sha512(s).digest(), "big"), then its 32-bit words, least
  // significant first, without leading zero words.
  std::string bytes(s);
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int digest_len = 0;
  EVP_Digest(s.data(), s.size(), digest, &digest_len, EVP_sha512(), nullptr);
  bytes.append(reinterpret_cast<const char*>(digest), digest_len);
  std::vector<uint32_t> key;
  for (std::size_t end = bytes.size(); end > 0;) {
    const std::size_t begin = end >= 4 ? end - 4 : 0;
    uint32_t w = 0;
    for (std::size_t k = begin; k < end; ++k) w = (w << 8) | static_cast<uint8_t>(bytes[k]);
    key.push_back(w);
    end = begin;
  }
  while (key.size() > 1 && key.back() == 0) key.pop_back();
  init_by_array(key);
}

uint32_t PyRandom::genrand() {
  static constexpr int kM = 397;
  static constexpr uint32_t kMatrixA = 0x9908b0dfu;
  static constexpr uint32_t kUpper = 0x80000000u;
  static constexpr uint32_t kLower = 0x7fffffffu;
  if (mti_ >= kN) {
    if (mti_ == kN + 1) init_genrand(5489u);
    int kk = 0;
    for (; kk < kN - kM; ++kk) {
      const uint32_t y = (mt_[kk] & kUpper) | (mt_[kk + 1] & kLower);
      mt_[kk] = mt_[kk + kM] ^ (y >> 1) ^ ((y & 1u) ? kMatrixA : 0u);
    }
    for (; kk < kN - 1; ++kk) {
      const uint32_t y = (mt_[kk] & kUpper) | (mt_[kk + 1] & kLower);
      mt_[kk] = mt_[kk + (kM - kN)] ^ (y >> 1) ^ ((y & 1u) ? kMatrixA : 0u);
    }
    const uint32_t y = (mt_[kN - 1] & kUpper) | (mt_[0] & kLower);
    mt_[kN - 1] = mt_[kM - 1] ^ (y >> 1) ^ ((y & 1u) ? kMatrixA : 0u);
    mti_ = 0;
  }
  uint32_t y = mt_[mti_++];
  y ^= (y >> 11);
  y ^= (y << 7) & 0x9d2c5680u;
  y ^= (y << 15) & 0xefc60000u;
  y ^= (y >> 18);
  return y;
}

uint64_t PyRandom::getrandbits(int k) {
  if (k <= 32) return genrand() >> (32 - k);
  // Python fills 32-bit words from the least significant up; the last keeps its top bits.
  const uint64_t low = genrand();
  const uint64_t high = genrand() >> (64 - k);
  return low | (high << 32);
}

uint64_t PyRandom::randbelow(uint64_t n) {
  int k = 0;
  for (uint64_t v = n; v != 0; v >>= 1) ++k;  // n.bit_length()
  uint64_t r = getrandbits(k);
  while (r >= n) r = getrandbits(k);
  return r;
}

// --- Formatting and addresses.

std::string py_float_repr(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific);
  std::string sci(buf, res.ptr);  // shortest round trip: [-]d[.ddd]e[+-]XX
  std::string sign;
  if (!sci.empty() && sci[0] == '-') {
    sign = "-";
    sci.erase(0, 1);
  }
  const std::size_t e = sci.find('e');
  std::string digits = sci.substr(0, e);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  const int exp = std::stoi(sci.substr(e + 1));
  const int n = static_cast<int>(digits.size());
  if (exp >= -4 && exp < 16) {
    if (exp >= 0) {
      if (n <= exp + 1) return sign + digits + std::string(exp + 1 - n, '0') + ".0";
      return sign + digits.substr(0, exp + 1) + "." + digits.substr(exp + 1);
    }
    return sign + "0." + std::string(-exp - 1, '0') + digits;
  }
  std::string out = sign + digits.substr(0, 1);
  if (n > 1) out += "." + digits.substr(1);
  char ebuf[16];
  std::snprintf(ebuf, sizeof(ebuf), "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
  return out + ebuf;
}

std::string strprintf(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  va_list ap2;
  va_copy(ap2, ap);
  const int n = std::vsnprintf(nullptr, 0, fmt, ap);
  va_end(ap);
  std::string out(n > 0 ? static_cast<std::size_t>(n) : 0, '\0');
  if (n > 0) std::vsnprintf(out.data(), out.size() + 1, fmt, ap2);
  va_end(ap2);
  return out;
}

static std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

static bool is_valid_ipv4(const std::string& ip) {
  in_addr a{};
  return ::inet_pton(AF_INET, ip.c_str(), &a) == 1;
}

bool is_valid_ipv6(std::string_view ip) {
  in6_addr a{};
  return ::inet_pton(AF_INET6, std::string(ip).c_str(), &a) == 1;
}

static std::string expand_ipv6(const std::string& ip) {
  in6_addr a{};
  ::inet_pton(AF_INET6, ip.c_str(), &a);
  char buf[INET6_ADDRSTRLEN];
  ::inet_ntop(AF_INET6, &a, buf, sizeof(buf));
  return buf;
}

// RFC 1123 host name, as Swift's is_valid_hostname checks it.
static bool is_valid_hostname(std::string_view host) {
  if (host.empty() || host.size() > 255) return false;
  if (host.back() == '.') host.remove_suffix(1);
  std::size_t start = 0;
  for (;;) {
    const std::size_t dot = host.find('.', start);
    const std::string_view label =
        host.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
    if (label.empty() || label.size() > 63 || label.front() == '-' || label.back() == '-') {
      return false;
    }
    for (char c : label) {
      const bool ok =
          (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
      if (!ok) return false;
    }
    if (dot == std::string_view::npos) return true;
    start = dot + 1;
  }
}

std::optional<std::string> normalize_ip(std::string_view ip) {
  const std::string l = lower(ip);
  if (is_valid_ipv4(l)) return l;
  if (is_valid_ipv6(l)) return expand_ipv6(l);
  return std::nullopt;
}

std::optional<std::string> normalize_address(std::string_view address) {
  std::string_view inner = address;
  while (!inner.empty() && inner.front() == '[') inner.remove_prefix(1);
  while (!inner.empty() && inner.back() == ']') inner.remove_suffix(1);
  if (!address.empty() && address.front() == '[' && address.back() == ']') {
    return normalize_ip(inner);
  }
  const std::string l = lower(inner);
  if (is_valid_ipv4(l)) return l;
  if (is_valid_ipv6(l)) return expand_ipv6(l);
  if (is_valid_hostname(l)) return l;
  return std::nullopt;
}

}  // namespace internal

using internal::py_float_repr;
using internal::PyRandom;
using internal::strprintf;

namespace {

constexpr int kMaxBalanceGatherCount = 3;  // Swift's MAX_BALANCE_GATHER_COUNT
constexpr double kEpsilon = 1e-10;         // Swift's tolerance on replicanth sums
// The plan loops converge in a handful of rounds; a cap turns a pathological input into an
// error instead of a hang.
constexpr int kMaxPlanRounds = 10000;

double now_seconds() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

// Python's `int(x) // 3600`-style helpers on possibly negative values.
int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

bool valid_device_name(const std::string& name) {
  return !name.empty() && name.front() != ' ' && name.back() != ' ';
}

// One node of the tier tree: root (depth 0), region, zone, server (ip), device.
struct Tier {
  int depth = 0;
  int region = 0;
  int zone = 0;
  std::string ip;
  int dev_id = -1;
  std::vector<int> children;  // tiers below holding weighted devices, in Python tuple order
  int weighted_devs = 0;      // weighted devices at or below this tier
};

// Python tuple order of two tiers (a shorter tuple that is a prefix sorts first).
bool tier_less(const Tier& a, const Tier& b) {
  for (int level = 1; level <= std::min(a.depth, b.depth); ++level) {
    switch (level) {
      case 1:
        if (a.region != b.region) return a.region < b.region;
        break;
      case 2:
        if (a.zone != b.zone) return a.zone < b.zone;
        break;
      case 3:
        if (a.ip != b.ip) return a.ip < b.ip;
        break;
      default:
        if (a.dev_id != b.dev_id) return a.dev_id < b.dev_id;
        break;
    }
  }
  return a.depth < b.depth;
}

// Counts of a partition's replicas per tier. A partition has few replicas, each on 4 tiers, so
// a short list beats any map.
class TierCounts {
 public:
  void clear() { v_.clear(); }
  int get(int tier) const {
    for (const auto& [t, c] : v_) {
      if (t == tier) return c;
    }
    return 0;
  }
  void add(int tier, int delta) {
    for (auto& [t, c] : v_) {
      if (t == tier) {
        c += delta;
        return;
      }
    }
    v_.emplace_back(tier, delta);
  }
  const std::vector<std::pair<int, int>>& items() const { return v_; }

 private:
  std::vector<std::pair<int, int>> v_;
};

// The tiers of every device (weighted or not) and the tree of weighted ones.
struct TierTree {
  std::vector<Tier> tiers;                    // [0] is the root
  std::vector<std::array<int, 4>> dev_tiers;  // by device id: region, zone, server, device tier

  // Builds from the devices present (all of them get tiers; only weighted ones are linked).
  explicit TierTree(const std::vector<std::optional<BuilderDevice>>& devs) {
    tiers.emplace_back();
    dev_tiers.assign(devs.size(), {-1, -1, -1, -1});
    std::map<int, int> regions;
    std::map<std::pair<int, int>, int> zones;
    std::map<std::tuple<int, int, std::string>, int> servers;
    auto make = [&](int depth, const BuilderDevice& d) {
      Tier t;
      t.depth = depth;
      t.region = d.region;
      t.zone = depth >= 2 ? d.zone : 0;
      if (depth >= 3) t.ip = d.ip;
      t.dev_id = depth >= 4 ? d.id : -1;
      tiers.push_back(std::move(t));
      return static_cast<int>(tiers.size()) - 1;
    };
    for (const auto& od : devs) {
      if (!od) continue;
      const BuilderDevice& d = *od;
      auto [ri, rnew] = regions.try_emplace(d.region, 0);
      if (rnew) ri->second = make(1, d);
      auto [zi, znew] = zones.try_emplace({d.region, d.zone}, 0);
      if (znew) zi->second = make(2, d);
      auto [si, snew] = servers.try_emplace({d.region, d.zone, d.ip}, 0);
      if (snew) si->second = make(3, d);
      const int dt = make(4, d);
      dev_tiers[d.id] = {ri->second, zi->second, si->second, dt};
      if (d.weight > 0) {
        const std::array<int, 5> chain = {0, ri->second, zi->second, si->second, dt};
        for (int k = 0; k < 5; ++k) {
          ++tiers[chain[k]].weighted_devs;
          if (k > 0) {
            auto& ch = tiers[chain[k - 1]].children;
            if (std::find(ch.begin(), ch.end(), chain[k]) == ch.end()) ch.push_back(chain[k]);
          }
        }
      }
    }
    for (auto& t : tiers) {
      std::sort(t.children.begin(), t.children.end(),
                [&](int a, int b) { return tier_less(tiers[a], tiers[b]); });
    }
  }

  std::size_t size() const { return tiers.size(); }
  bool weighted(int t) const { return tiers[t].weighted_devs > 0; }

  // Swift's _build_max_replicas_by_tier over the weighted tree; ceil_bound picks math.ceil
  // over float as the per-child bound. Tiers without weighted devices get 0.
  std::vector<double> max_replicas(double replicas, bool ceil_bound) const {
    std::vector<double> out(tiers.size(), 0.0);
    walk_max(0, replicas, ceil_bound, out);
    return out;
  }

  std::string name(int t, const std::vector<std::optional<BuilderDevice>>& devs) const {
    const Tier& x = tiers[t];
    switch (x.depth) {
      case 1:
        return strprintf("r%d", x.region);
      case 2:
        return strprintf("r%dz%d", x.region, x.zone);
      case 3:
        return strprintf("r%dz%d-%s", x.region, x.zone, x.ip.c_str());
      case 4: {
        std::string dev_name = strprintf("IDd%d", x.dev_id);
        if (x.dev_id >= 0 && static_cast<std::size_t>(x.dev_id) < devs.size() && devs[x.dev_id]) {
          dev_name = devs[x.dev_id]->device;
        }
        return strprintf("r%dz%d-%s/%s", x.region, x.zone, x.ip.c_str(), dev_name.c_str());
      }
      default:
        return "";
    }
  }

 private:
  void walk_max(int t, double count, bool ceil_bound, std::vector<double>& out) const {
    if (tiers[t].depth == 4) count = std::min(1.0, count);
    out[t] = count;
    const auto& ch = tiers[t].children;
    for (int c : ch) {
      double sub = count / static_cast<double>(ch.size());
      if (ceil_bound) sub = std::ceil(sub);
      walk_max(c, sub, ceil_bound, out);
    }
  }
};

// Python's tuple ordering of two sort keys (parts_wanted, random, id).
struct SortKey {
  double parts_wanted;
  int64_t rand;
  int id;
  bool operator<(const SortKey& o) const {
    return std::tie(parts_wanted, rand, id) < std::tie(o.parts_wanted, o.rand, o.id);
  }
};

// Dispersion of an assignment: per-tier replica histograms and the at-risk percentage.
struct DispersionGraph {
  std::vector<std::vector<int64_t>> graph;  // by tier; empty = tier holds no replica
  double dispersion = 0.0;
};

DispersionGraph compute_dispersion(const BuilderState& s, const TierTree& tree) {
  DispersionGraph out;
  const int64_t parts = int64_t{1} << s.part_power;
  const int int_replicas = static_cast<int>(std::ceil(s.replicas));
  const std::vector<double> max_allowed = tree.max_replicas(s.replicas, true);
  out.graph.assign(tree.size(), {});
  double at_risk = 0.0;
  TierCounts counts;
  for (int64_t part = 0; part < parts; ++part) {
    counts.clear();
    for (const auto& row : s.replica2part2dev) {
      if (part >= static_cast<int64_t>(row.size())) continue;
      const uint16_t id = row[part];
      if (id == kNoDevice || id >= tree.dev_tiers.size() || tree.dev_tiers[id][0] < 0) continue;
      for (int t : tree.dev_tiers[id]) counts.add(t, 1);
    }
    std::array<double, 5> depth_risk{};
    for (const auto& [t, c] : counts.items()) {
      auto& g = out.graph[t];
      if (g.empty()) {
        g.assign(static_cast<std::size_t>(std::max(int_replicas, c)) + 1, 0);
        g[0] = parts;
      } else if (static_cast<std::size_t>(c) >= g.size()) {
        g.resize(static_cast<std::size_t>(c) + 1, 0);
      }
      g[0] -= 1;
      g[c] += 1;
      if (c > max_allowed[t]) depth_risk[tree.tiers[t].depth] += c - max_allowed[t];
    }
    at_risk += *std::max_element(depth_risk.begin(), depth_risk.end());
  }
  out.dispersion = 100.0 * at_risk / (static_cast<double>(parts) * s.replicas);
  return out;
}

}  // namespace

// --- The rebalance pass. Works on a copy of the state so a failure leaves the builder as it was.
class RingBuilder::Rebalancer {
 public:
  Rebalancer(BuilderState& s, PyRandom& rng)
      : s_(s), rng_(rng), parts_(int64_t{1} << s.part_power), tree_(s.devs) {}

  Result<double> required_overload() {
    std::vector<double> weighted, wanted;
    Status st = weighted_replicas_by_tier(weighted);
    if (!st.ok()) return st;
    st = wanted_replicas_by_tier(weighted, wanted);
    if (!st.ok()) return st;
    return required_overload_of(weighted, wanted);
  }

  Result<RebalanceResult> run(double now) {
    RebalanceResult result;
    const std::vector<std::vector<uint16_t>> old = s_.replica2part2dev;
    update_last_part_moves(now);

    Status st = build_replica_plan();
    if (!st.ok()) return st;
    st = set_parts_wanted();
    if (!st.ok()) return st;

    adjust_replica2part2dev_size();
    result.removed_devices = gather_from_failed_devices();
    gather_for_dispersion();

    for (int gather = 0; gather < kMaxBalanceGatherCount; ++gather) {
      gather_for_balance(gather == 0);
      if (gathered_.empty()) break;
      std::vector<GatheredPart> list = take_gathered();
      // No preference in which order the plan is fulfilled.
      rng_.shuffle(list);
      reassign(list);
      bool overweight = false;
      for (const auto& d : s_.devs) {
        if (d && d->parts_wanted < 0) overweight = true;
      }
      if (!overweight) break;
    }

    s_.devs_changed = false;
    result.changed_parts = count_changed(old);
    s_.dispersion = compute_dispersion(s_, tree_).dispersion;
    s_.version += 1;
    return result;
  }

 private:
  // --- Partition move bookkeeping (min_part_hours).
  void update_last_part_moves(double now) {
    moved_.assign(static_cast<std::size_t>(parts_), 0);
    if (s_.last_part_moves.size() != static_cast<std::size_t>(parts_)) {
      s_.last_part_moves.assign(static_cast<std::size_t>(parts_), 0);
    }
    const int64_t elapsed_hours =
        floor_div(static_cast<int64_t>(now - static_cast<double>(s_.last_part_moves_epoch)), 3600);
    if (elapsed_hours <= 0) return;
    for (auto& h : s_.last_part_moves) {
      const int64_t v = h + elapsed_hours;
      h = static_cast<uint8_t>(v < 0xff ? v : 0xff);
    }
    s_.last_part_moves_epoch = static_cast<int64_t>(now);
  }
  void set_moved(int64_t part) {
    s_.last_part_moves[part] = 0;
    moved_[part] = 1;
  }
  bool can_move(int64_t part) const {
    return s_.last_part_moves[part] >= s_.min_part_hours && !moved_[part];
  }

  // --- The replica plan: replicanths per tier from weights, dispersion and overload.
  Status weighted_replicas_by_tier(std::vector<double>& out) {
    double total_weight = 0.0;
    for (const auto& d : s_.devs) {
      if (d) total_weight += d->weight;
    }
    if (total_weight == 0.0) {
      return Status::invalid_argument(
          "There are no devices in this ring, or all devices have been deleted");
    }
    const double weight_of_one_part = static_cast<double>(parts_) * s_.replicas / total_weight;
    std::vector<std::pair<int, double>> per_dev;  // insertion (id) order, like Swift's dict
    std::vector<std::size_t> room;
    for (const auto& d : s_.devs) {
      if (!d || !(d->weight > 0)) continue;
      double wr = d->weight * weight_of_one_part / static_cast<double>(parts_);
      if (wr < 1) {
        room.push_back(per_dev.size());
      } else {
        wr = 1;
      }
      per_dev.emplace_back(d->id, wr);
    }
    for (int round = 0;; ++round) {
      if (round > kMaxPlanRounds) return Status::invalid_argument("weight plan did not converge");
      double sum = 0;
      for (const auto& [id, wr] : per_dev) sum += wr;
      const double remaining = s_.replicas - sum;
      if (remaining < kEpsilon) break;
      std::vector<std::size_t> still;
      for (std::size_t i : room) {
        if (per_dev[i].second < 1) still.push_back(i);
      }
      room = std::move(still);
      double room_sum = 0;
      for (std::size_t i : room) room_sum += per_dev[i].second;
      if (room.empty() || room_sum == 0) {
        return Status::invalid_argument("not enough device weight to place every replica");
      }
      const double rel_weight = remaining / room_sum;
      for (std::size_t i : room) {
        per_dev[i].second = std::min(1.0, per_dev[i].second * (rel_weight + 1));
      }
    }
    out.assign(tree_.size(), 0.0);
    for (const auto& [id, wr] : per_dev) {
      out[0] += wr;
      for (int t : tree_.dev_tiers[id]) out[t] += wr;
    }
    return validate_replicas_by_tier(out);
  }

  Status validate_replicas_by_tier(const std::vector<double>& by_tier) const {
    static const char* const kNames[] = {"cluster", "regions", "zones", "servers", "devices"};
    for (int depth = 0; depth <= 4; ++depth) {
      double sum = 0;
      for (std::size_t t = 0; t < by_tier.size(); ++t) {
        if (tree_.tiers[t].depth == depth && tree_.weighted(static_cast<int>(t))) sum += by_tier[t];
      }
      if (std::abs(s_.replicas - sum) > kEpsilon) {
        return Status::invalid_argument(strprintf("%s != %s at tier %s", py_float_repr(sum).c_str(),
                                                  py_float_repr(s_.replicas).c_str(),
                                                  kNames[depth]));
      }
    }
    return Status();
  }

  Status wanted_replicas_by_tier(const std::vector<double>& weighted, std::vector<double>& out) {
    const std::vector<double> dispersed = tree_.max_replicas(s_.replicas, false);
    out.assign(tree_.size(), 0.0);
    Status st = place_replicas(0, s_.replicas, weighted, dispersed, out);
    if (!st.ok()) return st;
    return validate_replicas_by_tier(out);
  }

  Status place_replicas(int tier, double replicanths, const std::vector<double>& weighted,
                        const std::vector<double>& dispersed, std::vector<double>& wanted) {
    const int num_devices = tree_.tiers[tier].weighted_devs;
    if (replicanths > num_devices) {
      return Status::invalid_argument(strprintf(
          "More replicanths (%s) than devices (%d) in tier (%s)",
          py_float_repr(replicanths).c_str(), num_devices, tree_.name(tier, s_.devs).c_str()));
    }
    wanted[tier] = replicanths;
    const std::vector<int>& subs = tree_.tiers[tier].children;
    if (subs.empty()) return Status();
    const std::size_t n = subs.size();
    std::vector<double> to_place(n, 0.0);
    std::vector<std::size_t> spread(n);
    for (std::size_t i = 0; i < n; ++i) spread[i] = i;
    double remaining = replicanths;
    bool device_limited = false;
    for (int round = 0;; ++round) {
      if (round > kMaxPlanRounds) {
        return Status::invalid_argument("dispersion plan did not converge");
      }
      double spread_weight = 0;
      for (std::size_t i : spread) spread_weight += weighted[subs[i]];
      if (spread.empty() || spread_weight == 0) {
        return Status::invalid_argument("dispersion plan has no tier to place replicas in");
      }
      const double rel_weight = remaining / spread_weight;
      for (std::size_t i : spread) {
        const int t = subs[i];
        double r = to_place[i] + weighted[t] * rel_weight;
        const double dmin = std::floor(dispersed[t]);
        const double dmax = std::ceil(dispersed[t]);
        if (r < dmin) {
          r = dmin;
        } else if (r > dmax && !device_limited) {
          r = dmax;
        }
        if (r > tree_.tiers[t].weighted_devs) r = tree_.tiers[t].weighted_devs;
        to_place[i] = r;
      }
      double placed = 0;
      for (double v : to_place) placed += v;
      remaining = replicanths - placed;
      spread.clear();
      if (remaining < -kEpsilon) {
        for (std::size_t i = 0; i < n; ++i) {
          if (to_place[i] > std::floor(dispersed[subs[i]])) spread.push_back(i);
        }
      } else if (remaining > kEpsilon) {
        for (std::size_t i = 0; i < n; ++i) {
          const int t = subs[i];
          if (tree_.tiers[t].weighted_devs > to_place[i] && to_place[i] < std::ceil(dispersed[t])) {
            spread.push_back(i);
          }
        }
        if (spread.empty()) {
          device_limited = true;
          for (std::size_t i = 0; i < n; ++i) {
            if (to_place[i] < tree_.tiers[subs[i]].weighted_devs) spread.push_back(i);
          }
        }
      } else {
        break;
      }
    }
    for (std::size_t i = 0; i < n; ++i) {
      Status st = place_replicas(subs[i], to_place[i], weighted, dispersed, wanted);
      if (!st.ok()) return st;
    }
    return Status();
  }

  // The overload that full dispersion needs: the largest relative step any device takes from
  // its weighted to its wanted replicanths (Swift's get_required_overload).
  Result<double> required_overload_of(const std::vector<double>& weighted,
                                      const std::vector<double>& wanted) const {
    double max_overload = 0.0;
    for (const auto& d : s_.devs) {
      if (!d) continue;
      const int t = tree_.dev_tiers[d->id][3];
      if (!(d->weight > 0)) {
        if (wanted[t] == 0) continue;
        return Status::invalid_argument(
            strprintf("Device %d has zero weight and should not want any replicas", d->id));
      }
      const double required = (wanted[t] - weighted[t]) / weighted[t];
      if (required > max_overload) max_overload = required;
    }
    return max_overload;
  }

  Status build_replica_plan() {
    std::vector<double> weighted, wanted;
    Status st = weighted_replicas_by_tier(weighted);
    if (!st.ok()) return st;
    st = wanted_replicas_by_tier(weighted, wanted);
    if (!st.ok()) return st;
    Result<double> required = required_overload_of(weighted, wanted);
    if (!required.ok()) return required.status();
    const double max_overload = *required;
    std::vector<double> target = wanted;
    if (max_overload > 0.0) {
      const double overload = std::min(s_.overload, max_overload);
      for (std::size_t t = 0; t < tree_.size(); ++t) {
        if (!tree_.weighted(static_cast<int>(t))) continue;
        const double m = (wanted[t] - weighted[t]) / max_overload;
        target[t] = m * overload + weighted[t];
      }
      st = validate_replicas_by_tier(target);
      if (!st.ok()) return st;
    }
    plan_target_.assign(tree_.size(), 0.0);
    plan_min_.assign(tree_.size(), 0);
    plan_max_.assign(tree_.size(), 0);
    for (std::size_t t = 0; t < tree_.size(); ++t) {
      if (!tree_.weighted(static_cast<int>(t))) continue;
      plan_target_[t] = target[t];
      plan_min_[t] = static_cast<int>(std::floor(target[t] + kEpsilon));
      plan_max_[t] = static_cast<int>(std::ceil(target[t] - kEpsilon));
    }
    return Status();
  }

  // Sets each device's parts_wanted from the plan: the target share of partitions of every
  // tier, split down the tree, minus what the device holds.
  Status set_parts_wanted() {
    std::vector<int64_t> parts_by_tier(tree_.size(), 0);
    const int64_t total = static_cast<int64_t>(s_.replicas * static_cast<double>(parts_));
    place_parts(0, total, parts_by_tier);
    static const char* const kNames[] = {"cluster", "regions", "zones", "servers", "devices"};
    for (int depth = 0; depth <= 4; ++depth) {
      int64_t sum = 0;
      for (std::size_t t = 0; t < tree_.size(); ++t) {
        if (tree_.tiers[t].depth == depth) sum += parts_by_tier[t];
      }
      if (sum != total) {
        return Status::invalid_argument(strprintf("%lld != %lld at tier %s",
                                                  static_cast<long long>(sum),
                                                  static_cast<long long>(total), kNames[depth]));
      }
    }
    for (auto& d : s_.devs) {
      if (!d) continue;
      if (!(d->weight > 0)) {
        d->parts_wanted = -static_cast<double>(parts_) * s_.replicas;
      } else {
        d->parts_wanted = static_cast<double>(parts_by_tier[tree_.dev_tiers[d->id][3]] - d->parts);
      }
    }
    return Status();
  }

  void place_parts(int tier, int64_t parts, std::vector<int64_t>& parts_by_tier) {
    parts_by_tier[tier] = parts;
    const std::vector<int>& subs = tree_.tiers[tier].children;
    if (subs.empty()) return;
    std::vector<int64_t> to_place(subs.size(), 0);
    for (std::size_t i = 0; i < subs.size(); ++i) {
      to_place[i] = std::min<int64_t>(
          parts,
          static_cast<int64_t>(std::floor(plan_target_[subs[i]] * static_cast<double>(parts_))));
      parts -= to_place[i];
    }
    // Whatever is left goes round the children, the least wanted first.
    std::vector<std::size_t> order(subs.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      return plan_target_[subs[a]] < plan_target_[subs[b]];
    });
    for (std::size_t k = 0; parts > 0; ++k, --parts) ++to_place[order[k % order.size()]];
    for (std::size_t i = 0; i < subs.size(); ++i) place_parts(subs[i], to_place[i], parts_by_tier);
  }

  // --- Gathering: (partition, replica) slots to reassign, in the order Swift gathers them.
  void gather(int64_t part, int replica) {
    s_.replica2part2dev[replica][part] = kNoDevice;
    gathered_.emplace_back(part, replica);
  }
  void take_from_dev(BuilderDevice& d, int64_t part, int replica) {
    d.parts_wanted += 1;
    d.parts -= 1;
    gather(part, replica);
  }

  // A partition to reassign: its replicas are gathered_replicas_[begin, begin + count).
  struct GatheredPart {
    int64_t part;
    uint32_t begin;
    uint32_t count;
  };

  // Groups the gathered slots by partition (first-gathered partition first, replicas in gather
  // order, as Swift's dict of lists holds them) into gathered_replicas_, and clears them.
  std::vector<GatheredPart> take_gathered() {
    std::vector<GatheredPart> list;
    if (slot_of_part_.size() != static_cast<std::size_t>(parts_)) {
      slot_of_part_.assign(static_cast<std::size_t>(parts_), -1);
    }
    for (const auto& [part, replica] : gathered_) {
      int64_t& slot = slot_of_part_[part];
      if (slot < 0) {
        slot = static_cast<int64_t>(list.size());
        list.push_back(GatheredPart{part, 0, 0});
      }
      ++list[slot].count;
    }
    uint32_t offset = 0;
    for (GatheredPart& g : list) {
      g.begin = offset;
      offset += g.count;
      g.count = 0;
    }
    gathered_replicas_.resize(offset);
    for (const auto& [part, replica] : gathered_) {
      GatheredPart& g = list[slot_of_part_[part]];
      gathered_replicas_[g.begin + g.count++] = replica;
    }
    for (const GatheredPart& g : list) slot_of_part_[g.part] = -1;
    gathered_.clear();
    return list;
  }

  // Makes the rows match the replica count, gathering the slots a row gains (replica-major,
  // as Swift gathers them) and dropping those it loses.
  void adjust_replica2part2dev_size() {
    auto& rows = s_.replica2part2dev;
    double whole_d = 0;
    const double frac = std::modf(s_.replicas, &whole_d);
    const std::size_t whole = static_cast<std::size_t>(whole_d);
    std::vector<int64_t> desired(whole, parts_);
    if (frac != 0) desired.push_back(static_cast<int64_t>(static_cast<double>(parts_) * frac));

    auto lose = [&](uint16_t id) {
      if (id < s_.devs.size() && s_.devs[id]) s_.devs[id]->parts -= 1;
    };
    if (rows.size() > desired.size()) {
      for (std::size_t r = desired.size(); r < rows.size(); ++r) {
        for (uint16_t id : rows[r]) lose(id);
      }
      rows.resize(desired.size());
    }
    for (std::size_t r = 0; r < desired.size(); ++r) {
      if (r >= rows.size()) rows.emplace_back();
      auto& row = rows[r];
      const int64_t len = static_cast<int64_t>(row.size());
      if (len < desired[r]) {
        for (int64_t part = len; part < desired[r]; ++part) {
          row.push_back(kNoDevice);
          gathered_.emplace_back(part, static_cast<int>(r));
        }
      } else if (len > desired[r]) {
        for (int64_t part = desired[r]; part < len; ++part) lose(row[part]);
        row.resize(static_cast<std::size_t>(desired[r]));
      }
    }
  }

  int gather_from_failed_devices() {
    if (!s_.remove_devs.empty()) {
      std::vector<uint8_t> failing(s_.devs.size(), 0);
      bool any = false;
      for (int id : s_.remove_devs) {
        if (id >= 0 && static_cast<std::size_t>(id) < s_.devs.size() && s_.devs[id] &&
            s_.devs[id]->parts) {
          failing[id] = 1;
          any = true;
        }
      }
      if (any) {
        auto& rows = s_.replica2part2dev;
        for (std::size_t r = 0; r < rows.size(); ++r) {
          for (int64_t part = 0; part < static_cast<int64_t>(rows[r].size()); ++part) {
            const uint16_t id = rows[r][part];
            if (id < failing.size() && failing[id]) {
              gather(part, static_cast<int>(r));
              set_moved(part);
            }
          }
        }
      }
    }
    int removed = 0;
    while (!s_.remove_devs.empty()) {
      const int id = s_.remove_devs.back();
      s_.remove_devs.pop_back();
      if (id >= 0 && static_cast<std::size_t>(id) < s_.devs.size()) s_.devs[id].reset();
      ++removed;
    }
    return removed;
  }

  // The devices holding each replica of part (kNoDevice slots skipped), with tier counts.
  void count_part(int64_t part, TierCounts& counts) const {
    counts.clear();
    for (const auto& row : s_.replica2part2dev) {
      if (part >= static_cast<int64_t>(row.size())) continue;
      const uint16_t id = row[part];
      if (id == kNoDevice) continue;
      for (int t : tree_.dev_tiers[id]) counts.add(t, 1);
    }
  }

  void gather_for_dispersion() {
    TierCounts counts;
    std::vector<std::pair<BuilderDevice*, int>> undispersed;
    for (int64_t part = 0; part < parts_; ++part) {
      if (!can_move(part)) continue;
      count_part(part, counts);
      undispersed.clear();
      for (std::size_t r = 0; r < s_.replica2part2dev.size(); ++r) {
        const auto& row = s_.replica2part2dev[r];
        if (part >= static_cast<int64_t>(row.size())) continue;
        const uint16_t id = row[part];
        if (id == kNoDevice) continue;
        bool ok = true;
        for (int t : tree_.dev_tiers[id]) {
          if (counts.get(t) > plan_max_[t]) ok = false;
        }
        if (!ok) undispersed.emplace_back(&*s_.devs[id], static_cast<int>(r));
      }
      if (undispersed.empty()) continue;
      std::stable_sort(undispersed.begin(), undispersed.end(), [](const auto& a, const auto& b) {
        return a.first->parts_wanted < b.first->parts_wanted;
      });
      for (auto& [dev, replica] : undispersed) {
        const auto& tiers = tree_.dev_tiers[dev->id];
        // Once a partition moved in this pass it stays, unless a device holds it twice (only
        // rings from much older builders have that).
        if (!can_move(part) && !(counts.get(tiers[3]) > 1)) continue;
        take_from_dev(*dev, part, replica);
        for (int t : tiers) counts.add(t, -1);
        set_moved(part);
      }
    }
  }

  void gather_for_balance(bool disperse_first) {
    const int64_t quarter_turn = parts_ / 4;
    const int64_t random_half = rng_.randint(0, parts_ / 2);
    const int64_t start = (s_.last_part_gather_start + quarter_turn + random_half) % parts_;
    s_.last_part_gather_start = start;
    if (disperse_first) gather_for_balance_can_disperse(start);
    gather_for_balance_forced(start);
  }

  // Takes replicas off overweight devices where the plan lets them go to another failure
  // domain that still wants partitions.
  void gather_for_balance_can_disperse(int64_t start) {
    std::vector<double> wanted_in_tier(tree_.size(), 0.0);
    for (const auto& d : s_.devs) {
      if (!d) continue;
      const double w = std::max(d->parts_wanted, 0.0);
      for (int t : tree_.dev_tiers[d->id]) wanted_in_tier[t] += w;
    }
    TierCounts counts;
    std::vector<std::pair<BuilderDevice*, int>> overweight;
    for (int64_t offset = 0; offset < parts_; ++offset) {
      const int64_t part = (start + offset) % parts_;
      if (!can_move(part)) continue;
      counts.clear();
      overweight.clear();
      for (std::size_t r = 0; r < s_.replica2part2dev.size(); ++r) {
        const auto& row = s_.replica2part2dev[r];
        if (part >= static_cast<int64_t>(row.size())) continue;
        const uint16_t id = row[part];
        if (id == kNoDevice) continue;
        for (int t : tree_.dev_tiers[id]) counts.add(t, 1);
        if (s_.devs[id]->parts_wanted < 0)
          overweight.emplace_back(&*s_.devs[id], static_cast<int>(r));
      }
      if (overweight.empty()) continue;
      std::stable_sort(overweight.begin(), overweight.end(), [](const auto& a, const auto& b) {
        return a.first->parts_wanted < b.first->parts_wanted;
      });
      for (auto& [dev, replica] : overweight) {
        const auto& tiers = tree_.dev_tiers[dev->id];
        bool stuck_by_plan = false;
        for (int t : tiers) {
          const int c = counts.get(t);
          if (plan_min_[t] <= c && c < plan_max_[t]) stuck_by_plan = true;
        }
        if (stuck_by_plan) continue;
        int stuck = tiers[0];
        for (int k = 3; k >= 0; --k) {
          if (counts.get(tiers[k]) - 1 < plan_min_[tiers[k]]) {
            stuck = tiers[k];
            break;
          }
        }
        double elsewhere = 0;
        for (int c : tree_.tiers[stuck].children) {
          if (std::find(tiers.begin(), tiers.end(), c) == tiers.end())
            elsewhere += wanted_in_tier[c];
        }
        if (elsewhere <= 0) continue;  // stuck by weight
        take_from_dev(*dev, part, replica);
        for (int t : tiers) {
          counts.add(t, -1);
          wanted_in_tier[t] -= 1;
        }
        set_moved(part);
        break;
      }
    }
  }

  // Takes one replica per partition off the most overweight device holding it, wherever it
  // may end up: the last resort that unlocks replicas the plan would otherwise pin.
  void gather_for_balance_forced(int64_t start) {
    for (int64_t offset = 0; offset < parts_; ++offset) {
      const int64_t part = (start + offset) % parts_;
      if (!can_move(part)) continue;
      BuilderDevice* best = nullptr;
      int best_replica = -1;
      for (std::size_t r = 0; r < s_.replica2part2dev.size(); ++r) {
        const auto& row = s_.replica2part2dev[r];
        if (part >= static_cast<int64_t>(row.size())) continue;
        const uint16_t id = row[part];
        if (id == kNoDevice) continue;
        BuilderDevice* d = &*s_.devs[id];
        // First of the most overweight, as a stable sort would leave it.
        if (d->parts_wanted < 0 && (!best || d->parts_wanted < best->parts_wanted)) {
          best = d;
          best_replica = static_cast<int>(r);
        }
      }
      if (!best) continue;
      take_from_dev(*best, part, best_replica);
      set_moved(part);
    }
  }

  // --- Reassignment: each gathered replica goes down the tree to the child with the most room
  // among those still below their planned maximum for this partition.
  void reassign(const std::vector<GatheredPart>& list) {
    std::vector<double> available(tree_.size(), 0.0);
    std::vector<SortKey> keys(s_.devs.size());
    std::vector<int> weighted_ids;
    for (const auto& d : s_.devs) {
      if (!d) continue;
      keys[d->id] = SortKey{d->parts_wanted, rng_.randint(0, 0xFFFF), d->id};
      const double w = std::max(d->parts_wanted, 0.0);
      for (int t : tree_.dev_tiers[d->id]) available[t] += w;
      if (d->weight > 0) weighted_ids.push_back(d->id);
    }
    std::sort(weighted_ids.begin(), weighted_ids.end(),
              [&](int a, int b) { return keys[a] < keys[b]; });
    // A tier sorts by the key of its most wanting device.
    std::vector<SortKey> tier_key(tree_.size(), SortKey{0, 0, -1});
    for (int id : weighted_ids) {
      for (int t : tree_.dev_tiers[id]) tier_key[t] = keys[id];
    }
    std::vector<std::vector<int>> children(tree_.size());
    for (std::size_t t = 0; t < tree_.size(); ++t) {
      children[t] = tree_.tiers[t].children;
      std::sort(children[t].begin(), children[t].end(),
                [&](int a, int b) { return tier_key[a] < tier_key[b]; });
    }

    TierCounts counts;
    for (const GatheredPart& g : list) {
      const int64_t part = g.part;
      s_.last_part_moves[part] = 0;
      count_part(part, counts);
      for (uint32_t k = 0; k < g.count; ++k) {
        const int replica = gathered_replicas_[g.begin + k];
        int tier = 0;
        for (int depth = 1; depth <= 4; ++depth) {
          int best = -1;
          for (int c : children[tier]) {
            if (counts.get(c) < plan_max_[c] && (best < 0 || available[c] > available[best])) {
              best = c;
            }
          }
          if (best < 0) break;
          tier = best;
        }
        const int dev_id = tree_.tiers[tier].depth == 4 ? tree_.tiers[tier].dev_id
                                                        : fallback_device(counts, available);
        BuilderDevice& dev = *s_.devs[dev_id];
        dev.parts_wanted -= 1;
        dev.parts += 1;
        for (int t : tree_.dev_tiers[dev_id]) {
          available[t] -= 1;
          counts.add(t, 1);
        }
        s_.replica2part2dev[replica][part] = static_cast<uint16_t>(dev_id);
      }
    }
  }

  // When the plan leaves no home for a replica (Swift raises here), picks the weighted device
  // not yet holding the partition that shares the fewest failure domains with its replicas,
  // then the one with most room.
  int fallback_device(const TierCounts& counts, const std::vector<double>& available) const {
    int best = -1;
    std::tuple<int, int, int, int, double> best_key;
    for (const auto& d : s_.devs) {
      if (!d || !(d->weight > 0)) continue;
      const auto& t = tree_.dev_tiers[d->id];
      auto key = std::make_tuple(counts.get(t[3]), counts.get(t[0]), counts.get(t[1]),
                                 counts.get(t[2]), -available[t[3]]);
      if (best < 0 || key < best_key) {
        best = d->id;
        best_key = key;
      }
    }
    return best;
  }

  int64_t count_changed(const std::vector<std::vector<uint16_t>>& old) const {
    int64_t changed = 0;
    const auto& rows = s_.replica2part2dev;
    for (std::size_t r = 0; r < rows.size(); ++r) {
      for (std::size_t part = 0; part < rows[r].size(); ++part) {
        if (r >= old.size() || part >= old[r].size() || old[r][part] != rows[r][part]) ++changed;
      }
    }
    return changed;
  }

 private:
  BuilderState& s_;
  PyRandom& rng_;
  const int64_t parts_;
  TierTree tree_;
  std::vector<double> plan_target_;
  std::vector<int> plan_min_, plan_max_;
  std::vector<uint8_t> moved_;  // partitions moved in this rebalance
  std::vector<std::pair<int64_t, int>> gathered_;
  std::vector<int64_t> slot_of_part_;
  std::vector<int> gathered_replicas_;
};

// --- RingBuilder

Result<RingBuilder> RingBuilder::create(int part_power, double replicas, int min_part_hours) {
  if (part_power < 0 || part_power > kMaxPartPower) {
    return Status::invalid_argument(
        strprintf("part_power must be at most 32 (was %d)", part_power));
  }
  if (!(replicas >= 1) || !std::isfinite(replicas)) {
    return Status::invalid_argument(strprintf("replicas must be at least 1 (was %.6f)", replicas));
  }
  if (replicas > kMaxReplicas) {
    return Status::invalid_argument(
        strprintf("replicas must be at most 65535 (was %.6f)", replicas));
  }
  if (min_part_hours < 0) {
    return Status::invalid_argument(
        strprintf("min_part_hours must be non-negative (was %d)", min_part_hours));
  }
  RingBuilder b;
  b.s_.part_power = part_power;
  b.s_.replicas = replicas;
  b.s_.min_part_hours = min_part_hours;
  b.s_.last_part_moves.assign(static_cast<std::size_t>(b.parts()), 0);
  return b;
}

Result<RingBuilder> RingBuilder::from_state(BuilderState state) {
  if (state.part_power < 0 || state.part_power > kMaxPartPower) {
    return Status::corruption(strprintf("bad part_power %d", state.part_power));
  }
  if (!(state.replicas >= 1) || !(state.replicas <= kMaxReplicas)) {
    return Status::corruption("bad replica count " + py_float_repr(state.replicas));
  }
  if (state.min_part_hours < 0) return Status::corruption("negative min_part_hours");
  if (!(state.overload >= 0) || !std::isfinite(state.overload)) {
    return Status::corruption("bad overload");
  }
  const int64_t parts = int64_t{1} << state.part_power;
  if (state.devs.size() > static_cast<std::size_t>(kMaxDeviceId) + 1) {
    return Status::corruption("too many devices");
  }
  for (std::size_t i = 0; i < state.devs.size(); ++i) {
    auto& d = state.devs[i];
    if (!d) continue;
    if (d->id != static_cast<int>(i)) {
      return Status::corruption(strprintf("device at index %zu has id %d", i, d->id));
    }
    if (!(d->weight >= 0) || !std::isfinite(d->weight)) {
      return Status::corruption(strprintf("device %d has a bad weight", d->id));
    }
    d->parts = 0;
    d->parts_wanted = 0;
  }
  if (!state.replica2part2dev.empty()) {
    const std::size_t want_rows = static_cast<std::size_t>(std::ceil(state.replicas));
    if (state.replica2part2dev.size() > want_rows + 1) {
      return Status::corruption("more assignment rows than replicas");
    }
    for (const auto& row : state.replica2part2dev) {
      if (static_cast<int64_t>(row.size()) > parts) {
        return Status::corruption("assignment row longer than the partition count");
      }
      for (uint16_t id : row) {
        if (id == kNoDevice) continue;
        if (id >= state.devs.size() || !state.devs[id]) {
          return Status::corruption(strprintf("assignment names missing device %u", id));
        }
        state.devs[id]->parts += 1;
      }
    }
  }
  if (state.last_part_moves.size() != static_cast<std::size_t>(parts)) {
    state.last_part_moves.assign(static_cast<std::size_t>(parts), 0);
  }
  std::vector<int> removes;
  for (int id : state.remove_devs) {
    if (id < 0 || static_cast<std::size_t>(id) >= state.devs.size() || !state.devs[id]) {
      return Status::corruption(strprintf("device %d marked for removal does not exist", id));
    }
    if (std::find(removes.begin(), removes.end(), id) == removes.end()) removes.push_back(id);
  }
  state.remove_devs = std::move(removes);
  if (state.next_part_power && (*state.next_part_power < 0 || *state.next_part_power > 32)) {
    return Status::corruption("bad next_part_power");
  }
  RingBuilder b;
  b.s_ = std::move(state);
  return b;
}

Result<RingBuilder> RingBuilder::from_ring_data(const RingData& ring, int min_part_hours) {
  if (min_part_hours < 0) {
    return Status::invalid_argument(
        strprintf("min_part_hours must be non-negative (was %d)", min_part_hours));
  }
  if (ring.replica2part2dev.empty()) {
    return Status::invalid_argument("the ring has no partition assignment");
  }
  BuilderState s;
  s.part_power = ring.part_power();
  s.replicas = ring.replica_count();
  s.min_part_hours = min_part_hours;
  s.version = ring.version.value_or(0);
  s.dispersion = std::nullopt;
  for (const auto& od : ring.devs) {
    if (!od) {
      s.devs.emplace_back();
      continue;
    }
    BuilderDevice d;
    static_cast<Device&>(d) = *od;
    s.devs.emplace_back(std::move(d));
  }
  s.replica2part2dev = ring.replica2part2dev;
  return from_state(std::move(s));
}

bool RingBuilder::marked_for_removal(int id) const {
  return std::find(s_.remove_devs.begin(), s_.remove_devs.end(), id) != s_.remove_devs.end();
}

Result<int> RingBuilder::add_dev(Device dev, std::optional<int> id) {
  if (!(dev.weight >= 0) || !std::isfinite(dev.weight)) {
    return Status::invalid_argument("Invalid weight value: " + py_float_repr(dev.weight));
  }
  if (!valid_device_name(dev.device)) return Status::invalid_argument("Invalid device name");
  if (dev.region < 0) return Status::invalid_argument(strprintf("Invalid region %d", dev.region));
  if (dev.zone < 0) return Status::invalid_argument(strprintf("Invalid zone %d", dev.zone));
  if (dev.ip.empty()) return Status::invalid_argument("Invalid ip (empty)");
  if (dev.replication_ip.empty()) dev.replication_ip = dev.ip;
  if (dev.replication_port == 0) dev.replication_port = dev.port;
  if (dev.port < 0 || dev.port > 65535 || dev.replication_port < 0 ||
      dev.replication_port > 65535) {
    return Status::invalid_argument(strprintf("Invalid port %d", dev.port));
  }
  for (const auto& d : s_.devs) {
    if (d && d->ip == dev.ip && d->port == dev.port && d->device == dev.device) {
      return Status::conflict(strprintf("Device %d already uses %s:%d/%s.", d->id, d->ip.c_str(),
                                        d->port, d->device.c_str()));
    }
  }
  int new_id;
  if (id) {
    new_id = *id;
    if (new_id < 0 || new_id > kMaxDeviceId) {
      return Status::invalid_argument(strprintf("Invalid device id %d", new_id));
    }
    if (static_cast<std::size_t>(new_id) < s_.devs.size() && s_.devs[new_id]) {
      return Status::invalid_argument(strprintf("Duplicate device id: %d", new_id));
    }
  } else {
    auto hole = std::find_if(s_.devs.begin(), s_.devs.end(), [](const auto& d) { return !d; });
    new_id = static_cast<int>(hole - s_.devs.begin());
    if (new_id > kMaxDeviceId) {
      return Status::invalid_argument("no device id left (ids are limited to 0..65534)");
    }
  }
  if (static_cast<std::size_t>(new_id) >= s_.devs.size()) s_.devs.resize(new_id + 1);
  BuilderDevice bd;
  static_cast<Device&>(bd) = std::move(dev);
  bd.id = new_id;
  s_.devs[new_id] = std::move(bd);
  s_.devs_changed = true;
  s_.version += 1;
  return new_id;
}

Status RingBuilder::remove_dev(int id) {
  if (id < 0 || static_cast<std::size_t>(id) >= s_.devs.size() || !s_.devs[id]) {
    return Status::not_found(strprintf("No device with id %d", id));
  }
  s_.devs[id]->weight = 0;
  if (!marked_for_removal(id)) s_.remove_devs.push_back(id);
  s_.devs_changed = true;
  s_.version += 1;
  return Status();
}

Status RingBuilder::set_weight(int id, double weight) {
  if (id < 0 || static_cast<std::size_t>(id) >= s_.devs.size() || !s_.devs[id]) {
    return Status::not_found(strprintf("No device with id %d", id));
  }
  if (!(weight >= 0) || !std::isfinite(weight)) {
    return Status::invalid_argument("Invalid weight value: " + py_float_repr(weight));
  }
  if (marked_for_removal(id)) {
    return Status::invalid_argument(
        strprintf("Can not set weight of dev_id %d because it is marked for removal", id));
  }
  s_.devs[id]->weight = weight;
  s_.devs_changed = true;
  s_.version += 1;
  return Status();
}

Status RingBuilder::set_overload(double overload) {
  if (!(overload >= 0) || !std::isfinite(overload)) {
    return Status::invalid_argument("Overload must be non-negative.");
  }
  s_.overload = overload;
  return Status();
}

Status RingBuilder::set_min_part_hours(int hours) {
  if (hours < 0) return Status::invalid_argument("min_part_hours must be non-negative");
  s_.min_part_hours = hours;
  return Status();
}

Status RingBuilder::set_replicas(double replicas) {
  if (!(replicas >= 1)) return Status::invalid_argument("Replica count must be at least 1.");
  if (!(replicas <= kMaxReplicas)) {
    return Status::invalid_argument("Replica count must be at most 65535.");
  }
  const double p = static_cast<double>(parts());
  if (static_cast<int64_t>(p * s_.replicas) != static_cast<int64_t>(p * replicas)) {
    s_.devs_changed = true;
  }
  s_.replicas = replicas;
  return Status();
}

void RingBuilder::pretend_min_part_hours_passed() {
  s_.last_part_moves_epoch = 0;
  std::fill(s_.last_part_moves.begin(), s_.last_part_moves.end(), 0xff);
}

void RingBuilder::ensure_id() {
  if (!s_.id.empty()) return;
  std::random_device rd;
  std::string hex;
  for (int i = 0; i < 4; ++i) hex += strprintf("%08x", static_cast<unsigned>(rd()));
  s_.id = hex;
}

std::vector<int> RingBuilder::weighted_device_ids() const {
  std::vector<int> ids;
  for (const auto& d : s_.devs) {
    if (d && d->weight > 0) ids.push_back(d->id);
  }
  return ids;
}

double RingBuilder::total_weight() const {
  double sum = 0;
  for (const auto& d : s_.devs) {
    if (d) sum += d->weight;
  }
  return sum;
}

Result<RebalanceResult> RingBuilder::rebalance(const RebalanceOptions& options) {
  if (s_.next_part_power) {
    return Status::conflict("Partition power increase in progress.");
  }
  const std::size_t num_devices = weighted_device_ids().size();
  if (static_cast<double>(num_devices) < s_.replicas) {
    return Status::invalid_argument(strprintf("Replica count of %s requires more than %zu devices",
                                              py_float_repr(s_.replicas).c_str(), num_devices));
  }
  PyRandom rng;
  rng.seed_str(options.seed ? *options.seed : "apus:" + s_.id + ":" + std::to_string(s_.version));
  BuilderState work = s_;
  Rebalancer pass(work, rng);
  Result<RebalanceResult> res = pass.run(options.now ? *options.now : now_seconds());
  if (!res.ok()) return res;
  s_ = std::move(work);
  Result<double> bal = balance();
  res->balance = bal.ok() ? *bal : 0.0;
  return res;
}

Result<std::vector<double>> RingBuilder::balance_per_dev() const {
  const double total = total_weight();
  if (total == 0) {
    return Status::invalid_argument(
        "There are no devices in this ring, or all devices have been deleted");
  }
  const double weight_of_one_part = static_cast<double>(parts()) * s_.replicas / total;
  std::vector<double> out(s_.devs.size(), 0.0);
  for (const auto& d : s_.devs) {
    if (!d) continue;
    if (!(d->weight > 0)) {
      out[d->id] = d->parts ? kMaxBalance : 0.0;
    } else {
      out[d->id] = 100.0 * static_cast<double>(d->parts) / (d->weight * weight_of_one_part) - 100.0;
    }
  }
  return out;
}

Result<double> RingBuilder::balance() const {
  Result<std::vector<double>> per = balance_per_dev();
  if (!per.ok()) return per.status();
  double worst = 0;
  for (const auto& d : s_.devs) {
    if (d) worst = std::max(worst, std::abs((*per)[d->id]));
  }
  return worst;
}

Result<double> RingBuilder::required_overload() const {
  BuilderState copy = s_;
  PyRandom rng;
  Rebalancer pass(copy, rng);
  return pass.required_overload();
}

Result<DispersionReport> RingBuilder::dispersion_report(const std::string& filter,
                                                        bool verbose) const {
  if (!ever_rebalanced()) return Status::invalid_argument("the builder was never rebalanced");
  std::optional<std::regex> re;
  if (!filter.empty()) {
    try {
      re.emplace(filter);
    } catch (const std::regex_error& e) {
      return Status::invalid_argument("bad search filter " + filter + ": " + e.what());
    }
  }
  const TierTree tree(s_.devs);
  const DispersionGraph g = compute_dispersion(s_, tree);
  const std::vector<double> max_allowed = tree.max_replicas(s_.replicas, true);
  std::vector<int> order;
  for (std::size_t t = 1; t < tree.size(); ++t) {
    if (!g.graph[t].empty()) order.push_back(static_cast<int>(t));
  }
  std::sort(order.begin(), order.end(),
            [&](int a, int b) { return tier_less(tree.tiers[a], tree.tiers[b]); });
  DispersionReport report;
  for (int t : order) {
    std::string name = tree.name(t, s_.devs);
    if (re && !std::regex_search(name, *re, std::regex_constants::match_continuous)) continue;
    const auto& counts = g.graph[t];
    const int max_replicas = static_cast<int>(max_allowed[t]);
    int64_t at_risk = 0, placed = 0;
    for (std::size_t i = 1; i < counts.size(); ++i) {
      placed += counts[i] * static_cast<int64_t>(i);
      if (static_cast<int>(i) > max_replicas) {
        at_risk += counts[i] * (static_cast<int64_t>(i) - max_replicas);
      }
    }
    const double tier_dispersion =
        placed ? 100.0 * static_cast<double>(at_risk) / static_cast<double>(placed) : 0.0;
    if (tier_dispersion > report.max_dispersion) {
      report.max_dispersion = tier_dispersion;
      report.worst_tier = name;
    }
    if (!verbose) continue;
    TierDispersion row;
    row.name = std::move(name);
    row.max_replicas = max_replicas;
    row.placed_parts = placed;
    row.dispersion = tier_dispersion;
    row.replicas = counts;
    row.replicas.resize(static_cast<std::size_t>(std::ceil(s_.replicas)) + 1, 0);
    report.graph.push_back(std::move(row));
  }
  return report;
}

void RingBuilder::recalculate_dispersion() {
  if (!ever_rebalanced()) return;
  s_.dispersion = compute_dispersion(s_, TierTree(s_.devs)).dispersion;
  s_.version += 1;
}

Status RingBuilder::validate() const {
  const auto& rows = s_.replica2part2dev;
  if (rows.empty()) {
    return Status::invalid_argument("_replica2part2dev empty; did you forget to rebalance?");
  }
  int64_t parts_on_devs = 0;
  for (const auto& d : s_.devs) {
    if (d) parts_on_devs += d->parts;
  }
  int64_t parts_in_map = 0;
  for (const auto& row : rows) parts_in_map += static_cast<int64_t>(row.size());
  if (parts_on_devs != parts_in_map) {
    return Status::invalid_argument(
        strprintf("All partitions are not double accounted for: %lld != %lld",
                  static_cast<long long>(parts_on_devs), static_cast<long long>(parts_in_map)));
  }
  const std::size_t int_replicas = static_cast<std::size_t>(std::ceil(s_.replicas));
  std::vector<uint16_t> devs_for_part;
  for (int64_t part = 0; part < parts(); ++part) {
    devs_for_part.clear();
    for (std::size_t r = 0; r < rows.size(); ++r) {
      if (static_cast<int64_t>(rows[r].size()) <= part) {
        if (r + 1 < int_replicas) {
          return Status::invalid_argument(strprintf(
              "The partition assignments of replica %zu were shorter than expected (%zu < %lld)"
              " - this should only happen for the last replica",
              r, rows[r].size(), static_cast<long long>(parts())));
        }
        break;
      }
      const uint16_t id = rows[r][part];
      if (id >= s_.devs.size() || !s_.devs[id]) {
        return Status::invalid_argument(
            strprintf("Partition %lld, replica %zu was not allocated to a device.",
                      static_cast<long long>(part), r));
      }
      devs_for_part.push_back(id);
    }
    std::vector<uint16_t> sorted = devs_for_part;
    std::sort(sorted.begin(), sorted.end());
    if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) {
      std::string list;
      for (uint16_t id : devs_for_part) list += (list.empty() ? "" : ", ") + std::to_string(id);
      return Status::invalid_argument(
          strprintf("The partition %lld has been assigned to duplicate devices [%s]",
                    static_cast<long long>(part), list.c_str()));
    }
  }
  return Status();
}

int64_t RingBuilder::min_part_seconds_left(double now) const {
  const int64_t elapsed = static_cast<int64_t>(now - static_cast<double>(s_.last_part_moves_epoch));
  return std::max<int64_t>(int64_t{s_.min_part_hours} * 3600 - elapsed, 0);
}

std::vector<int> RingBuilder::search_devs(const DeviceSearch& q) const {
  std::vector<int> out;
  auto norm = [](const std::string& a) {
    std::optional<std::string> n = internal::normalize_address(a);
    return n ? *n : std::string();
  };
  for (const auto& od : s_.devs) {
    if (!od) continue;
    const BuilderDevice& d = *od;
    if (q.id && *q.id != d.id) continue;
    if (q.region && *q.region != d.region) continue;
    if (q.zone && *q.zone != d.zone) continue;
    if (q.ip && *q.ip != norm(d.ip)) continue;
    if (q.port && *q.port != d.port) continue;
    if (q.replication_ip && *q.replication_ip != norm(d.replication_ip)) continue;
    if (q.replication_port && *q.replication_port != d.replication_port) continue;
    if (q.device && *q.device != d.device) continue;
    if (q.weight && *q.weight != d.weight) continue;
    if (q.meta && d.meta.find(*q.meta) == std::string::npos) continue;
    out.push_back(d.id);
  }
  return out;
}

std::vector<int> RingBuilder::part_devices(int64_t part) const {
  std::vector<int> out;
  for (const auto& row : s_.replica2part2dev) {
    if (part < 0 || part >= static_cast<int64_t>(row.size()) || row[part] == kNoDevice) continue;
    if (std::find(out.begin(), out.end(), row[part]) == out.end()) out.push_back(row[part]);
  }
  return out;
}

RingData RingBuilder::ring_data() const {
  RingData ring;
  ring.devs.resize(s_.devs.size());
  for (std::size_t i = 0; i < s_.devs.size(); ++i) {
    if (s_.devs[i]) ring.devs[i] = static_cast<const Device&>(*s_.devs[i]);
  }
  ring.part_shift = 32 - s_.part_power;
  ring.version = s_.version;
  if (!s_.replica2part2dev.empty()) {
    ring.replica2part2dev = s_.replica2part2dev;
    ring.next_part_power = s_.next_part_power;
  }
  return ring;
}

}  // namespace apus::ring
