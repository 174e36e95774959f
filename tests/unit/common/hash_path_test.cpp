#include "common/hash_path.h"

#include <string>

#include <doctest/doctest.h>

#include "tests/unit/common/swift_vectors.h"

namespace apus::common {
namespace {

const HashPathConfig kSuffixOnly{"", "changeme"};
const HashPathConfig kBoth{"start", "end"};

TEST_CASE("hash_path: values computed by Swift") {
  CHECK(*hash_path_hex(kSuffixOnly, "a") == "b8ea67c480b33ac40c79510c7df2b8a8");
  CHECK(*hash_path_hex(kSuffixOnly, "a", "c") == "e8fbcd486a77117e2cd3398aa1f9485f");
  CHECK(*hash_path_hex(kSuffixOnly, "a", "c", "o") == "2f714cd91b0e5d803cde2012b01d7099");
  CHECK(*hash_path_hex(kSuffixOnly, "AUTH_test", "cont", "dir/sub/obj") ==
        "20553ed13e9efd3b978204a04d7c48bb");
  CHECK(*hash_path_hex(kBoth, "a", "c", "o") == "d6b6cf581bf74c5cc5f3dfdce49dca97");
  CHECK(*hash_path_hex(kBoth, "\xc3\xa9", "\xe4\xb8\xad", "\xf0\x9f\x98\x80") ==
        "3694a264f8e9df319e68a0e6d98191e2");
}

TEST_CASE("hash_path: the digest is MD5 of prefix/a/c/o + suffix") {
  CHECK(*hash_path(kBoth, "a", "c", "o") == crypto::md5("start/a/c/oend"));
  CHECK(*hash_path(kBoth, "a", "c") == crypto::md5("start/a/cend"));
  CHECK(*hash_path(kBoth, "") == crypto::md5("start/end"));
  // Empty components are simply left out.
  CHECK(*hash_path(kBoth, "a", "c", "") == *hash_path(kBoth, "a", "c"));
  CHECK(*hash_path(kBoth, "a", "", "") == *hash_path(kBoth, "a"));
  // Names longer than the internal stack buffer take the heap path.
  const std::string long_name(5000, 'x');
  CHECK(*hash_path(kBoth, "a", "c", long_name) == crypto::md5("start/a/c/" + long_name + "end"));
}

TEST_CASE("hash_path: an object needs a container") {
  const Result<PathHash> r = hash_path(kBoth, "a", "", "o");
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == Status::Code::kInvalidArgument);
  CHECK_FALSE(hash_path_hex(kBoth, "a", "", "o").ok());
}

TEST_CASE("partition_of: top bits of the big-endian first word") {
  PathHash d{};
  d[0] = 0xd6;
  d[1] = 0xb6;
  d[2] = 0xcf;
  d[3] = 0x58;
  CHECK(partition_of(d, 32) == 0xd6b6cf58u);
  CHECK(partition_of(d, 1) == 1);
  CHECK(partition_of(d, 8) == 0xd6);
  CHECK(partition_of(d, 10) == (0xd6b6cf58u >> 22));
  CHECK(partition_of(d, 0) == 0);
  CHECK(partition_of(*hash_path(kBoth, "a", "c", "o"), 32) == 3602304856u);
}

TEST_CASE("hash_path: every vector from stock Swift") {
  const auto& vectors = testing::swift_vectors("hash");
  CHECK(vectors.size() > 1000);
  size_t checked = 0;
  for (const auto& v : vectors) {
    REQUIRE(v.size() == 7);
    const HashPathConfig config{testing::unhex(v[0]), testing::unhex(v[1])};
    const std::string a = testing::unhex(v[2]), c = testing::unhex(v[3]), o = testing::unhex(v[4]);
    const Result<std::string> hex = hash_path_hex(config, a, c, o);
    INFO("a=", v[2], " c=", v[3], " o=", v[4]);
    if (v[5] == "ERR") {
      CHECK_FALSE(hex.ok());
      continue;
    }
    REQUIRE(hex.ok());
    CHECK(*hex == v[5]);
    const PathHash digest = *hash_path(config, a, c, o);
    std::string parts;
    for (unsigned power : {0u, 1u, 7u, 10u, 16u, 18u, 23u, 31u, 32u}) {
      if (!parts.empty()) parts += ',';
      parts += std::to_string(power) + ":" + std::to_string(partition_of(digest, power));
    }
    CHECK(parts == v[6]);
    ++checked;
  }
  CHECK(checked > 1000);
}

}  // namespace
}  // namespace apus::common
