#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <sys/stat.h>

#include "common/io/fs.h"
#include "ring/ring_data.h"
#include "tests/unit/ring/ring_test_support.h"

namespace apus::ring {
namespace {

using common::Status;
using Code = common::Status::Code;
using testing::gzip_stored;
using testing::make_device;
using testing::ring_payload;
using testing::table_bytes;
using testing::TempDir;

// A small ring with everything the format has: a removed device, non-ASCII meta, fractional
// replicas (short last row), a version and a pending part power.
RingData sample_ring() {
  RingData ring;
  ring.part_shift = 32 - 3;  // 8 partitions
  ring.devs.emplace_back(make_device(0, 1, 1, "10.0.0.1", "sda", 100.0));
  ring.devs.emplace_back(std::nullopt);
  ring.devs.emplace_back(make_device(2, 1, 2, "10.0.0.2", "sdb", 0.5));
  ring.devs.emplace_back(make_device(3, 2, 1, "fe80::1", "sdc", 1e-05));
  ring.devs[3]->meta = "m\xc3\xa9ta \xe2\x98\x83";
  ring.devs[3]->replication_ip = "192.168.0.3";
  ring.devs[3]->replication_port = 6300;
  ring.replica2part2dev = {
      {0, 2, 3, 0, 2, 3, 0, 2},
      {2, 3, 0, 2, 3, 0, 2, 3},
      {3, 0, 2, 3},
  };
  ring.version = 7;
  ring.next_part_power = 4;
  return ring;
}

void check_same(const RingData& a, const RingData& b) {
  CHECK(a.part_shift == b.part_shift);
  CHECK(a.version == b.version);
  CHECK(a.next_part_power == b.next_part_power);
  CHECK(a.replica2part2dev == b.replica2part2dev);
  REQUIRE(a.devs.size() == b.devs.size());
  for (size_t i = 0; i < a.devs.size(); ++i) {
    REQUIRE(a.devs[i].has_value() == b.devs[i].has_value());
    if (!a.devs[i]) continue;
    const Device& x = *a.devs[i];
    const Device& y = *b.devs[i];
    CHECK(x.id == y.id);
    CHECK(x.region == y.region);
    CHECK(x.zone == y.zone);
    CHECK(x.ip == y.ip);
    CHECK(x.port == y.port);
    CHECK(x.replication_ip == y.replication_ip);
    CHECK(x.replication_port == y.replication_port);
    CHECK(x.device == y.device);
    CHECK(x.weight == y.weight);
    CHECK(x.meta == y.meta);
  }
}

// A decodable ring file image from JSON text and table rows.
std::string crafted(std::string_view json, const std::vector<std::vector<uint16_t>>& rows,
                    bool big_endian = false) {
  return gzip_stored(ring_payload(json, table_bytes(rows, big_endian)));
}

constexpr std::string_view kDev0 =
    R"({"device": "sda", "id": 0, "ip": "10.0.0.1", "meta": "", "port": 6200, "region": 1, )"
    R"("replication_ip": "10.0.0.1", "replication_port": 6200, "weight": 100.0, "zone": 1})";
constexpr std::string_view kDev1 =
    R"({"device": "sdb", "id": 1, "ip": "10.0.0.2", "meta": "", "port": 6200, "region": 1, )"
    R"("replication_ip": "10.0.0.2", "replication_port": 6200, "weight": 100.0, "zone": 2})";

std::string two_dev_json(std::string_view extra = "", std::string_view byteorder = "little") {
  return "{\"byteorder\": \"" + std::string(byteorder) + "\", \"devs\": [" + std::string(kDev0) +
         ", " + std::string(kDev1) + "], \"part_shift\": 30, \"replica_count\": 2" +
         std::string(extra) + "}";
}

const std::vector<std::vector<uint16_t>> kTwoRows = {{0, 1, 0, 1}, {1, 0, 1, 0}};

// Decodes and expects Corruption whose message contains `needle`.
void expect_corrupt(std::string_view file, std::string_view needle) {
  common::Result<RingData> r = decode_ring(file);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == Code::kCorruption);
  CHECK_MESSAGE(r.status().message().find(needle) != std::string::npos, r.status().message());
}

std::string weight_text(double w) {
  RingData ring;
  ring.part_shift = 32;
  ring.devs.emplace_back(make_device(0, 1, 1, "1.2.3.4", "sda", w));
  const std::string json = ring_header_json_for_test(ring);
  const size_t at = json.find("\"weight\": ") + std::strlen("\"weight\": ");
  return json.substr(at, json.find(',', at) - at);
}

std::string meta_text(std::string_view meta) {
  RingData ring;
  ring.part_shift = 32;
  ring.devs.emplace_back(make_device(0, 1, 1, "1.2.3.4", "sda"));
  ring.devs[0]->meta = meta;
  const std::string json = ring_header_json_for_test(ring);
  const size_t at = json.find("\"meta\": ") + std::strlen("\"meta\": ");
  return json.substr(at, json.find(", \"port\"", at) - at);
}

TEST_CASE("round trip keeps every field, null devices and a short last row") {
  const RingData ring = sample_ring();
  common::Result<std::string> file = encode_ring(ring, "object.ring.gz");
  REQUIRE(file.ok());
  common::Result<RingData> back = decode_ring(*file);
  REQUIRE_MESSAGE(back.ok(), back.status().to_string());
  check_same(ring, *back);
  CHECK(back->replica_count() == doctest::Approx(2.5));
  CHECK(back->part_power() == 3);
  CHECK(back->partition_count() == 8);
  // Encoding is deterministic.
  CHECK(*encode_ring(*back, "object.ring.gz") == *file);
}

TEST_CASE("the header is json.dumps(sort_keys=True) with Python's separators") {
  RingData ring;
  ring.part_shift = 30;
  ring.devs.emplace_back(make_device(0, 1, 1, "10.0.0.1", "sda"));
  ring.devs.emplace_back(std::nullopt);
  ring.replica2part2dev = {{0, 0, 0, 0}};
  CHECK(ring_header_json_for_test(ring) ==
        R"({"byteorder": "little", "devs": [{"device": "sda", "id": 0, "ip": "10.0.0.1", )"
        R"("meta": "", "port": 6201, "region": 1, "replication_ip": "10.0.0.1", )"
        R"("replication_port": 6201, "weight": 100.0, "zone": 1}, null], "part_shift": 30, )"
        R"("replica_count": 1})");
  ring.version = 12;
  ring.next_part_power = 3;
  const std::string json = ring_header_json_for_test(ring);
  CHECK(json.find(R"(null], "next_part_power": 3, "part_shift": 30, "replica_count": 1, )"
                  R"("version": 12})") != std::string::npos);
  RingData empty;
  CHECK(ring_header_json_for_test(empty) ==
        R"({"byteorder": "little", "devs": [], "part_shift": 32, "replica_count": 0})");
}

TEST_CASE("weights are written as Python's repr(float)") {
  CHECK(weight_text(100.0) == "100.0");
  CHECK(weight_text(0.5) == "0.5");
  CHECK(weight_text(1e-05) == "1e-05");
  CHECK(weight_text(0.0001) == "0.0001");
  CHECK(weight_text(1.5e-07) == "1.5e-07");
  CHECK(weight_text(33.3) == "33.3");
  CHECK(weight_text(0.1 + 0.2) == "0.30000000000000004");
  CHECK(weight_text(1e16) == "1e+16");
  CHECK(weight_text(1234567890123456.0) == "1234567890123456.0");
  CHECK(weight_text(12345678901234567.0) == "1.2345678901234568e+16");
  CHECK(weight_text(1e22) == "1e+22");
  CHECK(weight_text(0.0) == "0.0");
  CHECK(weight_text(-0.0) == "-0.0");
  CHECK(weight_text(-2.5) == "-2.5");
  CHECK(weight_text(5e-324) == "5e-324");
  CHECK(weight_text(1.7976931348623157e308) == "1.7976931348623157e+308");
  CHECK(weight_text(std::numeric_limits<double>::infinity()) == "Infinity");
  CHECK(weight_text(std::numeric_limits<double>::quiet_NaN()) == "NaN");
}

TEST_CASE("weights read back exactly, also where Boost.JSON's own parsing is off by one ulp") {
  for (const double w : {24.898488120950326, 33.333333333333336, 0.1, 1e-05, 75.25, 3e-300}) {
    RingData ring;
    ring.part_shift = 32;
    ring.devs.emplace_back(make_device(0, 1, 1, "1.2.3.4", "sda", w));
    ring.replica2part2dev = {{0}};
    common::Result<RingData> back = decode_ring(*encode_ring(ring, "x.ring.gz"));
    REQUIRE(back.ok());
    CHECK(back->devs[0]->weight == w);
  }
  // An integer weight (very old rings) is accepted too.
  std::string json = two_dev_json();
  json.replace(json.find("100.0"), 5, "100");
  common::Result<RingData> r = decode_ring(crafted(json, kTwoRows));
  REQUIRE(r.ok());
  CHECK(r->devs[0]->weight == 100.0);
}

TEST_CASE("strings are escaped as json.dumps(ensure_ascii=True) does") {
  CHECK(meta_text("") == R"("")");
  CHECK(meta_text("plain ~text!") == R"("plain ~text!")");
  CHECK(meta_text("quote\" back\\slash /") == R"("quote\" back\\slash /")");
  CHECK(meta_text("\n\r\t\b\f") == R"("\n\r\t\b\f")");
  CHECK(meta_text(std::string("\x01\x1f\x7f", 3)) == R"("\u0001\u001f\u007f")");
  CHECK(meta_text("\xc3\xa9") == R"("\u00e9")");                // é
  CHECK(meta_text("\xe2\x98\x83") == R"("\u2603")");            // snowman
  CHECK(meta_text("\xf0\x9f\x98\x80") == R"("\ud83d\ude00")");  // emoji: surrogate pair
  CHECK(meta_text(std::string("a\0b", 3)) == R"("a\u0000b")");
  // Bytes that are not UTF-8 come out as Python's surrogateescape would carry them.
  CHECK(meta_text("\xff\xc3") == R"("\udcff\udcc3")");
  // And the non-ASCII text reads back as the same UTF-8.
  RingData ring = sample_ring();
  common::Result<RingData> back = decode_ring(*encode_ring(ring, "o.ring.gz"));
  REQUIRE(back.ok());
  CHECK(back->devs[3]->meta == "m\xc3\xa9ta \xe2\x98\x83");
}

TEST_CASE("the gzip header is Python GzipFile's: FNAME, fixed mtime, XFL 2, OS 255") {
  const RingData ring = sample_ring();
  const std::string file = *encode_ring(ring, "/etc/swift/object.ring.gz");
  // mtime 1300507380 = 0x4d842af4, little-endian.
  CHECK(1300507380u == 0x4d842af4u);
  const std::string expect_head(
      "\x1f\x8b\x08\x08\xf4\x2a\x84\x4d\x02\xff"
      "object.ring\0",
      22);
  CHECK(file.substr(0, 22) == expect_head);
  // Without ".gz" the name is kept whole; a Latin-1 name is stored as Latin-1.
  CHECK(encode_ring(ring, "ring")->substr(10, 5) == std::string("ring\0", 5));
  CHECK(encode_ring(ring, "\xc3\xa9.ring.gz")->substr(10, 7) == std::string("\xe9.ring\0", 7));
  // A name outside Latin-1 is left out, and FLG says so.
  const std::string no_name = *encode_ring(ring, "\xe2\x98\x83.ring.gz");
  CHECK(no_name[3] == '\0');
  CHECK(no_name.substr(4, 6) == std::string("\xf4\x2a\x84\x4d\x02\xff", 6));
  const std::string bare = *encode_ring(ring, ".gz");
  CHECK(bare[3] == '\0');
  // The content does not depend on the name.
  CHECK(decode_ring(no_name).ok());
}

TEST_CASE("either byte order reads the same") {
  common::Result<RingData> little = decode_ring(crafted(two_dev_json(), kTwoRows, false));
  common::Result<RingData> big =
      decode_ring(crafted(two_dev_json("", "big"), kTwoRows, /*big_endian=*/true));
  REQUIRE(little.ok());
  REQUIRE_MESSAGE(big.ok(), big.status().to_string());
  CHECK(little->replica2part2dev == kTwoRows);
  CHECK(big->replica2part2dev == kTwoRows);
  // Values above 255 make the byte order visible.
  RingData wide;
  wide.part_shift = 31;
  for (int i = 0; i < 300; ++i) wide.devs.emplace_back(make_device(i, 1, 1, "1.1.1.1", "d"));
  std::vector<std::vector<uint16_t>> rows = {{299, 258}};
  wide.replica2part2dev = rows;
  const std::string json = ring_header_json_for_test(wide);
  std::string big_json = json;
  big_json.replace(big_json.find("\"little\""), 8, "\"big\"");
  common::Result<RingData> b = decode_ring(crafted(big_json, rows, true));
  REQUIRE(b.ok());
  CHECK(b->replica2part2dev == rows);
  // Without "byteorder" the reader's own order is assumed, as in Swift.
  std::string no_order = json;
  no_order.erase(0, no_order.find("\"devs\""));
  no_order.insert(0, "{");
  common::Result<RingData> n = decode_ring(crafted(no_order, rows, false));
  REQUIRE_MESSAGE(n.ok(), n.status().to_string());
  CHECK(n->replica2part2dev == rows);
  expect_corrupt(crafted(two_dev_json("", "middle"), kTwoRows), "byteorder");
}

TEST_CASE("old rings: region defaults to 1, replication address to the client address") {
  const std::string json =
      R"({"devs": [{"device": "sda", "id": 0, "ip": "10.0.0.9", "port": 6000, "zone": 3}], )"
      R"("part_shift": 31, "replica_count": 1})";
  common::Result<RingData> r = decode_ring(crafted(json, {{0, 0}}));
  REQUIRE_MESSAGE(r.ok(), r.status().to_string());
  const Device& d = *r->devs[0];
  CHECK(d.region == 1);
  CHECK(d.zone == 3);
  CHECK(d.replication_ip == "10.0.0.9");
  CHECK(d.replication_port == 6000);
  CHECK(d.weight == 0.0);
  CHECK(d.meta.empty());
  CHECK_FALSE(r->version.has_value());
  CHECK_FALSE(r->next_part_power.has_value());
}

TEST_CASE("unknown keys are ignored, whatever their value, null version is absent") {
  std::string json =
      two_dev_json(R"(, "future": {"a": [1, 2, {"b": null}], "c": "d"}, "version": null, )"
                   R"("next_part_power": null, "z": [true, false])");
  json.replace(json.find("\"zone\": 1}"), 10, R"("zone": 1, "parts": 3, "x": {"y": [1.5]}})");
  common::Result<RingData> r = decode_ring(crafted(json, kTwoRows));
  REQUIRE_MESSAGE(r.ok(), r.status().to_string());
  CHECK(r->devs.size() == 2);
  CHECK(r->devs[0]->zone == 1);
  CHECK_FALSE(r->version.has_value());
  CHECK_FALSE(r->next_part_power.has_value());
}

TEST_CASE("a ring with no rows (never rebalanced) and a ring of part power 0") {
  RingData empty;
  empty.part_shift = 22;
  empty.devs.emplace_back(make_device(0, 1, 1, "1.1.1.1", "sda"));
  common::Result<RingData> e = decode_ring(*encode_ring(empty, "a.ring.gz"));
  REQUIRE(e.ok());
  CHECK(e->replica2part2dev.empty());
  CHECK(e->replica_count() == 0.0);

  RingData one;
  one.part_shift = 32;
  one.devs.emplace_back(make_device(0, 1, 1, "1.1.1.1", "sda"));
  one.replica2part2dev = {{0}, {0}};
  common::Result<RingData> o = decode_ring(*encode_ring(one, "a.ring.gz"));
  REQUIRE(o.ok());
  CHECK(o->partition_count() == 1);
  CHECK(o->replica_count() == 2.0);
}

TEST_CASE("an empty last row (replicas just over a whole number) is accepted, as Swift writes it") {
  common::Result<RingData> r =
      decode_ring(crafted(two_dev_json().replace(two_dev_json().find("\"replica_count\": 2"), 18,
                                                 "\"replica_count\": 3"),
                          kTwoRows));
  REQUIRE_MESSAGE(r.ok(), r.status().to_string());
  CHECK(r->replica2part2dev.size() == 3);
  CHECK(r->replica2part2dev[2].empty());
  CHECK(r->replica_count() == 2.0);
}

TEST_CASE("bad files are Corruption with a clear message") {
  const std::string good = *encode_ring(sample_ring(), "object.ring.gz");

  SUBCASE("empty and not gzip") {
    expect_corrupt("", "truncated");
    expect_corrupt("this is not a ring", "not a valid gzip stream");
  }
  SUBCASE("truncated gzip") {
    expect_corrupt(good.substr(0, good.size() - 4), "truncated");
    expect_corrupt(good.substr(0, good.size() / 2), "truncated");
    expect_corrupt(good.substr(0, 12), "truncated");
  }
  SUBCASE("damaged gzip") {
    std::string bad_crc = good;
    bad_crc[bad_crc.size() - 5] ^= 0x55;
    expect_corrupt(bad_crc, "incorrect data check");
  }
  SUBCASE("wrong magic, wrong version") {
    expect_corrupt(gzip_stored(ring_payload(two_dev_json(), "", "R2NG")), "bad magic");
    expect_corrupt(gzip_stored(std::string("\x80\x02}q\x00.", 6)), "bad magic");  // a pickle
    expect_corrupt(
        gzip_stored(ring_payload(two_dev_json(), table_bytes(kTwoRows, false), "R1NG", 2)),
        "unsupported ring format version 2");
    expect_corrupt(gzip_stored("R1N"), "bad magic");
    expect_corrupt(gzip_stored(std::string("R1NG\x00\x01\x00", 7)), "ring header too short");
  }
  SUBCASE("bad JSON") {
    expect_corrupt(crafted("{\"devs\": [}", kTwoRows), "bad JSON header");
    expect_corrupt(crafted("not json", kTwoRows), "bad JSON header");
    expect_corrupt(crafted("[1, 2]", kTwoRows), "expected an object");
    expect_corrupt(crafted(R"({"devs": {}, "part_shift": 30, "replica_count": 2})", kTwoRows),
                   "expected a list");
    expect_corrupt(crafted(R"({"devs": [], "replica_count": 2})", kTwoRows), "part_shift");
    expect_corrupt(crafted(R"({"devs": [], "part_shift": 30})", kTwoRows), "replica_count");
    expect_corrupt(crafted(R"({"part_shift": 30, "replica_count": 2})", kTwoRows), "devs");
    expect_corrupt(crafted(R"({"devs": [5], "part_shift": 30, "replica_count": 2})", kTwoRows),
                   "expected an object or null");
    expect_corrupt(crafted(R"({"devs": [], "part_shift": 2.5, "replica_count": 2})", kTwoRows),
                   "expected an integer");
    expect_corrupt(crafted(R"({"devs": [], "part_shift": 40, "replica_count": 2})", kTwoRows),
                   "outside 0..32");
    expect_corrupt(crafted(R"({"devs": [], "part_shift": 30, "replica_count": -1})", kTwoRows),
                   "negative");
    std::string zone_str = two_dev_json();
    zone_str.replace(zone_str.find("\"zone\": 1"), 9, "\"zone\": \"1\"");
    expect_corrupt(crafted(zone_str, kTwoRows), "key \"zone\" of device 0 is a string");
    std::string no_ip = two_dev_json();
    no_ip.replace(no_ip.find("\"ip\": \"10.0.0.2\", "), 18, "");
    expect_corrupt(crafted(no_ip, kTwoRows), "device 1 has no \"ip\"");
    // JSON length beyond the data.
    std::string payload = ring_payload(two_dev_json(), "");
    payload[9] = static_cast<char>(payload[9] + 50);
    expect_corrupt(gzip_stored(payload), "shorter than its declared length");
  }
  SUBCASE("tables shorter or longer than declared") {
    // A middle row short: the data ends too early.
    const std::string json3 = two_dev_json().replace(two_dev_json().find("\"replica_count\": 2"),
                                                     18, "\"replica_count\": 3");
    expect_corrupt(crafted(json3, {{0, 1, 0, 1}, {1, 0}}), "replica row 1 has 2 of 4 entries");
    expect_corrupt(crafted(two_dev_json(), {{0, 1}}), "replica row 0 has 2 of 4 entries");
    expect_corrupt(gzip_stored(ring_payload(two_dev_json(), table_bytes(kTwoRows, false) + "x")),
                   "unexpected data after the partition table");
    expect_corrupt(
        gzip_stored(ring_payload(two_dev_json(), table_bytes({{0, 1, 0, 1}}, false) + "x")),
        "odd number of bytes");
  }
  SUBCASE("the table names devices that do not exist") {
    expect_corrupt(crafted(two_dev_json(), {{0, 1, 0, 1}, {1, 0, 1, 7}}),
                   "device id 7, which is not in devs");
    const std::string with_null =
        "{\"devs\": [" + std::string(kDev0) + ", null], \"part_shift\": 30, \"replica_count\": 2}";
    expect_corrupt(crafted(with_null, kTwoRows), "a removed (null) device");
    std::string wrong_id = two_dev_json();
    wrong_id.replace(wrong_id.find("\"id\": 1"), 7, "\"id\": 5");
    expect_corrupt(crafted(wrong_id, kTwoRows), "device at index 1 has id 5");
  }
}

TEST_CASE("every truncation and many random corruptions fail cleanly, never crash") {
  const std::string good = *encode_ring(sample_ring(), "object.ring.gz");
  for (size_t n = 0; n < good.size(); ++n) {
    common::Result<RingData> r = decode_ring(std::string_view(good).substr(0, n));
    CHECK_FALSE(r.ok());
  }
  // The same on an uncompressed (stored) image, so the cuts land in every part of the payload.
  const std::string stored = crafted(two_dev_json(), kTwoRows);
  for (size_t n = 0; n < stored.size(); ++n) {
    CHECK_FALSE(decode_ring(std::string_view(stored).substr(0, n)).ok());
  }
  std::mt19937 rng(42);
  for (int i = 0; i < 3000; ++i) {
    std::string bad = (i % 2 == 0) ? good : stored;
    const int flips = 1 + static_cast<int>(rng() % 3);
    for (int f = 0; f < flips; ++f) bad[rng() % bad.size()] ^= static_cast<char>(1 + rng() % 255);
    common::Result<RingData> r = decode_ring(bad);
    if (!r.ok()) CHECK(r.status().code() == Code::kCorruption);
  }
}

TEST_CASE("encode refuses malformed data with InvalidArgument") {
  auto refused = [](const RingData& ring, std::string_view needle) {
    common::Result<std::string> r = encode_ring(ring, "x.ring.gz");
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == Code::kInvalidArgument);
    CHECK_MESSAGE(r.status().message().find(needle) != std::string::npos, r.status().message());
    CHECK(validate_ring_data(ring).code() == Code::kInvalidArgument);
  };
  RingData ring = sample_ring();
  CHECK(validate_ring_data(ring).ok());
  RingData bad = ring;
  bad.part_shift = 33;
  refused(bad, "part_shift");
  bad = ring;
  bad.replica2part2dev[1].pop_back();
  refused(bad, "replica row 1 has 7 entries, expected 8");
  bad = ring;
  bad.replica2part2dev[2].resize(9);
  refused(bad, "replica row 2 has 9 entries, expected at most 8");
  bad = ring;
  bad.replica2part2dev[0][5] = 1;
  refused(bad, "a removed (null) device");
  bad = ring;
  bad.replica2part2dev[0][5] = 40;
  refused(bad, "not in devs");
  bad = ring;
  bad.devs[2]->id = 9;
  refused(bad, "device at index 2 has id 9");
  bad = ring;
  bad.replica2part2dev = {{0, 2, 3}};  // a lone row must be full
  refused(bad, "replica row 0 has 3 entries, expected 8");
}

TEST_CASE("write_ring_file: atomic, mode 0644, the bytes of encode_ring, load_ring_file reads it") {
  TempDir dir;
  const std::string path = dir.path("object.ring.gz");
  const RingData ring = sample_ring();
  REQUIRE(write_ring_file(ring, path).ok());
  CHECK(testing::slurp(path) == *encode_ring(ring, "object.ring.gz"));
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0644);
  common::Result<RingData> back = load_ring_file(path);
  REQUIRE(back.ok());
  check_same(ring, *back);
  // Only the ring is left in the directory (no temp files).
  CHECK(std::distance(std::filesystem::directory_iterator(dir.root()),
                      std::filesystem::directory_iterator()) == 1);

  SUBCASE("a missing file is NotFound, a bad one Corruption naming the path") {
    CHECK(load_ring_file(dir.path("nope.ring.gz")).status().code() == Code::kNotFound);
    testing::spit(dir.path("bad.ring.gz"), "garbage");
    common::Result<RingData> bad = load_ring_file(dir.path("bad.ring.gz"));
    CHECK(bad.status().code() == Code::kCorruption);
    CHECK(bad.status().message().find(dir.path("bad.ring.gz")) != std::string::npos);
  }
  SUBCASE("a failed write leaves the old ring and no temp file") {
    common::io::FaultInjectingFs faulty(common::io::default_fs());
    RingData other = ring;
    other.version = 99;
    faulty.fail_next(common::io::FaultInjectingFs::Op::kFsync, EIO);
    CHECK(write_ring_file(other, path, faulty).code() == Code::kIOError);
    faulty.fail_writes_after_bytes(10, ENOSPC);
    CHECK(write_ring_file(other, path, faulty).code() == Code::kInsufficientStorage);
    faulty.clear_faults();
    faulty.fail_next(common::io::FaultInjectingFs::Op::kRename, EIO);
    CHECK_FALSE(write_ring_file(other, path, faulty).ok());
    CHECK(load_ring_file(path)->version == 7);
    CHECK(std::distance(std::filesystem::directory_iterator(dir.root()),
                        std::filesystem::directory_iterator()) == 1);
    // And through the same Fs, when nothing fails, it works and reads back.
    REQUIRE(write_ring_file(other, path, faulty).ok());
    CHECK(load_ring_file(path, faulty)->version == 99);
  }
  SUBCASE("a read error is reported as such") {
    common::io::FaultInjectingFs faulty(common::io::default_fs());
    faulty.fail_next(common::io::FaultInjectingFs::Op::kRead, EIO);
    CHECK(load_ring_file(path, faulty).status().code() == Code::kIOError);
  }
}

TEST_CASE("random rings round trip through the file format") {
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    const double replicas = 1.0 + (seed % 5) * 0.5;
    const RingData ring = testing::random_ring(seed, 1 + static_cast<int>(seed % 10), replicas,
                                               2 + static_cast<int>(seed * 7 % 40), 3, 3, 3);
    common::Result<std::string> file = encode_ring(ring, "r.ring.gz");
    REQUIRE(file.ok());
    common::Result<RingData> back = decode_ring(*file);
    REQUIRE_MESSAGE(back.ok(), back.status().to_string());
    check_same(ring, *back);
  }
}

}  // namespace
}  // namespace apus::ring
