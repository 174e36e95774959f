// Fuzzes the pickle reader (common/pickle.h) on what an attacker with write access to a disk
// or a peer answering REPLICATE could hand it: xattr metadata, hashes.pkl, async_pendings.
//
// Besides the sanitizers (and loads()'s own depth and expansion bounds, which keep each input
// cheap), it checks two round trips the servers rely on: a value loads() accepts is written by
// dumps() at protocols 0-2 into a pickle that loads back to the same value, and the object
// metadata decode_object_metadata() returns encodes into a pickle that decodes to the same
// pairs. And its two readers agree: whatever the plain one reads, the general one reads to the
// same pairs.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <string_view>

#include "common/pickle.h"

namespace pickle = apus::common::pickle;

namespace {

void fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "pickle_fuzz: %s: %s\n", what, detail.c_str());
  std::abort();
}

// NaN != NaN, so values holding one cannot be compared after a round trip.
bool has_nan(const pickle::Value& v) {
  switch (v.kind()) {
    case pickle::Value::Kind::kFloat: return std::isnan(v.as_float());
    case pickle::Value::Kind::kList:
    case pickle::Value::Kind::kTuple:
      for (const auto& item : v.as_list()) {
        if (has_nan(item)) return true;
      }
      return false;
    case pickle::Value::Kind::kDict:
      for (const auto& [k, item] : v.as_dict()) {
        if (has_nan(k) || has_nan(item)) return true;
      }
      return false;
    default: return false;
  }
}

void check_value_round_trip(const pickle::Value& v) {
  if (has_nan(v)) return;
  for (int protocol = 0; protocol <= 2; ++protocol) {
    std::string again = pickle::dumps(v, protocol);
    auto back = pickle::loads(again);
    if (!back.ok()) {
      fail("dumps() wrote what loads() refuses",
           "protocol " + std::to_string(protocol) + ": " + back.status().to_string() + " for " +
               v.debug_string());
    }
    if (!(*back == v)) {
      fail("round trip changed the value", "protocol " + std::to_string(protocol) + ": " +
                                               v.debug_string() + " -> " +
                                               back->debug_string());
    }
  }
}

void check_metadata_readers_agree(std::string_view data) {
  auto plain = pickle::internal::decode_plain_object_metadata(data);
  if (!plain) return;
  auto general = pickle::internal::decode_general_object_metadata(data);
  if (!general.ok())
    fail("the general reader refuses what the plain one reads", general.status().to_string());
  if (*general != *plain) fail("the metadata readers disagree", "");
}

void check_metadata_round_trip(std::string_view data) {
  auto pairs = pickle::decode_object_metadata(data);
  if (!pairs.ok()) return;
  // encode_object_metadata() requires distinct keys.
  std::set<std::string> keys;
  for (const auto& [k, v] : *pairs) {
    if (!keys.insert(k).second) return;
  }
  auto back = pickle::decode_object_metadata(pickle::encode_object_metadata(*pairs));
  if (!back.ok()) fail("encoded metadata does not decode", back.status().to_string());
  if (*back != *pairs) fail("metadata round trip changed the pairs", "");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  auto v = pickle::loads(input);
  if (v.ok()) {
    (void)v->debug_string();
    check_value_round_trip(*v);
  }
  check_metadata_round_trip(input);
  check_metadata_readers_agree(input);
  return 0;
}
