// Shard ranges as Swift's ShardRange compares them: what decides which shard a listing asks and
// which shard an object update goes to.
#include "proxy/shard_ranges.h"

#include <doctest/doctest.h>

#include "common/utf8.h"

using apus::proxy::find_shard_range;
using apus::proxy::parse_shard_ranges;
using apus::proxy::ShardRange;

TEST_CASE("shard_ranges: bounds compare as Swift's ShardRange") {
  ShardRange first{".shards_a/c-0", "", "m"}, last{".shards_a/c-1", "m", ""};
  CHECK(first.account() == ".shards_a");
  CHECK(first.container() == "c-0");
  CHECK(first.contains("a"));
  CHECK(first.contains("m"));  // the upper bound is inside
  CHECK_FALSE(first.contains(""));
  CHECK_FALSE(last.contains("m"));  // the lower bound is not
  CHECK(last.contains("\xf4\x8f\xbf\xbf"));  // no upper bound: every name above "m"
  CHECK(first.below("n"));
  CHECK_FALSE(first.below("m"));
  CHECK_FALSE(last.below("zzz"));  // unbounded above
  CHECK(last.above("m"));
  CHECK(last.above("a"));
  CHECK_FALSE(last.above("n"));
  CHECK_FALSE(first.above(""));  // unbounded below
  CHECK(first.end_marker() == std::string("m\0", 2));
  CHECK(last.end_marker().empty());
}

TEST_CASE("shard_ranges: the range that holds a name, none in a gap") {
  auto ranges = parse_shard_ranges(
      R"([{"name": "s/c-0", "lower": "", "upper": "f", "state": 40, "object_count": 3},
          {"name": "s/c-1", "lower": "f", "upper": "p"},
          {"name": "s/c-2", "lower": "t", "upper": ""}])");
  REQUIRE(ranges);
  REQUIRE(ranges->size() == 3);
  CHECK(find_shard_range("a", *ranges)->name == "s/c-0");
  CHECK(find_shard_range("f", *ranges)->name == "s/c-0");
  CHECK(find_shard_range("f0", *ranges)->name == "s/c-1");
  CHECK(find_shard_range("q", *ranges) == nullptr);  // between c-1 and c-2
  CHECK(find_shard_range("t", *ranges) == nullptr);
  CHECK(find_shard_range("zz", *ranges)->name == "s/c-2");
  CHECK(find_shard_range("x", {}) == nullptr);
}

TEST_CASE("shard_ranges: a listing that is not shard ranges is refused") {
  CHECK(parse_shard_ranges("[]")->empty());
  CHECK_FALSE(parse_shard_ranges("{}"));
  CHECK_FALSE(parse_shard_ranges("not json"));
  CHECK_FALSE(parse_shard_ranges(R"([{"name": "o", "hash": "x"}])"));  // an object listing
  CHECK_FALSE(parse_shard_ranges(R"([{"name": "no-slash", "lower": "", "upper": ""}])"));
  CHECK_FALSE(parse_shard_ranges(R"([{"name": "/c", "lower": "", "upper": ""}])"));
  CHECK_FALSE(parse_shard_ranges(R"([{"name": "a/c", "lower": 1, "upper": ""}])"));
  CHECK_FALSE(parse_shard_ranges(R"([{"name": "a/c", "lower": "z", "upper": "a"}])"));
}

TEST_CASE("shard_ranges: the first string past a prefix (a shard above it lists nothing)") {
  using apus::common::increment_last_char;
  CHECK(increment_last_char("a/") == "a0");
  CHECK(increment_last_char("caf\xc3\xa9") == "caf\xc3\xaa");
  ShardRange above{"s/c", "a0", ""};
  CHECK(above.above(increment_last_char("a/")));  // names "a/..." all sort below "a0"
}
