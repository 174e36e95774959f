#include "proxy/shard_ranges.h"

#include <algorithm>

#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>

#include "common/http/url.h"

namespace apus::proxy {

bool ShardRange::contains(std::string_view item) const {
  return !item.empty() && lower < item && (upper.empty() || item <= upper);
}

bool ShardRange::below(std::string_view item) const { return !upper.empty() && upper < item; }

bool ShardRange::above(std::string_view item) const { return !lower.empty() && lower >= item; }

std::string ShardRange::end_marker() const {
  return upper.empty() ? std::string() : upper + std::string(1, '\0');
}

std::optional<std::vector<ShardRange>> parse_shard_ranges(std::string_view json) {
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(json, ec);
  if (ec || !v.is_array()) return std::nullopt;
  std::vector<ShardRange> out;
  out.reserve(v.as_array().size());
  for (const boost::json::value& e : v.as_array()) {
    const boost::json::object* o = e.if_object();
    if (!o) return std::nullopt;
    auto text = [&](std::string_view key) -> const boost::json::string* {
      const boost::json::value* f = o->if_contains(key);
      return f ? f->if_string() : nullptr;
    };
    const boost::json::string *name = text("name"), *lower = text("lower"), *upper = text("upper");
    if (!name || !lower || !upper) return std::nullopt;
    ShardRange r{std::string(*name), std::string(*lower), std::string(*upper)};
    if (!common::http::split_container_path(r.name)) return std::nullopt;
    if (!r.upper.empty() && r.lower > r.upper) return std::nullopt;
    out.push_back(std::move(r));
  }
  return out;
}

const ShardRange* find_shard_range(std::string_view item, const std::vector<ShardRange>& ranges) {
  // bisect_left: the first range not wholly below the item.
  auto it = std::partition_point(ranges.begin(), ranges.end(),
                                 [&](const ShardRange& r) { return r.below(item); });
  return it != ranges.end() && it->contains(item) ? &*it : nullptr;
}


}  // namespace apus::proxy
