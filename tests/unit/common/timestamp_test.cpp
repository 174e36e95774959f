#include "common/timestamp.h"

#include <chrono>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "tests/unit/common/swift_vectors.h"

namespace apus::common {
namespace {

Timestamp ts(std::string_view text) {
  Result<Timestamp> r = Timestamp::parse(text);
  REQUIRE_MESSAGE(r.ok(), text);
  return *r;
}

std::optional<Timestamp> opt_ts(std::string_view internal) {
  if (internal == "-") return std::nullopt;
  return ts(internal);
}

TEST_CASE("Timestamp: the three text forms") {
  const Timestamp t = ts("1402464677.04188");
  CHECK(t.raw() == 140246467704188);
  CHECK(t.offset() == 0);
  CHECK(t.normal() == "1402464677.04188");
  CHECK(t.internal() == "1402464677.04188");
  CHECK(t.short_form() == "1402464677.04188");

  const Timestamp o = ts("1402464677.04188_0000000000000001");
  CHECK(o.offset() == 1);
  CHECK(o.normal() == "1402464677.04188");
  CHECK(o.internal() == "1402464677.04188_0000000000000001");
  CHECK(o.short_form() == "1402464677.04188_1");

  CHECK(ts("0").normal() == "0000000000.00000");
  CHECK(ts("1.5").normal() == "0000000001.50000");
  CHECK(ts("1402464677").normal() == "1402464677.00000");
  CHECK(ts("1402464677.041880").normal() == "1402464677.04188");
  CHECK(ts("1402464677.04188_ffffffffffffffff").internal() == "1402464677.04188_ffffffffffffffff");
  CHECK(ts("1402464677.04188_").internal() == "1402464677.04188");
  CHECK(ts("1402464677.04188_0").internal() == "1402464677.04188");
}

TEST_CASE("Timestamp: extra precision rounds as Swift prints it") {
  CHECK(ts("1402464677.041884").normal() == "1402464677.04188");
  CHECK(ts("1402464677.041886").normal() == "1402464677.04189");
  // Exact halves follow the binary value of the parsed double, not the decimal digits.
  CHECK(ts("0.000005").normal() == "0000000000.00001");
  CHECK(ts("0.000015").normal() == "0000000000.00002");
  CHECK(ts("1.000005").raw() == 100001);
  CHECK(ts("1.4e9").normal() == "1400000000.00000");
  CHECK(ts("  12.5  ").normal() == "0000000012.50000");
  CHECK(ts("+12.5").normal() == "0000000012.50000");
  CHECK(ts("-0").raw() == 0);
  CHECK(ts("9999999999.99999").raw() == Timestamp::kMaxRaw - 1);
  CHECK(ts("9999999999.999994").raw() == Timestamp::kMaxRaw - 1);
}

TEST_CASE("Timestamp: invalid input") {
  for (const char* bad : {"",
                          "_",
                          "abc",
                          "-1",
                          "-0.00001",
                          "1e10",
                          "10000000000",
                          "9999999999.999996",
                          "nan",
                          "inf",
                          "1.2.3",
                          "0x10",
                          "1402464677.04188_g",
                          "1_2_3",
                          "1402464677.04188__1",
                          "1402464677.04188_10000000000000000",
                          "--1",
                          "+-1",
                          "1e",
                          "."}) {
    INFO(bad);
    const Result<Timestamp> r = Timestamp::parse(bad);
    CHECK_FALSE(r.ok());
    if (!r.ok()) CHECK(r.status().code() == Status::Code::kInvalidArgument);
  }
  CHECK_FALSE(Timestamp::from_raw(-1).ok());
  CHECK_FALSE(Timestamp::from_raw(Timestamp::kMaxRaw).ok());
  CHECK(Timestamp::from_raw(Timestamp::kMaxRaw - 1).ok());
  CHECK_FALSE(Timestamp::from_seconds(-1.0).ok());
  CHECK_FALSE(Timestamp::from_seconds(1e10).ok());
  CHECK(Timestamp::from_seconds(1402464677.041875)->normal() == "1402464677.04187");
}

TEST_CASE("Timestamp: ordering is by time, then offset") {
  const Timestamp a = ts("1402464677.04188");
  const Timestamp a1 = ts("1402464677.04188_1");
  const Timestamp b = ts("1402464677.04189");
  CHECK(a < a1);
  CHECK(a1 < b);
  CHECK(ts("1402464677.04188_ffffffffffffffff") < b);
  CHECK(a == ts("1402464677.041880"));
  CHECK(a != a1);
  CHECK(Timestamp() == ts("0"));
  CHECK(Timestamp().is_zero());
  CHECK_FALSE(ts("0_1").is_zero());
}

TEST_CASE("Timestamp: offset, delta, inversion") {
  const Timestamp t = ts("1402464677.04188_5");
  CHECK(t.plus_offset(3)->internal() == "1402464677.04188_0000000000000008");
  CHECK_FALSE(ts("1_ffffffffffffffff").plus_offset(1).ok());
  CHECK(t.plus_delta(12)->internal() == "1402464677.04200_0000000000000005");
  CHECK(t.plus_delta(-1)->normal() == "1402464677.04187");
  CHECK(ts("0").plus_delta(0)->raw() == 0);
  CHECK_FALSE(ts("0.00001").plus_delta(-1).ok());  // Swift wants a positive result
  CHECK_FALSE(ts("9999999999.99999").plus_delta(1).ok());
  CHECK(ts("0").inverted()->normal() == "9999999999.99999");
  CHECK(ts("1402464677.04188").inverted()->normal() == "8597535322.95811");
  CHECK_FALSE(t.inverted().ok());
}

TEST_CASE("Timestamp: isoformat and ceil") {
  CHECK(ts("0").isoformat() == "1970-01-01T00:00:00.000000");
  CHECK(ts("1402464677.04188").isoformat() == "2014-06-11T05:31:17.041880");
  CHECK(ts("951782400").isoformat() == "2000-02-29T00:00:00.000000");
  CHECK(ts("9999999999.99999").isoformat() == "2286-11-20T17:46:39.999990");
  CHECK(ts("1402464677.04188").ceil() == 1402464678);
  CHECK(ts("1402464677").ceil() == 1402464677);
  CHECK(ts("0.00001").ceil() == 1);
  CHECK(ts("0").ceil() == 0);
}

TEST_CASE("Timestamp: clock") {
  using namespace std::chrono;
  const system_clock::time_point tp{microseconds(1402464677041875)};
  CHECK(Timestamp::from_time_point(tp).normal() == "1402464677.04188");
  CHECK(Timestamp::from_time_point(system_clock::time_point{microseconds(-5)}).raw() == 0);
  const Timestamp now = Timestamp::now();
  CHECK(now > ts("1700000000"));
  CHECK(now < ts("4000000000"));
  CHECK(normalize_timestamp("1402464677.5").value() == "1402464677.50000");
  CHECK_FALSE(normalize_timestamp("x").ok());
}

TEST_CASE("encode/decode_timestamps") {
  const Timestamp t1 = ts("1402464677.04188_a");
  const Timestamp t2 = ts("1402464677.04200");
  const Timestamp t3 = ts("1402464677.04190");
  CHECK(encode_timestamps(t1) == "1402464677.04188_a");
  CHECK(encode_timestamps(t1, ts("1402464677.04188")) == "1402464677.04188_a");
  CHECK(encode_timestamps(t1, ts("1402464677.04188"), {}, true) == "1402464677.04188_a+0");
  CHECK(encode_timestamps(t1, t2) == "1402464677.04188_a+c");
  CHECK(encode_timestamps(t1, t2, t3) == "1402464677.04188_a+c-a");
  CHECK(encode_timestamps(t1, std::nullopt, t3) == "1402464677.04188_a");

  Result<DecodedTimestamps> d = decode_timestamps("1402464677.04188_a+c-a");
  REQUIRE(d.ok());
  CHECK(d->t1 == t1);
  CHECK(d->t2 == t2);
  CHECK(d->t3 == t3);

  d = decode_timestamps("1402464677.04188_a");
  REQUIRE(d.ok());
  CHECK(d->t2 == t1);  // same time and offset
  CHECK(d->t3 == t1);
  d = decode_timestamps("1402464677.04188_a", true);
  REQUIRE(d.ok());
  CHECK_FALSE(d->t2.has_value());
  CHECK_FALSE(d->t3.has_value());

  CHECK_FALSE(decode_timestamps("").ok());
  CHECK_FALSE(decode_timestamps("1.5+").ok());
  CHECK_FALSE(decode_timestamps("1.5+g").ok());
  CHECK_FALSE(decode_timestamps("0.00001-2").ok());
}

TEST_CASE("normalize_delete_at") {
  CHECK(normalize_delete_at(0) == "0000000000");
  CHECK(normalize_delete_at(-5) == "0000000000");
  CHECK(normalize_delete_at(1402464677) == "1402464677");
  CHECK(normalize_delete_at(123) == "0000000123");
  CHECK(normalize_delete_at(99999999999) == "9999999999");
}

// ---- Vectors computed by stock Swift (tests/interop/swift_vectors.py).

TEST_CASE("Timestamp: parse and format match Swift on every vector") {
  const auto& vectors = testing::swift_vectors("ts");
  CHECK(vectors.size() > 1000);
  for (const auto& v : vectors) {
    REQUIRE(v.size() == 8);
    const std::string input = testing::unhex(v[0]);
    INFO("input: '", input, "'");
    const Result<Timestamp> t = Timestamp::parse(input);
    REQUIRE(t.ok());
    CHECK(t->normal() == v[1]);
    CHECK(t->internal() == v[2]);
    CHECK(t->short_form() == v[3]);
    CHECK(t->isoformat() == v[4]);
    CHECK(std::to_string(t->ceil()) == v[5]);
    CHECK(std::to_string(t->raw()) == v[6]);
    CHECK(std::to_string(t->offset()) == v[7]);
    // Every text form parses back to the same value.
    CHECK(ts(t->internal()) == *t);
    CHECK(ts(t->short_form()) == *t);
  }
  for (const auto& v : testing::swift_vectors("ts_err")) {
    const std::string input = testing::unhex(v[0]);
    INFO("input: '", input, "'");
    CHECK_FALSE(Timestamp::parse(input).ok());
  }
}

TEST_CASE("Timestamp: ordering matches Swift on every vector") {
  const auto& vectors = testing::swift_vectors("cmp");
  CHECK(vectors.size() > 100);
  for (const auto& v : vectors) {
    REQUIRE(v.size() == 3);
    INFO(v[0], " vs ", v[1]);
    const Timestamp a = ts(v[0]), b = ts(v[1]);
    const int sign = a < b ? -1 : (a == b ? 0 : 1);
    CHECK(std::to_string(sign) == v[2]);
    CHECK((a > b) == (v[2] == "1"));
  }
}

TEST_CASE("encode_timestamps matches Swift on every vector") {
  const auto& vectors = testing::swift_vectors("enc");
  CHECK(vectors.size() > 100);
  for (const auto& v : vectors) {
    REQUIRE(v.size() == 5);
    INFO(v[0], " ", v[1], " ", v[2], " explicit=", v[3]);
    CHECK(encode_timestamps(ts(v[0]), opt_ts(v[1]), opt_ts(v[2]), v[3] == "1") == v[4]);
  }
}

TEST_CASE("decode_timestamps matches Swift on every vector") {
  const auto& vectors = testing::swift_vectors("dec");
  CHECK(vectors.size() > 100);
  for (const auto& v : vectors) {
    REQUIRE(v.size() == 5);
    const std::string encoded = testing::unhex(v[0]);
    INFO("'", encoded, "' explicit=", v[1]);
    const Result<DecodedTimestamps> d = decode_timestamps(encoded, v[1] == "1");
    REQUIRE(d.ok());
    CHECK(d->t1.internal() == v[2]);
    CHECK((d->t2 ? d->t2->internal() : "-") == v[3]);
    CHECK((d->t3 ? d->t3->internal() : "-") == v[4]);
  }
  for (const auto& v : testing::swift_vectors("dec_err")) {
    const std::string encoded = testing::unhex(v[0]);
    INFO("'", encoded, "' explicit=", v[1]);
    CHECK_FALSE(decode_timestamps(encoded, v[1] == "1").ok());
  }
}

TEST_CASE("normalize_delete_at matches Swift on every vector") {
  const auto& vectors = testing::swift_vectors("delete_at");
  CHECK(vectors.size() > 10);
  for (const auto& v : vectors) {
    REQUIRE(v.size() == 2);
    CHECK(normalize_delete_at(std::stoll(v[0])) == v[1]);
  }
}

}  // namespace
}  // namespace apus::common
