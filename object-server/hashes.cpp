// Suffix hashes of a partition (hashes.pkl, hashes.invalid), as Swift's replicator and
// REPLICATE verb use them (swift-protocol.md §7.7). Part of DiskFileManager.
#include <sys/file.h>

#include <algorithm>
#include <chrono>

#include "common/crypto/md5.h"
#include "common/log/log.h"
#include "common/config/config.h"
#include "common/pickle.h"
#include "object-server/diskfile.h"

namespace apus::object {

namespace pickle = common::pickle;
using common::Result;
using common::Status;
using common::Timestamp;

bool is_valid_suffix(std::string_view s) {
  return s.size() == 3 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

Result<PartitionLock> PartitionLock::take(common::io::Fs& fs, const std::string& part_dir) {
  auto file = fs.open_append(part_dir + "/.lock");
  if (!file.ok()) return file.status();
  if (::flock(file->fd(), LOCK_EX) != 0) {
    return common::io::from_errno(errno, "flock " + part_dir + "/.lock");
  }
  return PartitionLock(std::move(*file));
}

PartitionLock::~PartitionLock() {
  if (file_.is_open()) ::flock(file_.fd(), LOCK_UN);
}

namespace {

// The suffix entries of a pickled hashes dict, appended directly (Value::set would look each
// key up: quadratic in the partition's suffixes, up to 4096).
pickle::Value::Dict suffix_entries(const SuffixHashes& hashes) {
  pickle::Value::Dict entries;
  entries.reserve(hashes.suffixes.size() + 2);
  for (const auto& [suffix, hash] : hashes.suffixes) {
    entries.emplace_back(pickle::Value::str(suffix),
                         hash ? pickle::Value::str(*hash) : pickle::Value::none());
  }
  return entries;
}

}  // namespace

SuffixHashes DiskFileManager::read_hashes(const std::string& part_dir) {
  SuffixHashes out;
  auto bytes = fs_.read_file(part_dir + "/hashes.pkl");
  if (!bytes.ok()) return out;
  auto value = pickle::loads(*bytes);
  if (!value.ok() || !value->is_dict()) return out;
  for (const auto& [k, v] : value->as_dict()) {
    if (!k.is_str()) return SuffixHashes();
    const std::string& key = k.as_str();
    if (key == "valid") {
      out.valid = v.is_bool() && v.as_bool();
    } else if (key == "updated") {
      if (v.is_float()) out.updated = v.as_float();
      if (v.is_int()) out.updated = static_cast<double>(v.as_int());
    } else if (is_valid_suffix(key)) {
      out.suffixes.emplace_back(key, v.is_str() ? std::optional<std::string>(v.as_str())
                                                : std::nullopt);
    } else {
      return SuffixHashes();  // as Swift: an unexpected key makes the whole file invalid
    }
  }
  return out;
}

Status DiskFileManager::write_hashes(const std::string& part_dir, SuffixHashes& hashes) {
  hashes.updated =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  pickle::Value::Dict entries = suffix_entries(hashes);
  entries.emplace_back(pickle::Value::str("valid"), pickle::Value::boolean(hashes.valid));
  entries.emplace_back(pickle::Value::str("updated"), pickle::Value::floating(*hashes.updated));
  return fs_.write_file_atomic(part_dir + "/hashes.pkl",
                               pickle::dumps(pickle::Value::dict(std::move(entries)), 2), part_dir);
}

std::string SuffixHashes::pickled_suffixes() const {
  return pickle::dumps(pickle::Value::dict(suffix_entries(*this)), 2);
}

Result<SuffixHashes> DiskFileManager::consolidate_hashes(const std::string& part_dir) {
  auto lock = PartitionLock::take(fs_, part_dir);
  if (!lock.ok()) return lock.status();
  SuffixHashes hashes = read_hashes(part_dir);
  auto invalid = fs_.read_file(part_dir + "/hashes.invalid");
  if (!invalid.ok()) {
    if (invalid.status().is_not_found()) return hashes;
    return invalid.status();
  }
  if (invalid->empty()) return hashes;
  size_t start = 0;
  while (start < invalid->size()) {
    size_t end = invalid->find('\n', start);
    if (end == std::string::npos) end = invalid->size();
    std::string suffix = invalid->substr(start, end - start);
    while (!suffix.empty() && (suffix.back() == '\r' || suffix.back() == ' ')) suffix.pop_back();
    hashes.set(suffix, std::nullopt);
    start = end + 1;
  }
  APUS_RETURN_IF_ERROR(write_hashes(part_dir, hashes));
  // Every invalidation is in hashes.pkl now: empty hashes.invalid (the lock is still held).
  auto truncated = fs_.open_append(part_dir + "/hashes.invalid");
  if (!truncated.ok()) return truncated.status();
  APUS_RETURN_IF_ERROR(fs_.ftruncate(*truncated, 0));
  return hashes;
}

Result<std::optional<std::string>> DiskFileManager::hash_suffix(const std::string& suffix_dir) {
  auto names = fs_.list_dir(suffix_dir);
  if (!names.ok()) {
    if (names.status().is_not_found()) return std::optional<std::string>();  // gone
    auto st = fs_.stat(suffix_dir);
    if (st.ok() && st->exists && !st->is_dir) return std::optional<std::string>();
    return names.status();
  }
  std::sort(names->begin(), names->end());
  common::crypto::Md5 md5;
  Timestamp now = Timestamp::now();
  for (const auto& hash : *names) {
    std::string dir = suffix_dir + "/" + hash;
    auto files = fs_.list_dir(dir);
    if (!files.ok()) continue;
    ChosenFiles chosen = choose_files(*files, now, options_.reclaim_age);
    size_t left = files->size();
    for (const auto& name : chosen.obsolete) {
      if (fs_.unlink(dir + "/" + name).ok()) --left;
    }
    left -= prune_sidecars(dir, *files, chosen.obsolete);
    if (left == 0) {
      fs_.rmdir(dir).ignore();
      continue;
    }
    // Swift's order: the .meta, the tombstone, the .data, then a separate content type.
    if (chosen.meta) md5.update(chosen.meta->timestamp.internal() + ".meta");
    bool ts_reclaimed =
        chosen.tombstone && std::find(chosen.obsolete.begin(), chosen.obsolete.end(),
                                      chosen.tombstone->name) != chosen.obsolete.end();
    if (chosen.tombstone && !ts_reclaimed) {
      md5.update(chosen.tombstone->timestamp.internal() + ".ts");
    }
    if (chosen.data) md5.update(chosen.data->timestamp.internal() + ".data");
    if (chosen.ctype_meta && chosen.ctype_meta->ctype_timestamp) {
      md5.update(chosen.ctype_meta->ctype_timestamp->internal() + "_ctype");
    }
  }
  // An empty suffix directory goes, and so does its key.
  if (fs_.rmdir(suffix_dir).ok()) return std::optional<std::string>();
  return std::optional<std::string>(md5.hex_digest());
}

Result<SuffixHashes> DiskFileManager::get_hashes(const Location& part_loc,
                                                 const std::vector<std::string>& recalculate) {
  std::string part_dir = partition_dir(part_loc);
  auto st = fs_.stat(part_dir);
  if (!st.ok()) return st.status();
  if (!st->exists) {
    // Swift makes the partition (its hashes.pkl) on the way: a peer's rsync then finds a
    // directory to put suffixes in (rsync does not make parent directories). Safer than Swift,
    // which makes whatever name a REPLICATE gives: only a partition number a ring can have.
    auto number = common::parse_python_int(part_loc.partition);
    if (!number || *number < 0 || *number > int64_t{0xffffffff}) {
      return SuffixHashes{.valid = true};
    }
    auto made = fs_.mkdirs(part_dir);
    if (!made.ok()) return made.status();
  }
  // Another process may write hashes.pkl meanwhile: Swift's optimistic scheme, retried.
  for (int attempt = 0; attempt < 10; ++attempt) {
    auto consolidated = consolidate_hashes(part_dir);
    SuffixHashes orig = consolidated.ok() ? *consolidated : SuffixHashes();
    SuffixHashes hashes;
    bool modified = false;
    if (!orig.valid) {
      hashes.valid = true;
      orig = read_hashes(part_dir);
      auto entries = fs_.list_dir(part_dir);
      if (entries.ok()) {
        for (const auto& e : *entries) {
          if (e.size() == 3 && !hashes.find(e)) hashes.set(e, std::nullopt);
        }
      }
      modified = true;
    } else {
      hashes = orig;
    }
    for (const auto& suffix : recalculate) hashes.set(suffix, std::nullopt);
    std::vector<std::pair<std::string, std::optional<std::string>>> kept;
    for (auto& [suffix, hash] : hashes.suffixes) {
      if (hash) {
        kept.emplace_back(suffix, hash);
        continue;
      }
      auto fresh = hash_suffix(partition_dir(part_loc) + "/" + suffix);
      modified = true;
      if (!fresh.ok()) {
        APUS_LOG_ERROR("error hashing suffix " + suffix + ": " + fresh.status().to_string());
        kept.emplace_back(suffix, std::nullopt);
      } else if (fresh->has_value()) {
        kept.emplace_back(suffix, *fresh);
      }
    }
    hashes.suffixes = std::move(kept);
    if (!modified) return hashes;
    auto lock = PartitionLock::take(fs_, part_dir);
    if (!lock.ok()) return lock.status();
    if (read_hashes(part_dir) == orig) {
      APUS_RETURN_IF_ERROR(write_hashes(part_dir, hashes));
      return hashes;
    }
  }
  return Status::unavailable("hashes.pkl of " + part_dir + " keeps changing");
}

}  // namespace apus::object
