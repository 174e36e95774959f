// SSYNC, Swift's object replication protocol over one HTTP request (swift-protocol.md §16.2):
// the sender offers the objects of some suffixes of a partition (missing check), the receiver
// answers which it wants (data, metadata or both), the sender then streams PUT, POST and DELETE
// subrequests for them (updates), which the receiver runs against its own object server with
// X-Backend-Replication.
//
// This file holds the line formats both sides speak; the receiver is ObjectServer::handle_ssync
// (ssync.cpp). Everything a sender writes is checked here: object hashes must be 32 hex digits
// (Swift joins whatever it gets into a path), timestamps valid, deltas in range.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "common/timestamp.h"

namespace apus::object::ssync {

// One offered object of a missing check: "<hash> <ts_data>[ m:<hex>[,t:<hex>][,durable:False]]",
// the meta and content-type timestamps as deltas (10 µs units) from the data's.
struct Offer {
  std::string hash;  // 32 lowercase hex
  common::Timestamp ts_data;
  common::Timestamp ts_meta;
  common::Timestamp ts_ctype;
  bool durable = true;
};

// Swift's decode_missing(); nullopt for a line that is not one (the receiver then gives up).
std::optional<Offer> decode_missing(std::string_view line);
// Swift's encode_missing() (no CRLF): the deltas only where the timestamps differ from ts_data.
std::string encode_missing(const Offer& offer);

// What the receiver has of an offered object: nothing, a tombstone (ts_data only) or an object.
struct LocalState {
  std::optional<common::Timestamp> ts_data;
  std::optional<common::Timestamp> ts_meta;
  std::optional<common::Timestamp> ts_ctype;
};

// Swift's encode_wanted(): "<hash> d", "<hash> m" or "<hash> dm" when the offer is newer than
// what is here in data or in metadata; nullopt when nothing is wanted.
std::optional<std::string> encode_wanted(const Offer& remote, const LocalState& local);

// Swift's decode_wanted() of the parts after the hash ("d", "m", "dm"; none means data).
struct Wanted {
  bool data = false;
  bool meta = false;
};
Wanted decode_wanted(std::string_view parts);

}  // namespace apus::object::ssync
