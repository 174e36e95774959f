#include "container-server/db_replication.h"

#include <algorithm>
#include <array>
#include <utility>

#include <boost/json.hpp>

#include "common/hash_path.h"
#include "common/http/swob.h"
#include "common/http/url.h"
#include "common/log/log.h"
#include "common/misplaced_queue.h"
#include "common/timestamp.h"
#include "common/utf8.h"
#include "container-server/swift_db.h"

namespace apus::container {

namespace json = boost::json;
namespace net = boost::asio;
using common::Result;
using common::Status;
using common::Timestamp;
using common::http::Exchange;
using common::http::OrRefusal;
using common::http::Response;
using common::http::swob_response;

namespace {

// REPLICATE bodies: merge_items batches of per_diff rows (1000 by default, each well under
// 2 KiB) and the small sync and merge_syncs arrays.
constexpr size_t kMaxReplicateBody = 32u << 20;
// The longest timestamp string taken (Swift's encoded created_at of three timestamps is ~60).

// ---- JSON helpers ----

std::optional<std::string> json_string(const json::object& o, std::string_view key,
                                       bool required = true) {
  auto it = o.find(key);
  if (it == o.end() || it->value().is_null()) {
    if (required) return std::nullopt;
    return std::string();
  }
  if (auto s = it->value().if_string()) return std::string(s->data(), s->size());
  return std::nullopt;
}

// Swift's numbers arrive as JSON numbers; older rows may hold them as strings.
std::optional<int64_t> json_int(const json::value& v) {
  if (auto i = v.if_int64()) return *i;
  if (auto u = v.if_uint64()) {
    if (*u <= static_cast<uint64_t>(INT64_MAX)) return static_cast<int64_t>(*u);
    return std::nullopt;
  }
  if (auto d = v.if_double()) {  // truncated, as Python's int(); only within int64's range
    if (!(*d > -9.2e18 && *d < 9.2e18)) return std::nullopt;
    return static_cast<int64_t>(*d);
  }
  if (auto b = v.if_bool()) return *b ? 1 : 0;
  if (auto s = v.if_string()) return parse_int(std::string_view(s->data(), s->size()));
  return std::nullopt;
}

std::optional<int64_t> json_int(const json::object& o, std::string_view key,
                                int64_t absent = 0) {
  auto it = o.find(key);
  if (it == o.end() || it->value().is_null()) return absent;
  return json_int(it->value());
}


}  // namespace

std::string metadata_json(const DbMetadata& md) {
  if (md.empty()) return "";
  json::object o;
  for (const auto& [key, item] : md) o[key] = json::array{item.value.c_str(), item.timestamp.c_str()};
  return json::serialize(o);
}

bool good_timestamp(std::string_view s) { return s.size() <= kMaxTimestamp; }
bool good_name(std::string_view s) { return !s.empty() && common::valid_utf8(s); }
bool good_id(std::string_view s) {
  return !s.empty() && s.size() <= 256 &&
         std::all_of(s.begin(), s.end(), [](char c) { return c > ' ' && c < 0x7f; });
}
bool good_row(const ObjectRecord& r) {
  return good_name(r.name) && good_timestamp(r.created_at) &&
         good_timestamp(r.ctype_timestamp) && good_timestamp(r.meta_timestamp) &&
         r.content_type.size() <= kMaxRowText && r.etag.size() <= kMaxRowText &&
         r.storage_policy_index >= 0;
}
bool good_row(const ContainerRecord& r) {
  return good_name(r.name) && good_timestamp(r.put_timestamp) &&
         good_timestamp(r.delete_timestamp) && r.storage_policy_index >= 0;
}

std::string device_tmp_dir(std::string_view devices, std::string_view device) {
  std::string dir(devices);
  dir.append("/").append(device).append("/tmp");
  return dir;
}

DbMetadata metadata_from_json(std::string_view raw) {
  DbMetadata md;
  if (raw.empty()) return md;
  boost::system::error_code ec;
  json::value v = json::parse(raw, ec);
  if (ec || !v.is_object()) {
    APUS_LOG_DEBUG("Unable to decode remote metadata");
    return md;
  }
  for (const auto& [key, item] : v.as_object()) {
    const auto* pair = item.if_array();
    if (!pair || pair->size() != 2 || !(*pair)[0].is_string() || !(*pair)[1].is_string()) continue;
    const auto& value = (*pair)[0].get_string();
    const auto& ts = (*pair)[1].get_string();
    if (ts.size() > kMaxTimestamp) continue;
    md[std::string(key)] = MetaItem{std::string(value), std::string(ts)};
  }
  return md;
}

namespace {

json::object object_row_json(const ObjectRecord& r) {
  return json::object{{"ROWID", r.rowid},
                      {"name", r.name},
                      {"created_at", r.created_at},
                      {"size", r.size},
                      {"content_type", r.content_type},
                      {"etag", r.etag},
                      {"deleted", r.deleted ? 1 : 0},
                      {"storage_policy_index", r.storage_policy_index}};
}

json::object container_row_json(const ContainerRecord& r) {
  return json::object{{"ROWID", r.rowid},
                      {"name", r.name},
                      {"put_timestamp", r.put_timestamp},
                      {"delete_timestamp", r.delete_timestamp},
                      {"object_count", r.object_count},
                      {"bytes_used", r.bytes_used},
                      {"deleted", r.deleted ? 1 : 0},
                      {"storage_policy_index", r.storage_policy_index}};
}

std::optional<ObjectRecord> object_row_from_json(const json::value& v) {
  const auto* o = v.if_object();
  if (!o) return std::nullopt;
  auto name = json_string(*o, "name"), created = json_string(*o, "created_at"),
       ctype = json_string(*o, "content_type", false), etag = json_string(*o, "etag", false),
       ctype_ts = json_string(*o, "ctype_timestamp", false),
       meta_ts = json_string(*o, "meta_timestamp", false);
  auto size = json_int(*o, "size"), deleted = json_int(*o, "deleted"),
       policy = json_int(*o, "storage_policy_index"), rowid = json_int(*o, "ROWID");
  if (!name || !created || !ctype || !etag || !ctype_ts || !meta_ts || !size || !deleted ||
      !policy || !rowid || *policy < 0 || *policy > INT32_MAX) {
    return std::nullopt;
  }
  ObjectRecord rec;
  rec.name = std::move(*name);
  rec.created_at = std::move(*created);
  rec.content_type = std::move(*ctype);
  rec.etag = std::move(*etag);
  rec.ctype_timestamp = std::move(*ctype_ts);
  rec.meta_timestamp = std::move(*meta_ts);
  rec.size = *size;
  rec.deleted = *deleted != 0;
  rec.storage_policy_index = static_cast<int>(*policy);
  rec.rowid = *rowid;
  if (!good_row(rec)) return std::nullopt;
  return rec;
}

std::optional<ContainerRecord> container_row_from_json(const json::value& v) {
  const auto* o = v.if_object();
  if (!o) return std::nullopt;
  auto name = json_string(*o, "name"), put = json_string(*o, "put_timestamp"),
       del = json_string(*o, "delete_timestamp");
  auto objects = json_int(*o, "object_count"), bytes = json_int(*o, "bytes_used"),
       deleted = json_int(*o, "deleted"), policy = json_int(*o, "storage_policy_index"),
       rowid = json_int(*o, "ROWID");
  if (!name || !put || !del || !objects || !bytes || !deleted || !policy || !rowid ||
      *policy < 0 || *policy > INT32_MAX) {
    return std::nullopt;
  }
  ContainerRecord rec;
  rec.name = std::move(*name);
  rec.put_timestamp = std::move(*put);
  rec.delete_timestamp = std::move(*del);
  rec.object_count = *objects;
  rec.bytes_used = *bytes;
  rec.deleted = *deleted != 0;
  rec.storage_policy_index = static_cast<int>(*policy);
  rec.rowid = *rowid;
  if (!good_row(rec)) return std::nullopt;
  return rec;
}

template <class Row, class Parse>
std::optional<std::vector<Row>> rows_from_json(const json::value& v, Parse parse) {
  const auto* a = v.if_array();
  if (!a) return std::nullopt;
  std::vector<Row> rows;
  rows.reserve(a->size());
  for (const auto& item : *a) {
    auto row = parse(item);
    if (!row) return std::nullopt;
    rows.push_back(std::move(*row));
  }
  return rows;
}

int64_t replica_count(const DbInfo& info, DbType type) {
  return type == DbType::kContainer ? info.container_objects() : info.container_count;
}

// The replica's info as Swift's get_replication_info() gives it, plus "point".
json::object replication_info_json(const DbInfo& info, DbType type, int64_t point) {
  json::object o{{"account", info.account},
                 {"created_at", info.created_at},
                 {"put_timestamp", info.put_timestamp},
                 {"delete_timestamp", info.delete_timestamp},
                 {"status_changed_at", info.status_changed_at},
                 {"count", replica_count(info, type)},
                 {"hash", info.hash},
                 {"id", info.id},
                 {"metadata", metadata_json(info.metadata)},
                 {"max_row", info.max_row},
                 {"point", point}};
  if (type == DbType::kContainer) {
    o["container"] = info.container;
    o["bytes_used"] = info.container_bytes();
    o["reported_put_timestamp"] = info.reported_put_timestamp;
    o["reported_delete_timestamp"] = info.reported_delete_timestamp;
    o["reported_object_count"] = info.reported_object_count;
    o["reported_bytes_used"] = info.reported_bytes_used;
    o["x_container_sync_point1"] = info.x_container_sync_point1;
    o["x_container_sync_point2"] = info.x_container_sync_point2;
    o["storage_policy_index"] = info.storage_policy_index;
    o["db_state"] = "unsharded";
    o["shard_max_row"] = -1;
  } else {
    o["object_count"] = info.object_count;
    o["bytes_used"] = info.bytes_used;
  }
  return o;
}

// ---- the server's side ----

// What "sync" says of the sender's replica (args after the op, Swift's _parse_sync_args).
std::optional<RemoteInfo> parse_sync_args(const json::array& args) {
  if (args.size() < 7) return std::nullopt;
  RemoteInfo r;
  auto point = json_int(args[0]);
  if (!point) return std::nullopt;
  r.point = *point;
  std::string* strings[] = {&r.hash, &r.id, &r.created_at, &r.put_timestamp,
                            &r.delete_timestamp};
  for (size_t i = 0; i < 5; ++i) {
    const auto* s = args[i + 1].if_string();
    if (!s || s->size() > 256) return std::nullopt;
    strings[i]->assign(s->data(), s->size());
  }
  if (!good_id(r.id)) return std::nullopt;
  if (!good_timestamp(r.created_at) || !good_timestamp(r.put_timestamp) ||
      !good_timestamp(r.delete_timestamp)) {
    return std::nullopt;
  }
  if (const auto* md = args[6].if_string()) {
    if (md->size() > kMaxMetadataJson) return std::nullopt;
    r.metadata = metadata_from_json(std::string_view(md->data(), md->size()));
  } else if (!args[6].is_null()) {
    return std::nullopt;
  }
  if (args.size() > 9) {  // a container replicator of a cluster with several policies
    const auto* changed = args[7].if_string();
    auto count = json_int(args[8]);
    auto policy = json_int(args[9]);
    if (!changed || !good_timestamp(std::string(changed->data(), changed->size())) || !count ||
        !policy || *policy < 0 || *policy > INT32_MAX) {
      return std::nullopt;
    }
    r.status_changed_at.assign(changed->data(), changed->size());
    r.count = *count;
    r.storage_policy_index = static_cast<int>(*policy);
  }
  return r;
}

std::string bad_request_body(std::string_view op) {
  return "Invalid arguments for " + std::string(op);
}

// A REPLICATE path: /<device>/<partition>/<hash>, the partition a number and the hash 32 hex
// digits (the database names the store keys on).
struct ReplicateTarget {
  std::string device;
  std::string partition;
  std::string hash;
  std::string db() const { return partition + "/" + hash; }
};

OrRefusal<ReplicateTarget> replicate_target(const common::http::Request& req) {
  std::string path = common::http::percent_decode(req.path());
  OrRefusal<PathSegments> split = split_storage_path(path, 3, 3, false);
  if (!split) return std::move(split).refusal();
  const PathSegments& segments = *split;
  ReplicateTarget t{*segments[0], *segments[1], *segments[2]};
  bool numeric = !t.partition.empty() && t.partition.size() <= 10 &&
                 std::all_of(t.partition.begin(), t.partition.end(),
                             [](char c) { return c >= '0' && c <= '9'; });
  bool hex = t.hash.size() == 32 && std::all_of(t.hash.begin(), t.hash.end(), [](char c) {
               return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
             });
  if (!numeric || !hex) return plain_error(400, "Invalid partition or hash");
  return t;
}

Result<RemoteInfo> remote_info_from_json(const json::object& o);  // below

class ReplicateRpc {
 public:
  ReplicateRpc(const DbServerConfig& config, DbDevices& devices, const ReplicateTarget& target)
      : config_(config), devices_(devices), t_(target), type_(config.type) {}

  // Runs `op` with `args` on the device's pool thread. REQUIRES: called on that thread.
  Response run(std::string_view op, const json::array& args) {
    if (!devices_.check_device(t_.device).ok()) return insufficient_storage(t_.device);
    auto store = devices_.store(t_.device);
    if (!store.ok()) return swob_response(500);
    store_ = *store;
    // A Swift replicator may be about to rsync a database file here (Swift's dispatch makes the
    // directory for every other operation).
    if (op != "complete_rsync" && op != "rsync_then_merge") {
      (void)devices_.fs().mkdirs(device_tmp_dir(config_.devices, t_.device));
    }
    if (op == "sync") return sync(args);
    if (op == "merge_items") return merge_items(args);
    if (op == "merge_syncs") return merge_syncs(args);
    if (op == "apus_create_db") return create_db(args);
    if (op == "complete_rsync") return take_file(args, /*create=*/true);
    if (op == "rsync_then_merge") return take_file(args, /*create=*/false);
    if (op == "apus_remove_db") return remove_db(args);
    if (op == "apus_merge_info") return merge_info(args);
    if (op == "apus_reconciler_sync" && type_ == DbType::kContainer) {
      return reconciler_sync(args);
    }
    if (op == "get_shard_ranges" && type_ == DbType::kContainer) return get_shard_ranges();
    return plain_error(400, "Unknown replication operation");
  }

 private:
  Response sync(const json::array& args) {
    std::optional<RemoteInfo> remote = parse_sync_args(args);
    if (!remote) return plain_error(400, bad_request_body("sync"));
    DbInfo info;
    Status s = store_->update_info(t_.db(), [&](std::optional<DbInfo>& stored) -> Result<bool> {
      if (!stored) return Status::not_found();
      const int policy_before = stored->storage_policy_index;
      bool changed = merge_remote_info(*stored, type_, *remote);
      log_policy_change(policy_before, *stored, *remote);
      info = *stored;
      return changed;
    });
    if (!s.ok()) return store_failure(s);
    auto syncs = store_->get_syncs(t_.db());
    if (!syncs.ok()) return store_failure(syncs.status());
    int64_t point = -1;
    for (const SyncPoint& p : *syncs) {
      if (p.remote_id == remote->id) point = p.sync_point;
    }
    // Equal hashes: the sender's rows up to its point are all here already.
    if (remote->hash == info.hash && point < remote->point) {
      Status merged = store_->merge_syncs(t_.db(), {SyncPoint{remote->id, remote->point}});
      if (!merged.ok()) return store_failure(merged);
      point = remote->point;
    }
    Response r;
    r.headers.set("Content-Type", "application/json");
    r.body = json::serialize(replication_info_json(info, type_, point));
    return r;
  }

  Response merge_items(const json::array& args) {
    if (args.empty()) return plain_error(400, bad_request_body("merge_items"));
    std::optional<SyncPoint> source;
    if (args.size() > 1 && !args[1].is_null()) {
      const auto* id = args[1].if_string();
      if (!id || !good_id(std::string_view(id->data(), id->size()))) {
        return plain_error(400, bad_request_body("merge_items"));
      }
      source.emplace();
      source->remote_id.assign(id->data(), id->size());
    }
    Status s;
    if (type_ == DbType::kContainer) {
      auto rows = rows_from_json<ObjectRecord>(args[0], object_row_from_json);
      if (!rows) return plain_error(400, bad_request_body("merge_items"));
      if (source && !rows->empty()) source->sync_point = rows->back().rowid;
      s = store_->merge_objects(t_.db(), std::move(*rows),
                                source && source->sync_point >= 0 ? &*source : nullptr);
    } else {
      auto rows = rows_from_json<ContainerRecord>(args[0], container_row_from_json);
      if (!rows) return plain_error(400, bad_request_body("merge_items"));
      if (source && !rows->empty()) source->sync_point = rows->back().rowid;
      s = store_->merge_containers(t_.db(), std::move(*rows),
                                   source && source->sync_point >= 0 ? &*source : nullptr);
    }
    if (!s.ok()) return store_failure(s);
    return swob_response(202);
  }

  Response merge_syncs(const json::array& args) {
    const json::array* list = args.empty() ? nullptr : args[0].if_array();
    if (!list || list->size() > ListingStore::kMaxSyncPoints) {
      return plain_error(400, bad_request_body("merge_syncs"));
    }
    std::vector<SyncPoint> points;
    for (const auto& item : *list) {
      const auto* o = item.if_object();
      if (!o) return plain_error(400, bad_request_body("merge_syncs"));
      auto id = json_string(*o, "remote_id");
      auto point = json_int(*o, "sync_point", INT64_MIN);
      if (!id || !good_id(*id) || !point || *point == INT64_MIN) {
        return plain_error(400, bad_request_body("merge_syncs"));
      }
      points.push_back(SyncPoint{std::move(*id), *point});
    }
    Status s = store_->merge_syncs(t_.db(), points);
    if (!s.ok()) return store_failure(s);
    return swob_response(202);
  }

  Response get_shard_ranges() {
    auto info = store_->get_info(t_.db());
    if (!info.ok()) return swob_response(500);
    if (!*info) return swob_response(404);
    Response r;
    r.headers.set("Content-Type", "application/json");
    r.body = "[]";
    return r;
  }

  // ["apus_create_db", {account, container, created_at, put_timestamp, delete_timestamp,
  // status, status_changed_at, storage_policy_index, metadata}]: 201 when made, 202 when the
  // replica was there already.
  Response create_db(const json::array& args) {
    const json::object* o = args.empty() ? nullptr : args[0].if_object();
    if (!o) return plain_error(400, bad_request_body("apus_create_db"));
    auto account = json_string(*o, "account"), container = json_string(*o, "container", false),
         created = json_string(*o, "created_at"), put = json_string(*o, "put_timestamp"),
         del = json_string(*o, "delete_timestamp"), status = json_string(*o, "status", false),
         changed = json_string(*o, "status_changed_at"), md = json_string(*o, "metadata", false);
    auto policy = json_int(*o, "storage_policy_index");
    bool good = account && good_name(*account) && container &&
                (type_ == DbType::kAccount ? container->empty() : good_name(*container)) &&
                created && good_timestamp(*created) && put && good_timestamp(*put) && del &&
                good_timestamp(*del) && status && (status->empty() || *status == "DELETED") &&
                changed && good_timestamp(*changed) && md && md->size() <= kMaxMetadataJson &&
                policy && *policy >= 0 && *policy <= INT32_MAX;
    if (!good) return plain_error(400, bad_request_body("apus_create_db"));
    auto hash = common::hash_path_hex(
        common::HashPathConfig{config_.swift.hash_path_prefix, config_.swift.hash_path_suffix},
        *account, *container);
    if (!hash.ok() || *hash != t_.hash) return plain_error(400, "Names do not match the hash");
    bool made = false;
    Status s = store_->update_info(t_.db(), [&](std::optional<DbInfo>& info) -> Result<bool> {
      if (info) return false;
      DbInfo& n = info.emplace();
      n.account = *account;
      n.container = *container;
      n.partition = t_.partition;
      n.created_at = *created;
      n.put_timestamp = *put;
      n.delete_timestamp = *del;
      n.status = *status;
      n.status_changed_at = *changed;
      n.id = new_db_id(t_.device);
      if (type_ == DbType::kContainer) {
        n.storage_policy_index = static_cast<int>(*policy);
        n.policy_stats[n.storage_policy_index];
      }
      n.metadata = metadata_from_json(*md);
      made = true;
      return true;
    });
    if (!s.ok()) return store_failure(s);
    return swob_response(made ? 201 : 202);
  }

  // Swift's complete_rsync [sender_id(, db file name)] and rsync_then_merge [sender_id]: the
  // database file a Swift replicator sent by rsync to <device>/tmp/<sender_id> is merged into
  // the store (a new replica, or into the one here) and removed. 404 as Swift answers: the
  // file is missing, or the database exists already (complete_rsync) or not (rsync_then_merge).
  Response take_file(const json::array& args, bool create) {
    const auto* id = args.empty() ? nullptr : args[0].if_string();
    std::string_view sender = id ? std::string_view(id->data(), id->size()) : "";
    if (!good_id(sender) || sender.find('/') != std::string_view::npos || sender == "." ||
        sender == "..") {
      return plain_error(400, bad_request_body(create ? "complete_rsync" : "rsync_then_merge"));
    }
    const std::string file = device_tmp_dir(config_.devices, t_.device) + "/" + std::string(sender);
    auto st = devices_.fs().stat(file);
    if (!st.ok() || !st->exists || st->is_dir) return swob_response(404);
    const common::HashPathConfig names{config_.swift.hash_path_prefix,
                                       config_.swift.hash_path_suffix};
    auto rows = merge_swift_db(file, *store_, t_.db(), t_.device, sender, create, &names);
    if (!rows.ok()) {
      if (rows.status().is_not_found() ||
          rows.status().code() == Status::Code::kConflict) {
        return swob_response(404);
      }
      if (rows.status().code() == Status::Code::kInvalidArgument) {
        (void)devices_.fs().unlink(file);  // a bad file stays bad: not kept for a retry
        return plain_error(400, rows.status().message());
      }
      APUS_LOG_ERROR("cannot take database file " + file + ": " + rows.status().to_string());
      return store_failure(rows.status());
    }
    (void)devices_.fs().unlink(file);
    return swob_response(204);
  }

  // ["apus_merge_info", {a "sync" answer}]: another replica's metadata, timestamps and policy
  // merged into this one (what Swift's replicator does with a peer's answer to its own
  // database; an Apus replicator asks its own server).
  Response merge_info(const json::array& args) {
    const json::object* o = args.size() == 1 ? args[0].if_object() : nullptr;
    auto remote = o ? remote_info_from_json(*o) : Result<RemoteInfo>(Status::invalid_argument(""));
    if (!remote.ok()) return plain_error(400, bad_request_body("apus_merge_info"));
    Status s = store_->update_info(t_.db(), [&](std::optional<DbInfo>& info) -> Result<bool> {
      if (!info) return Status::not_found();
      const int policy_before = info->storage_policy_index;
      bool changed = merge_remote_info(*info, type_, *remote);
      log_policy_change(policy_before, *info, *remote);
      return changed;
    });
    if (!s.ok()) return store_failure(s);
    return swob_response(204);
  }

  // A replica takes another's storage policy only after split-brain container PUTs (rare, and
  // what an operator, or a test that finds the replicas still disagreeing, asks about): said at
  // INFO, with the status-change times the choice was made on.
  void log_policy_change(int before, const DbInfo& after, const RemoteInfo& remote) const {
    if (after.storage_policy_index == before) return;
    APUS_LOG_INFO(
        "/" + common::http::quote(after.account) + "/" + common::http::quote(after.container) +
        " on " + t_.device + ": storage policy index " + std::to_string(before) + " -> " +
        std::to_string(after.storage_policy_index) + ", another replica's (its status changed at " +
        remote.status_changed_at + "; here now " + after.status_changed_at + ")");
  }

  // ["apus_reconciler_sync", point]: the replicator queued this replica's rows of other
  // policies up to ROWID `point` for the reconciler (Swift's update_reconciler_sync).
  Response reconciler_sync(const json::array& args) {
    auto point = args.size() == 1 ? json_int(args[0]) : std::nullopt;
    if (!point || *point < -1) return plain_error(400, bad_request_body("apus_reconciler_sync"));
    Status s = store_->update_info(t_.db(), [&](std::optional<DbInfo>& info) -> Result<bool> {
      if (!info) return Status::not_found();
      if (info->reconciler_sync_point == *point) return false;
      info->reconciler_sync_point = *point;
      return true;
    });
    if (!s.ok()) return store_failure(s);
    return swob_response(204);
  }

  // ["apus_remove_db", id, max_row].
  Response remove_db(const json::array& args) {
    const auto* id = args.size() == 2 ? args[0].if_string() : nullptr;
    auto max_row = args.size() == 2 ? json_int(args[1]) : std::nullopt;
    if (!id || !max_row) return plain_error(400, bad_request_body("apus_remove_db"));
    Status s = store_->remove_db(t_.db(), std::string_view(id->data(), id->size()), *max_row);
    if (!s.ok()) return store_failure(s);
    return swob_response(204);
  }

  const DbServerConfig& config_;
  DbDevices& devices_;
  const ReplicateTarget& t_;
  const DbType type_;
  ListingStore* store_ = nullptr;
};

}  // namespace

bool merge_remote_info(DbInfo& info, DbType type, const RemoteInfo& remote) {
  bool changed = false;
  const std::string now = Timestamp::now().internal();
  if (type == DbType::kContainer && remote.storage_policy_index &&
      *remote.storage_policy_index != info.storage_policy_index &&
      remote_policy_wins(info, remote)) {
    info.storage_policy_index = *remote.storage_policy_index;
    info.policy_stats[info.storage_policy_index];
    info.status_changed_at = std::max(info.status_changed_at, now);
    changed = true;
  }
  // Each message's metadata is bounded, but many could add keys without end: a merge that
  // could take the replica's metadata past kMaxMetadataJson is left out (and said).
  size_t md_bytes = 0;
  for (const DbMetadata* md : {&std::as_const(info.metadata), &remote.metadata}) {
    for (const auto& [key, item] : *md) {
      md_bytes += key.size() + item.value.size() + item.timestamp.size() + 8;
    }
  }
  if (md_bytes > kMaxMetadataJson) {
    APUS_LOG_WARNING("metadata of /" + common::http::quote(info.account) +
                     (info.container.empty() ? "" : "/" + common::http::quote(info.container)) +
                     " not merged: with the other replica's it would be " +
                     std::to_string(md_bytes) + " bytes");
  } else {
    OrRefusal<bool> md = merge_metadata(info, remote.metadata, false, common::Constraints());
    changed = (md && *md) || changed;
  }
  if (remote.created_at != info.created_at || remote.put_timestamp != info.put_timestamp ||
      remote.delete_timestamp != info.delete_timestamp) {
    const bool was_deleted = info.is_deleted(type);
    info.created_at = std::min(info.created_at, remote.created_at);
    info.put_timestamp = std::max(info.put_timestamp, remote.put_timestamp);
    info.delete_timestamp = std::max(info.delete_timestamp, remote.delete_timestamp);
    if (was_deleted != info.is_deleted(type)) info.status_changed_at = now;
    changed = true;
  }
  return changed;
}

// ---- request bodies ----

std::string sync_request(const DbInfo& info, DbType type, bool several_policies) {
  json::array a{"sync",
                info.max_row,
                info.hash,
                info.id,
                info.created_at,
                info.put_timestamp,
                info.delete_timestamp,
                metadata_json(info.metadata)};
  if (type == DbType::kContainer && several_policies) {
    a.emplace_back(info.status_changed_at);
    a.emplace_back(replica_count(info, type));
    a.emplace_back(info.storage_policy_index);
  }
  return json::serialize(a);
}

std::string merge_items_request(const std::vector<ObjectRecord>& rows, std::string_view local_id) {
  json::array items;
  items.reserve(rows.size());
  for (const ObjectRecord& r : rows) items.emplace_back(object_row_json(r));
  return json::serialize(json::array{"merge_items", std::move(items), local_id});
}

std::string merge_items_request(const std::vector<ContainerRecord>& rows,
                                std::string_view local_id) {
  json::array items;
  items.reserve(rows.size());
  for (const ContainerRecord& r : rows) items.emplace_back(container_row_json(r));
  return json::serialize(json::array{"merge_items", std::move(items), local_id});
}

std::string merge_syncs_request(const std::vector<SyncPoint>& points) {
  json::array list;
  for (const SyncPoint& p : points) {
    list.emplace_back(json::object{{"remote_id", p.remote_id}, {"sync_point", p.sync_point}});
  }
  return json::serialize(json::array{"merge_syncs", std::move(list)});
}

std::string create_db_request(const DbInfo& info, DbType type) {
  json::object o{{"account", info.account},
                 {"container", type == DbType::kContainer ? info.container : std::string()},
                 {"created_at", info.created_at},
                 {"put_timestamp", info.put_timestamp},
                 {"delete_timestamp", info.delete_timestamp},
                 {"status", info.status},
                 {"status_changed_at", info.status_changed_at},
                 {"storage_policy_index", info.storage_policy_index},
                 {"metadata", metadata_json(info.metadata)}};
  return json::serialize(json::array{"apus_create_db", std::move(o)});
}

std::string remove_db_request(std::string_view id, int64_t max_row) {
  return json::serialize(json::array{"apus_remove_db", id, max_row});
}

std::string reconciler_sync_request(int64_t point) {
  return json::serialize(json::array{"apus_reconciler_sync", point});
}

std::string object_rows_body(const std::vector<ObjectRecord>& rows) {
  json::array items;
  items.reserve(rows.size());
  for (const ObjectRecord& r : rows) items.emplace_back(object_row_json(r));
  return json::serialize(items);
}

namespace {

// The replication info of a "sync" answer (or of "apus_merge_info", which carries one).
Result<RemoteInfo> remote_info_from_json(const json::object& o) {
  RemoteInfo r;
  auto point = json_int(o, "point", -1), max_row = json_int(o, "max_row", -1),
       count = json_int(o, "count", 0);
  auto hash = json_string(o, "hash"), id = json_string(o, "id"),
       created = json_string(o, "created_at"), put = json_string(o, "put_timestamp"),
       del = json_string(o, "delete_timestamp"),
       changed = json_string(o, "status_changed_at", false),
       md = json_string(o, "metadata", false);
  if (!point || !max_row || !count || !hash || !id || !created || !good_timestamp(*created) ||
      !put || !good_timestamp(*put) || !del || !good_timestamp(*del) || !changed ||
      !good_timestamp(*changed) || !md || md->size() > kMaxMetadataJson) {
    return Status::invalid_argument("not replication info");
  }
  r.point = *point;
  r.max_row = *max_row;
  r.count = *count;
  r.hash = std::move(*hash);
  r.id = std::move(*id);
  r.created_at = std::move(*created);
  r.put_timestamp = std::move(*put);
  r.delete_timestamp = std::move(*del);
  r.status_changed_at = changed->empty() ? "0" : std::move(*changed);
  r.metadata = metadata_from_json(*md);
  if (o.contains("storage_policy_index")) {
    auto policy = json_int(o, "storage_policy_index");
    if (policy && *policy >= 0 && *policy <= INT32_MAX) {
      r.storage_policy_index = static_cast<int>(*policy);
    }
  }
  if (o.contains("shard_max_row")) r.shard_max_row = json_int(o, "shard_max_row", -1).value_or(-1);
  return r;
}

}  // namespace

Result<RemoteInfo> parse_sync_answer(std::string_view body) {
  boost::system::error_code ec;
  json::value v = json::parse(body, ec);
  const json::object* o = ec ? nullptr : v.if_object();
  if (!o) return Status::invalid_argument("sync answer is not a JSON object");
  return remote_info_from_json(*o);
}

std::string merge_info_request(std::string_view sync_answer) {
  return "[\"apus_merge_info\"," + std::string(sync_answer) + "]";
}

bool remote_policy_wins(const DbInfo& local, const RemoteInfo& remote) {
  if (!remote.storage_policy_index || *remote.storage_policy_index == local.storage_policy_index) {
    return false;
  }
  const common::PolicyClaim ours{local.storage_policy_index, local.put_timestamp,
                                 local.delete_timestamp, local.status_changed_at,
                                 local.container_objects()};
  const common::PolicyClaim other{*remote.storage_policy_index, remote.put_timestamp,
                                  remote.delete_timestamp, remote.status_changed_at, remote.count};
  return common::policy_claim_wins(ours, other);
}

std::optional<std::vector<ObjectRecord>> parse_object_rows(std::string_view body) {
  boost::system::error_code ec;
  json::value v = json::parse(body, ec);
  if (ec) return std::nullopt;
  // UPDATE rows carry no ROWID: give them one so the row parser takes them.
  if (auto* a = v.if_array()) {
    for (auto& item : *a) {
      if (auto* o = item.if_object(); o && !o->contains("ROWID")) (*o)["ROWID"] = 0;
    }
  }
  return rows_from_json<ObjectRecord>(v, object_row_from_json);
}

net::awaitable<void> serve_replicate(Exchange& ex, const DbServerConfig& config,
                                     DbDevices& devices) {
  const common::http::Request& req = ex.request();
  if (!config.replication_server) co_return co_await ex.reply(swob_response(405));
  OrRefusal<ReplicateTarget> target = replicate_target(req);
  if (!target) co_return co_await ex.reply(std::move(target).refusal());
  common::io::BlockingPool* pool = co_await devices.pool_for(target->device);
  if (!pool) co_return co_await ex.reply(insufficient_storage(target->device));
  std::optional<std::string> body = co_await read_whole_body(ex, kMaxReplicateBody);
  if (!body) co_return;
  // Parsed on the device's pool with the work it asks for: a merge_items body of several MiB
  // takes milliseconds to parse, which a network worker must not spend.
  Response r = co_await pool->call([&]() -> Response {
    boost::system::error_code ec;
    json::value parsed = json::parse(*body, ec);
    json::array* args = ec ? nullptr : parsed.if_array();
    if (!args || args->empty() || !(*args)[0].is_string()) {
      return plain_error(400, "Invalid object type");
    }
    std::string op((*args)[0].get_string());
    args->erase(args->begin());
    if (op == "merge_shard_ranges") {
      // Swift's replicator logs the failure and tries again next pass.
      return common::http::swob_response_with_body(
          501, "Apus container servers do not shard: shard ranges are not taken");
    }
    Response answer = ReplicateRpc(config, devices, *target).run(op, *args);
    if (answer.status == 404 && op == "sync") answer.headers.set(kApusDbReplicationHeader, "1");
    return answer;
  });
  co_return co_await ex.reply(std::move(r));
}

}  // namespace apus::container
