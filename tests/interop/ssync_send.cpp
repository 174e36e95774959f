// Runs Apus's SSYNC sender or its replication of one partition once, for
// tests/interop/ssync_interop.py:
//   ssync_send ssync DEVICES DEVICE PARTITION SUFFIX[,SUFFIX...] IP PORT TARGET_DEVICE
//     prints "ok <puts> <posts> <deletes> <in sync>" or "error <why>"
//   ssync_send primary|handoff DEVICES DEVICE PARTITION IP:PORT/DEVICE...
//     prints "ok <synced> <failed> <hashmatch> <suffixes> <objects removed> <partition removed>"
// with the cluster's swift.conf in $APUS_SWIFT_DIR (default /etc/swift).
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "common/config/config.h"
#include "common/config/swift_conf.h"
#include "common/io/fs.h"
#include "object-server/replicator.h"
#include "object-server/ssync.h"

namespace net = boost::asio;
using namespace apus;

namespace {

template <class Awaitable>
auto run(Awaitable a) {
  net::io_context ioc;
  auto done = net::co_spawn(ioc, std::move(a), net::use_future);
  ioc.run();
  return done.get();
}

object::ssync::SyncTarget parse_node(const std::string& text) {  // ip:port/device
  size_t colon = text.find(':');
  size_t slash = text.find('/', colon);
  return {text.substr(0, colon),
          static_cast<uint16_t>(std::stoi(text.substr(colon + 1, slash - colon - 1))),
          text.substr(slash + 1), 1, ""};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 6) {
    std::fprintf(stderr, "usage: see tests/interop/ssync_send.cpp\n");
    return 2;
  }
  const std::string mode = argv[1];
  object::DiskFileOptions options;
  options.devices = argv[2];
  options.mount_check = false;
  // The cluster's hash prefix and suffix: objects found by hash must hash back to their name.
  const char* swift_dir = std::getenv("APUS_SWIFT_DIR");
  auto swift = common::load_swift_conf(std::string(swift_dir ? swift_dir : "/etc/swift") +
                                       "/swift.conf");
  if (!swift.ok()) {
    std::fprintf(stderr, "%s\n", swift.status().to_string().c_str());
    return 2;
  }
  object::DiskFileManager disk(common::io::default_fs(), options,
                               {swift->hash_path_prefix, swift->hash_path_suffix});
  object::Location part;
  part.device = argv[3];
  part.partition = argv[4];
  common::http::ClientOptions client;
  client.conn_timeout = 5;
  client.node_timeout = 30;
  if (mode == "ssync" && argc == 9) {
    object::ssync::SyncTarget target{argv[6], static_cast<uint16_t>(std::stoi(argv[7])), argv[8], 1, ""};
    object::ssync::SyncResult r = run(object::ssync::send_partition(
        disk, part, common::list_from_csv(argv[5]), target, client));
    if (!r.ok) {
      std::printf("error %s\n", r.error.c_str());
      return 1;
    }
    std::printf("ok %zu %zu %zu %zu\n", r.puts, r.posts, r.deletes, r.in_sync.size());
    return 0;
  }
  object::PartitionJob job;
  job.part = part;
  job.primary = mode == "primary";
  for (int i = 5; i < argc; ++i) job.nodes.push_back(parse_node(argv[i]));
  object::ReplicationOptions ropts;
  ropts.client = client;
  object::PartitionOutcome o = run(object::replicate_partition(disk, job, ropts));
  std::printf("ok %d %d %d %d %zu %d\n", o.synced, o.failed, o.hashmatch, o.suffixes_synced,
              o.objects_removed, o.partition_removed ? 1 : 0);
  return 0;
}
