#include "container-server/listing_db.h"

#include <array>
#include <atomic>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <ctime>
#include <map>
#include <unordered_map>

#include <stdlib.h>

#include <rocksdb/db.h>
#include <rocksdb/env.h>
#include <rocksdb/options.h>
#include <rocksdb/sst_file_manager.h>
#include <rocksdb/write_batch.h>

#include "common/crypto/md5.h"
#include "common/http/headers.h"
#include "common/log/log.h"
#include "common/thread_annotations.h"
#include "common/timestamp.h"

namespace apus::container {

using common::Result;
using common::Status;
using common::Timestamp;

namespace {

// ---- value encoding: varints and length-prefixed strings (FORMAT.md) --------------------------

constexpr uint8_t kInfoVersion = 1;
constexpr uint8_t kRowVersion = 1;

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}
void put_signed(std::string& out, int64_t v) {  // zig-zag
  put_varint(out, (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63));
}
void put_string(std::string& out, std::string_view s) {
  put_varint(out, s.size());
  out.append(s);
}

class Reader {
 public:
  explicit Reader(std::string_view data) : data_(data) {}
  bool ok() const { return ok_; }
  bool done() const { return data_.empty(); }
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (data_.empty()) break;
      auto byte = static_cast<uint8_t>(data_.front());
      data_.remove_prefix(1);
      v |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if (!(byte & 0x80)) return v;
    }
    ok_ = false;
    return 0;
  }
  int64_t signed_varint() {
    uint64_t z = varint();
    return static_cast<int64_t>((z >> 1) ^ (~(z & 1) + 1));
  }
  std::string string() {
    uint64_t n = varint();
    if (!ok_ || n > data_.size()) {
      ok_ = false;
      return {};
    }
    std::string s(data_.substr(0, n));
    data_.remove_prefix(n);
    return s;
  }

 private:
  std::string_view data_;
  bool ok_ = true;
};

void put_be32(std::string& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>(v >> shift));
}

uint32_t get_be32(std::string_view in) {
  const auto* p = reinterpret_cast<const uint8_t*>(in.data());
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

// Counts and byte sums wrap instead of overflowing (undefined behaviour): rows come from
// peers, and Swift's own columns are SQLite integers with no bound a row must keep.
void add_wrapping(int64_t& to, int64_t v) {
  to = static_cast<int64_t>(static_cast<uint64_t>(to) + static_cast<uint64_t>(v));
}
void sub_wrapping(int64_t& to, int64_t v) {
  to = static_cast<int64_t>(static_cast<uint64_t>(to) - static_cast<uint64_t>(v));
}
void put_be64(std::string& out, uint64_t v) {
  for (int shift = 56; shift >= 0; shift -= 8) out.push_back(static_cast<char>(v >> shift));
}

// ---- keys ------------------------------------------------------------------------------------

std::string info_key(std::string_view db) {
  std::string k = "i";
  k.append(db);
  return k;
}
// Rows of one database and policy share this prefix; the name follows it.
std::string row_base(std::string_view db, uint32_t policy) {
  std::string k = "r";
  put_string(k, db);
  put_be32(k, policy);
  return k;
}
std::string seq_key(std::string_view db, int64_t rowid) {
  std::string k = "s";
  put_string(k, db);
  put_be64(k, static_cast<uint64_t>(rowid));
  return k;
}

// A database's keys of one family ("r", "s" or "y") all start with this prefix.
std::string db_prefix(char family, std::string_view db) {
  std::string k(1, family);
  put_string(k, db);
  return k;
}
// The first key after every key that starts with `prefix`. REQUIRES: the prefix ends in a
// byte below 0xff (database names are "<partition>/<hash hex>").
std::string prefix_end(std::string prefix) {
  prefix.back() = static_cast<char>(prefix.back() + 1);
  return prefix;
}
std::string sync_key(std::string_view db, std::string_view remote_id) {
  std::string k = db_prefix('y', db);
  k.append(remote_id);
  return k;
}

// ---- records ---------------------------------------------------------------------------------

std::string encode_info(const DbInfo& in) {
  std::string out(1, static_cast<char>(kInfoVersion));
  for (const std::string* s :
       {&in.account, &in.container, &in.partition, &in.created_at, &in.put_timestamp,
        &in.delete_timestamp, &in.status, &in.status_changed_at, &in.reported_put_timestamp,
        &in.reported_delete_timestamp, &in.hash, &in.id}) {
    put_string(out, *s);
  }
  for (int64_t v : {in.reported_object_count, in.reported_bytes_used,
                    static_cast<int64_t>(in.storage_policy_index), in.x_container_sync_point1,
                    in.x_container_sync_point2, in.container_count, in.object_count,
                    in.bytes_used, in.max_row, in.tombstones}) {
    put_signed(out, v);
  }
  put_varint(out, in.policy_stats.size());
  for (const auto& [index, st] : in.policy_stats) {
    put_signed(out, index);
    put_signed(out, st.object_count);
    put_signed(out, st.bytes_used);
    put_signed(out, st.container_count);
  }
  put_varint(out, in.metadata.size());
  for (const auto& [key, item] : in.metadata) {
    put_string(out, key);
    put_string(out, item.value);
    put_string(out, item.timestamp);
  }
  put_signed(out, in.reconciler_sync_point);  // added later: absent from older records
  return out;
}

Result<DbInfo> decode_info(std::string_view data) {
  if (data.empty() || static_cast<uint8_t>(data[0]) != kInfoVersion) {
    return Status::corruption("unknown info record version");
  }
  Reader r(data.substr(1));
  DbInfo in;
  for (std::string* s :
       {&in.account, &in.container, &in.partition, &in.created_at, &in.put_timestamp,
        &in.delete_timestamp, &in.status, &in.status_changed_at, &in.reported_put_timestamp,
        &in.reported_delete_timestamp, &in.hash, &in.id}) {
    *s = r.string();
  }
  int64_t policy = 0;
  for (int64_t* v : {&in.reported_object_count, &in.reported_bytes_used, &policy,
                     &in.x_container_sync_point1, &in.x_container_sync_point2,
                     &in.container_count, &in.object_count, &in.bytes_used, &in.max_row,
                     &in.tombstones}) {
    *v = r.signed_varint();
  }
  in.storage_policy_index = static_cast<int>(policy);
  uint64_t n = r.varint();
  for (uint64_t i = 0; i < n && r.ok(); ++i) {
    auto index = static_cast<int>(r.signed_varint());
    PolicyStat& st = in.policy_stats[index];
    st.object_count = r.signed_varint();
    st.bytes_used = r.signed_varint();
    st.container_count = r.signed_varint();
  }
  n = r.varint();
  for (uint64_t i = 0; i < n && r.ok(); ++i) {
    std::string key = r.string();
    MetaItem item;
    item.value = r.string();
    item.timestamp = r.string();
    in.metadata[std::move(key)] = std::move(item);
  }
  if (r.ok() && !r.done()) in.reconciler_sync_point = r.signed_varint();
  if (!r.ok()) return Status::corruption("truncated info record");
  return in;
}

std::string encode_row(const ObjectRecord& o) {
  std::string out(1, static_cast<char>(kRowVersion));
  put_string(out, o.created_at);
  put_signed(out, o.size);
  put_string(out, o.content_type);
  put_string(out, o.etag);
  out.push_back(o.deleted ? 1 : 0);
  put_signed(out, o.rowid);
  return out;
}
std::string encode_row(const ContainerRecord& c) {
  std::string out(1, static_cast<char>(kRowVersion));
  put_string(out, c.put_timestamp);
  put_string(out, c.delete_timestamp);
  put_signed(out, c.object_count);
  put_signed(out, c.bytes_used);
  out.push_back(c.deleted ? 1 : 0);
  put_signed(out, c.rowid);
  put_signed(out, c.storage_policy_index);
  return out;
}

bool decode_row(std::string_view data, ObjectRecord& o) {
  if (data.empty() || static_cast<uint8_t>(data[0]) != kRowVersion) return false;
  Reader r(data.substr(1));
  o.created_at = r.string();
  o.size = r.signed_varint();
  o.content_type = r.string();
  o.etag = r.string();
  uint64_t deleted = r.varint();
  o.deleted = deleted != 0;
  o.rowid = r.signed_varint();
  return r.ok();
}
bool decode_row(std::string_view data, ContainerRecord& c) {
  if (data.empty() || static_cast<uint8_t>(data[0]) != kRowVersion) return false;
  Reader r(data.substr(1));
  c.put_timestamp = r.string();
  c.delete_timestamp = r.string();
  c.object_count = r.signed_varint();
  c.bytes_used = r.signed_varint();
  c.deleted = r.varint() != 0;
  c.rowid = r.signed_varint();
  c.storage_policy_index = static_cast<int>(r.signed_varint());
  return r.ok();
}

Status from_rocksdb(const rocksdb::Status& s) {
  if (s.ok()) return Status();
  if (s.IsNotFound()) return Status::not_found(s.ToString());
  // A read limited to memory that needed the disk (Waiting::kNever): do it again on a pool.
  if (s.IsIncomplete()) return Status::unavailable(s.ToString());
  if (s.IsCorruption()) return Status::corruption(s.ToString());
  if (s.IsNoSpace()) return Status::insufficient_storage(s.ToString());
  return Status::io_error(s.ToString());
}

// ---- the RocksDB store -----------------------------------------------------------------------

// A container report older than the deletion the account already knows of: both its
// timestamps are older than the row's delete timestamp, which is newer than the row's put.
// Its object count is from before the DELETE (a container is deleted only when empty, and a
// deleted one takes no more rows), so it must not bring the container back. Swift's account
// broker takes such a report's counts and lists the container again until the container's next
// report; Apus keeps the row as it is.
bool stale_report(const ContainerRecord& row, const ContainerRecord& report) {
  const Timestamp row_delete = timestamp_or_zero(row.delete_timestamp);
  return row_delete > timestamp_or_zero(row.put_timestamp) &&
         timestamp_or_zero(report.put_timestamp) <= timestamp_or_zero(row.put_timestamp) &&
         timestamp_or_zero(report.delete_timestamp) < row_delete;
}

class RocksListingStore final : public ListingStore {
 public:
  RocksListingStore(StoreOptions options, std::unique_ptr<rocksdb::DB> db,
                    bool follower = false)
      : ListingStore(options), db_(std::move(db)), follower_(follower) {
    write_options_.sync = options.sync_writes;
    unsynced_write_options_.sync = false;
    nonblocking_write_options_.sync = false;
    nonblocking_write_options_.no_slowdown = true;
  }

  // A consistent view for a read of several keys: a snapshot; for a follower, which RocksDB
  // cannot snapshot, none (its view changes only at catch_up(), called between reads).
  class ReadView {
   public:
    explicit ReadView(RocksListingStore& store)
        : db_(store.db_.get()), snap_(store.follower_ ? nullptr : db_->GetSnapshot()) {}
    ~ReadView() {
      if (snap_) db_->ReleaseSnapshot(snap_);
    }
    ReadView(const ReadView&) = delete;
    ReadView& operator=(const ReadView&) = delete;
    const rocksdb::Snapshot* snapshot() const { return snap_; }

   private:
    rocksdb::DB* db_;
    const rocksdb::Snapshot* snap_;
  };

  Status catch_up() override {
    if (!follower_) return Status();
    rocksdb::Status s = db_->TryCatchUpWithPrimary();
    return s.ok() ? Status() : from_rocksdb(s);
  }

  Result<std::optional<DbInfo>> get_info(std::string_view db) override {
    return read_info(db, nullptr);
  }

  Result<std::vector<std::pair<std::string, DbInfo>>> list_infos(std::string_view after_db,
                                                                 size_t limit) override {
    std::vector<std::pair<std::string, DbInfo>> out;
    rocksdb::ReadOptions ro;
    std::string upper = "j";  // info keys are "i" + name
    rocksdb::Slice upper_slice(upper);
    ro.iterate_upper_bound = &upper_slice;
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro));
    std::string start = info_key(after_db);
    for (it->Seek(start); it->Valid() && out.size() < limit; it->Next()) {
      std::string_view key(it->key().data(), it->key().size());
      if (key == start) continue;
      auto info = decode_info(std::string_view(it->value().data(), it->value().size()));
      if (!info.ok()) return info.status();
      out.emplace_back(std::string(key.substr(1)), std::move(*info));
    }
    if (!it->status().ok()) return from_rocksdb(it->status());
    return out;
  }

  Status update_info(std::string_view db, const InfoUpdate& fn) override {
    common::MutexLock lock(&lock_for(db));
    auto info = read_info(db, nullptr);
    if (!info.ok()) return info.status();
    auto write = fn(*info);
    if (!write.ok()) return write.status();
    if (!*write || !info->has_value()) return Status();
    rocksdb::WriteBatch batch;
    batch.Put(info_key(db), encode_info(**info));
    return write_batch(batch);
  }

  Status merge_objects(std::string_view db, std::vector<ObjectRecord> records,
                       const SyncPoint* source, WalSync sync, Waiting waiting) override {
    common::Mutex& mu = lock_for(db);
    if (waiting == Waiting::kMay) {
      common::MutexLock lock(&mu);
      return merge_objects_locked(db, std::move(records), source, sync, waiting);
    }
    if (sync == WalSync::kStore && options_.sync_writes) return would_block();  // an fsync
    if (!mu.try_lock()) return would_block();
    Status s = merge_objects_locked(db, std::move(records), source, sync, waiting);
    mu.unlock();
    return s;
  }

  // merge_objects() under the database's stripe lock.
  Status merge_objects_locked(std::string_view db, std::vector<ObjectRecord> records,
                              const SyncPoint* source, WalSync sync, Waiting waiting) {
    // kNever reads only what is in memory (memtables, cached blocks, open tables): Incomplete
    // otherwise, answered as Unavailable.
    rocksdb::ReadOptions reads;
    if (waiting == Waiting::kNever) reads.read_tier = rocksdb::kBlockCacheTier;
    auto loaded = read_info(db, nullptr, reads);
    if (!loaded.ok()) return loaded.status();
    if (!loaded->has_value()) return Status::not_found("no such container");
    DbInfo& info = **loaded;
    rocksdb::WriteBatch batch;
    std::unordered_map<std::string, ObjectRecord> written;  // rows this batch already holds
    for (ObjectRecord& rec : records) {
      std::string key = row_base(db, static_cast<uint32_t>(rec.storage_policy_index)) + rec.name;
      std::optional<ObjectRecord> existing;
      if (auto it = written.find(key); it != written.end()) {
        existing = it->second;
      } else {
        std::string value;
        rocksdb::Status s = db_->Get(reads, key, &value);
        if (!s.ok() && !s.IsNotFound()) return from_rocksdb(s);
        if (s.ok()) {
          existing.emplace();
          if (!decode_row(value, *existing)) return Status::corruption("bad object row");
          existing->name = rec.name;
          existing->storage_policy_index = rec.storage_policy_index;
        }
      }
      if (!merge_object_record(rec, existing ? &*existing : nullptr)) continue;
      if (existing) remove_object_stats(info, *existing, db, batch);
      rec.rowid = info.max_row = std::max<int64_t>(info.max_row, 0) + 1;  // ROWIDs start at 1
      add_object_stats(info, rec);
      batch.Put(key, encode_row(rec));
      batch.Put(seq_key(db, rec.rowid), key.substr(1));
      written[key] = rec;
    }
    return finish_merge(db, info, !written.empty(), source, batch, sync, waiting);
  }

  static Status would_block() { return Status::unavailable("the write would wait"); }

  Status merge_containers(std::string_view db, std::vector<ContainerRecord> records,
                          const SyncPoint* source) override {
    common::MutexLock lock(&lock_for(db));
    auto loaded = read_info(db, nullptr);
    if (!loaded.ok()) return loaded.status();
    if (!loaded->has_value()) return Status::not_found("no such account");
    DbInfo& info = **loaded;
    rocksdb::WriteBatch batch;
    std::unordered_map<std::string, ContainerRecord> written;
    for (ContainerRecord& rec : records) {
      std::string key = row_base(db, 0) + rec.name;
      std::optional<ContainerRecord> existing;
      if (auto it = written.find(key); it != written.end()) {
        existing = it->second;
      } else {
        std::string value;
        rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), key, &value);
        if (!s.ok() && !s.IsNotFound()) return from_rocksdb(s);
        if (s.ok()) {
          existing.emplace();
          if (!decode_row(value, *existing)) return Status::corruption("bad container row");
          existing->name = rec.name;
        }
      }
      if (existing && stale_report(*existing, rec)) continue;
      if (existing) {
        // Swift keeps the newer put and delete timestamps independently, takes counts from the
        // update, and always rewrites the row.
        if (timestamp_or_zero(existing->put_timestamp) > timestamp_or_zero(rec.put_timestamp)) {
          rec.put_timestamp = existing->put_timestamp;
        }
        if (timestamp_or_zero(existing->delete_timestamp) > timestamp_or_zero(rec.delete_timestamp)) {
          rec.delete_timestamp = existing->delete_timestamp;
        }
        rec.deleted = timestamp_or_zero(rec.delete_timestamp) > timestamp_or_zero(rec.put_timestamp) &&
                      rec.object_count == 0;
        remove_container_stats(info, *existing, db, batch);
      }
      rec.rowid = info.max_row = std::max<int64_t>(info.max_row, 0) + 1;  // ROWIDs start at 1
      add_container_stats(info, rec);
      batch.Put(key, encode_row(rec));
      batch.Put(seq_key(db, rec.rowid), key.substr(1));
      written[key] = rec;
    }
    return finish_merge(db, info, !written.empty(), source, batch);
  }

  Result<std::vector<SyncPoint>> get_syncs(std::string_view db) override {
    ReadView view(*this);
    auto info = read_info(db, view.snapshot());
    if (!info.ok()) return info.status();
    if (!info->has_value()) return Status::not_found("no such database");
    return read_syncs(db, view.snapshot());
  }

  Status merge_syncs(std::string_view db, const std::vector<SyncPoint>& points) override {
    common::MutexLock lock(&lock_for(db));
    auto info = read_info(db, nullptr);
    if (!info.ok()) return info.status();
    if (!info->has_value()) return Status::not_found("no such database");
    auto stored = read_syncs(db, nullptr);
    if (!stored.ok()) return stored.status();
    std::map<std::string, int64_t> merged;
    for (const SyncPoint& p : *stored) merged.emplace(p.remote_id, p.sync_point);
    rocksdb::WriteBatch batch;
    for (const SyncPoint& p : points) {
      auto [it, added] = merged.emplace(p.remote_id, p.sync_point);
      if (!added && p.sync_point <= it->second) continue;
      it->second = p.sync_point;
      batch.Put(sync_key(db, p.remote_id), encode_sync(p.sync_point));
    }
    if (merged.size() > kMaxSyncPoints) {
      return Status::invalid_argument("more than " + std::to_string(kMaxSyncPoints) +
                                      " sync points");
    }
    if (batch.Count() == 0) return Status();
    return write_batch(batch);
  }

  Status remove_db(std::string_view db, std::string_view id, int64_t max_row) override {
    common::MutexLock lock(&lock_for(db));
    auto info = read_info(db, nullptr);
    if (!info.ok()) return info.status();
    if (!info->has_value()) return Status::not_found("no such database");
    if ((*info)->id != id || (*info)->max_row != max_row) {
      return Status::conflict("the database changed since it was replicated");
    }
    rocksdb::WriteBatch batch;
    batch.Delete(info_key(db));
    delete_db_keys(db, batch);
    return write_batch(batch);
  }

  Status remove_db_if_unchanged(std::string_view db, const DbInfo& expected) override {
    common::MutexLock lock(&lock_for(db));
    auto info = read_info(db, nullptr);
    if (!info.ok()) return info.status();
    if (!info->has_value()) return Status::not_found("no such database");
    if (**info != expected) return Status::conflict("the database changed meanwhile");
    rocksdb::WriteBatch batch;
    batch.Delete(info_key(db));
    delete_db_keys(db, batch);
    return write_batch(batch);
  }

  Result<int64_t> reclaim(std::string_view db, const std::string& age) override {
    // Find the old tombstones on a snapshot without the lock, then remove them in batches
    // under it, checking each row again (it may have been rewritten meanwhile).
    std::vector<std::string> candidates;
    {
      std::string prefix = "r";
      put_string(prefix, db);
      std::string end = prefix;
      end.back() = static_cast<char>(end.back() + 1);  // the db name's last byte, bumped
      rocksdb::ReadOptions ro;
      rocksdb::Slice upper(end);
      ro.iterate_upper_bound = &upper;
      std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro));
      for (it->Seek(prefix); it->Valid(); it->Next()) {
        std::string_view value(it->value().data(), it->value().size());
        if (old_tombstone(value, age)) candidates.emplace_back(it->key().data(), it->key().size());
      }
      if (!it->status().ok()) return from_rocksdb(it->status());
    }
    constexpr size_t kBatch = 1000;  // rows per write batch (and per hold of the lock)
    int64_t removed = 0;
    for (size_t start = 0;; start += kBatch) {
      common::MutexLock lock(&lock_for(db));
      auto loaded = read_info(db, nullptr);
      if (!loaded.ok()) return loaded.status();
      if (!loaded->has_value()) return Status::not_found();
      DbInfo& info = **loaded;
      rocksdb::WriteBatch batch;
      for (size_t i = start; i < std::min(start + kBatch, candidates.size()); ++i) {
        std::string value;
        rocksdb::Status got = db_->Get(rocksdb::ReadOptions(), candidates[i], &value);
        if (!got.ok() || !old_tombstone(value, age)) continue;
        remove_row(info, candidates[i], value, db, batch);
        batch.Delete(candidates[i]);
        ++removed;
      }
      bool last = start + kBatch >= candidates.size();
      if (last) {
        for (auto it = info.metadata.begin(); it != info.metadata.end();) {
          it = it->second.value.empty() && it->second.timestamp < age ? info.metadata.erase(it)
                                                                      : std::next(it);
        }
      }
      if (last && info.is_deleted(options_.type) && info.empty(options_.type) &&
          info.tombstones == 0 && info.delete_timestamp < age) {
        batch.Delete(info_key(db));  // the whole database is gone, as Swift unlinks it
        delete_db_keys(db, batch);
      } else {
        batch.Put(info_key(db), encode_info(info));
      }
      APUS_RETURN_IF_ERROR(write_batch(batch));
      if (last) return removed;
    }
  }

  Result<std::vector<ObjectEntry>> list_objects(std::string_view db,
                                                const ListingQuery& q) override {
    std::vector<ObjectEntry> out;
    Status s = scan(db, q, static_cast<uint32_t>(q.storage_policy_index), /*allow_path=*/true, out);
    if (!s.ok()) return s;
    for (auto& e : out) e.row.storage_policy_index = q.storage_policy_index;
    return out;
  }

  Result<std::vector<ObjectRecord>> objects_since(std::string_view db, int64_t after_rowid,
                                                  size_t limit) override {
    if (options_.type != DbType::kContainer) {
      return Status::invalid_argument("objects_since on an account store");
    }
    return rows_since<ObjectRecord>(db, after_rowid, limit);
  }

  Result<RowAudit> audit_rows(std::string_view db) override {
    ReadView view(*this);
    const rocksdb::Snapshot* snap = view.snapshot();
    RowAudit out;
    auto info = read_info(db, snap);
    if (!info.ok()) return info.status();
    out.info = std::move(*info);
    if (!out.info) return out;
    rocksdb::ReadOptions ro;
    ro.snapshot = snap;
    const std::string rows_prefix = db_prefix('r', db);
    const std::string rows_end = prefix_end(rows_prefix);
    rocksdb::Slice rows_upper(rows_end);
    ro.iterate_upper_bound = &rows_upper;
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro));
    const size_t name_at = rows_prefix.size() + 4;  // after be32(policy)
    DbInfo recount;  // from zero: counts, tombstones, hash
    for (it->Seek(rows_prefix); it->Valid(); it->Next()) {
      std::string_view key(it->key().data(), it->key().size());
      std::string_view value(it->value().data(), it->value().size());
      if (key.size() < name_at) return Status::corruption("a row key without a policy");
      const int policy = static_cast<int>(get_be32(key.substr(rows_prefix.size())));
      std::string_view name = key.substr(name_at);
      ++out.rows;
      // Recounted with the writers' own bookkeeping, so both count alike by construction.
      if (options_.type == DbType::kContainer) {
        ObjectRecord r;
        if (!decode_row(value, r)) return Status::corruption("a row that does not decode");
        r.name = name;
        r.storage_policy_index = policy;
        add_object_stats(recount, r);
      } else {
        ContainerRecord r;
        if (!decode_row(value, r)) return Status::corruption("a row that does not decode");
        r.name = name;
        add_container_stats(recount, r);
      }
    }
    if (!it->status().ok()) return from_rocksdb(it->status());
    out.stats = std::move(recount.policy_stats);
    out.tombstones = recount.tombstones;
    out.hash = std::move(recount.hash);
    const std::string seq_prefix = db_prefix('s', db);
    const std::string seq_end = prefix_end(seq_prefix);
    rocksdb::Slice seq_upper(seq_end);
    ro.iterate_upper_bound = &seq_upper;
    std::unique_ptr<rocksdb::Iterator> seq(db_->NewIterator(ro));
    for (seq->Seek(seq_prefix); seq->Valid(); seq->Next()) ++out.sequence_entries;
    if (!seq->status().ok()) return from_rocksdb(seq->status());
    return out;
  }

  Status verify_checksums() override {
    rocksdb::Status s = db_->VerifyChecksum();
    return s.ok() ? Status() : from_rocksdb(s);
  }

  Result<std::vector<ContainerRecord>> containers_since(std::string_view db, int64_t after_rowid,
                                                        size_t limit) override {
    if (options_.type != DbType::kAccount) {
      return Status::invalid_argument("containers_since on a container store");
    }
    return rows_since<ContainerRecord>(db, after_rowid, limit);
  }

  Result<std::vector<ContainerEntry>> list_containers(std::string_view db,
                                                      const ListingQuery& q) override {
    std::vector<ContainerEntry> out;
    ListingQuery account_query = q;
    account_query.path.reset();  // accounts have no path parameter
    Status s = scan(db, account_query, 0, /*allow_path=*/false, out);
    if (!s.ok()) return s;
    return out;
  }

 private:
  // Up to `limit` rows of `db` whose ROWID is greater than `after_rowid`, in ROWID order, each
  // with its name, policy and rowid set: one ordered walk of the "s" sequence keys on a
  // snapshot. `Row` is ObjectRecord or ContainerRecord, as the store's type.
  template <class Row>
  Result<std::vector<Row>> rows_since(std::string_view db, int64_t after_rowid, size_t limit) {
    ReadView view(*this);
    const rocksdb::Snapshot* snap = view.snapshot();
    auto info = read_info(db, snap);
    if (!info.ok()) return info.status();
    if (!info->has_value()) return Status::not_found("no such database");
    std::vector<Row> out;
    // The sequence keys of `db` are "s" + varint(len(db)) + db + be64(rowid); each value is
    // the row's key without its "r", i.e. the same varint(len(db)) + db, then be32(policy)
    // and the name.
    const std::string prefix = db_prefix('s', db);
    const std::string end = prefix_end(prefix);
    rocksdb::ReadOptions ro;
    ro.snapshot = snap;
    rocksdb::Slice upper(end);
    ro.iterate_upper_bound = &upper;
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro));
    const size_t db_part = prefix.size() - 1;  // varint(len(db)) + db
    for (it->Seek(seq_key(db, std::max<int64_t>(after_rowid, -1) + 1));
         it->Valid() && out.size() < limit; it->Next()) {
      std::string_view value(it->value().data(), it->value().size());
      if (value.size() < db_part + 4) return Status::corruption("bad sequence entry");
      std::string row_key = "r";
      row_key.append(value);
      std::string row;
      rocksdb::Status s = db_->Get(ro, row_key, &row);
      if (s.IsNotFound()) continue;  // cannot happen: row and entry change in one batch
      if (!s.ok()) return from_rocksdb(s);
      Row rec;
      if (!decode_row(row, rec)) return Status::corruption("bad row");
      const auto* p = reinterpret_cast<const uint8_t*>(value.data() + db_part);
      rec.storage_policy_index =
          static_cast<int>((uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) |
                           (uint32_t{p[2]} << 8) | uint32_t{p[3]});
      rec.name = std::string(value.substr(db_part + 4));
      out.push_back(std::move(rec));
    }
    if (!it->status().ok()) return from_rocksdb(it->status());
    return out;
  }

  // A sync point's value: the point (zig-zag varint) and when it was last moved (Unix seconds,
  // Swift's updated_at, for a later reclaim of points of replicas long gone).
  static std::string encode_sync(int64_t point) {
    std::string v;
    put_signed(v, point);
    put_varint(v, static_cast<uint64_t>(std::max<int64_t>(0, std::time(nullptr))));
    return v;
  }

  Result<std::vector<SyncPoint>> read_syncs(std::string_view db, const rocksdb::Snapshot* snap) {
    const std::string prefix = db_prefix('y', db);
    const std::string end = prefix_end(prefix);
    rocksdb::ReadOptions ro;
    ro.snapshot = snap;
    rocksdb::Slice upper(end);
    ro.iterate_upper_bound = &upper;
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro));
    std::vector<SyncPoint> out;
    for (it->Seek(prefix); it->Valid(); it->Next()) {
      Reader r(std::string_view(it->value().data(), it->value().size()));
      SyncPoint p;
      p.remote_id.assign(it->key().data() + prefix.size(), it->key().size() - prefix.size());
      p.sync_point = r.signed_varint();
      if (!r.ok()) return Status::corruption("bad sync point");
      out.push_back(std::move(p));
    }
    if (!it->status().ok()) return from_rocksdb(it->status());
    return out;
  }

  // The end of a row merge: the info (when rows changed) and the source's incoming sync point
  // (Swift moves it even when no row was newer) go out with the rows in one write.
  Status finish_merge(std::string_view db, const DbInfo& info, bool rows_changed,
                      const SyncPoint* source, rocksdb::WriteBatch& batch,
                      WalSync sync = WalSync::kStore, Waiting waiting = Waiting::kMay) {
    if (source) {
      std::string key = sync_key(db, source->remote_id);
      std::string value;
      rocksdb::ReadOptions reads;
      if (waiting == Waiting::kNever) reads.read_tier = rocksdb::kBlockCacheTier;
      rocksdb::Status got = db_->Get(reads, key, &value);
      if (!got.ok() && !got.IsNotFound()) return from_rocksdb(got);
      int64_t old_point = INT64_MIN;
      if (got.ok()) {
        Reader r(value);
        old_point = r.signed_varint();
        if (!r.ok()) return Status::corruption("bad sync point");
      }
      if (source->sync_point > old_point) batch.Put(key, encode_sync(source->sync_point));
    }
    if (rows_changed) batch.Put(info_key(db), encode_info(info));
    if (batch.Count() == 0) return Status();
    return write_batch(batch, sync, waiting);
  }

  // Adds the removal of every row, sequence entry and sync point of `db` to `batch`.
  static void delete_db_keys(std::string_view db, rocksdb::WriteBatch& batch) {
    for (char family : {'r', 's', 'y'}) {
      std::string prefix = db_prefix(family, db);
      batch.DeleteRange(prefix, prefix_end(prefix));
    }
  }

  common::Mutex& lock_for(std::string_view db) {
    return locks_[std::hash<std::string_view>()(db) % locks_.size()];
  }

  Result<std::optional<DbInfo>> read_info(std::string_view db, const rocksdb::Snapshot* snap,
                                          rocksdb::ReadOptions ro = {}) {
    ro.snapshot = snap;
    std::string value;
    rocksdb::Status s = db_->Get(ro, info_key(db), &value);
    if (s.IsNotFound()) return std::optional<DbInfo>();
    if (!s.ok()) return from_rocksdb(s);
    auto info = decode_info(value);
    if (!info.ok()) return info.status();
    return std::optional<DbInfo>(std::move(*info));
  }

  // Whether a row value is a tombstone older than `age` (Swift's db_reclaim_timestamp:
  // created_at for objects, delete_timestamp for containers; compared as strings, as SQLite).
  bool old_tombstone(std::string_view value, const std::string& age) const {
    if (options_.type == DbType::kContainer) {
      ObjectRecord r;
      return decode_row(value, r) && r.deleted && r.created_at < age;
    }
    ContainerRecord r;
    return decode_row(value, r) && r.deleted && r.delete_timestamp < age;
  }

  // Takes a row's share out of the info's counts and hash, and its sequence entry out.
  void remove_row(DbInfo& info, const std::string& key, std::string_view value,
                  std::string_view db, rocksdb::WriteBatch& batch) {
    // key: "r" + varint len + db + be32 policy + name
    size_t name_at = 1 + varint_size(db.size()) + db.size() + 4;
    std::string name = key.substr(name_at);
    uint32_t policy = 0;
    for (int i = 0; i < 4; ++i) policy = policy << 8 | static_cast<uint8_t>(key[name_at - 4 + i]);
    if (options_.type == DbType::kContainer) {
      ObjectRecord r;
      (void)decode_row(value, r);
      r.name = name;
      r.storage_policy_index = static_cast<int>(policy);
      remove_object_stats(info, r, db, batch);
    } else {
      ContainerRecord r;
      (void)decode_row(value, r);
      r.name = name;
      remove_container_stats(info, r, db, batch);
    }
  }

  static size_t varint_size(uint64_t v) {
    size_t n = 1;
    while (v >= 0x80) {
      v >>= 7;
      ++n;
    }
    return n;
  }

  // Swift's object table triggers: policy_stat counts and the chexor hash.
  static void add_object_stats(DbInfo& info, const ObjectRecord& r) {
    info.tombstones += r.deleted ? 1 : 0;
    PolicyStat& st = info.policy_stats[r.storage_policy_index];
    st.object_count += r.deleted ? 0 : 1;
    add_wrapping(st.bytes_used, r.size);
    info.hash = chexor(info.hash, r.name, r.created_at);
  }
  void remove_object_stats(DbInfo& info, const ObjectRecord& r, std::string_view db,
                           rocksdb::WriteBatch& batch) {
    info.tombstones -= r.deleted ? 1 : 0;
    if (auto it = info.policy_stats.find(r.storage_policy_index); it != info.policy_stats.end()) {
      it->second.object_count -= r.deleted ? 0 : 1;
      sub_wrapping(it->second.bytes_used, r.size);
    }
    info.hash = chexor(info.hash, r.name, r.created_at);
    batch.Delete(seq_key(db, r.rowid));
  }
  static std::string container_hash_input(const ContainerRecord& r) {
    return r.put_timestamp + "-" + r.delete_timestamp + "-" + std::to_string(r.object_count) +
           "-" + std::to_string(r.bytes_used);
  }
  static void add_container_stats(DbInfo& info, const ContainerRecord& r) {
    int alive = r.deleted ? 0 : 1;
    info.tombstones += 1 - alive;
    info.container_count += alive;
    add_wrapping(info.object_count, r.object_count);
    add_wrapping(info.bytes_used, r.bytes_used);
    PolicyStat& st = info.policy_stats[r.storage_policy_index];
    st.container_count += alive;
    add_wrapping(st.object_count, r.object_count);
    add_wrapping(st.bytes_used, r.bytes_used);
    info.hash = chexor(info.hash, r.name, container_hash_input(r));
  }
  void remove_container_stats(DbInfo& info, const ContainerRecord& r, std::string_view db,
                              rocksdb::WriteBatch& batch) {
    int alive = r.deleted ? 0 : 1;
    info.tombstones -= 1 - alive;
    info.container_count -= alive;
    sub_wrapping(info.object_count, r.object_count);
    sub_wrapping(info.bytes_used, r.bytes_used);
    if (auto it = info.policy_stats.find(r.storage_policy_index); it != info.policy_stats.end()) {
      it->second.container_count -= alive;
      sub_wrapping(it->second.object_count, r.object_count);
      sub_wrapping(it->second.bytes_used, r.bytes_used);
    }
    info.hash = chexor(info.hash, r.name, container_hash_input(r));
    batch.Delete(seq_key(db, r.rowid));
  }

  // Swift's list_*_iter: an ordered walk over one database's rows of one policy, re-seeking
  // past each delimiter subdirectory. The bounds are recomputed from (marker, end_marker) each
  // time exactly as Swift rebuilds its SQL query, so every corner (path mode skipping, subdir
  // equal to the marker, reverse) comes out the same.
  // Each row is decoded once; deleted ones are skipped before they count. `Entry` is
  // ObjectEntry or ContainerEntry.
  template <class Entry>
  Status scan(std::string_view db, const ListingQuery& q, uint32_t policy, bool allow_path,
              std::vector<Entry>& out) {
    ReadView view(*this);
    const rocksdb::Snapshot* snap = view.snapshot();
    auto info = read_info(db, snap);
    if (!info.ok()) return info.status();
    if (!info->has_value()) return Status::not_found();

    const std::string base = row_base(db, policy);
    const std::string base_end = row_base(db, policy + 1);
    rocksdb::ReadOptions ro;
    ro.snapshot = snap;
    rocksdb::Slice lower_slice(base), upper_slice(base_end);
    ro.iterate_lower_bound = &lower_slice;
    ro.iterate_upper_bound = &upper_slice;
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro));

    std::string marker = q.marker;
    std::string end_marker = q.end_marker.value_or("");
    if (q.reverse) std::swap(marker, end_marker);
    std::optional<std::string> prefix = q.prefix;
    std::string delimiter = q.delimiter.value_or("");
    std::optional<std::string> path;
    if (allow_path && q.path) {
      std::string p = *q.path;
      if (!p.empty()) {
        while (!p.empty() && p.back() == '/') p.pop_back();
        p += '/';
      }
      prefix = path = p;
      delimiter = "/";
    } else if (!delimiter.empty() && !prefix) {
      prefix = "";
    }
    const std::string pfx = prefix.value_or("");
    const std::string end_prefix = pfx.empty() ? "" : increment_last_char(pfx);
    const std::string orig_marker = marker;
    const bool delimited = prefix.has_value() && !delimiter.empty();
    const int64_t limit = q.limit;
    int64_t results = 0;
    bool delim_force_gte = false;

    while (results < limit) {
      // The bounds of Swift's next query.
      std::optional<std::string> upper;
      if (!end_marker.empty() && (pfx.empty() || end_marker < end_prefix)) {
        upper = end_marker;
      } else if (!pfx.empty()) {
        upper = end_prefix;
      }
      std::string lower;
      bool lower_inclusive = true;
      if (delim_force_gte) {
        lower = marker;
        delim_force_gte = false;
      } else if (!marker.empty() && (pfx.empty() || marker >= pfx)) {
        lower = marker;
        lower_inclusive = false;
      } else if (!pfx.empty()) {
        lower = pfx;
      }
      auto in_bounds = [&](std::string_view name) {
        if (upper && name >= *upper) return false;
        if (lower_inclusive ? name < lower : name <= lower) return false;
        if (!q.allow_reserved && !name.empty() && name[0] == '\0') return false;
        return true;
      };
      if (q.reverse) {
        if (upper) {
          it->SeekForPrev(base + *upper);
        } else {
          it->SeekToLast();
        }
      } else {
        std::string start = lower;
        if (!q.allow_reserved && start < std::string("\x01", 1)) start = "\x01";
        it->Seek(base + start);
      }

      int64_t rowcount = 0;
      bool requery = false;
      for (; it->Valid() && results < limit; q.reverse ? it->Prev() : it->Next()) {
        std::string_view key(it->key().data(), it->key().size());
        std::string_view name = key.substr(base.size());
        if (!in_bounds(name)) {
          // Past the far bound: done. Before the near bound (an exclusive marker, or the
          // reserved range seen from the top in reverse): keep walking.
          bool past_far = q.reverse ? (lower_inclusive ? name < lower : name <= lower) ||
                                          (!q.allow_reserved && !name.empty() && name[0] == '\0')
                                    : (upper && name >= *upper);
          if (past_far) break;
          continue;
        }
        Entry entry;
        if (!decode_row(std::string_view(it->value().data(), it->value().size()), entry.row)) {
          return Status::corruption("bad row");
        }
        if (entry.row.deleted) continue;
        entry.row.name.assign(name);
        ++rowcount;
        if (q.reverse) {
          end_marker.assign(name);
        } else {
          marker.assign(name);
        }
        if (!delimited) {
          out.push_back(std::move(entry));
          ++results;
          continue;
        }
        size_t end = name.find(delimiter, pfx.size());
        if (path) {
          if (name == *path) continue;
          if (end != std::string_view::npos && name.size() > end + delimiter.size()) {
            if (q.reverse) {
              end_marker.assign(name.substr(0, end + delimiter.size()));
            } else {
              marker = std::string(name.substr(0, end)) + increment_last_char(delimiter);
            }
            requery = true;
            break;
          }
        } else if (end != std::string_view::npos) {
          std::string dir_name(name.substr(0, end + delimiter.size()));
          if (q.reverse) {
            end_marker = dir_name;
          } else {
            marker = std::string(name.substr(0, end)) + increment_last_char(delimiter);
            delim_force_gte = true;
          }
          if (dir_name != orig_marker) {
            Entry subdir;
            subdir.subdir = true;
            subdir.row.name = std::move(dir_name);
            out.push_back(std::move(subdir));
            ++results;
          }
          requery = true;
          break;
        }
        out.push_back(std::move(entry));
        ++results;
      }
      if (!it->status().ok()) return from_rocksdb(it->status());
      if (!requery || rowcount == 0) break;
    }
    return Status();
  }

  // kNever writes unsynced (merge_objects() checked) and answers Unavailable (from_rocksdb's
  // Incomplete) where RocksDB would stall the write.
  Status write_batch(rocksdb::WriteBatch& batch, WalSync sync = WalSync::kStore,
                     Waiting waiting = Waiting::kMay) {
    const rocksdb::WriteOptions& options =
        waiting == Waiting::kNever   ? nonblocking_write_options_
        : sync == WalSync::kUnsynced ? unsynced_write_options_
                                     : write_options_;
    rocksdb::Status s = db_->Write(options, &batch);
    // A failed WAL write leaves RocksDB read-only (its background error); ReopeningStore
    // reopens it.
    if (s.IsIOError()) write_failed_.store(true, std::memory_order_release);
    return from_rocksdb(s);
  }

  std::unique_ptr<rocksdb::DB> db_;
  const bool follower_;  // a secondary instance (open_follower)
  rocksdb::WriteOptions write_options_;
  rocksdb::WriteOptions unsynced_write_options_;     // WalSync::kUnsynced
  rocksdb::WriteOptions nonblocking_write_options_;  // Waiting::kNever
  // Striped by database name: one database's read-modify-write of its info and rows at a time.
  std::array<common::Mutex, 128> locks_;
  std::atomic<bool> write_failed_{false};  // a write failed with an I/O error: reopen

 public:
  bool write_failed() const { return write_failed_.load(std::memory_order_acquire); }
};

}  // namespace

// ---- DbInfo ----------------------------------------------------------------------------------

int64_t DbInfo::container_objects() const {
  auto it = policy_stats.find(storage_policy_index);
  return it == policy_stats.end() ? 0 : it->second.object_count;
}
int64_t DbInfo::container_bytes() const {
  auto it = policy_stats.find(storage_policy_index);
  return it == policy_stats.end() ? 0 : it->second.bytes_used;
}

bool DbInfo::is_deleted(DbType type) const {
  bool newer_delete = timestamp_or_zero(delete_timestamp) > timestamp_or_zero(put_timestamp);
  if (type == DbType::kContainer) return container_objects() == 0 && newer_delete;
  return status == "DELETED" || (container_count == 0 && newer_delete);
}

bool DbInfo::is_status_deleted() const {
  return status == "DELETED" || delete_timestamp > put_timestamp;
}

bool DbInfo::empty(DbType type) const {
  if (type == DbType::kAccount) return container_count == 0;
  int64_t most = 0;
  bool any = false;
  for (const auto& [index, st] : policy_stats) {
    most = any ? std::max(most, st.object_count) : st.object_count;
    any = true;
  }
  return most == 0;
}

// ---- helpers ---------------------------------------------------------------------------------

std::string chexor(std::string_view old_hash, std::string_view name, std::string_view timestamp) {
  std::string input;
  input.reserve(name.size() + 1 + timestamp.size());
  input.append(name).append("-").append(timestamp);
  common::crypto::Md5Digest digest = common::crypto::md5(input);
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return 0;
  };
  std::array<uint8_t, 16> old{};
  // The stored hash is 32 hex digits; shorter ones are right-aligned as int(old, 16) reads them.
  std::string padded(old_hash.size() < 32 ? 32 - old_hash.size() : 0, '0');
  padded.append(old_hash.substr(old_hash.size() > 32 ? old_hash.size() - 32 : 0));
  for (size_t i = 0; i < 16; ++i) {
    old[i] = static_cast<uint8_t>(nibble(padded[2 * i]) << 4 | nibble(padded[2 * i + 1]));
    old[i] ^= digest[i];
  }
  std::string out(32, '0');
  common::crypto::write_hex(old, out.data());
  return out;
}


bool merge_object_record(ObjectRecord& update, const ObjectRecord* existing) {
  auto decoded = common::decode_timestamps(update.created_at);
  Timestamp data = decoded.ok() ? decoded->t1 : Timestamp();
  Timestamp ctype = decoded.ok() && decoded->t2 ? *decoded->t2 : data;
  Timestamp meta = decoded.ok() && decoded->t3 ? *decoded->t3 : ctype;
  if (!update.ctype_timestamp.empty()) {
    ctype = timestamp_or_zero(update.ctype_timestamp);
    meta = ctype;
  }
  if (!update.meta_timestamp.empty()) meta = timestamp_or_zero(update.meta_timestamp);
  update.ctype_timestamp.clear();
  update.meta_timestamp.clear();
  if (!existing) {
    update.created_at = common::encode_timestamps(data, ctype, meta);
    return true;
  }
  auto rec = common::decode_timestamps(existing->created_at);
  Timestamp rec_data = rec.ok() ? rec->t1 : Timestamp();
  Timestamp rec_ctype = rec.ok() && rec->t2 ? *rec->t2 : rec_data;
  Timestamp rec_meta = rec.ok() && rec->t3 ? *rec->t3 : rec_ctype;

  // swift_bytes follows the data timestamp, the rest of the content type its own timestamp.
  auto [new_type, new_bytes] = common::http::extract_swift_bytes(update.content_type);
  auto [old_type, old_bytes] = common::http::extract_swift_bytes(existing->content_type);
  bool newer = false;
  if (rec_data >= data) {
    update.size = existing->size;
    update.etag = existing->etag;
    update.deleted = existing->deleted;
    new_bytes = old_bytes;
    data = rec_data;
  } else {
    newer = true;
  }
  if (rec_ctype >= ctype) {
    new_type = old_type;
    ctype = rec_ctype;
  } else {
    newer = true;
  }
  if (rec_meta >= meta) {
    meta = rec_meta;
  } else {
    newer = true;
  }
  update.created_at = common::encode_timestamps(data, ctype, meta);
  update.content_type = new_type;
  if (new_bytes && !new_bytes->empty()) update.content_type += ";swift_bytes=" + *new_bytes;
  return newer;
}

namespace {

// RocksDB's info log, sent to the server's log (warnings and worse) instead of a LOG file in the
// store's directory: on a full device that file's writes fail, and Debian's librocksdb (built
// with assertions) then aborts the process at its next log line.
class ServerLogger final : public rocksdb::Logger {
 public:
  explicit ServerLogger(std::string path)
      : rocksdb::Logger(rocksdb::InfoLogLevel::WARN_LEVEL), path_(std::move(path)) {}

  void Logv(const char* format, va_list ap) override {
    Logv(rocksdb::InfoLogLevel::INFO_LEVEL, format, ap);
  }
  void Logv(const rocksdb::InfoLogLevel level, const char* format, va_list ap) override {
    if (level < GetInfoLogLevel() || level == rocksdb::InfoLogLevel::HEADER_LEVEL) return;
    char buf[1024];
    std::vsnprintf(buf, sizeof buf, format, ap);
    std::string line = "rocksdb " + path_ + ": " + buf;
    if (level >= rocksdb::InfoLogLevel::ERROR_LEVEL) {
      APUS_LOG_ERROR(line);
    } else {
      APUS_LOG_WARNING(line);
    }
  }

 private:
  const std::string path_;
};

// Opens the RocksDB of a store.
Result<std::unique_ptr<RocksListingStore>> open_rocks(const std::string& path,
                                                      StoreOptions options) {
  rocksdb::Options ro;
  ro.create_if_missing = true;
  ro.max_open_files = 512;
  ro.keep_log_file_num = 4;
  ro.recycle_log_file_num = 2;
  ro.info_log = std::make_shared<ServerLogger>(path);
  // Keeps compactions out of the free-space reserve (they wait instead). No cap on the store's
  // size (SetMaxAllowedSpaceUsage): like Swift's databases it may use the whole device, down to
  // the reserve the server checks before each write. With it RocksDB also polls free space
  // after ENOSPC and resumes by itself, though only ReopeningStore's reopen is sure to replace
  // the failed WAL writer.
  ro.sst_file_manager.reset(rocksdb::NewSstFileManager(rocksdb::Env::Default()));
  ro.sst_file_manager->SetCompactionBufferSize(options.reserve_bytes);
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(ro, path, &raw);
  if (!s.ok()) return from_rocksdb(s);
  return std::make_unique<RocksListingStore>(options, std::unique_ptr<rocksdb::DB>(raw));
}

// A RocksListingStore that is closed and opened again after a write failed with an I/O error
// (ENOSPC in the WAL, typically). RocksDB then refuses every write until it recovers, and its
// own recovery (DB::Resume(), which its SstFileManager also calls) keeps the failed WAL writer
// when the memtable is empty: the next write appends to that writer, which Debian's librocksdb
// 7.8 (built with assertions) answers with an abort. A reopen replays the WAL and starts a new
// one, whatever state the old DB was in.
//
// After a failure, writes answer InsufficientStorage without touching RocksDB, except one a
// second that reopens it; reads go on meanwhile. A reopen that fails (the disk still full)
// leaves the store closed: every call answers InsufficientStorage, and one a second (a read as
// well) tries again. Thread-safe: calls share mutex_; a reopen holds it alone, after the calls
// in flight finish.
class ReopeningStore final : public ListingStore {
 public:
  ReopeningStore(std::string path, StoreOptions options,
                 std::unique_ptr<RocksListingStore> inner)
      : ListingStore(options), path_(std::move(path)), inner_(std::move(inner)) {}

  Result<std::optional<DbInfo>> get_info(std::string_view db) override {
    if (closed_.load(std::memory_order_acquire)) (void)maybe_reopen();
    common::ReaderMutexLock lock(&mutex_);
    if (!inner_) return closed();
    return inner_->get_info(db);
  }
  Result<std::vector<std::pair<std::string, DbInfo>>> list_infos(std::string_view after,
                                                                 size_t limit) override {
    if (closed_.load(std::memory_order_acquire)) (void)maybe_reopen();
    common::ReaderMutexLock lock(&mutex_);
    if (!inner_) return closed();
    return inner_->list_infos(after, limit);
  }
  Status update_info(std::string_view db, const InfoUpdate& fn) override {
    return write([&](RocksListingStore& inner) { return inner.update_info(db, fn); });
  }
  Status merge_objects(std::string_view db, std::vector<ObjectRecord> records,
                       const SyncPoint* source, WalSync sync, Waiting waiting) override {
    auto merge = [&](RocksListingStore& inner) {
      return inner.merge_objects(db, std::move(records), source, sync, waiting);
    };
    return waiting == Waiting::kMay ? write(merge) : write_now(merge);
  }
  Status merge_containers(std::string_view db, std::vector<ContainerRecord> records,
                          const SyncPoint* source) override {
    return write([&](RocksListingStore& inner) {
      return inner.merge_containers(db, std::move(records), source);
    });
  }
  Result<std::vector<SyncPoint>> get_syncs(std::string_view db) override {
    return read([&](RocksListingStore& inner) { return inner.get_syncs(db); });
  }
  Status merge_syncs(std::string_view db, const std::vector<SyncPoint>& points) override {
    return write([&](RocksListingStore& inner) { return inner.merge_syncs(db, points); });
  }
  Status remove_db(std::string_view db, std::string_view id, int64_t max_row) override {
    return write([&](RocksListingStore& inner) { return inner.remove_db(db, id, max_row); });
  }
  Status remove_db_if_unchanged(std::string_view db, const DbInfo& expected) override {
    return write(
        [&](RocksListingStore& inner) { return inner.remove_db_if_unchanged(db, expected); });
  }
  Result<RowAudit> audit_rows(std::string_view db) override {
    return read([&](RocksListingStore& inner) { return inner.audit_rows(db); });
  }
  Status verify_checksums() override {
    return read([&](RocksListingStore& inner) { return inner.verify_checksums(); });
  }
  Result<std::vector<ContainerRecord>> containers_since(std::string_view db, int64_t after_rowid,
                                                        size_t limit) override {
    return read([&](RocksListingStore& inner) {
      return inner.containers_since(db, after_rowid, limit);
    });
  }
  Result<int64_t> reclaim(std::string_view db, const std::string& age) override {
    Result<int64_t> out = int64_t{0};
    Status s = write([&](RocksListingStore& inner) {
      out = inner.reclaim(db, age);
      return out.ok() ? Status() : out.status();
    });
    if (!s.ok()) return s;
    return out;
  }
  Result<std::vector<ObjectEntry>> list_objects(std::string_view db,
                                                const ListingQuery& q) override {
    if (closed_.load(std::memory_order_acquire)) (void)maybe_reopen();
    common::ReaderMutexLock lock(&mutex_);
    if (!inner_) return closed();
    return inner_->list_objects(db, q);
  }
  Result<std::vector<ContainerEntry>> list_containers(std::string_view db,
                                                      const ListingQuery& q) override {
    if (closed_.load(std::memory_order_acquire)) (void)maybe_reopen();
    common::ReaderMutexLock lock(&mutex_);
    if (!inner_) return closed();
    return inner_->list_containers(db, q);
  }
  Result<std::vector<ObjectRecord>> objects_since(std::string_view db, int64_t after_rowid,
                                                  size_t limit) override {
    if (closed_.load(std::memory_order_acquire)) (void)maybe_reopen();
    common::ReaderMutexLock lock(&mutex_);
    if (!inner_) return closed();
    return inner_->objects_since(db, after_rowid, limit);
  }

 private:
  // Runs a read fn(store) under a shared hold of mutex_ (trying a reopen first when closed).
  template <class F>
  auto read(F&& fn) -> decltype(fn(std::declval<RocksListingStore&>())) {
    if (closed_.load(std::memory_order_acquire)) (void)maybe_reopen();
    common::ReaderMutexLock lock(&mutex_);
    if (!inner_) return closed();
    return fn(*inner_);
  }

  Status closed() const {
    return Status::insufficient_storage("listing store " + path_ + " closed after a disk error");
  }

  // Runs fn(store) under a shared hold of mutex_, reopening the store first if a write failed.
  template <class F>
  Status write(F&& fn) APUS_EXCLUDES(mutex_) {
    if (failed_.load(std::memory_order_acquire)) {
      Status reopened = maybe_reopen();
      if (!reopened.ok()) return reopened;
    }
    common::ReaderMutexLock lock(&mutex_);
    if (!inner_) return closed();
    Status s = fn(*inner_);
    if (inner_->write_failed()) failed_.store(true, std::memory_order_release);
    return s;
  }

  // write() for Waiting::kNever: Unavailable, without waiting, when a reopen is due or under
  // way.
  template <class F>
  Status write_now(F&& fn) APUS_EXCLUDES(mutex_) {
    if (failed_.load(std::memory_order_acquire)) return RocksListingStore::would_block();
    if (!mutex_.try_lock_shared()) return RocksListingStore::would_block();
    Status s = inner_ ? fn(*inner_) : closed();
    if (inner_ && inner_->write_failed()) failed_.store(true, std::memory_order_release);
    mutex_.unlock_shared();
    return s;
  }

  // Reopens the store if a second has passed since the last try; InsufficientStorage when it
  // did not (or could not) reopen.
  Status maybe_reopen() APUS_EXCLUDES(mutex_) {
    const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                            std::chrono::steady_clock::now().time_since_epoch())
                            .count();
    int64_t due = next_reopen_ns_.load(std::memory_order_relaxed);
    if (now < due || !next_reopen_ns_.compare_exchange_strong(due, now + kReopenIntervalNs)) {
      return Status::insufficient_storage("listing store " + path_ + ": writes failed, " +
                                          "reopening");
    }
    common::WriterMutexLock lock(&mutex_);
    if (!failed_.load(std::memory_order_acquire)) return Status();  // reopened meanwhile
    inner_.reset();  // closes RocksDB: its lock file must be free for the new open
    closed_.store(true, std::memory_order_release);
    auto opened = open_rocks(path_, options_);
    if (!opened.ok()) {
      APUS_LOG_ERROR("listing store " + path_ + ": reopen failed: " +
                     opened.status().to_string());
      return Status::insufficient_storage("listing store " + path_ + ": reopen failed");
    }
    inner_ = std::move(*opened);
    closed_.store(false, std::memory_order_release);
    failed_.store(false, std::memory_order_release);
    APUS_LOG_INFO("listing store " + path_ + " reopened after a write error");
    return Status();
  }

  // A reopen costs a RocksDB close and open (WAL replay): at most one a second under a burst
  // of writes to a full disk.
  static constexpr int64_t kReopenIntervalNs = 1'000'000'000;

  const std::string path_;
  // Shared by every call; held alone by a reopen, after the calls in flight finish.
  common::SharedMutex mutex_;
  // Null after a failed reopen.
  std::unique_ptr<RocksListingStore> inner_ APUS_GUARDED_BY(mutex_);
  std::atomic<bool> failed_{false};           // a write failed: reopen before the next
  std::atomic<bool> closed_{false};           // a reopen failed: inner_ is null
  std::atomic<int64_t> next_reopen_ns_{0};    // steady clock; no reopen before it
};

}  // namespace

Status ListingStore::set_sync_points(std::string_view db, std::string_view sync_to,
                                     std::optional<int64_t> point1,
                                     std::optional<int64_t> point2) {
  bool changed = false;
  Status s = update_info(db, [&](std::optional<DbInfo>& info) -> Result<bool> {
    if (!info) return Status::not_found("no such container");
    auto stored = info->metadata.find("X-Container-Sync-To");
    if (stored == info->metadata.end() || stored->second.value != sync_to) {
      changed = true;
      return false;
    }
    if (point1) info->x_container_sync_point1 = *point1;
    if (point2) info->x_container_sync_point2 = *point2;
    return true;
  });
  if (!s.ok()) return s;
  if (changed) return Status::conflict("X-Container-Sync-To changed");
  return Status();
}

Result<std::unique_ptr<ListingStore>> ListingStore::open(const std::string& path,
                                                         StoreOptions options) {
  auto rocks = open_rocks(path, options);
  if (!rocks.ok()) return rocks.status();
  return std::unique_ptr<ListingStore>(new ReopeningStore(path, options, std::move(*rocks)));
}

Result<std::unique_ptr<ListingStore>> ListingStore::open_follower(const std::string& path,
                                                                  const std::string& scratch_dir,
                                                                  StoreOptions options) {
  rocksdb::Options ro;
  // A secondary keeps every table file open: the server's compactions delete files, and one
  // opened later would be gone.
  ro.max_open_files = -1;
  ro.info_log = std::make_shared<ServerLogger>(path);
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s = rocksdb::DB::OpenAsSecondary(ro, path, scratch_dir, &raw);
  if (!s.ok()) return from_rocksdb(s);
  return std::unique_ptr<ListingStore>(
      new RocksListingStore(options, std::unique_ptr<rocksdb::DB>(raw), /*follower=*/true));
}

// ---- FollowedStores ----------------------------------------------------------------------------

FollowedStores::FollowedStores(std::string devices_dir, DbType type, common::io::Fs& fs)
    : devices_dir_(std::move(devices_dir)), type_(type), fs_(fs) {}

FollowedStores::~FollowedStores() {
  stores_.clear();
  if (!scratch_dir_.empty()) {
    std::error_code ignored;
    std::filesystem::remove_all(scratch_dir_, ignored);
  }
}

ListingStore* FollowedStores::follow(const std::string& device) {
  const std::string path = devices_dir_ + "/" + device +
                           (type_ == DbType::kAccount ? "/apus-accounts" : "/apus-containers");
  auto it = stores_.find(device);
  if (it != stores_.end()) {
    Status caught_up = it->second->catch_up();
    if (caught_up.ok()) return it->second.get();
    APUS_LOG_WARNING("listing store " + path + ": " + caught_up.to_string() + "; reopening");
    stores_.erase(it);
  }
  // No store of this kind on this device (yet): RocksDB's CURRENT file names a store.
  auto current = fs_.stat(path + "/CURRENT");
  if (!current.ok() || !current->exists) return nullptr;
  if (scratch_dir_.empty()) {
    std::string templ = std::filesystem::temp_directory_path().string() + "/apus-follower.XXXXXX";
    if (::mkdtemp(templ.data()) == nullptr) {
      APUS_LOG_ERROR("cannot make a scratch directory for the listing stores: " + templ);
      return nullptr;
    }
    scratch_dir_ = templ;
  }
  StoreOptions options;
  options.type = type_;
  auto store = ListingStore::open_follower(path, scratch_dir_ + "/" + device, options);
  if (!store.ok()) {
    APUS_LOG_ERROR("cannot read listing store " + path + ": " + store.status().to_string());
    return nullptr;
  }
  return stores_.emplace(device, std::move(*store)).first->second.get();
}

}  // namespace apus::container
