// SSYNC's line formats (object-server/ssync.h), against lines Swift 2.30.1's sender and
// receiver write (swift/obj/ssync_sender.encode_missing, ssync_receiver.encode_wanted).
#include "object-server/ssync.h"

#include <doctest/doctest.h>

using apus::common::Timestamp;
namespace ssync = apus::object::ssync;

namespace {

constexpr const char* kHash = "9d41d8cd98f00b204e9800998ecf0abc";

Timestamp ts(const char* text) { return *Timestamp::parse(text); }

}  // namespace

TEST_CASE("ssync: missing check lines as Swift's sender writes them") {
  ssync::Offer o;
  o.hash = kHash;
  o.ts_data = o.ts_meta = o.ts_ctype = ts("1380144470.00000");
  CHECK(ssync::encode_missing(o) == std::string(kHash) + " 1380144470.00000");
  o.ts_meta = ts("1380144471.00000");
  CHECK(ssync::encode_missing(o) == std::string(kHash) + " 1380144470.00000 m:186a0");
  o.ts_ctype = ts("1380144470.50000");
  CHECK(ssync::encode_missing(o) == std::string(kHash) + " 1380144470.00000 m:186a0,t:c350");
  o.durable = false;
  CHECK(ssync::encode_missing(o) ==
        std::string(kHash) + " 1380144470.00000 m:186a0,t:c350,durable:False");
  o.ts_data = ts("1380144470.00000_0000000000000001");
  o.ts_meta = o.ts_ctype = o.ts_data;
  o.durable = true;
  CHECK(ssync::encode_missing(o) == std::string(kHash) + " 1380144470.00000_0000000000000001");
}

TEST_CASE("ssync: decode_missing reads what encode_missing writes, deltas from the data's time") {
  auto o = ssync::decode_missing(std::string(kHash) + " 1380144470.00000 m:186a0,t:c350\r\n");
  REQUIRE(o);
  CHECK(o->hash == kHash);
  CHECK(o->ts_data == ts("1380144470.00000"));
  CHECK(o->ts_meta == ts("1380144471.00000"));
  CHECK(o->ts_ctype == ts("1380144470.50000"));
  CHECK(o->durable);
  auto plain = ssync::decode_missing(std::string(kHash) + " 1380144470.00000_0000000000000002");
  REQUIRE(plain);
  CHECK(plain->ts_meta == plain->ts_data);
  CHECK(plain->ts_data.offset() == 2);
  auto nd = ssync::decode_missing(std::string(kHash) + " 1380144470.00000 durable:False");
  REQUIRE(nd);
  CHECK_FALSE(nd->durable);
  // Items without a colon are skipped, as Swift does; unknown keys are ignored.
  CHECK(ssync::decode_missing(std::string(kHash) + " 1380144470.00000 junk,x:1"));
}

TEST_CASE("ssync: decode_missing refuses what is not a missing check line") {
  for (std::string bad : {std::string(""), std::string(kHash),
                          std::string("../../etc/passwd 1380144470.00000"),
                          std::string("9D41D8CD98F00B204E9800998ECF0ABC 1380144470.00000"),
                          std::string(kHash) + " yesterday",
                          std::string(kHash) + " 1380144470.00000 m:zz",
                          std::string(kHash) + " 1380144470.00000 m:1:2",
                          std::string(kHash) + " 1380144470.00000 m:-ffffffffffffff",
                          std::string(kHash) + " 1380144470.00000 m:1 extra"}) {
    CAPTURE(bad);
    CHECK_FALSE(ssync::decode_missing(bad));
  }
}

TEST_CASE("ssync: encode_wanted asks for what is newer than here, as Swift's receiver") {
  ssync::Offer remote;
  remote.hash = kHash;
  remote.ts_data = ts("1000.00000");
  remote.ts_meta = ts("1002.00000");
  remote.ts_ctype = ts("1001.00000");
  ssync::LocalState none;
  CHECK(ssync::encode_wanted(remote, none) == std::string(kHash) + " dm");
  ssync::LocalState same{ts("1000.00000"), ts("1002.00000"), ts("1001.00000")};
  CHECK_FALSE(ssync::encode_wanted(remote, same));
  ssync::LocalState old_data{ts("999.00000"), ts("1002.00000"), ts("1001.00000")};
  CHECK(ssync::encode_wanted(remote, old_data) == std::string(kHash) + " d");
  ssync::LocalState old_meta{ts("1000.00000"), ts("1001.00000"), ts("1001.00000")};
  CHECK(ssync::encode_wanted(remote, old_meta) == std::string(kHash) + " m");
  ssync::LocalState old_ctype{ts("1000.00000"), ts("1002.00000"), ts("1000.00000")};
  CHECK(ssync::encode_wanted(remote, old_ctype) == std::string(kHash) + " m");
  // A tombstone here (data time only) that is older: the data is wanted, not the metadata.
  ssync::LocalState tombstone{ts("999.00000"), std::nullopt, std::nullopt};
  CHECK(ssync::encode_wanted(remote, tombstone) == std::string(kHash) + " d");
  ssync::LocalState newer_tombstone{ts("1003.00000"), std::nullopt, std::nullopt};
  CHECK_FALSE(ssync::encode_wanted(remote, newer_tombstone));
}

TEST_CASE("ssync: decode_wanted, none meaning data") {
  CHECK(ssync::decode_wanted("").data);
  CHECK_FALSE(ssync::decode_wanted("").meta);
  CHECK(ssync::decode_wanted("m").meta);
  CHECK_FALSE(ssync::decode_wanted("m").data);
  CHECK(ssync::decode_wanted("dm").data);
  CHECK(ssync::decode_wanted("dm").meta);
}
