#include "common/io/device_pools.h"

#include "common/log/log.h"
#include "common/metrics/metrics.h"

namespace apus::common::io {

DevicePools::DevicePools(std::string prefix, int threads_per_device, Check check,
                         Metrics* metrics)
    : prefix_(std::move(prefix)),
      threads_per_device_(threads_per_device),
      check_(std::move(check)),
      metrics_(metrics),
      probe_(prefix_ + "-probe", 1) {
  if (metrics_) probe_.export_metrics(*metrics_);
}

DevicePools::~DevicePools() = default;

boost::asio::awaitable<BlockingPool*> DevicePools::checked(const std::string& device) {
  if (BlockingPool* known = find(device)) co_return known;
  Status s = co_await probe_.call([this, &device] { return check_(device); });
  if (!s.ok()) co_return nullptr;
  co_return &get(device);
}

BlockingPool* DevicePools::find(const std::string& device) {
  MutexLock lock(&mutex_);
  auto it = pools_.find(device);
  return it == pools_.end() ? nullptr : it->second.get();
}

BlockingPool& DevicePools::get(const std::string& device) {
  MutexLock lock(&mutex_);
  if (auto it = pools_.find(device); it != pools_.end()) return *it->second;
  if (pools_.size() >= kMaxPools) {
    if (!overflow_) {
      APUS_LOG_WARNING("more than " + std::to_string(kMaxPools) +
                       " devices: the others share one " + prefix_ + " pool");
      overflow_ = std::make_unique<BlockingPool>(prefix_ + "-overflow", threads_per_device_);
      if (metrics_) overflow_->export_metrics(*metrics_);
    }
    return *overflow_;
  }
  auto& pool = pools_[device];
  pool = std::make_unique<BlockingPool>(prefix_ + "-" + device, threads_per_device_);
  if (metrics_) pool->export_metrics(*metrics_);
  return *pool;
}

size_t DevicePools::size() {
  MutexLock lock(&mutex_);
  return pools_.size();
}

}  // namespace apus::common::io
