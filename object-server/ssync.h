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

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/asio/awaitable.hpp>

#include "common/http/client.h"
#include "common/timestamp.h"
#include "object-server/diskfile.h"

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

// ---- The sender (ssync_sender.cpp) ----

// What this node would offer of the objects in `suffixes` of the partition of `part` (Swift's
// yield_hashes: by the names of their files, in hash order). Blocking disk I/O.
common::Result<std::vector<Offer>> local_offers(DiskFileManager& disk, const Location& part,
                                                const std::vector<std::string>& suffixes);

// A receiving object server: its replication address and the device there.
struct SyncTarget {
  std::string ip;
  uint16_t port = 0;
  std::string device;
  int region = 1;
  // With sync_method = rsync: the replicator's rsync_module for this device, interpolated.
  std::string rsync_module;
};

struct SyncResult {
  bool ok = false;
  std::string error;  // why not, when !ok
  // Every object offered, now held by the receiver too, as it was offered: what a handoff
  // partition may delete after every primary took it (Swift's can_delete_obj), if it has not
  // changed since.
  std::vector<Offer> in_sync;
  size_t puts = 0, posts = 0, deletes = 0;  // updates sent
};

// Swift's ssync_sender.Sender: offers the objects of `suffixes` of the partition of `part`
// (device, partition, policy) to `target` and sends what it wants. Reads the disk inline: run
// it on an io_context of the replicator's own, whose thread may block on disk I/O.
// (A plain function over a coroutine: see the GCC 12 note in common/http/server.h.)
boost::asio::awaitable<SyncResult> send_partition_impl(DiskFileManager& disk,
                                                       const Location& part,
                                                       std::vector<std::string> suffixes,
                                                       SyncTarget target,
                                                       common::http::ClientOptions options);
inline boost::asio::awaitable<SyncResult> send_partition(DiskFileManager& disk,
                                                         const Location& part,
                                                         std::vector<std::string> suffixes,
                                                         SyncTarget target,
                                                         common::http::ClientOptions options) {
  return send_partition_impl(disk, part, std::move(suffixes), std::move(target), options);
}

}  // namespace apus::object::ssync
