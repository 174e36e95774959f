// Shard ranges of a sharded container, as Swift's container servers list them (a JSON list of
// Swift's ShardRange dicts: name "<account>/<container>" of the shard container, lower and
// upper bounds, state, counts, timestamps). Apus's own container servers never shard; a mixed
// cluster's Swift servers do, and the proxy reads such containers as Swift's proxy does:
// listings gathered from the shards (ContainerController), object updates sent to the shard
// that holds the name (ObjectController, with the ranges cached in memcached under Swift's key).
//
// Bounds compare as Swift's ShardRange compares them: by code point, which is UTF-8 byte order;
// an empty lower bound is below every name and an empty upper bound above every name.
//
// Pure functions; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace apus::proxy {

struct ShardRange {
  std::string name;   // "<account>/<container>" of the shard container
  std::string lower;  // exclusive; "" = no lower bound
  std::string upper;  // inclusive; "" = no upper bound

  std::string account() const { return name.substr(0, name.find('/')); }
  std::string container() const { return name.substr(name.find('/') + 1); }
  // lower < item <= upper (never for "").
  bool contains(std::string_view item) const;
  // The whole range is below `item` (Swift's `range < item`): upper < item.
  bool below(std::string_view item) const;
  // The whole range is at or above `item` (Swift's `range > item`): lower >= item.
  bool above(std::string_view item) const;
  // The end_marker that lists exactly this range's names: upper + "\0", "" for no bound.
  std::string end_marker() const;
};

// A container server's shard-range listing. nullopt when it is not a JSON list of objects
// each with string "name" ("<account>/<container>"), "lower" and "upper", or lower > upper.
std::optional<std::vector<ShardRange>> parse_shard_ranges(std::string_view json);

// The range of `ranges` (sorted, as a container server lists them) that holds `item`, as Swift's
// find_shard_range; nullptr when none does.
const ShardRange* find_shard_range(std::string_view item, const std::vector<ShardRange>& ranges);

}  // namespace apus::proxy
