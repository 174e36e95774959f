// Object replication of one partition, as Swift's object replicator does it with
// sync_method = ssync (swift-protocol.md §16.1-16.2): the part of apus-object-replicator that
// decides what to send where and what a handoff may delete. The daemon around it (rings, local
// devices, passes, stats) is issue 16's next step.
//
// A primary partition: its suffix hashes (get_hashes) are compared with each other primary's
// (REPLICATE /<dev>/<part>); suffixes that differ are rehashed here, compared again, sent with
// SSYNC, and the peer is told to rehash them (REPLICATE /<dev>/<part>/<s1>-<s2>...).
//
// A handoff partition: every suffix goes to every primary; once all of them (or handoff_delete
// of them) took it, the objects are removed here. Safer than Swift, which removes the whole
// partition directory: only the hash directories still exactly as they were offered are
// removed, so a write that landed here during the sync stays for the next pass.
//
// Blocking disk I/O inline: run on an io_context of the replicator's own.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <boost/asio/awaitable.hpp>

#include "common/http/client.h"
#include "object-server/diskfile.h"
#include "object-server/ssync.h"

namespace apus::object {

struct PartitionJob {
  Location part;                         // device, partition and policy here
  bool primary = true;                   // this device is one of the partition's primaries
  std::vector<ssync::SyncTarget> nodes;  // the other primaries (all of them for a handoff)
};

struct ReplicationOptions {
  common::http::ClientOptions client;  // conn_timeout, node_timeout
  double http_timeout = 60;            // REPLICATE answers
  // A handoff partition goes once this many primaries took it (0: all of them).
  int handoff_delete = 0;
};

struct PartitionOutcome {
  int synced = 0;        // peers now in step (compared equal or sent to)
  int failed = 0;        // peers that could not be reached or refused
  int hashmatch = 0;     // peers whose suffix hashes matched already
  int suffixes_synced = 0;
  size_t objects_removed = 0;  // handoff objects removed after the primaries took them
  bool partition_removed = false;
};

// Replicates one partition (see above).
boost::asio::awaitable<PartitionOutcome> replicate_partition_impl(DiskFileManager& disk,
                                                                  PartitionJob job,
                                                                  ReplicationOptions options);
inline boost::asio::awaitable<PartitionOutcome> replicate_partition(DiskFileManager& disk,
                                                                    PartitionJob job,
                                                                    ReplicationOptions options) {
  return replicate_partition_impl(disk, std::move(job), std::move(options));
}

}  // namespace apus::object
