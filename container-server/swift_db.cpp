#include "container-server/swift_db.h"

#include <sqlite3.h>

#include <cstdio>
#include <map>
#include <random>
#include <set>
#include <variant>

#include "common/crypto/base64.h"
#include "common/hash_path.h"
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

// A file a peer sent is hostile: its schema may hold views that never end. Every statement
// gets a budget of virtual-machine steps (SQLite calls the progress handler every
// kStepsPerCall of them), far above what reading 1000 rows by ROWID takes.
constexpr int kStepsPerCall = 1000;
constexpr int64_t kCallsPerStatement = 100'000;  // 100 million steps
// The longest text or blob the file may hand out (metadata JSON is at most 1 MiB).
constexpr int kMaxValueBytes = 2 << 20;

int over_budget(void* calls) {
  return ++*static_cast<int64_t*>(calls) > kCallsPerStatement ? 1 : 0;
}

class Statement {
 public:
  // `calls` is the connection's progress counter, restarted for this statement.
  Statement(sqlite3* db, int64_t& calls, const std::string& sql) {
    calls = 0;
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
  std::string name(int i) {
    const char* n = sqlite3_column_name(stmt_, i);
    return n ? n : "";
  }
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
  SqliteReader(sqlite3* db, DbType type) : db_(db), type_(type) {
    sqlite3_progress_handler(db_, kStepsPerCall, over_budget, &calls_);
  }
  ~SqliteReader() override { sqlite3_close(db_); }

  Status load() {
    APUS_RETURN_IF_ERROR(load_stat());
    APUS_RETURN_IF_ERROR(load_max_row());
    load_syncs();  // very old databases have no sync tables: none then
    // Old container schemas lack storage_policy_index in the object table.
    const char* rows_table = type_ == DbType::kContainer ? "object" : "container";
    Statement probe(db_, calls_, std::string("SELECT storage_policy_index FROM ") + rows_table +
                             " LIMIT 1");
    has_policy_column_ = probe.ok();
    return Status();
  }

  const DbInfo& info() const override { return info_; }
  int64_t max_row() const override { return max_row_; }
  const std::vector<SyncPoint>& incoming_syncs() const override { return syncs_; }

  Result<std::vector<ObjectRecord>> objects_after(int64_t after, size_t limit) override {
    Statement st(db_, calls_, std::string("SELECT ROWID, name, created_at, size, content_type, etag, "
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
      r.storage_policy_index = policy_index(st.integer(7));
      keep_if_good(out, std::move(r));
    }
    if (rc != SQLITE_DONE) return error("reading objects");
    return out;
  }

  Result<std::vector<ContainerRecord>> containers_after(int64_t after, size_t limit) override {
    Statement st(db_, calls_, std::string("SELECT ROWID, name, put_timestamp, delete_timestamp, "
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
      r.storage_policy_index = policy_index(st.integer(7));
      keep_if_good(out, std::move(r));
    }
    if (rc != SQLITE_DONE) return error("reading containers");
    return out;
  }

  int64_t skipped_rows() const override { return skipped_; }
  int64_t last_rowid() const override { return last_rowid_; }

 private:
  // A policy index outside 0..INT32_MAX becomes -1, which good_row() refuses.
  static int policy_index(int64_t v) { return v >= 0 && v <= INT32_MAX ? static_cast<int>(v) : -1; }
  // Rows that fail the checks a peer's JSON rows get are skipped, and counted. The batch still
  // moves past them (its last ROWID is read before the rows are checked).
  template <class Row>
  void keep_if_good(std::vector<Row>& out, Row&& r) {
    last_rowid_ = r.rowid;
    if (good_row(r)) {
      out.push_back(std::move(r));
    } else {
      ++skipped_;
    }
  }

  Status error(std::string_view what) const {
    return Status::corruption(std::string(what) + ": " + sqlite3_errmsg(db_));
  }

  // The stat row, column by column by name (older schemas have fewer columns).
  Status load_stat() {
    Statement st(db_, calls_, type_ == DbType::kContainer ? "SELECT * FROM container_stat"
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
    info_.object_count = integer("object_count", 0);
    info_.bytes_used = integer("bytes_used", 0);
    info_.container_count = integer("container_count", 0);
    const int64_t policy = integer("storage_policy_index", 0);
    const std::string metadata = text("metadata", "");
    const bool names_good = good_name(info_.account) && (type_ == DbType::kContainer
                                                             ? good_name(info_.container)
                                                             : info_.container.empty());
    bool good = names_good && (info_.status.empty() || info_.status == "DELETED") &&
                policy >= 0 && policy <= INT32_MAX && metadata.size() <= kMaxMetadataJson;
    for (const std::string* ts : {&info_.created_at, &info_.put_timestamp,
                                  &info_.delete_timestamp, &info_.status_changed_at,
                                  &info_.reported_put_timestamp,
                                  &info_.reported_delete_timestamp}) {
      good = good && good_timestamp(*ts);
    }
    if (!good) return Status::invalid_argument("the database's stat row is not a valid one");
    info_.storage_policy_index = static_cast<int>(policy);
    info_.metadata = metadata_from_json(metadata);
    // Only compared with the rows' hash, and logged: 32 hex digits or nothing.
    if (info_.hash.size() != 32 ||
        info_.hash.find_first_not_of("0123456789abcdef") != std::string::npos) {
      info_.hash.clear();
    }
    return Status();
  }

  // SQLite's AUTOINCREMENT sequence of the rows table (Swift's get_max_row).
  Status load_max_row() {
    Statement st(db_, calls_, "SELECT seq FROM SQLITE_SEQUENCE WHERE name = ?");
    if (!st.ok()) return Status();  // no AUTOINCREMENT row yet: -1
    const char* table = type_ == DbType::kContainer ? "object" : "container";
    sqlite3_bind_text(st.get(), 1, table, -1, SQLITE_STATIC);
    if (st.step() == SQLITE_ROW) max_row_ = st.integer(0);
    return Status();
  }

  void load_syncs() {
    Statement st(db_, calls_, "SELECT remote_id, sync_point FROM incoming_sync");
    if (!st.ok()) return;
    while (st.step() == SQLITE_ROW) {
      if (syncs_.size() >= ListingStore::kMaxSyncPoints) break;
      SyncPoint p{st.text(0), st.integer(1)};
      if (good_id(p.remote_id)) syncs_.push_back(std::move(p));
    }
  }

  sqlite3* db_;
  const DbType type_;
  DbInfo info_;
  int64_t max_row_ = -1;
  std::vector<SyncPoint> syncs_;
  bool has_policy_column_ = true;
  int64_t calls_ = 0;  // progress handler calls of the running statement
  int64_t skipped_ = 0;
  int64_t last_rowid_ = -1;  // of the last row read, good or not
};

}  // namespace

Result<std::unique_ptr<SwiftDbReader>> SwiftDbReader::open(const std::string& path, DbType type) {
  // immutable: no locks, journal or WAL files looked for; nothing else writes the file.
  std::string uri = "file:";
  for (char c : path) {
    if (c == '%' || c == '?' || c == '#') {
      char hex[4];
      std::snprintf(hex, sizeof hex, "%%%02X", static_cast<unsigned char>(c));
      uri += hex;
    } else {
      uri += c;
    }
  }
  uri += "?immutable=1";
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(uri.c_str(), &db,
                           SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_URI, nullptr);
  if (rc != SQLITE_OK) {
    std::string why = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    if (rc == SQLITE_CANTOPEN) return Status::not_found(path + ": " + why);
    return Status::io_error(path + ": " + why);
  }
  // What the file's schema may do: no functions with side effects in its views or triggers,
  // no writes to its schema, bounded values.
  sqlite3_db_config(db, SQLITE_DBCONFIG_DEFENSIVE, 1, nullptr);
  sqlite3_db_config(db, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, nullptr);
  sqlite3_limit(db, SQLITE_LIMIT_LENGTH, kMaxValueBytes);
  auto reader = std::make_unique<SqliteReader>(db, type);
  Status loaded = reader->load();
  if (!loaded.ok()) return loaded;
  return std::unique_ptr<SwiftDbReader>(std::move(reader));
}

namespace {

// The file's incoming sync points and the sender's (at the file's last ROWID, as Swift's newid
// records it), within the store's kMaxSyncPoints: the sender's first, then the file's, as many
// as there is room for beside those the database has.
std::vector<SyncPoint> sync_points_to_keep(ListingStore& store, std::string_view db,
                                           const SwiftDbReader& file,
                                           std::string_view sender_id) {
  std::set<std::string> known;
  if (auto stored = store.get_syncs(db); stored.ok()) {
    for (const SyncPoint& p : *stored) known.insert(p.remote_id);
  }
  std::vector<SyncPoint> points;
  auto add = [&](SyncPoint p) {
    if (!known.count(p.remote_id) && known.size() >= ListingStore::kMaxSyncPoints) return;
    known.insert(p.remote_id);
    points.push_back(std::move(p));
  };
  if (!sender_id.empty()) add(SyncPoint{std::string(sender_id), file.max_row()});
  for (const SyncPoint& p : file.incoming_syncs()) add(p);
  return points;
}

}  // namespace

Result<int64_t> merge_swift_db(const std::string& path, ListingStore& store, std::string_view db,
                               std::string_view device, std::string_view sender_id, bool create,
                               const common::HashPathConfig* names_must_hash) {
  auto opened = SwiftDbReader::open(path, store.type());
  if (!opened.ok()) return opened.status();
  SwiftDbReader& file = **opened;
  const DbType type = store.type();
  const std::string partition(db.substr(0, db.find('/')));
  if (names_must_hash) {
    auto hash = common::hash_path_hex(*names_must_hash, file.info().account,
                                      type == DbType::kContainer ? file.info().container : "");
    if (!hash.ok() || *hash != db.substr(db.find('/') + 1)) {
      return Status::invalid_argument("the database's names do not hash to " + std::string(db));
    }
  }
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
      got = batch->size();
      if (got > 0) merged = store.merge_objects(db, std::move(*batch));
    } else {
      auto batch = file.containers_after(after, kBatch);
      if (!batch.ok()) return batch.status();
      got = batch->size();
      if (got > 0) merged = store.merge_containers(db, std::move(*batch));
    }
    if (!merged.ok()) return merged;
    rows += static_cast<int64_t>(got);
    if (file.last_rowid() <= after) break;  // no row read, good or skipped
    after = file.last_rowid();
  }
  if (file.skipped_rows() > 0) {
    APUS_LOG_WARNING("database " + std::string(db) + " from " + path + ": " +
                     std::to_string(file.skipped_rows()) +
                     " rows skipped (bad names, timestamps or policy indexes)");
  }
  APUS_RETURN_IF_ERROR(store.merge_syncs(db, sync_points_to_keep(store, db, file, sender_id)));
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

namespace {

// Swift's tables (container/backend.py, account/backend.py, common/db.py), without triggers.
// The container's stat row is a table with the counts in it, as before policies.
constexpr const char* kContainerSchema = R"(
CREATE TABLE object (ROWID INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT, created_at TEXT,
  size INTEGER, content_type TEXT, etag TEXT, deleted INTEGER DEFAULT 0,
  storage_policy_index INTEGER DEFAULT 0);
CREATE INDEX ix_object_deleted_name ON object (deleted, name);
CREATE TABLE policy_stat (storage_policy_index INTEGER PRIMARY KEY,
  object_count INTEGER DEFAULT 0, bytes_used INTEGER DEFAULT 0);
CREATE TABLE container_stat (account TEXT, container TEXT, created_at TEXT,
  put_timestamp TEXT DEFAULT '0', delete_timestamp TEXT DEFAULT '0',
  object_count INTEGER, bytes_used INTEGER,
  reported_put_timestamp TEXT DEFAULT '0', reported_delete_timestamp TEXT DEFAULT '0',
  reported_object_count INTEGER DEFAULT 0, reported_bytes_used INTEGER DEFAULT 0,
  hash TEXT default '00000000000000000000000000000000', id TEXT, status TEXT DEFAULT '',
  status_changed_at TEXT DEFAULT '0', metadata TEXT DEFAULT '',
  x_container_sync_point1 INTEGER DEFAULT -1, x_container_sync_point2 INTEGER DEFAULT -1,
  storage_policy_index INTEGER DEFAULT 0, reconciler_sync_point INTEGER DEFAULT -1);
)";
constexpr const char* kAccountSchema = R"(
CREATE TABLE container (ROWID INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT,
  put_timestamp TEXT, delete_timestamp TEXT, object_count INTEGER, bytes_used INTEGER,
  deleted INTEGER DEFAULT 0, storage_policy_index INTEGER DEFAULT 0);
CREATE INDEX ix_container_deleted_name ON container (deleted, name);
CREATE TABLE policy_stat (storage_policy_index INTEGER PRIMARY KEY,
  container_count INTEGER DEFAULT 0, object_count INTEGER DEFAULT 0,
  bytes_used INTEGER DEFAULT 0);
CREATE TABLE account_stat (account TEXT, created_at TEXT, put_timestamp TEXT DEFAULT '0',
  delete_timestamp TEXT DEFAULT '0', container_count INTEGER, object_count INTEGER DEFAULT 0,
  bytes_used INTEGER DEFAULT 0, hash TEXT default '00000000000000000000000000000000', id TEXT,
  status TEXT DEFAULT '', status_changed_at TEXT DEFAULT '0', metadata TEXT DEFAULT '');
)";
constexpr const char* kSyncSchema = R"(
CREATE TABLE outgoing_sync (remote_id TEXT UNIQUE, sync_point INTEGER, updated_at TEXT DEFAULT 0);
CREATE TABLE incoming_sync (remote_id TEXT UNIQUE, sync_point INTEGER, updated_at TEXT DEFAULT 0);
)";

// A new SQLite file written in one transaction; every value bound as given.
class SqliteFile {
 public:
  explicit SqliteFile(const std::string& path) {
    if (sqlite3_open_v2(path.c_str(), &db_,
                        SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                        nullptr) != SQLITE_OK) {
      status_ = Status::io_error(path + ": " + (db_ ? sqlite3_errmsg(db_) : "out of memory"));
    }
  }
  ~SqliteFile() {
    for (auto& [sql, st] : statements_) sqlite3_finalize(st);
    sqlite3_close(db_);
  }
  SqliteFile(const SqliteFile&) = delete;
  SqliteFile& operator=(const SqliteFile&) = delete;

  const Status& status() const { return status_; }

  void exec(const char* sql) {
    if (!status_.ok()) return;
    if (sqlite3_exec(db_, sql, nullptr, nullptr, nullptr) != SQLITE_OK) fail();
  }

  // Runs `sql` once with `values` bound in order (strings as TEXT, numbers as INTEGER). The
  // statement is prepared once per file and reused: an export runs one per row.
  using Value = std::variant<std::string_view, int64_t>;
  void run(const char* sql, std::initializer_list<Value> values) {
    if (!status_.ok()) return;
    sqlite3_stmt*& st = statements_[sql];
    if (!st && sqlite3_prepare_v2(db_, sql, -1, &st, nullptr) != SQLITE_OK) return fail();
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    int i = 0;
    for (const Value& v : values) {
      ++i;
      if (const auto* text = std::get_if<std::string_view>(&v)) {
        sqlite3_bind_text(st, i, text->data(), static_cast<int>(text->size()), SQLITE_STATIC);
      } else {
        sqlite3_bind_int64(st, i, std::get<int64_t>(v));
      }
    }
    int rc = sqlite3_step(st);
    sqlite3_reset(st);  // the bound texts are the caller's: not kept past this call
    if (rc != SQLITE_DONE) fail();
  }

 private:
  void fail() { status_ = Status::io_error(std::string("sqlite: ") + sqlite3_errmsg(db_)); }

  sqlite3* db_ = nullptr;
  Status status_;
  std::map<std::string, sqlite3_stmt*> statements_;  // by their SQL
};

void write_stat(SqliteFile& f, DbType type, const DbInfo& i) {
  const std::string metadata = metadata_json(i.metadata);
  if (type == DbType::kContainer) {
    f.run("INSERT INTO container_stat (account, container, created_at, put_timestamp, "
          "delete_timestamp, object_count, bytes_used, reported_put_timestamp, "
          "reported_delete_timestamp, reported_object_count, reported_bytes_used, hash, id, "
          "status, status_changed_at, metadata, x_container_sync_point1, "
          "x_container_sync_point2, storage_policy_index, reconciler_sync_point) "
          "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
          {i.account, i.container, i.created_at, i.put_timestamp, i.delete_timestamp,
           i.container_objects(), i.container_bytes(), i.reported_put_timestamp,
           i.reported_delete_timestamp, i.reported_object_count, i.reported_bytes_used, i.hash,
           i.id, i.status, i.status_changed_at, metadata, i.x_container_sync_point1,
           i.x_container_sync_point2, int64_t{i.storage_policy_index},
           i.reconciler_sync_point});
    for (const auto& [policy, stat] : i.policy_stats) {
      f.run("INSERT INTO policy_stat VALUES (?,?,?)",
            {int64_t{policy}, stat.object_count, stat.bytes_used});
    }
  } else {
    f.run("INSERT INTO account_stat (account, created_at, put_timestamp, delete_timestamp, "
          "container_count, object_count, bytes_used, hash, id, status, status_changed_at, "
          "metadata) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
          {i.account, i.created_at, i.put_timestamp, i.delete_timestamp, i.container_count,
           i.object_count, i.bytes_used, i.hash, i.id, i.status, i.status_changed_at, metadata});
    for (const auto& [policy, stat] : i.policy_stats) {
      f.run("INSERT INTO policy_stat VALUES (?,?,?,?)",
            {int64_t{policy}, stat.container_count, stat.object_count, stat.bytes_used});
    }
  }
}

void insert_row(SqliteFile& f, const ObjectRecord& r) {
  f.run("INSERT INTO object VALUES (?,?,?,?,?,?,?,?)",
        {r.rowid, r.name, r.created_at, r.size, r.content_type, r.etag, int64_t{r.deleted},
         int64_t{r.storage_policy_index}});
}

void insert_row(SqliteFile& f, const ContainerRecord& r) {
  f.run("INSERT INTO container VALUES (?,?,?,?,?,?,?,?)",
        {r.rowid, r.name, r.put_timestamp, r.delete_timestamp, r.object_count, r.bytes_used,
         int64_t{r.deleted}, int64_t{r.storage_policy_index}});
}

// Every row up to `max_row`, in ROWID order, a page of `since(after)` at a time.
template <class Since>
Status write_rows(SqliteFile& f, int64_t max_row, const Since& since) {
  for (int64_t after = -1; after < max_row;) {
    auto rows = since(after);
    if (!rows.ok()) return rows.status();
    if (rows->empty()) break;
    for (const auto& r : *rows) {
      if (r.rowid > max_row) break;
      insert_row(f, r);
    }
    after = rows->back().rowid;
    APUS_RETURN_IF_ERROR(f.status());
  }
  return f.status();
}

}  // namespace

Status write_swift_db(const std::string& path, ListingStore& store, std::string_view db,
                      const DbInfo& info) {
  const DbType type = store.type();
  SqliteFile f(path);
  // No journal: a file that is not finished is thrown away, never repaired.
  f.exec("PRAGMA journal_mode = OFF; PRAGMA synchronous = FULL; BEGIN;");
  f.exec(type == DbType::kContainer ? kContainerSchema : kAccountSchema);
  f.exec(kSyncSchema);
  write_stat(f, type, info);
  if (type == DbType::kContainer) {
    APUS_RETURN_IF_ERROR(write_rows(
        f, info.max_row, [&](int64_t after) { return store.objects_since(db, after, kBatch); }));
  } else {
    APUS_RETURN_IF_ERROR(write_rows(f, info.max_row, [&](int64_t after) {
      return store.containers_since(db, after, kBatch);
    }));
  }
  if (info.max_row >= 0) {
    // Rows replaced since leave the sequence above the last ROWID kept.
    const std::string_view table = type == DbType::kContainer ? "object" : "container";
    f.run("DELETE FROM sqlite_sequence WHERE name = ?", {table});
    f.run("INSERT INTO sqlite_sequence (name, seq) VALUES (?, ?)", {table, info.max_row});
  }
  auto syncs = store.get_syncs(db);
  if (!syncs.ok()) return syncs.status();
  for (const SyncPoint& p : *syncs) {
    f.run("INSERT INTO incoming_sync (remote_id, sync_point) VALUES (?, ?)",
          {p.remote_id, p.sync_point});
  }
  f.exec("COMMIT;");  // synchronous = FULL: the file is on disk when this returns
  return f.status();
}

Result<std::string> quarantine_db(ListingStore& store, common::io::Fs& fs, std::string_view db,
                                  const std::string& device_path, std::string_view reason) {
  auto info = store.get_info(db);
  if (!info.ok()) return info.status();
  if (!*info) return Status::not_found("no such database");
  const std::string hash(db.substr(db.find('/') + 1));
  std::random_device rd;
  char random[40];
  std::snprintf(random, sizeof random, "%08x%08x%08x%08x", rd(), rd(), rd(), rd());
  // Written in the device's tmp, then renamed into place with every directory the rename
  // makes fsynced (Swift's renamer): only a file whose name is durable lets the database go.
  const std::string tmp_dir = device_path + "/tmp";
  auto made = fs.mkdirs(tmp_dir);
  if (!made.ok()) return made.status();
  const std::string tmp = tmp_dir + "/" + hash + "." + random + ".db";
  std::string dir = device_path + "/quarantined/" +
                    (store.type() == DbType::kContainer ? "containers/" : "accounts/") + hash;
  if (auto st = fs.stat(dir); st.ok() && st->exists) dir += std::string("-") + random;
  const std::string file = dir + "/" + hash + ".db";
  Status s = write_swift_db(tmp, store, db, **info);
  if (s.ok()) {
    auto f = fs.open_read(tmp);
    s = f.ok() ? fs.fsync(*f) : f.status();
  }
  if (s.ok()) s = fs.durable_rename(tmp, file);
  if (!s.ok()) {
    (void)fs.unlink(tmp);
    return s;
  }
  // Whatever changed since the copy began (a row, a POST's metadata, a status) would be lost.
  s = store.remove_db_if_unchanged(db, **info);
  if (!s.ok()) {
    (void)fs.unlink(file);
    (void)fs.rmdir(dir);
    return s;
  }
  APUS_LOG_ERROR("Quarantined " + device_path + " " + std::string(db) + " to " + dir +
                 " due to " + std::string(reason));
  return dir;
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
      if (good && good_row(r)) out.objects.push_back(std::move(r));
      else ++out.bad;
    } else {
      ContainerRecord r;
      good = good && str(t[0], r.name) && str(t[1], r.put_timestamp) &&
             str(t[2], r.delete_timestamp) && num(t[3], r.object_count) &&
             num(t[4], r.bytes_used) && num(t[5], deleted) &&
             (t.size() < 7 || num(t[6], policy));
      r.deleted = deleted != 0;
      r.storage_policy_index = static_cast<int>(policy);
      if (good && good_row(r)) out.containers.push_back(std::move(r));
      else ++out.bad;
    }
  }
  return out;
}

}  // namespace apus::container
