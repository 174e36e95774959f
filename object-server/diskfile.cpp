#include "object-server/diskfile.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <initializer_list>
#include <random>

#include "common/crypto/crc32c.h"
#include "common/http/headers.h"
#include "common/http/url.h"
#include "common/log/log.h"
#include "common/pickle.h"
#include "object-server/delete_at.h"

namespace apus::object {

using common::Result;
using common::Status;
using common::Timestamp;
using common::io::File;

namespace {

// Swift splits the metadata pickle over xattrs of at most this many bytes each.
constexpr size_t kXattrChunk = 65536;
constexpr const char* kMetadataKey = "user.swift.metadata";
constexpr const char* kChecksumKey = "user.swift.metadata_checksum";
// Set instead of the keys above when the metadata did not fit the filesystem's xattr room: the
// MD5 of the pickle kept in the sidecar file ".<file name>.metadata" (FORMAT.md).
constexpr const char* kSidecarKey = "user.apus.metadata_sidecar";
// An orphaned sidecar (its file never renamed in, after a crash) is removed after this long.
constexpr int64_t kOrphanSidecarSeconds = 3600;

std::string sidecar_name(std::string_view file_name) {
  return "." + std::string(file_name) + ".metadata";
}

// The file a sidecar belongs to, or "" when `name` is not a sidecar.
std::string sidecar_owner(std::string_view name) {
  constexpr std::string_view kSuffix = ".metadata";
  if (name.size() <= 1 + kSuffix.size() || name.front() != '.' ||
      name.substr(name.size() - kSuffix.size()) != kSuffix) {
    return "";
  }
  return std::string(name.substr(1, name.size() - 1 - kSuffix.size()));
}

// The parts joined by '/', in one allocation (an object's directory is built on every open).
std::string join(std::initializer_list<std::string_view> parts) {
  size_t size = 0;
  for (std::string_view p : parts) size += p.size() + 1;
  std::string out;
  out.reserve(size);
  for (std::string_view p : parts) {
    out.append(p).push_back('/');
  }
  if (!out.empty()) out.pop_back();  // the separator after the last part
  return out;
}

std::string join(std::string_view a, std::string_view b) { return join({a, b}); }

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

bool reclaimable(const Timestamp& ts, const Timestamp& now, int64_t reclaim_age) {
  return now.seconds() - ts.seconds() > static_cast<double>(reclaim_age);
}

// Files newer than `ts` stay in `files`; the rest (same age or older) are returned.
std::vector<OnDiskFile> split_older_or_equal(std::vector<OnDiskFile>& files, const Timestamp& ts) {
  std::vector<OnDiskFile> older;
  auto keep = std::stable_partition(files.begin(), files.end(),
                                    [&](const OnDiskFile& f) { return f.timestamp > ts; });
  older.assign(keep, files.end());
  files.erase(keep, files.end());
  return older;
}

std::vector<OnDiskFile> split_older(std::vector<OnDiskFile>& files, const Timestamp& ts) {
  std::vector<OnDiskFile> older;
  auto keep = std::stable_partition(files.begin(), files.end(),
                                    [&](const OnDiskFile& f) { return f.timestamp >= ts; });
  older.assign(keep, files.end());
  files.erase(keep, files.end());
  return older;
}

void add_names(std::vector<std::string>& out, const std::vector<OnDiskFile>& files) {
  for (const auto& f : files) out.push_back(f.name);
}

Timestamp ctype_or_zero(const OnDiskFile& f) { return f.ctype_timestamp.value_or(Timestamp()); }

}  // namespace

const std::string* find_meta(const Metadata& md, std::string_view key) {
  for (const auto& [k, v] : md) {
    if (k == key) return &v;
  }
  return nullptr;
}

const std::string* find_meta_ci(const Metadata& md, std::string_view key) {
  for (const auto& [k, v] : md) {
    if (common::http::iequals(k, key)) return &v;
  }
  return nullptr;
}

std::string stored_crc32c(std::string_view crc_hex, std::string_view etag) {
  std::string value;
  value.reserve(crc_hex.size() + 1 + etag.size());
  value.append(crc_hex).append(" ").append(etag);
  return value;
}

std::optional<uint32_t> stored_crc32c_for(const Metadata& md, std::string_view etag) {
  const std::string* stored = find_meta(md, kCrc32cMetaKey);
  if (!stored) return std::nullopt;
  std::string_view v(*stored);
  constexpr size_t kHex = 8;
  if (v.size() <= kHex + 1 || v[kHex] != ' ' || v.substr(kHex + 1) != etag) return std::nullopt;
  return common::crypto::parse_crc32c_hex(v.substr(0, kHex));
}

void set_meta(Metadata& md, std::string_view key, std::string_view value) {
  for (auto& [k, v] : md) {
    if (k == key) {
      v.assign(value);
      return;
    }
  }
  md.emplace_back(key, value);
}

std::optional<OnDiskFile> parse_file_name(std::string_view name) {
  OnDiskFile f;
  f.name.assign(name);
  std::string_view stem;
  if (ends_with(name, ".data")) {
    f.kind = OnDiskFile::Kind::kData;
    stem = name.substr(0, name.size() - 5);
  } else if (ends_with(name, ".ts")) {
    f.kind = OnDiskFile::Kind::kTombstone;
    stem = name.substr(0, name.size() - 3);
  } else if (ends_with(name, ".meta")) {
    f.kind = OnDiskFile::Kind::kMeta;
    stem = name.substr(0, name.size() - 5);
    auto decoded = common::decode_timestamps(stem, /*explicit_deltas=*/true);
    if (!decoded.ok()) return std::nullopt;
    f.timestamp = decoded->t1;
    f.ctype_timestamp = decoded->t2;
    return f;
  } else {
    return std::nullopt;
  }
  auto ts = Timestamp::parse(stem);
  if (!ts.ok()) return std::nullopt;
  f.timestamp = *ts;
  return f;
}

ChosenFiles choose_files(const std::vector<std::string>& names, const Timestamp& now,
                         int64_t reclaim_age) {
  std::vector<OnDiskFile> data, meta, ts;
  for (const auto& n : names) {
    auto f = parse_file_name(n);
    if (!f) continue;  // unexpected files are left alone, as Swift does
    switch (f->kind) {
      case OnDiskFile::Kind::kData: data.push_back(std::move(*f)); break;
      case OnDiskFile::Kind::kMeta: meta.push_back(std::move(*f)); break;
      case OnDiskFile::Kind::kTombstone: ts.push_back(std::move(*f)); break;
    }
  }
  auto newest_first = [](const OnDiskFile& a, const OnDiskFile& b) {
    return a.timestamp > b.timestamp;
  };
  std::stable_sort(data.begin(), data.end(), newest_first);
  std::stable_sort(meta.begin(), meta.end(), newest_first);
  std::stable_sort(ts.begin(), ts.end(), newest_first);

  ChosenFiles out;
  // 1. The newest tombstone makes everything else of its age or older obsolete.
  if (!ts.empty()) {
    add_names(out.obsolete, split_older_or_equal(data, ts.front().timestamp));
    add_names(out.obsolete, split_older_or_equal(meta, ts.front().timestamp));
    for (size_t i = 1; i < ts.size(); ++i) out.obsolete.push_back(ts[i].name);
    ts.resize(1);
  }
  // 2. Keep the newest .meta, and an older one whose content-type is newer still.
  if (!meta.empty()) {
    size_t retain = 1;
    if (meta.size() > 1) {
      std::stable_sort(meta.begin() + 1, meta.end(), [](const OnDiskFile& a, const OnDiskFile& b) {
        return ctype_or_zero(a) > ctype_or_zero(b);
      });
      if (ctype_or_zero(meta[1]) > ctype_or_zero(meta[0])) {
        if (meta[1].timestamp == meta[0].timestamp) {
          std::swap(meta[0], meta[1]);  // same age: keep only the one with the newer ctype
        } else {
          retain = 2;
        }
      }
    }
    for (size_t i = retain; i < meta.size(); ++i) out.obsolete.push_back(meta[i].name);
    meta.resize(retain);
  }
  // 3. The newest .data; older data and anything not newer than it are obsolete.
  if (!data.empty()) {
    add_names(out.obsolete, split_older(data, data.front().timestamp));
    add_names(out.obsolete, split_older_or_equal(meta, data.front().timestamp));
    add_names(out.obsolete, split_older_or_equal(ts, data.front().timestamp));
    out.data = data.front();
  }
  // 4. The final choice.
  if (out.data) {
    if (!meta.empty()) {
      out.meta = meta.front();
      const OnDiskFile& ctype = meta.back();
      if (ctype_or_zero(ctype) > out.data->timestamp) out.ctype_meta = ctype;
    }
  } else {
    if (!ts.empty()) {
      out.tombstone = ts.front();
      if (reclaimable(ts.front().timestamp, now, reclaim_age)) {
        out.obsolete.push_back(ts.front().name);
      }
    }
    // .meta files without data wait for reclaim_age, then go.
    for (const auto& m : meta) {
      if (reclaimable(m.timestamp, now, reclaim_age)) out.obsolete.push_back(m.name);
    }
  }
  return out;
}

// ---- ObjectWriter --------------------------------------------------------------------------

ObjectWriter::ObjectWriter(DiskFileManager& manager, Location location, std::string hash, File temp,
                           bool size_reserved, bool dir_seen)
    : manager_(manager),
      location_(std::move(location)),
      hash_(std::move(hash)),
      temp_(std::move(temp)),
      size_reserved_(size_reserved),
      dir_seen_(dir_seen) {}

ObjectWriter::~ObjectWriter() {
  if (committed_) return;
  // A failed or abandoned upload leaves nothing behind, even when the commit failed after
  // closing the file (a failed rename).
  manager_.discard_temps(temp_, sidecar_);
}

Status ObjectWriter::write(std::string_view chunk) {
  if (!size_reserved_ && written_ + chunk.size() >= next_space_check_) {
    APUS_RETURN_IF_ERROR(manager_.check_free_space(location_.device, chunk.size()));
    next_space_check_ = written_ + chunk.size() + kSpaceCheckBytes;
  }
  APUS_RETURN_IF_ERROR(manager_.fs().write(temp_, chunk));
  written_ += chunk.size();
  unsynced_ += chunk.size();
  if (!manager_.options().fsync_on_close) return Status();
  // Swift's mb_per_sync: flush periodically so a large upload does not end in one huge fsync.
  uint64_t every = manager_.options().mb_per_sync << 20;
  if (every > 0 && unsynced_ >= every) {
    APUS_RETURN_IF_ERROR(manager_.fs().fdatasync(temp_));
    manager_.fs().drop_cache(temp_, written_ - unsynced_, unsynced_).ignore();
    unsynced_ = 0;
    written_back_ = written_;
  } else if (written_ - written_back_ >= kWritebackBytes) {
    manager_.fs().start_writeback(temp_, written_back_, written_ - written_back_).ignore();
    written_back_ = written_;
  }
  return Status();
}

Status ObjectWriter::commit(const Metadata& metadata, const Timestamp& timestamp) {
  APUS_RETURN_IF_ERROR(manager_.write_metadata(location_, temp_, metadata, &sidecar_));
  APUS_RETURN_IF_ERROR(manager_.commit_file(location_, hash_, temp_, timestamp.internal() + ".data",
                                            manager_.options().fsync_on_close, &sidecar_,
                                            written_, dir_seen_));
  committed_ = true;
  return Status();
}

// ---- DiskFileManager -----------------------------------------------------------------------

DiskFileManager::DiskFileManager(common::io::Fs& fs, DiskFileOptions options,
                                 common::HashPathConfig hash_config)
    : fs_(fs), options_(std::move(options)), hash_config_(std::move(hash_config)) {}

std::string DiskFileManager::policy_dir(std::string_view base, int policy) {
  std::string out(base);
  if (policy > 0) out += "-" + std::to_string(policy);
  return out;
}

std::string DiskFileManager::tmp_dir(const std::string& device, int policy) const {
  return join(join(options_.devices, device), policy_dir("tmp", policy));
}

std::string DiskFileManager::async_pending_path(const std::string& device, int policy,
                                                const std::string& hash,
                                                const std::string& timestamp) const {
  return join(join(join(join(options_.devices, device), policy_dir("async_pending", policy)),
                   hash.substr(hash.size() - 3)),
              hash + "-" + timestamp);
}

bool DiskFileManager::is_expired(const DiskObject& obj, const Timestamp& now) {
  if (obj.state != DiskObject::State::kExists) return false;
  int64_t delete_at = delete_at_of(obj.metadata);
  return delete_at != 0 && static_cast<double>(delete_at) <= now.seconds();
}

Status DiskFileManager::check_device(const std::string& device) {
  return common::io::check_device(fs_, options_.devices, device, options_.mount_check);
}

Status DiskFileManager::check_free_space(const std::string& device, uint64_t size) {
  return common::io::check_free_space(fs_, options_.devices, device, options_.fallocate_reserve,
                                      size);
}

Result<std::string> DiskFileManager::object_hash(const Location& loc) const {
  return common::hash_path_hex(hash_config_, loc.account, loc.container, loc.object);
}

bool DiskFileManager::name_hashes_to(const std::string& name, const std::string& hash) const {
  auto parts = common::http::split_path(name, 3, 3, true);
  if (!parts.ok()) return false;
  auto h = common::hash_path_hex(hash_config_, *(*parts)[0], *(*parts)[1], *(*parts)[2]);
  return h.ok() && *h == hash;
}

std::string DiskFileManager::partition_dir(const Location& loc) const {
  return join({options_.devices, loc.device, policy_dir("objects", loc.policy), loc.partition});
}

std::string DiskFileManager::hash_dir(const Location& loc, const std::string& hash) const {
  std::string dir = partition_dir(loc);
  dir.append("/").append(std::string_view(hash).substr(hash.size() - 3)).append("/").append(hash);
  return dir;
}

Status DiskFileManager::write_metadata(const Location& loc, File& file, const Metadata& metadata,
                                       std::optional<File>* sidecar) {
  std::string pickled = common::pickle::encode_object_metadata(metadata);
  size_t pieces = 0;
  Status s;
  for (size_t i = 0; s.ok() && (i < pickled.size() || pieces == 0); i += kXattrChunk) {
    std::string key = kMetadataKey;
    if (pieces > 0) key += std::to_string(pieces);
    s = fs_.set_xattr(file, key, std::string_view(pickled).substr(i, kXattrChunk));
    if (s.ok()) ++pieces;
  }
  if (s.ok()) s = fs_.set_xattr(file, kChecksumKey, common::crypto::md5_hex(pickled));
  if (s.ok() || s.code() != Status::Code::kInsufficientStorage || sidecar == nullptr) return s;

  // No room for the xattrs (ext4 gives all of an inode's xattrs about one block): the pickle
  // goes to a sidecar file instead, renamed into place just before the file itself.
  for (size_t n = 0; n < pieces; ++n) {
    std::string key = kMetadataKey;
    if (n > 0) key += std::to_string(n);
    fs_.remove_xattr(file, key).ignore();
  }
  fs_.remove_xattr(file, kChecksumKey).ignore();
  auto side = create_temp(loc);
  if (!side.ok()) return side.status();
  Status w = fs_.write(*side, pickled);
  if (w.ok() && options_.fsync_on_close) w = fs_.fsync(*side);
  if (w.ok()) w = fs_.set_xattr(file, kSidecarKey, common::crypto::md5_hex(pickled));
  if (!w.ok()) {
    discard_temp(*side);
    return w;
  }
  *sidecar = std::move(*side);
  return Status();
}

Result<Metadata> DiskFileManager::read_metadata(const File& file) {
  // Swift splits the pickle over user.swift.metadata, user.swift.metadata1, ... and a reader
  // joins them until a key is missing. A first piece that decodes whole is the whole pickle
  // (a strict prefix of a pickle never holds its STOP), so the probe for a second key, a
  // system call on every open, is skipped then; a checksum that does not match it reads on.
  auto first = fs_.get_xattr(file, kMetadataKey);
  if (!first.ok()) {
    if (first.status().is_not_found()) return read_sidecar(file);
    return first.status();
  }
  std::string pickled = std::move(*first);
  bool all_read = false;
  auto read_rest = [&]() -> Status {
    all_read = true;
    for (int n = 1;; ++n) {
      auto piece = fs_.get_xattr(file, kMetadataKey + std::to_string(n));
      if (!piece.ok()) return piece.status().is_not_found() ? Status() : piece.status();
      pickled += *piece;
    }
  };
  auto decoded = common::pickle::decode_object_metadata(pickled);
  if (!decoded.ok()) {
    APUS_RETURN_IF_ERROR(read_rest());
    decoded = common::pickle::decode_object_metadata(pickled);
  }
  auto checksum = fs_.get_xattr(file, kChecksumKey);
  // Hashed once per reading of the pieces (it was twice per open).
  bool checksum_matches = !checksum.ok() || *checksum == common::crypto::md5_hex(pickled);
  if (!checksum_matches && !all_read) {
    // Whole on its own, yet more pieces follow: read as Swift reads it, every piece.
    APUS_RETURN_IF_ERROR(read_rest());
    decoded = common::pickle::decode_object_metadata(pickled);
    checksum_matches = *checksum == common::crypto::md5_hex(pickled);
  }
  if (!checksum_matches) return Status::corruption("metadata checksum mismatch");
  if (!decoded.ok()) return Status::corruption("unreadable metadata: " + decoded.status().message());
  return std::move(*decoded);
}

Result<Metadata> DiskFileManager::read_sidecar(const File& file) {
  auto checksum = fs_.get_xattr(file, kSidecarKey);
  if (!checksum.ok()) {
    if (checksum.status().is_not_found()) return Status::corruption("no metadata xattr");
    return checksum.status();
  }
  const std::string& path = file.path();
  size_t slash = path.rfind('/');
  std::string side = path.substr(0, slash + 1) + sidecar_name(path.substr(slash + 1));
  auto pickled = fs_.read_file(side);
  if (!pickled.ok()) {
    return pickled.status().is_not_found() ? Status::corruption("metadata sidecar missing")
                                           : pickled.status();
  }
  if (*checksum != common::crypto::md5_hex(*pickled)) {
    return Status::corruption("metadata sidecar checksum mismatch");
  }
  auto decoded = common::pickle::decode_object_metadata(*pickled);
  if (!decoded.ok()) return Status::corruption("unreadable metadata: " + decoded.status().message());
  return std::move(*decoded);
}

Result<Metadata> DiskFileManager::read_metadata_at(const std::string& path) {
  auto f = fs_.open_read(path);
  if (!f.ok()) return f.status();
  return read_metadata(*f);
}

Result<DiskObject> DiskFileManager::open(const Location& loc) {
  auto hash = object_hash(loc);
  if (!hash.ok()) return hash.status();
  return open_hash(loc, *hash, loc.name());
}

Result<DiskObject> DiskFileManager::open_hash(const Location& loc, const std::string& hash,
                                              std::optional<std::string> expected_name) {
  std::string dir = hash_dir(loc, hash);
  DiskObject obj;
  auto names = fs_.list_dir(dir);
  if (!names.ok()) {
    if (names.status().is_not_found()) return obj;
    // A hash "directory" that is a file: Swift quarantines it.
    auto st = fs_.stat(dir);
    if (st.ok() && st->exists && !st->is_dir) {
      quarantine(loc, hash, "hash directory is a file").ignore();
      return obj;
    }
    return names.status();
  }
  ChosenFiles chosen = choose_files(*names, Timestamp::now(), options_.reclaim_age);
  obj.dir_seen = true;
  if (chosen.tombstone) {
    obj.state = DiskObject::State::kDeleted;
    obj.data_timestamp = obj.timestamp = chosen.tombstone->timestamp;
    auto f = fs_.open_read(join(dir, chosen.tombstone->name));
    if (f.ok()) {
      auto md = read_metadata(*f);
      if (md.ok()) obj.metadata = std::move(*md);
    }
    return obj;
  }
  if (!chosen.data) return obj;

  auto data = fs_.open_read(join(dir, chosen.data->name));
  if (!data.ok()) {
    if (data.status().is_not_found()) return obj;  // replaced under us: treat as missing
    return data.status();
  }
  auto data_md = read_metadata(*data);
  if (!data_md.ok()) {
    if (data_md.status().code() == Status::Code::kCorruption) {
      quarantine(loc, hash, data_md.status().message()).ignore();
      return obj;
    }
    return data_md.status();
  }
  const std::string* stored_name = find_meta(*data_md, "name");
  if (!stored_name) {
    quarantine(loc, hash, "missing name metadata").ignore();
    return obj;
  }
  if (!expected_name && !name_hashes_to(*stored_name, hash)) {
    // Found by its hash (replication, audit): the name must hash back to it, as Swift checks.
    quarantine(loc, hash, "name " + *stored_name + " does not hash to its directory").ignore();
    return obj;
  }
  if (expected_name && *stored_name != *expected_name) {
    APUS_LOG_ERROR("hash collision: " + *expected_name + " finds the data of " + *stored_name);
    obj.state = DiskObject::State::kCollision;
    return obj;
  }
  auto st = fs_.fstat(*data);
  const std::string* length = find_meta(*data_md, "Content-Length");
  if (!st.ok() || !length || std::to_string(st->size) != *length) {
    quarantine(loc, hash, "data file size does not match Content-Length").ignore();
    return obj;
  }

  obj.state = DiskObject::State::kExists;
  obj.size = st->size;
  obj.data_timestamp = obj.timestamp = obj.ctype_timestamp = chosen.data->timestamp;
  obj.data_metadata = std::move(*data_md);
  obj.data_file = std::move(*data);

  // Effective metadata, as Swift builds it: the .meta's set (with a newer Content-Type from a
  // second .meta merged in), then the keys only a .data may carry, then the data's Content-Type
  // unless a .meta changed it later.
  if (!chosen.meta) {
    obj.metadata = obj.data_metadata;
    return obj;
  }
  auto meta_md = read_metadata_at(join(dir, chosen.meta->name));
  if (!meta_md.ok()) {
    quarantine(loc, hash, meta_md.status().message()).ignore();
    return DiskObject();
  }
  Metadata effective = std::move(*meta_md);
  obj.meta_timestamp = obj.timestamp = chosen.meta->timestamp;
  auto ctype_ts_of = [](const Metadata& md) {
    const std::string* v = find_meta(md, "Content-Type-Timestamp");
    return v ? *v : std::string();
  };
  if (chosen.ctype_meta && chosen.ctype_meta->name != chosen.meta->name) {
    auto ctype_md = read_metadata_at(join(dir, chosen.ctype_meta->name));
    if (ctype_md.ok()) {
      const std::string* ct = find_meta(*ctype_md, "Content-Type");
      std::string ct_ts = ctype_ts_of(*ctype_md);
      if (ct && ct_ts > ctype_ts_of(effective) && ct_ts > obj.data_timestamp.internal()) {
        set_meta(effective, "Content-Type", *ct);
        set_meta(effective, "Content-Type-Timestamp", ct_ts);
      }
    }
  }
  obj.meta_metadata = effective;
  for (const auto& [k, v] : obj.data_metadata) {
    std::string lower = common::http::to_lower(k);
    if (lower == "content-length" || lower == "deleted" || lower == "etag" ||
        lower == "x-static-large-object" || lower.rfind("x-object-sysmeta-", 0) == 0) {
      set_meta(effective, k, v);
    }
  }
  const std::string* data_ctype = find_meta(obj.data_metadata, "Content-Type");
  if (data_ctype && obj.data_timestamp.internal() > ctype_ts_of(effective)) {
    set_meta(effective, "Content-Type", *data_ctype);
    std::erase_if(effective, [](const auto& kv) { return kv.first == "Content-Type-Timestamp"; });
  }
  if (auto ct_ts = Timestamp::parse(ctype_ts_of(effective)); ct_ts.ok()) {
    obj.ctype_timestamp = *ct_ts;
  }
  obj.metadata = std::move(effective);
  return obj;
}

Result<size_t> DiskFileManager::read(const DiskObject& obj, uint64_t offset, std::span<char> buf) {
  return fs_.pread(obj.data_file, offset, buf);
}

void DiskFileManager::drop_cache(const DiskObject& obj, uint64_t offset, uint64_t length) {
  fs_.drop_cache(obj.data_file, offset, length).ignore();
}

size_t DiskFileManager::remove_stale_temps(const std::string& device, int policy) {
  return fs_.remove_older_than(tmp_dir(device, policy), std::chrono::seconds(options_.reclaim_age));
}

Result<File> DiskFileManager::create_temp(const Location& loc) {
  std::string tmp = tmp_dir(loc.device, loc.policy);
  auto create = [&]() -> Result<File> {
    if (use_unnamed_temps_.load(std::memory_order_relaxed)) {
      auto file = fs_.create_unnamed(tmp);
      if (!file.ok() || file->is_open()) return file;
      if (use_unnamed_temps_.exchange(false)) {
        APUS_LOG_INFO("no O_TMPFILE on " + tmp + ": temp files are named from now on");
      }
    }
    return fs_.create_temp(tmp);
  };
  auto file = create();
  if (!file.ok() && file.status().is_not_found()) {
    auto made = fs_.mkdirs(tmp);
    if (!made.ok()) return made.status();
    file = create();
  }
  return file;
}

Result<std::unique_ptr<ObjectWriter>> DiskFileManager::create_writer(
    const Location& loc, std::optional<uint64_t> expected_size, bool dir_seen) {
  auto hash = object_hash(loc);
  if (!hash.ok()) return hash.status();
  APUS_RETURN_IF_ERROR(check_free_space(loc.device, expected_size.value_or(0)));
  auto temp = create_temp(loc);
  if (!temp.ok()) return temp.status();
  if (expected_size && *expected_size > 0) {
    APUS_RETURN_IF_ERROR(fs_.fallocate(*temp, 0, *expected_size));
  }
  return std::unique_ptr<ObjectWriter>(
      new ObjectWriter(*this, loc, *hash, std::move(*temp), expected_size.has_value(),
                       dir_seen));
}

Status DiskFileManager::commit_file(const Location& loc, const std::string& hash, File& temp,
                                    const std::string& file_name, bool fsync_data,
                                    std::optional<File>* sidecar, uint64_t written,
                                    bool dir_seen) {
  if (fsync_data) {
    APUS_RETURN_IF_ERROR(fs_.fsync(temp));
    // As Swift: once the pages are clean they leave the cache; readers decide whether to bring
    // them back (keep_cache_size, keep_cache_private).
    if (written) fs_.drop_cache(temp, 0, written).ignore();
  }
  std::string dir = hash_dir(loc, hash);
  int created = 0;
  bool has_sidecar = sidecar && *sidecar;
  if (has_sidecar) {
    // The sidecar lands first: a crash between the two names leaves an orphan sidecar (removed
    // later), never a file whose metadata is missing.
    APUS_RETURN_IF_ERROR(
        name_in_dir(**sidecar, loc, dir, sidecar_name(file_name), &created, dir_seen));
    sidecar->reset();
  }
  APUS_RETURN_IF_ERROR(name_in_dir(temp, loc, dir, file_name, &created, dir_seen || has_sidecar));
  if (fsync_data) {
    // The new name, and every directory made on the way, must survive a crash.
    APUS_RETURN_IF_ERROR(fs_.fsync_dir(dir));
    std::string parent = dir;
    for (int i = 0; i < created; ++i) {
      parent = parent.substr(0, parent.rfind('/'));
      APUS_RETURN_IF_ERROR(fs_.fsync_dir(parent));
    }
  }
  relink_for_next_part_power(loc, hash, file_name, has_sidecar);
  APUS_RETURN_IF_ERROR(invalidate_suffix(loc, hash));
  return cleanup(dir);
}

Status DiskFileManager::name_in_dir(File& file, const Location& loc, const std::string& dir,
                                    const std::string& name, int* created, bool dir_seen) {
  // A named temp file is closed before its rename, as Swift's; an unnamed one can only be named
  // through its open descriptor.
  const std::string from = file.path();
  if (!file.unnamed()) APUS_RETURN_IF_ERROR(file.close());
  const std::string to = join(dir, name);
  // cleanup() of another request removes a hash directory it found empty; that can land between
  // our mkdirs and rename. The temp file is still there, so making the directory again is safe.
  Status s;
  for (int attempt = 0; attempt < kRenameAttempts; ++attempt) {
    if (attempt > 0 || !dir_seen) {
      auto made = fs_.mkdirs(dir);
      if (!made.ok()) return made.status();
      *created = std::max(*created, *made);
    }
    s = file.unnamed() ? fs_.link_file(file, to) : fs_.rename(from, to);
    if (!s.is_not_found()) break;
  }
  if (file.unnamed() && s.code() == Status::Code::kConflict) {
    s = replace_with_unnamed(file, loc, to);
  }
  if (!s.ok()) return s;
  return file.close();
}

Status DiskFileManager::replace_with_unnamed(File& file, const Location& loc,
                                             const std::string& to) {
  // `to` exists: a write of the same timestamp committed first. The file gets a name of its own
  // in tmp/ that rename then moves over `to`, so readers find the old file or the new one, never
  // neither (Swift unlinks `to` and links again). The name: a placeholder that mkstemp made
  // unique, plus a suffix mkstemp never makes. A crash leaves both to the replicator's sweep.
  auto placeholder = fs_.create_temp(tmp_dir(loc.device, loc.policy));
  if (!placeholder.ok()) return placeholder.status();
  const std::string own = placeholder->path() + ".new";
  Status s = fs_.link_file(file, own);
  if (s.ok()) s = fs_.rename(own, to);
  if (!s.ok()) fs_.unlink(own).ignore();
  discard_temp(*placeholder);
  return s;
}

void DiskFileManager::relink_for_next_part_power(const Location& loc, const std::string& hash,
                                                 const std::string& file_name, bool has_sidecar) {
  if (loc.next_part_power <= 0) return;
  auto digest = common::hash_path(hash_config_, loc.account, loc.container, loc.object);
  if (!digest.ok()) return;  // the write itself hashed the same name
  auto other_partition = [&](int power) {
    Location other = loc;
    other.partition = std::to_string(common::partition_of(*digest, static_cast<unsigned>(power)));
    return other;
  };
  Location next = other_partition(loc.next_part_power);
  if (next.partition == loc.partition) {
    // The ring has the new power already: this is the new partition, and the relinker may not
    // have cleaned the old one yet; what this write made obsolete there goes now.
    Status s = cleanup(hash_dir(other_partition(loc.next_part_power - 1), hash));
    if (!s.ok()) APUS_LOG_ERROR("cleanup of the old partition failed: " + s.to_string());
    return;
  }
  std::string dir = hash_dir(loc, hash);
  std::string next_dir = hash_dir(next, hash);
  auto made = fs_.mkdirs(next_dir);
  if (!made.ok()) {
    APUS_LOG_ERROR("relinking into " + next_dir + " failed: " + made.status().to_string());
    return;
  }
  std::vector<std::string> names;
  if (has_sidecar) names.push_back(sidecar_name(file_name));  // first, as for the rename
  names.push_back(file_name);
  for (const auto& name : names) {
    std::string from = join(dir, name), to = join(next_dir, name);
    Status s = fs_.link(from, to);
    if (s.ok()) continue;
    // Fine when another writer linked it already, or a newer write has removed the file.
    auto a = fs_.stat(from);
    auto b = fs_.stat(to);
    bool already = s.code() == Status::Code::kConflict && a.ok() && b.ok() && a->exists &&
                   b->exists && a->device == b->device && a->inode == b->inode;
    bool gone = s.is_not_found() && a.ok() && !a->exists;
    if (!already && !gone) {
      APUS_LOG_ERROR("relinking " + from + " to " + to + " failed: " + s.to_string());
      return;
    }
  }
  Status s = cleanup(next_dir);
  if (!s.ok()) APUS_LOG_ERROR("cleanup of " + next_dir + " failed: " + s.to_string());
}

Status DiskFileManager::cleanup(const std::string& dir) {
  auto names = fs_.list_dir(dir);
  if (!names.ok()) return names.status().is_not_found() ? Status() : names.status();
  ChosenFiles chosen = choose_files(*names, Timestamp::now(), options_.reclaim_age);
  for (const auto& name : chosen.obsolete) {
    Status s = fs_.unlink(join(dir, name));
    if (!s.ok() && !s.is_not_found()) return s;
  }
  size_t removed = chosen.obsolete.size() + prune_sidecars(dir, *names, chosen.obsolete);
  if (removed == names->size()) {
    fs_.rmdir(dir).ignore();  // empty now; another writer may have raced a file in: fine
  }
  return Status();
}

size_t DiskFileManager::prune_sidecars(const std::string& dir, const std::vector<std::string>& names,
                                       const std::vector<std::string>& removed) {
  size_t pruned = 0;
  Timestamp now = Timestamp::now();
  for (const auto& name : names) {
    std::string owner = sidecar_owner(name);
    if (owner.empty()) continue;
    bool owner_removed = std::find(removed.begin(), removed.end(), owner) != removed.end();
    bool owner_present = !owner_removed &&
                         std::find(names.begin(), names.end(), owner) != names.end();
    if (owner_present) continue;
    if (!owner_removed) {
      // A sidecar whose file has not been renamed in yet is a commit in progress; only an old
      // one is an orphan from a crash.
      auto f = parse_file_name(owner);
      if (f && now.seconds() - f->timestamp.seconds() < kOrphanSidecarSeconds) continue;
    }
    if (fs_.unlink(join(dir, name)).ok()) ++pruned;
  }
  return pruned;
}

void DiskFileManager::discard_temp(File& temp) {
  (void)temp.close();
  // Closed ones too: a named temp file is closed before its rename, which may then fail. (One
  // renamed into place is no longer at its path: the unlink finds nothing.)
  if (!temp.unnamed() && !temp.path().empty()) fs_.unlink(temp.path()).ignore();
}

void DiskFileManager::discard_temps(File& temp, std::optional<File>& sidecar) {
  discard_temp(temp);
  if (sidecar) discard_temp(*sidecar);
}

Status DiskFileManager::write_meta(const Location& loc, const Metadata& metadata,
                                   const Timestamp& timestamp,
                                   std::optional<Timestamp> ctype_timestamp) {
  auto hash = object_hash(loc);
  if (!hash.ok()) return hash.status();
  APUS_RETURN_IF_ERROR(check_free_space(loc.device, 0));
  auto temp = create_temp(loc);
  if (!temp.ok()) return temp.status();
  std::string name = ctype_timestamp
                         ? common::encode_timestamps(timestamp, ctype_timestamp, std::nullopt,
                                                     /*explicit_deltas=*/true) + ".meta"
                         : timestamp.internal() + ".meta";
  std::optional<File> sidecar;
  Status s = write_metadata(loc, *temp, metadata, &sidecar);
  if (s.ok()) s = commit_file(loc, *hash, *temp, name, options_.fsync_on_close, &sidecar);
  if (!s.ok()) discard_temps(*temp, sidecar);
  return s;
}

Status DiskFileManager::write_tombstone(const Location& loc, const Timestamp& timestamp,
                                        const Metadata& extra, bool dir_seen) {
  auto hash = object_hash(loc);
  if (!hash.ok()) return hash.status();
  auto temp = create_temp(loc);  // tombstones skip the free-space reserve, as in Swift
  if (!temp.ok()) return temp.status();
  Metadata md = {{"X-Timestamp", timestamp.internal()}, {"name", loc.name()}};
  for (const auto& [k, v] : extra) set_meta(md, k, v);
  std::optional<File> sidecar;
  Status s = write_metadata(loc, *temp, md, &sidecar);
  if (s.ok()) {
    s = commit_file(loc, *hash, *temp, timestamp.internal() + ".ts", options_.fsync_on_close,
                    &sidecar, 0, dir_seen);
  }
  if (!s.ok()) discard_temps(*temp, sidecar);
  return s;
}

Status DiskFileManager::quarantine(const Location& loc, const std::string& hash,
                                   std::string_view why) {
  std::string qdir = join(join(join(options_.devices, loc.device), "quarantined"),
                          policy_dir("objects", loc.policy));
  auto made = fs_.mkdirs(qdir);
  if (!made.ok()) return made.status();
  std::string target = join(qdir, hash);
  auto st = fs_.stat(target);
  if (st.ok() && st->exists) {
    // Already one there: keep both, as Swift does, with a random suffix.
    std::random_device rd;
    char suffix[40];
    std::snprintf(suffix, sizeof suffix, "-%08x%08x%08x%08x", rd(), rd(), rd(), rd());
    target += suffix;
  }
  APUS_LOG_WARNING("quarantining " + hash_dir(loc, hash) + ": " + std::string(why));
  APUS_RETURN_IF_ERROR(fs_.rename(hash_dir(loc, hash), target));
  count("quarantines");
  return invalidate_suffix(loc, hash);
}

Status DiskFileManager::invalidate_suffix(const Location& loc, const std::string& hash) {
  return mark_suffix_dirty(loc, hash.substr(hash.size() - 3));
}

Status DiskFileManager::mark_suffix_dirty(const Location& loc, const std::string& suffix) {
  std::string part = partition_dir(loc);
  // Under the partition lock, so a Python replicator on the same disk sees whole lines. The
  // partition directory is there after every write (no stat for it); it is made only when the
  // lock file could not be opened for its lack (a REPLICATE naming suffixes of a new one).
  auto lock = [&]() -> Result<PartitionLock> {
    auto first = PartitionLock::take(fs_, part);
    if (first.ok() || !first.status().is_not_found()) return first;
    auto made = fs_.mkdirs(part);
    if (!made.ok()) return made.status();
    return PartitionLock::take(fs_, part);
  }();
  if (!lock.ok()) return lock.status();
  auto invalid = fs_.open_append(join(part, "hashes.invalid"));
  if (!invalid.ok()) return invalid.status();
  return fs_.write(*invalid, suffix + "\n");
}

}  // namespace apus::object
