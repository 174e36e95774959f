// Runs Apus's SSYNC sender once, for tests/interop/ssync_interop.py:
//   ssync_send DEVICES DEVICE PARTITION SUFFIX[,SUFFIX...] IP PORT TARGET_DEVICE
// prints "ok puts posts deletes in_sync" or "error <why>", and exits 0 or 1.
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <cstdio>
#include <string>

#include "common/config/config.h"
#include "common/io/fs.h"
#include "object-server/ssync.h"

namespace net = boost::asio;
using namespace apus;

int main(int argc, char** argv) {
  if (argc != 8) {
    std::fprintf(stderr, "usage: ssync_send DEVICES DEVICE PARTITION SUFFIXES IP PORT TARGET\n");
    return 2;
  }
  object::DiskFileOptions options;
  options.devices = argv[1];
  options.mount_check = false;
  object::DiskFileManager disk(common::io::default_fs(), options, common::HashPathConfig{});
  object::Location part;
  part.device = argv[2];
  part.partition = argv[3];
  std::vector<std::string> suffixes = common::list_from_csv(argv[4]);
  object::ssync::SyncTarget target{argv[5], static_cast<uint16_t>(std::stoi(argv[6])), argv[7]};
  common::http::ClientOptions client;
  client.conn_timeout = 5;
  client.node_timeout = 30;
  net::io_context ioc;
  auto done = net::co_spawn(
      ioc, object::ssync::send_partition(disk, part, suffixes, target, client), net::use_future);
  ioc.run();
  object::ssync::SyncResult r = done.get();
  if (!r.ok) {
    std::printf("error %s\n", r.error.c_str());
    return 1;
  }
  std::printf("ok %zu %zu %zu %zu\n", r.puts, r.posts, r.deletes, r.in_sync.size());
  return 0;
}
