#include "common/io/device.h"

#include <cstdlib>

namespace apus::common::io {

namespace {
std::string join(const std::string& a, const std::string& b) {
  return a.empty() || a.back() == '/' ? a + b : a + "/" + b;
}
}  // namespace

Result<FreeSpaceReserve> FreeSpaceReserve::parse(std::string value) {
  FreeSpaceReserve r;
  r.is_percent = !value.empty() && value.back() == '%';
  if (r.is_percent) value.pop_back();
  char* end = nullptr;
  r.amount = std::strtod(value.c_str(), &end);
  if (value.empty() || end == value.c_str() || *end != '\0') {
    return Status::invalid_argument("is not a number or a percentage");
  }
  return r;
}

Status check_device(Fs& fs, const std::string& devices, const std::string& device,
                    bool mount_check) {
  std::string path = join(devices, device);
  if (mount_check) {
    auto mounted = fs.is_mount(path);
    if (!mounted.ok() || !*mounted) {
      return Status::insufficient_storage(device + " is not mounted");
    }
    return Status();
  }
  auto st = fs.stat(path);
  if (!st.ok() || !st->exists || !st->is_dir) {
    return Status::insufficient_storage(device + " is not a directory");
  }
  return Status();
}

Status check_free_space(Fs& fs, const std::string& devices, const std::string& device,
                        const FreeSpaceReserve& reserve, uint64_t size) {
  if (reserve.amount <= 0) return Status();
  auto space = fs.statvfs(join(devices, device));
  if (!space.ok()) return space.status();
  double free_after = static_cast<double>(space->free_bytes) - static_cast<double>(size);
  double keep = reserve.is_percent
                    ? static_cast<double>(space->total_bytes) * reserve.amount / 100
                    : reserve.amount;
  if (free_after < keep) {
    return Status::insufficient_storage("not enough free space on " + device);
  }
  return Status();
}

}  // namespace apus::common::io
