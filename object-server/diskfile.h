// The object on-disk layout, byte for byte as Swift's replicated policy keeps it
// (swift-protocol.md §7, object-server/FORMAT.md):
//
//   <devices>/<dev>/objects[-N]/<part>/<suffix>/<hash>/<timestamp>.data|.meta|.ts
//
// with metadata pickled into `user.swift.metadata*` xattrs. DiskFileManager opens an object's
// current state (choosing among the files of its hash directory exactly as Swift does), writes
// new .data, .meta and .ts files durably (temp file, fsync, rename, fsync of the directory), marks
// the partition's suffix as changed (hashes.invalid) and removes files a write made obsolete.
//
// Blocking: every call here does disk I/O through the Fs seam. Call only on a disk pool thread.
// Thread-safe: a DiskFileManager holds configuration only; concurrent writers of one object are
// ordered by their timestamps, as in Swift (the newest file wins, whatever order renames land in).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/crypto/md5.h"
#include "common/hash_path.h"
#include "common/io/device.h"
#include "common/io/fs.h"
#include "common/status.h"
#include "common/timestamp.h"

namespace apus::object {

// Object metadata as stored: (name, value) pairs of wire bytes, in the order written. Names are
// Swift's spellings ("X-Timestamp", "Content-Type", "ETag", "Content-Length", "name",
// "X-Object-Meta-Color"...). A few dozen entries at most, so a vector.
using Metadata = std::vector<std::pair<std::string, std::string>>;

// The value stored under `key` (exact match), or nullptr.
const std::string* find_meta(const Metadata& md, std::string_view key);
// The first value stored under `key` in any case (as headers name it), or nullptr.
const std::string* find_meta_ci(const Metadata& md, std::string_view key);
// Sets `key` to `value`, replacing an existing entry.
void set_meta(Metadata& md, std::string_view key, std::string_view value);

// The CRC32C of a .data file's body (8 hex digits), a space, and the ETag stored with it:
// Apus's object server computes it of every body it stores, and a whole-object GET checks the
// CRC32C instead of the MD5 while the ETag is still the one it was stored with (a changed ETag
// is checked by MD5, as Swift checks it). Not metadata in Swift's sense: Swift's object servers
// never return it, and Apus's stores only the value it computed itself. The name is one that
// Python's str.title() (Swift's and our title_case of replicated header names) leaves alone.
inline constexpr std::string_view kCrc32cMetaKey = "X-Apus-Crc32C";
// kCrc32cMetaKey's value for a body of CRC32C `crc_hex` (8 hex digits) stored with `etag`.
std::string stored_crc32c(std::string_view crc_hex, std::string_view etag);
// The CRC32C in `md`'s kCrc32cMetaKey when there is one and it was stored with `etag`.
std::optional<uint32_t> stored_crc32c_for(const Metadata& md, std::string_view etag);

// Which object, on which device and partition, under which policy.
struct Location {
  std::string device;
  std::string partition;
  std::string account;
  std::string container;
  std::string object;
  int policy = 0;
  // X-Backend-Next-Part-Power (0: none): during a partition power increase every new file is
  // also hard-linked into its partition under that power, as Swift's relinker would.
  int next_part_power = 0;

  // "/a/c/o", the `name` Swift stores in metadata.
  std::string name() const { return "/" + account + "/" + container + "/" + object; }
};

// One file of a hash directory, parsed from its name.
struct OnDiskFile {
  enum class Kind { kData, kMeta, kTombstone };
  std::string name;
  Kind kind = Kind::kData;
  common::Timestamp timestamp;
  std::optional<common::Timestamp> ctype_timestamp;  // .meta files that changed Content-Type
};

// Parses "<ts>.data", "<ts>.ts", "<ts>.meta" and "<ts>[+-delta].meta"; nullopt for names Swift
// would not recognise (rsync temp files and the like), which are left alone.
std::optional<OnDiskFile> parse_file_name(std::string_view name);

// The outcome of Swift's choice among the files of one hash directory (§7.3).
struct ChosenFiles {
  std::optional<OnDiskFile> data;        // current .data, if the object exists
  std::optional<OnDiskFile> meta;        // newest .meta newer than the data
  std::optional<OnDiskFile> ctype_meta;  // an older .meta whose content-type is still newest
  std::optional<OnDiskFile> tombstone;   // current .ts, if the object is deleted
  std::vector<std::string> obsolete;     // files to remove
};

// Chooses the current files. `now` and `reclaim_age` (seconds) decide when a lone tombstone or
// an orphaned .meta has lived long enough to be removed too.
ChosenFiles choose_files(const std::vector<std::string>& names, const common::Timestamp& now,
                         int64_t reclaim_age);

// An object as found on disk.
struct DiskObject {
  // kCollision: the hash directory holds the data of another name, which hashes the same
  // (Swift's DiskFileCollision). Nothing of that object is given out, and nothing may be
  // written over it: Swift refuses the request (403).
  enum class State { kMissing, kDeleted, kExists, kCollision };
  State state = State::kMissing;
  // kExists: the .data timestamp; kDeleted: the tombstone's.
  common::Timestamp data_timestamp;
  // The newest of data, .meta: what X-Timestamp and X-Backend-Timestamp report.
  common::Timestamp timestamp;
  std::optional<common::Timestamp> meta_timestamp;
  common::Timestamp ctype_timestamp;  // of the Content-Type in effect
  Metadata metadata;                  // effective metadata (§7.3 rule 5)
  Metadata data_metadata;             // the .data file's own metadata
  // The .meta file's own metadata with a newer Content-Type from another .meta merged in
  // (Swift's get_metafile_metadata(), what SSYNC's POST carries); empty without a .meta.
  Metadata meta_metadata;
  uint64_t size = 0;
  common::io::File data_file;  // open for reading when kExists
  // The open found the hash directory. A write that follows (PUT, DELETE) tells its commit,
  // which then renames into it without checking first that it is there (see commit_file).
  bool dir_seen = false;
};

// Three lowercase hex digits: the last three of an object hash, naming its suffix directory.
bool is_valid_suffix(std::string_view s);

// A partition's suffix hashes, as in hashes.pkl: suffix -> MD5 hex, or nullopt when it must be
// recomputed; `valid` false when the file was missing or unreadable.
struct SuffixHashes {
  bool valid = false;
  std::optional<double> updated;  // Unix time of the last write
  std::vector<std::pair<std::string, std::optional<std::string>>> suffixes;  // file order

  const std::optional<std::string>* find(std::string_view suffix) const {
    for (const auto& [s, h] : suffixes) {
      if (s == suffix) return &h;
    }
    return nullptr;
  }
  void set(std::string_view suffix, std::optional<std::string> hash) {
    for (auto& [s, h] : suffixes) {
      if (s == suffix) {
        h = std::move(hash);
        return;
      }
    }
    suffixes.emplace_back(suffix, std::move(hash));
  }
  friend bool operator==(const SuffixHashes&, const SuffixHashes&) = default;

  // The suffix -> hash (or None) dict as Swift pickles it (hashes.pkl without its "valid" and
  // "updated" keys; a REPLICATE answer), built in one pass: the suffixes are unique already.
  std::string pickled_suffixes() const;
};

// flock on <partition>/.lock, as Swift's lock_path: held while hashes.pkl / hashes.invalid
// change. Released when destroyed.
class PartitionLock {
 public:
  static common::Result<PartitionLock> take(common::io::Fs& fs, const std::string& part_dir);
  PartitionLock(PartitionLock&&) = default;
  ~PartitionLock();

 private:
  explicit PartitionLock(common::io::File f) : file_(std::move(f)) {}
  common::io::File file_;
};

struct DiskFileOptions {
  std::string devices = "/srv/node";
  bool mount_check = true;
  bool fsync_on_close = true;        // Apus knob: fsync data and directory before answering
  uint64_t mb_per_sync = 512;        // fdatasync every this many MiB written
  int64_t reclaim_age = 604800;      // seconds
  common::io::FreeSpaceReserve fallocate_reserve;  // free space to keep
  uint64_t keep_cache_size = 5242880;  // objects smaller than this may stay in the page cache
};

class DiskFileManager;

// Streams one new .data file: write() the body in chunks, then commit() with its metadata.
// Destroying a writer that was not committed removes its temp file. Pool thread only.
class ObjectWriter {
 public:
  ~ObjectWriter();
  ObjectWriter(const ObjectWriter&) = delete;
  ObjectWriter& operator=(const ObjectWriter&) = delete;

  // Appends body bytes. InsufficientStorage when the disk is full, or when an upload of unknown
  // size (nothing reserved by fallocate) would eat into fallocate_reserve: its free space is
  // checked again every kSpaceCheckBytes written.
  common::Status write(std::string_view chunk);
  uint64_t bytes_written() const { return written_; }
  // Writes the metadata, syncs as configured, renames into the hash directory, fsyncs it,
  // invalidates the suffix hash and removes obsolete files. `timestamp` names the file.
  common::Status commit(const Metadata& metadata, const common::Timestamp& timestamp);

 private:
  friend class DiskFileManager;
  ObjectWriter(DiskFileManager& manager, Location location, std::string hash,
               common::io::File temp, bool size_reserved, bool dir_seen);

  // Swift checks the reserve once, at fallocate, with the size the request announced. A
  // chunked upload announces none: re-checking every 4 MiB (one statvfs, about a microsecond)
  // keeps each such upload within 4 MiB plus one write batch of the reserve.
  static constexpr uint64_t kSpaceCheckBytes = 4 << 20;
  // Without it the commit's fsync starts writing the whole body only once its last byte has
  // arrived, and the client waits for all of it. Starting each MiB's writeback as soon as it is
  // written lets the disk work while the rest is still on the network: 16 MiB PUTs c4 +29% on
  // the all-in-one (bench/results/2026-12-08-early-writeback.md). 256 KiB measured the same;
  // 1 MiB keeps each request a size spinning disks like.
  static constexpr uint64_t kWritebackBytes = 1 << 20;

  DiskFileManager& manager_;
  Location location_;
  std::string hash_;
  common::io::File temp_;
  std::optional<common::io::File> sidecar_;  // metadata too large for xattrs, if any
  uint64_t written_ = 0;
  uint64_t unsynced_ = 0;
  uint64_t written_back_ = 0;    // bytes before this offset have had their writeback started
  bool size_reserved_ = false;   // fallocate reserved the whole announced size
  bool dir_seen_ = false;        // DiskObject::dir_seen of the open before it
  uint64_t next_space_check_ = kSpaceCheckBytes;  // bytes written at the next free-space check
  bool committed_ = false;
};

class DiskFileManager {
 public:
  // `fs` must outlive the manager.
  DiskFileManager(common::io::Fs& fs, DiskFileOptions options, common::HashPathConfig hash_config);

  const DiskFileOptions& options() const { return options_; }
  common::io::Fs& fs() { return fs_; }

  // Events Swift's diskfile counts in StatsD ("quarantines", "async_pendings"): `counter` is
  // called with the name from whichever thread the event happens on. Set before first use.
  using EventCounter = std::function<void(std::string_view name)>;
  void set_event_counter(EventCounter counter) { count_ = std::move(counter); }
  void count(std::string_view name) const {
    if (count_) count_(name);
  }

  // 507-worthy (InsufficientStorage) when the device is not mounted (mount_check) or missing.
  common::Status check_device(const std::string& device);
  // InsufficientStorage when writing `size` more bytes would eat into fallocate_reserve.
  common::Status check_free_space(const std::string& device, uint64_t size);

  // The object's hash (32 hex) and its directory.
  common::Result<std::string> object_hash(const Location& loc) const;
  // Whether the object named "/a/c/o" hashes to `hash` (32 hex) under this cluster's prefix and
  // suffix.
  bool name_hashes_to(const std::string& name, const std::string& hash) const;
  std::string hash_dir(const Location& loc, const std::string& hash) const;
  std::string partition_dir(const Location& loc) const;
  // "objects" or "objects-N" (likewise "tmp", "async_pending").
  static std::string policy_dir(std::string_view base, int policy);
  // <devices>/<device>/tmp[-N]: where temp files of the policy are made.
  std::string tmp_dir(const std::string& device, int policy) const;
  // Removes what a crash left in tmp_dir (named temp files, async pendings half written):
  // entries last modified more than reclaim_age ago, as Swift's replicator does each pass.
  // Returns how many went.
  size_t remove_stale_temps(const std::string& device, int policy);
  // <devices>/<device>/async_pending[-N]/<suffix>/<hash>-<timestamp>: the async pending of the
  // row whose name hashes to `hash` (32 hex), saved at `timestamp` (FORMAT.md).
  std::string async_pending_path(const std::string& device, int policy, const std::string& hash,
                                 const std::string& timestamp) const;
  // The metadata of the object file at `path` (its xattrs, else its sidecar), checksum
  // checked: what Swift's read_metadata gives (apus-object-info prints it).
  common::Result<Metadata> read_metadata_at(const std::string& path);
  // True when `obj` exists and its X-Delete-At has come at `now`: Swift then answers 404 (to
  // all but replication and X-Backend-Open-Expired requests) and a DELETE still removes it.
  static bool is_expired(const DiskObject& obj, const common::Timestamp& now);

  // Opens the object's current state. A hash directory whose files are corrupt (unreadable
  // metadata, bad checksum, size mismatch) is quarantined and the object reported missing; one
  // whose data names another object is State::kCollision. A failed Status is a disk failure.
  common::Result<DiskObject> open(const Location& loc);
  // The same for the object whose hash (32 hex) is `hash` in the partition of `loc` (device,
  // partition, policy), whatever its name (Swift's get_diskfile_from_hash, for replication):
  // with `expected_name`, data stored under another name is State::kCollision. The object's
  // name is the metadata's "name".
  common::Result<DiskObject> open_hash(const Location& loc, const std::string& hash,
                                       std::optional<std::string> expected_name);

  // Reads up to buf.size() bytes of an opened object's data at `offset`.
  common::Result<size_t> read(const DiskObject& obj, uint64_t offset, std::span<char> buf);
  // Evicts [offset, offset + length) of an opened object's data from the page cache (Swift's
  // drop_buffer_cache, for reads that should not keep the cache).
  void drop_cache(const DiskObject& obj, uint64_t offset, uint64_t length);

  // Starts a .data write. `expected_size` (when known) is reserved with fallocate.
  // `dir_seen`: the open before it found the hash directory (DiskObject::dir_seen).
  common::Result<std::unique_ptr<ObjectWriter>> create_writer(
      const Location& loc, std::optional<uint64_t> expected_size, bool dir_seen = false);
  // Writes a .meta (POST) file; `ctype_timestamp` set when the POST changed Content-Type.
  common::Status write_meta(const Location& loc, const Metadata& metadata,
                            const common::Timestamp& timestamp,
                            std::optional<common::Timestamp> ctype_timestamp);
  // Writes a tombstone (.ts) with {X-Timestamp, name} (plus `extra`). `dir_seen` as for
  // create_writer().
  common::Status write_tombstone(const Location& loc, const common::Timestamp& timestamp,
                                 const Metadata& extra = {}, bool dir_seen = false);

  // Moves the object's hash directory to <dev>/quarantined/objects[-N]/<hash>.
  common::Status quarantine(const Location& loc, const std::string& hash, std::string_view why);

  // Appends the object hash's suffix to <part>/hashes.invalid under the partition lock.
  common::Status invalidate_suffix(const Location& loc, const std::string& hash);
  // The same for a suffix by name (REPLICATE with suffixes only marks them, as Swift does).
  common::Status mark_suffix_dirty(const Location& loc, const std::string& suffix);

  // Swift's get_hashes for the partition of `part_loc` (device, partition, policy): merges
  // hashes.invalid, recomputes the suffixes listed in `recalculate` and any without a hash,
  // cleans up hash directories on the way and saves hashes.pkl. What REPLICATE answers. A
  // partition that does not exist is made, with an empty hashes.pkl, as Swift makes it (the
  // directory a peer's rsync then sends suffixes into).
  common::Result<SuffixHashes> get_hashes(const Location& part_loc,
                                          const std::vector<std::string>& recalculate);

 private:
  friend class ObjectWriter;
  // Writes `metadata` into the xattrs of `file` (split in 64 KiB pieces, plus checksum).
  // When the xattrs do not fit (ext4) and `sidecar` is given, the pickle goes to a sidecar temp
  // file returned there, for commit_file to rename beside the file (FORMAT.md).
  common::Status write_metadata(const Location& loc, common::io::File& file,
                                const Metadata& metadata, std::optional<common::io::File>* sidecar);
  common::Result<Metadata> read_metadata(const common::io::File& file);
  common::Result<Metadata> read_sidecar(const common::io::File& file);
  // Removes sidecars whose file went (in `removed`) or never came; returns how many.
  size_t prune_sidecars(const std::string& dir, const std::vector<std::string>& names,
                        const std::vector<std::string>& removed);
  void discard_temps(common::io::File& temp, std::optional<common::io::File>& sidecar);
  // Renames a finished temp file into place and does the post-write housekeeping. With
  // fsync_data the file's `written` bytes are dropped from the page cache after the fsync.
  // A hash directory removed by a concurrent cleanup() between its mkdir and the rename is
  // made again (up to kRenameAttempts times) rather than failing the write. With `dir_seen`
  // (the request's open found the directory: DiskObject::dir_seen) the rename is tried before
  // any mkdir. The cleanup lists the directory after the rename, as Swift's does: of writers
  // racing on one object, the last to commit then removes every older file, its own included
  // (reusing the open's listing instead left the older of two racing PUTs behind).
  common::Status commit_file(const Location& loc, const std::string& hash, common::io::File& temp,
                             const std::string& file_name, bool fsync_data,
                             std::optional<common::io::File>* sidecar = nullptr,
                             uint64_t written = 0, bool dir_seen = false);
  // The partition-power-increase links of a committed file (Location::next_part_power): the
  // file (and its sidecar) gets a second name in the partition under the next power, and the
  // obsolete files of the other power's directory go. Failures are logged, not returned: the
  // object is stored, and Swift's relinker would link it later.
  void relink_for_next_part_power(const Location& loc, const std::string& hash,
                                  const std::string& file_name, bool has_sidecar);
  // Gives the finished temp file `file` the name dir/name and closes it: a rename of a named
  // temp file, a link of an unnamed one. mkdirs `dir` first (not before the first try when
  // `dir_seen`), and again while the directory turns out gone (NotFound). Adds the directories
  // created to *created.
  common::Status name_in_dir(common::io::File& file, const Location& loc, const std::string& dir,
                             const std::string& name, int* created, bool dir_seen = false);
  static constexpr int kRenameAttempts = 5;
  // Moves an unnamed file over an existing name `to`, atomically (link_file never replaces).
  common::Status replace_with_unnamed(common::io::File& file, const Location& loc,
                                      const std::string& to);
  // Closes a temp file of a write that did not commit and removes its name, if it has one.
  void discard_temp(common::io::File& temp);
  common::Status cleanup(const std::string& hash_dir);
  // hashes.cpp
  SuffixHashes read_hashes(const std::string& part_dir);
  common::Status write_hashes(const std::string& part_dir, SuffixHashes& hashes);
  common::Result<SuffixHashes> consolidate_hashes(const std::string& part_dir);
  // nullopt when the suffix directory is gone (or was empty and removed).
  common::Result<std::optional<std::string>> hash_suffix(const std::string& suffix_dir);
  // A new temp file for a write on loc's device: unnamed (O_TMPFILE, in <dev>/tmp) where the
  // filesystem can, as Swift's use_linkat, so that a crash leaves none behind; else a named one
  // in <dev>/tmp (mkstemp), which the replicator removes once older than reclaim_age.
  common::Result<common::io::File> create_temp(const Location& loc);

  common::io::Fs& fs_;
  DiskFileOptions options_;
  common::HashPathConfig hash_config_;
  EventCounter count_;
  // Cleared, for good, by the first filesystem that cannot make unnamed files (Swift likewise).
  std::atomic<bool> use_unnamed_temps_{true};
};

}  // namespace apus::object
