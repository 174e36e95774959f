// Device checks every storage server makes before touching a device, as Swift's check_drive()
// and fs_has_free_space() do.
//
// Pure functions over an Fs; thread-safe as the Fs is.
#pragma once

#include <cstdint>
#include <string>

#include "common/io/fs.h"
#include "common/status.h"

namespace apus::common::io {

// Free space a server keeps: fallocate_reserve, in bytes or as a percentage ("1%").
struct FreeSpaceReserve {
  double amount = 1.0;
  bool is_percent = true;

  // Parses Swift's fallocate_reserve value; InvalidArgument when it is not a number or a
  // percentage.
  static Result<FreeSpaceReserve> parse(std::string value);
};

// InsufficientStorage unless `devices`/`device` is a mount point (`mount_check`) or else a
// directory.
Status check_device(Fs& fs, const std::string& devices, const std::string& device,
                    bool mount_check);

// InsufficientStorage when writing `size` more bytes on `devices`/`device` would eat into the
// reserve.
Status check_free_space(Fs& fs, const std::string& devices, const std::string& device,
                        const FreeSpaceReserve& reserve, uint64_t size = 0);

}  // namespace apus::common::io
