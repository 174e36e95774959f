#include "container-server/swift_db.h"

#include <sqlite3.h>

#include <cstdio>
#include <map>

#include "common/crypto/base64.h"
#include "common/log/log.h"
#include "common/pickle.h"
#include "container-server/db_replication.h"
#include "container-server/db_server.h"

namespace apus::container {

using common::Result;
using common::Status;

namespace {

// Rows read (and merged) per batch.
constexpr size_t kBatch = 1000;

class Statement {
 public:
  Statement(sqlite3* db, const std::string& sql) {
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt_, nullptr) != SQLITE_OK) stmt_ = nullptr;
  }
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  bool ok() const { return stmt_ != nullptr; }
  sqlite3_stmt* get() { return stmt_; }
  // SQLITE_ROW, SQLITE_DONE or an error.
  int step() { return sqlite3_step(stmt_); }
  int columns() { return sqlite3_column_count(stmt_); }
  std::string name(int i) { return sqlite3_column_name(stmt_, i); }
  std::string text(int i) {
    const auto* p = sqlite3_column_text(stmt_, i);
    return p ? std::string(reinterpret_cast<const char*>(p),
                           static_cast<size_t>(sqlite3_column_bytes(stmt_, i)))
             : std::string();
  }
  int64_t integer(int i) { return sqlite3_column_int64(stmt_, i); }

 private:
  sqlite3_stmt* stmt_ = nullptr;
};

class SqliteReader final : public SwiftDbReader {
 public:
  SqliteReader(sqlite3* db, DbType type) : db_(db), type_(type) {}
  ~SqliteReader() override { sqlite3_close(db_); }

  Status load() {
    APUS_RETURN_IF_ERROR(load_stat());
    APUS_RETURN_IF_ERROR(load_max_row());
    load_syncs();  // very old databases have no sync tables: none then
    // Old container schemas lack storage_policy_index in the object table.
    const char* rows_table = type_ == DbType::kContainer ? "object" : "container";
    Statement probe(db_, std::string("SELECT storage_policy_index FROM ") + rows_table +
                             " LIMIT 1");
    has_policy_column_ = probe.ok();
    return Status();
  }

  const DbInfo& info() const override { return info_; }
  int64_t max_row() const override { return max_row_; }
  const std::vector<SyncPoint>& incoming_syncs() const override { return syncs_; }

  Result<std::vector<ObjectRecord>> objects_after(int64_t after, size_t limit) override {
    Statement st(db_, std::string("SELECT ROWID, name, created_at, size, content_type, etag, "
                                  "deleted, ") +
                          (has_policy_column_ ? "storage_policy_index" : "0") +
                          " FROM object WHERE ROWID > ? ORDER BY ROWID LIMIT ?");
    if (!st.ok()) return error("reading objects");
    sqlite3_bind_int64(st.get(), 1, after);
    sqlite3_bind_int64(st.get(), 2, static_cast<int64_t>(limit));
    std::vector<ObjectRecord> out;
    int rc;
    while ((rc = st.step()) == SQLITE_ROW) {
      ObjectRecord r;
      r.rowid = st.integer(0);
      r.name = st.text(1);
      r.created_at = st.text(2);
      r.size = st.integer(3);
      r.content_type = st.text(4);
      r.etag = st.text(5);
      r.deleted = st.integer(6) != 0;
      r.storage_policy_index = static_cast<int>(st.integer(7));
      out.push_back(std::move(r));
    }
    if (rc != SQLITE_DONE) return error("reading objects");
    return out;
  }

  Result<std::vector<ContainerRecord>> containers_after(int64_t after, size_t limit) override {
    Statement st(db_, std::string("SELECT ROWID, name, put_timestamp, delete_timestamp, "
                                  "object_count, bytes_used, deleted, ") +
                          (has_policy_column_ ? "storage_policy_index" : "0") +
                          " FROM container WHERE ROWID > ? ORDER BY ROWID LIMIT ?");
    if (!st.ok()) return error("reading containers");
    sqlite3_bind_int64(st.get(), 1, after);
    sqlite3_bind_int64(st.get(), 2, static_cast<int64_t>(limit));
    std::vector<ContainerRecord> out;
    int rc;
    while ((rc = st.step()) == SQLITE_ROW) {
      ContainerRecord r;
      r.rowid = st.integer(0);
      r.name = st.text(1);
      r.put_timestamp = st.text(2);
      r.delete_timestamp = st.text(3);
      r.object_count = st.integer(4);
      r.bytes_used = st.integer(5);
      r.deleted = st.integer(6) != 0;
      r.storage_policy_index = static_cast<int>(st.integer(7));
      out.push_back(std::move(r));
    }
    if (rc != SQLITE_DONE) return error("reading containers");
    return out;
  }

 private:
  Status error(std::string_view what) const {
    return Status::corruption(std::string(what) + ": " + sqlite3_errmsg(db_));
  }

  // The stat row, column by column by name (older schemas have fewer columns).
  Status load_stat() {
    Statement st(db_, type_ == DbType::kContainer ? "SELECT * FROM container_stat"
                                                  : "SELECT * FROM account_stat");
    if (!st.ok() || st.step() != SQLITE_ROW) {
      return Status::invalid_argument("not a Swift " +
                                      std::string(type_ == DbType::kContainer ? "container"
                                                                              : "account") +
                                      " database: " + sqlite3_errmsg(db_));
    }
    std::map<std::string, int> col;
    for (int i = 0; i < st.columns(); ++i) col[st.name(i)] = i;
    auto text = [&](const char* name, const char* absent) {
      auto it = col.find(name);
      return it == col.end() ? std::string(absent) : st.text(it->second);
    };
    auto integer = [&](const char* name, int64_t absent) {
      auto it = col.find(name);
      return it == col.end() ? absent : st.integer(it->second);
    };
    info_.account = text("account", "");
    info_.container = text("container", "");
    info_.created_at = text("created_at", "0");
    info_.put_timestamp = text("put_timestamp", "0");
    info_.delete_timestamp = text("delete_timestamp", "0");
    info_.status = text("status", "");
    info_.status_changed_at = text("status_changed_at", "0");
    info_.reported_put_timestamp = text("reported_put_timestamp", "0");
    info_.reported_delete_timestamp = text("reported_delete_timestamp", "0");
    info_.reported_object_count = integer("reported_object_count", 0);
    info_.reported_bytes_used = integer("reported_bytes_used", 0);
    info_.hash = text("hash", "00000000000000000000000000000000");
    info_.id = text("id", "");
    info_.storage_policy_index = static_cast<int>(integer("storage_policy_index", 0));
    info_.object_count = integer("object_count", 0);
    info_.bytes_used = integer("bytes_used", 0);
    info_.container_count = integer("container_count", 0);
    info_.metadata = metadata_from_json(text("metadata", ""));
    if (info_.account.empty() || (type_ == DbType::kContainer && info_.container.empty())) {
      return Status::invalid_argument("the database names no account or container");
    }
    return Status();
  }

  // SQLite's AUTOINCREMENT sequence of the rows table (Swift's get_max_row).
  Status load_max_row() {
    Statement st(db_, "SELECT seq FROM SQLITE_SEQUENCE WHERE name = ?");
    if (!st.ok()) return Status();  // no AUTOINCREMENT row yet: -1
    const char* table = type_ == DbType::kContainer ? "object" : "container";
    sqlite3_bind_text(st.get(), 1, table, -1, SQLITE_STATIC);
    if (st.step() == SQLITE_ROW) max_row_ = st.integer(0);
    return Status();
  }

  void load_syncs() {
    Statement st(db_, "SELECT remote_id, sync_point FROM incoming_sync");
    if (!st.ok()) return;
    while (st.step() == SQLITE_ROW) {
      if (syncs_.size() >= ListingStore::kMaxSyncPoints) break;
      syncs_.push_back(SyncPoint{st.text(0), st.integer(1)});
    }
  }

  sqlite3* db_;
  const DbType type_;
  DbInfo info_;
  int64_t max_row_ = -1;
  std::vector<SyncPoint> syncs_;
  bool has_policy_column_ = true;
};

}  // namespace

Result<std::unique_ptr<SwiftDbReader>> SwiftDbReader::open(const std::string& path, DbType type) {
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string why = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    if (rc == SQLITE_CANTOPEN) return Status::not_found(path + ": " + why);
    return Status::io_error(path + ": " + why);
  }
  sqlite3_busy_timeout(db, 10000);
  auto reader = std::make_unique<SqliteReader>(db, type);
  Status loaded = reader->load();
  if (!loaded.ok()) return loaded;
  return std::unique_ptr<SwiftDbReader>(std::move(reader));
}

Result<int64_t> merge_swift_db(const std::string& path, ListingStore& store, std::string_view db,
                               std::string_view device, std::string_view sender_id, bool create) {
  auto opened = SwiftDbReader::open(path, store.type());
  if (!opened.ok()) return opened.status();
  SwiftDbReader& file = **opened;
  const DbType type = store.type();
  const std::string partition(db.substr(0, db.find('/')));
  bool existed = false;
  Status s = store.update_info(db, [&](std::optional<DbInfo>& info) -> Result<bool> {
    if (info) {
      existed = true;
      if (create) return Status::conflict("the database exists");
      RemoteInfo remote;
      remote.created_at = file.info().created_at;
      remote.put_timestamp = file.info().put_timestamp;
      remote.delete_timestamp = file.info().delete_timestamp;
      remote.metadata = file.info().metadata;
      return merge_remote_info(*info, type, remote);
    }
    if (!create) return Status::not_found("no such database");
    DbInfo& n = info.emplace();
    const DbInfo& f = file.info();
    n.account = f.account;
    n.container = type == DbType::kContainer ? f.container : "";
    n.partition = partition;
    n.created_at = f.created_at;
    n.put_timestamp = f.put_timestamp;
    n.delete_timestamp = f.delete_timestamp;
    n.status = f.status;
    n.status_changed_at = f.status_changed_at;
    n.metadata = f.metadata;
    n.id = new_db_id(device);
    if (type == DbType::kContainer) {
      n.storage_policy_index = f.storage_policy_index;
      n.policy_stats[n.storage_policy_index];
    }
    return true;
  });
  if (!s.ok()) return s;
  int64_t rows = 0;
  for (int64_t after = -1;;) {
    Status merged;
    size_t got = 0;
    if (type == DbType::kContainer) {
      auto batch = file.objects_after(after, kBatch);
      if (!batch.ok()) return batch.status();
      if (batch->empty()) break;
      after = batch->back().rowid;
      got = batch->size();
      merged = store.merge_objects(db, std::move(*batch));
    } else {
      auto batch = file.containers_after(after, kBatch);
      if (!batch.ok()) return batch.status();
      if (batch->empty()) break;
      after = batch->back().rowid;
      got = batch->size();
      merged = store.merge_containers(db, std::move(*batch));
    }
    if (!merged.ok()) return merged;
    rows += static_cast<int64_t>(got);
  }
  std::vector<SyncPoint> points = file.incoming_syncs();
  if (!sender_id.empty()) points.push_back(SyncPoint{std::string(sender_id), file.max_row()});
  APUS_RETURN_IF_ERROR(store.merge_syncs(db, points));
  if (!existed) {
    auto info = store.get_info(db);
    if (info.ok() && *info && (*info)->hash != file.info().hash) {
      APUS_LOG_WARNING("database " + std::string(db) + " made from " + path +
                       ": its rows hash to " + (*info)->hash + ", the file says " +
                       file.info().hash);
    }
  }
  return rows;
}

PendingRows parse_pending(std::string_view text, DbType type) {
  PendingRows out;
  auto str = [](const common::pickle::Value& v, std::string& to) {
    if (v.is_str() || v.is_bytes()) {
      to = v.as_string();
      return true;
    }
    if (v.is_none()) {
      to.clear();
      return true;
    }
    if (v.is_int()) {  // a timestamp or count pickled as a number by an old Swift
      to = std::to_string(v.as_int());
      return true;
    }
    if (v.is_float()) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.5f", v.as_float());
      to = buf;
      return true;
    }
    return false;
  };
  auto num = [](const common::pickle::Value& v, int64_t& to) {
    if (v.is_int()) to = v.as_int();
    else if (v.is_bool()) to = v.as_bool() ? 1 : 0;
    else if (v.is_str() || v.is_bytes()) {
      auto n = parse_int(v.as_string());
      if (!n) return false;
      to = *n;
    } else {
      return false;
    }
    return true;
  };
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(':', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view entry = text.substr(start, end - start);
    start = end + 1;
    if (entry.empty()) continue;
    auto raw = common::crypto::strict_b64decode(entry);
    if (!raw) {
      ++out.bad;
      continue;
    }
    auto value = common::pickle::loads(*raw);
    if (!value.ok() || !(value->is_tuple() || value->is_list())) {
      ++out.bad;
      continue;
    }
    const auto& t = value->as_list();
    bool good = t.size() >= 6;
    int64_t deleted = 0, policy = 0;
    if (type == DbType::kContainer) {
      ObjectRecord r;
      good = good && str(t[0], r.name) && str(t[1], r.created_at) && num(t[2], r.size) &&
             str(t[3], r.content_type) && str(t[4], r.etag) && num(t[5], deleted) &&
             (t.size() < 7 || num(t[6], policy)) &&
             (t.size() < 8 || str(t[7], r.ctype_timestamp)) &&
             (t.size() < 9 || str(t[8], r.meta_timestamp));
      r.deleted = deleted != 0;
      r.storage_policy_index = static_cast<int>(policy);
      if (good && !r.name.empty()) out.objects.push_back(std::move(r));
      else ++out.bad;
    } else {
      ContainerRecord r;
      good = good && str(t[0], r.name) && str(t[1], r.put_timestamp) &&
             str(t[2], r.delete_timestamp) && num(t[3], r.object_count) &&
             num(t[4], r.bytes_used) && num(t[5], deleted) &&
             (t.size() < 7 || num(t[6], policy));
      r.deleted = deleted != 0;
      r.storage_policy_index = static_cast<int>(policy);
      if (good && !r.name.empty()) out.containers.push_back(std::move(r));
      else ++out.bad;
    }
  }
  return out;
}

}  // namespace apus::container
