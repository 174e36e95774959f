// DevicePools: the disk pools of a storage server, one BlockingPool per device, made only for
// device names that exist. Requests name their device, and a client can name any: a pool per
// name would let it create threads at will. So a name without a pool is first checked
// (check_device(): exists, mounted when mount_check) on one shared probe thread, and only a
// device found there gets a pool; at most kMaxPools devices get their own, the rest share one.
//
// Thread-safe. Pools are never removed, so a pool reference stays valid until this is
// destroyed; destroying it waits for the pools' queued jobs.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include <boost/asio/awaitable.hpp>

#include "common/io/blocking_pool.h"
#include "common/status.h"
#include "common/thread_annotations.h"

namespace apus::common {
class Metrics;
}

namespace apus::common::io {

class DevicePools {
 public:
  // check(device): ok when the device exists (runs on the probe thread). `prefix` names the
  // threads ("disk" gives disk-<device>, disk-probe, disk-overflow). `metrics` (nullable)
  // must outlive this.
  using Check = std::function<Status(const std::string& device)>;
  DevicePools(std::string prefix, int threads_per_device, Check check, Metrics* metrics);
  ~DevicePools();

  // The pool of `device`, or nullptr when it does not exist (answer 507). Known devices
  // answer at once; their jobs still check the device, which may have gone since. `device`
  // must live until the result is awaited.
  boost::asio::awaitable<BlockingPool*> checked(const std::string& device);
  // The pool `device` has already, or nullptr.
  BlockingPool* find(const std::string& device) APUS_EXCLUDES(mutex_);
  // The pool of `device`, made on first use. REQUIRES: the device was found on disk (a walk
  // over the devices directory, or check passed).
  BlockingPool& get(const std::string& device) APUS_EXCLUDES(mutex_);
  // Devices with a pool of their own so far.
  size_t size() APUS_EXCLUDES(mutex_);

  // A real server has tens of devices; this bounds the threads (threads_per_device each) even
  // if many directories appear under `devices`.
  static constexpr size_t kMaxPools = 256;

 private:
  const std::string prefix_;
  const int threads_per_device_;
  const Check check_;
  Metrics* const metrics_;
  // One thread: a probe is a stat or two, and only names without a pool take it.
  BlockingPool probe_;
  Mutex mutex_;
  std::map<std::string, std::unique_ptr<BlockingPool>> pools_ APUS_GUARDED_BY(mutex_);
  std::unique_ptr<BlockingPool> overflow_ APUS_GUARDED_BY(mutex_);  // beyond kMaxPools
};

}  // namespace apus::common::io
