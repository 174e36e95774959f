// The recon cache files Swift's daemons write and swift-recon reads (object.recon,
// container.recon, ...): one JSON object per file, each daemon merging its own keys in (Swift's
// dump_recon_cache). A key whose value is an object is merged one level deep, so two daemons
// can share a top-level entry.
//
// Thread-safe: writers of one file (here or in a Swift daemon) are ordered by flock on it.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace apus::common {

// Merges `entries` (the text of a JSON object) into `path`, made if missing, replaced whole
// (temp file and rename). InvalidArgument when `entries` is not a JSON object; the filesystem
// error when the directory is missing or not writable.
Status dump_recon_cache(const std::string& path, std::string_view entries);

// dump_recon_cache() of one number under `key` (a daemon's pass time), a failure logged at
// ERROR, as Swift's daemons log it and go on.
void write_recon_entry(const std::string& path, std::string_view key, double value);

}  // namespace apus::common
