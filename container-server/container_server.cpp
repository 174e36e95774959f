#include "container-server/container_server.h"

#include <unistd.h>

#include <boost/json.hpp>

#include "common/async.h"
#include "common/hash_path.h"
#include "common/http/client.h"
#include "common/http/date.h"
#include "common/http/headers.h"
#include "common/http/swob.h"
#include "common/http/url.h"
#include "common/listing_format.h"
#include "common/log/log.h"
#include "common/update_plan.h"
#include "container-server/db_replication.h"
#include "ring/ring_reloader.h"

namespace apus::container {

namespace net = boost::asio;
using common::Result;
using common::Status;
using common::Timestamp;
using common::http::Exchange;
using common::http::HeaderMap;
using common::http::OrRefusal;
using common::http::Request;
using common::http::Response;
using common::http::swob_response;

namespace {

constexpr DbType kType = DbType::kContainer;
// Sharding sysmeta survives a container DELETE (Swift's delete_meta_whitelist).
constexpr std::string_view kKeptOnDelete[] = {"x-container-sysmeta-shard-quoted-root",
                                              "x-container-sysmeta-shard-root"};

// Swift's gen_resp_headers(): backend timestamps always, counts only for a live container.
HeaderMap container_headers(const std::optional<DbInfo>& info, bool deleted) {
  DbInfo none;
  const DbInfo& i = info ? *info : none;
  HeaderMap h;
  h.set("X-Backend-Timestamp", timestamp_or_zero(info ? i.created_at : "0").internal());
  h.set("X-Backend-PUT-Timestamp", timestamp_or_zero(i.put_timestamp).internal());
  h.set("X-Backend-DELETE-Timestamp", timestamp_or_zero(i.delete_timestamp).internal());
  h.set("X-Backend-Status-Changed-At", timestamp_or_zero(i.status_changed_at).internal());
  h.set("X-Backend-Storage-Policy-Index", std::to_string(i.storage_policy_index));
  if (!deleted) {
    h.set("X-Container-Object-Count", std::to_string(i.container_objects()));
    h.set("X-Container-Bytes-Used", std::to_string(i.container_bytes()));
    h.set("X-Timestamp", timestamp_or_zero(i.created_at).normal());
    h.set("X-PUT-Timestamp", timestamp_or_zero(i.put_timestamp).normal());
    h.set("X-Backend-Sharding-State", "unsharded");
  }
  return h;
}

void add_metadata_headers(HeaderMap& h, const DbInfo& info, bool allow_versions) {
  for (const auto& [key, item] : info.metadata) {
    if (!item.value.empty() && returned_metadata(key, kType, allow_versions)) {
      h.set(key, item.value);
    }
  }
}

DbInfo new_container_info(const std::string& account, const std::string& container,
                          const std::string& partition, const std::string& device,
                          const std::string& put_timestamp, int policy) {
  DbInfo info;
  info.account = account;
  info.container = container;
  info.partition = partition;
  info.created_at = Timestamp::now().internal();
  info.id = new_db_id(device);
  info.put_timestamp = put_timestamp;
  info.status_changed_at = put_timestamp;
  info.storage_policy_index = policy;
  info.policy_stats[policy];
  return info;
}

Response with_header(Response r, std::string_view name, std::string_view value) {
  r.headers.set(name, value);
  return r;
}

// Swift's HTTPBadRequest(body): its text under swob's default type.

// Whether `md` sets X-Container-Sync-To to something new: Swift then restarts the sync.
bool sync_to_changes(const DbInfo& info, const DbMetadata& md) {
  auto sync_to = md.find("X-Container-Sync-To");
  if (sync_to == md.end()) return false;
  auto stored = info.metadata.find("X-Container-Sync-To");
  return stored == info.metadata.end() || stored->second.value != sync_to->second.value;
}

void reset_sync_points(DbInfo& info) {
  info.x_container_sync_point1 = -1;
  info.x_container_sync_point2 = -1;
}

// Python's [x.strip() for x in s.split(',')]: empty items kept.
std::vector<std::string> split_stripped(std::string_view s) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    size_t comma = s.find(',', start);
    std::string_view item = s.substr(start, comma == std::string_view::npos ? s.npos : comma - start);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    out.emplace_back(item);
    if (comma == std::string_view::npos) return out;
    start = comma + 1;
  }
}

}  // namespace

struct ContainerServer::Target {
  std::string device, partition, account, container;
  std::optional<std::string> object;
  std::string db;  // hash_path hex of account/container
};

std::optional<Response> ContainerServer::bad_sync_to(const Request& req) const {
  auto sync_to = req.headers.get("X-Container-Sync-To");
  if (!sync_to) return std::nullopt;
  auto check = common::validate_sync_to(*sync_to, config_.allowed_sync_hosts, realms_.get());
  if (!check.error) return std::nullopt;
  return common::http::swob_response_with_body(400, *check.error);
}

ContainerServer::ContainerServer(const DbServerConfig& config, DbDevices& devices,
                                 std::unique_ptr<ContainerUpdater> updater,
                                 std::unique_ptr<ContainerSync> sync)
    : config_(config),
      devices_(devices),
      updater_(std::move(updater)),
      sync_(std::move(sync)),
      realms_(std::make_shared<common::ContainerSyncRealms>(config.swift_dir +
                                                            "/container-sync-realms.conf")) {
  if (auto* m = devices_.metrics()) {
    phase_account_update_ =
        m->histogram("apus_db_phase_seconds", "Time spent in each listing-store operation",
                     {{"phase", "account_update"}}, common::Metrics::latency_buckets());
    account_updates_deferred_ = m->counter(
        "apus_account_updates_deferred_total",
        "Async account updates not sent because too many were in flight (the updater's "
        "sweep sends them)",
        {});
  }
}

void ContainerServer::start_background() {
  if (updater_) updater_->start();
  if (sync_) sync_->start();
}

void ContainerServer::request_background_pass() {
  if (updater_) {
    updater_->run_now();
  } else {
    APUS_LOG_WARNING("SIGUSR2: no container updater to run ([container-updater] enabled = false)");
  }
}

void ContainerServer::stop_background() {
  if (sync_) sync_->stop();
  if (updater_) updater_->stop();
}

Result<std::unique_ptr<DbServer>> make_container_server(const common::Config& conf,
                                                        const DbServerConfig& config,
                                                        DbDevices& devices) {
  auto updater_config = ContainerUpdaterConfig::from_config(conf);
  if (!updater_config.ok()) return updater_config.status();
  std::unique_ptr<ContainerUpdater> updater;
  if (updater_config->enabled) {
    std::string swift_dir = conf.section("container-updater").get_string("swift_dir", "/etc/swift");
    // Reloaded by the shared reloader's thread, never inside the updater's lookups.
    ring::RingOptions ring_options;
    ring_options.reloader = ring::RingReloader::shared();
    auto ring = ring::Ring::open(swift_dir + "/account.ring.gz",
                                 {config.swift.hash_path_prefix, config.swift.hash_path_suffix},
                                 std::move(ring_options));
    if (ring.ok()) {
      updater = std::make_unique<ContainerUpdater>(*updater_config, config, devices,
                                                   std::move(*ring));
    } else {
      APUS_LOG_WARNING("container updates to accounts only at PUT and DELETE: no account ring (" +
                       ring.status().to_string() + ")");
    }
  }
  auto sync_config = ContainerSyncConfig::from_config(conf);
  if (!sync_config.ok()) return sync_config.status();
  std::unique_ptr<ContainerSync> sync;
  if (sync_config->enabled) {
    ring::RingOptions ring_options;
    ring_options.reloader = ring::RingReloader::shared();
    auto ring = ring::Ring::open(sync_config->swift_dir + "/container.ring.gz",
                                 {config.swift.hash_path_prefix, config.swift.hash_path_suffix},
                                 std::move(ring_options));
    if (ring.ok()) {
      auto realms = std::make_shared<common::ContainerSyncRealms>(
          config.swift_dir + "/container-sync-realms.conf");
      sync = std::make_unique<ContainerSync>(std::move(*sync_config), config, devices,
                                             std::move(realms), std::move(*ring));
    } else {
      APUS_LOG_WARNING("no container sync: no container ring (" + ring.status().to_string() +
                       ")");
    }
  }
  return std::unique_ptr<DbServer>(std::make_unique<ContainerServer>(
      config, devices, std::move(updater), std::move(sync)));
}

net::awaitable<void> ContainerServer::handle(Exchange& ex) {
  const Request& req = ex.request();
  const std::string& method = req.method;
  // Every answer to HEAD goes out as swob makes it (no body, its length declared).
  auto reply = [&](Response r) {
    return ex.reply(method == "HEAD" ? no_body(std::move(r)) : std::move(r));
  };
  static constexpr std::string_view kAllowed =
      "DELETE, GET, HEAD, OPTIONS, POST, PUT, REPLICATE, UPDATE";
  if (method == "OPTIONS") {
    Response r;
    r.headers.set("Content-Type", "text/html; charset=UTF-8");
    r.headers.set("Allow", kAllowed);
    r.headers.set("Server", "container-server/" APUS_SWIFT_VERSION);
    co_return co_await reply(std::move(r));
  }
  if (method == "REPLICATE") co_return co_await serve_replicate(ex, config_, devices_);
  bool known = method == "PUT" || method == "GET" || method == "HEAD" || method == "POST" ||
               method == "DELETE" || method == "UPDATE";
  if (!known) co_return co_await reply(swob_response(405));
  std::string path = common::http::percent_decode(req.path());
  if (!common::check_utf8(path, /*internal=*/true)) {
    Response r = swob_response(412);
    r.body = "Invalid UTF8 or contains NULL";
    co_return co_await reply(std::move(r));
  }
  // POST and UPDATE name a container only; the others may name an object row.
  bool container_only = method == "POST" || method == "UPDATE";
  OrRefusal<PathSegments> split =
      split_storage_path(path, 4, container_only ? 4 : 5, !container_only);
  if (!split) co_return co_await reply(std::move(split).refusal());
  const PathSegments& segments = *split;
  Target t;
  t.device = *segments[0];
  t.partition = *segments[1];
  t.account = *segments[2];
  t.container = *segments[3];
  if (segments.size() > 4) t.object = segments[4];
  auto db = common::hash_path_hex(
      common::HashPathConfig{config_.swift.hash_path_prefix, config_.swift.hash_path_suffix},
      t.account, t.container);
  if (!db.ok()) co_return co_await reply(plain_error(400, db.status().message()));
  t.db = t.partition + "/" + *db;  // Swift finds a database under its path's partition

  if (method == "PUT") {
    co_await handle_put(ex, t);
  } else if (method == "DELETE") {
    co_await handle_delete(ex, t);
  } else if (method == "POST") {
    co_await handle_post(ex, t);
  } else if (method == "HEAD") {
    co_await handle_head(ex, t);
  } else if (method == "GET") {
    co_await handle_get(ex, t);
  } else {
    co_await handle_update(ex, t);
  }
}

// ---- PUT -------------------------------------------------------------------------------------

namespace {

// Swift's _should_autocreate: an explicit X-Backend-Auto-Create, else accounts under the
// auto-create prefix except the sharder's ".shards_" ones.
bool should_autocreate(const Request& req, const std::string& account, const std::string& prefix) {
  if (auto h = req.headers.get("X-Backend-Auto-Create"); h && !h->empty()) {
    return common::config_true_value(*h);
  }
  if (account.rfind(prefix + "shards_", 0) == 0) return false;
  return account.rfind(prefix, 0) == 0;
}

}  // namespace

net::awaitable<void> ContainerServer::handle_put(Exchange& ex, const Target& t) {
  const Request& req = ex.request();
  OrRefusal<Timestamp> ts = request_timestamp(req);
  if (!ts) co_return co_await ex.reply(std::move(ts).refusal());
  if (auto bad = bad_sync_to(req)) co_return co_await ex.reply(std::move(*bad));
  PolicyIndex policy = request_policy_index(req, config_.swift.policies);
  OrRefusal<common::io::BlockingPool*> found = co_await device_pool(req, t);
  if (!found) co_return co_await ex.reply(std::move(found).refusal());
  common::io::BlockingPool* pool = *found;
  if (t.object) {  // an object row from an object server or updater
    std::optional<ObjectRecord> rec;
    auto size = parse_int(req.headers.get_or("X-Size", ""));
    auto ctype = req.headers.get("X-Content-Type");
    auto etag = req.headers.get("X-Etag");
    if (size && ctype && etag) {
      rec.emplace();
      rec->name = *t.object;
      rec->created_at = ts->internal();
      rec->size = *size;
      rec->content_type.assign(*ctype);
      rec->etag.assign(*etag);
      rec->storage_policy_index = policy ? policy->value_or(0) : 0;
      rec->ctype_timestamp.assign(req.headers.get_or("X-Content-Type-Timestamp", ""));
      rec->meta_timestamp.assign(req.headers.get_or("X-Meta-Timestamp", ""));
    }
    // Swift's order: the device, then the policy, then the row's own headers.
    auto merge = [&](Waiting waiting, ListingStore* now_store) -> std::optional<Response> {
      if (!policy) return std::move(policy).refusal();
      if (!rec) {
        return plain_error(400, "Missing or invalid X-Size, X-Content-Type or X-Etag header");
      }
      return put_row(req, t, *ts, *rec, waiting, now_store);
    };
    if (ListingStore* now = devices_.checked_store(t.device, /*space=*/true)) {
      if (auto done = merge(Waiting::kNever, now)) co_return co_await ex.reply(std::move(*done));
    }
    Response r = co_await pool->call([&]() -> Response {
      if (!devices_.check_device(t.device).ok() || !devices_.check_free_space(t.device).ok()) {
        return insufficient_storage(t.device);
      }
      return *merge(Waiting::kMay, nullptr);
    });
    co_return co_await ex.reply(std::move(r));
  }
  if (auto refused = co_await refusal(t, policy, true)) {
    co_return co_await ex.reply(std::move(*refused));
  }

  int new_policy = config_.swift.policies.default_policy().index;
  if (*policy) {
    new_policy = **policy;
  } else if (auto d = parse_int(req.headers.get_or("X-Backend-Storage-Policy-Default", ""))) {
    new_policy = static_cast<int>(*d);
  }
  struct Put {
    bool created = false;
    DbInfo info;
  };
  OrRefusal<Put> out = co_await pool->call([&]() -> OrRefusal<Put> {
    auto store = devices_.store(t.device);
    if (!store.ok()) return swob_response(500);
    Put done;
    std::optional<Response> refused;
    std::string stamp = ts->internal();
    Status s = (*store)->update_info(t.db, [&](std::optional<DbInfo>& info) -> Result<bool> {
      if (!info) {
        info = new_container_info(t.account, t.container, t.partition, t.device, stamp,
                                  new_policy);
        done.created = true;
        return true;
      }
      bool recreated = info->is_deleted(kType);
      if (recreated) {
        info->policy_stats[new_policy];
        if (info->storage_policy_index != new_policy) {
          info->storage_policy_index = new_policy;
          info->status_changed_at = std::max(info->status_changed_at, stamp);
        }
      } else if (*policy && **policy != info->storage_policy_index) {
        refused = with_header(swob_response(409), "X-Backend-Storage-Policy-Index",
                              std::to_string(info->storage_policy_index));
        return false;
      }
      if (info->put_timestamp < stamp) info->put_timestamp = stamp;
      if (info->is_deleted(kType)) {
        refused = swob_response(409);
        return true;
      }
      if (recreated && info->status_changed_at < stamp) info->status_changed_at = stamp;
      done.created = recreated;
      return true;
    });
    if (!s.ok()) return store_failure(s);
    if (refused) return std::move(*refused);
    DbMetadata md = request_metadata(req, kType, config_.allow_versions, *ts);
    s = (*store)->update_info(t.db, [&](std::optional<DbInfo>& info) -> Result<bool> {
      if (!info) return false;
      bool new_sync_to = sync_to_changes(*info, md);
      OrRefusal<bool> merged = merge_metadata(*info, md, true, config_.swift.constraints);
      if (!merged) {
        refused = std::move(merged).refusal();
        return false;
      }
      if (new_sync_to) reset_sync_points(*info);
      done.info = *info;
      return *merged || new_sync_to;
    });
    if (!s.ok()) return store_failure(s);
    if (refused) return std::move(*refused);
    return done;
  });
  if (!out) co_return co_await ex.reply(std::move(out).refusal());
  OrRefusal<std::optional<AccountUpdate>> update = account_update_of(req, t);
  if (!update) co_return co_await ex.reply(std::move(update).refusal());
  if (auto failed = co_await account_update(std::move(*update), out->info)) {
    co_return co_await ex.reply(std::move(*failed));
  }
  Response r = swob_response(out->created ? 201 : 202);
  r.headers.set("X-Backend-Storage-Policy-Index", std::to_string(out->info.storage_policy_index));
  co_return co_await ex.reply(std::move(r));
}

// ---- object rows -----------------------------------------------------------------------------

std::optional<Response> ContainerServer::put_row(const Request& req, const Target& t,
                                                 const Timestamp& ts, const ObjectRecord& rec,
                                                 Waiting waiting, ListingStore* now_store) {
  const bool autocreate = should_autocreate(req, t.account, config_.auto_create_account_prefix);
  // Swift appends the row to a .pending file and answers; a store that writes the row without
  // fsync (listing_db.h, WalSync) can do it on the event loop's thread as well, saving a trip
  // to the disk pool and back, when nothing makes it wait. Creating a database is synced.
  if (waiting == Waiting::kNever) {
    if (!now_store || autocreate || config_.sync_object_rows) return std::nullopt;
    Status s =
        now_store->merge_objects(t.db, {rec}, nullptr, WalSync::kUnsynced, Waiting::kNever);
    if (s.code() == common::Status::Code::kUnavailable) return std::nullopt;
    if (!s.ok()) return store_failure(s);
    return swob_response(rec.deleted ? 204 : 201);
  }
  auto store = devices_.store(t.device);
  if (!store.ok()) return swob_response(500);
  if (autocreate) {
    Status s = (*store)->update_info(t.db, [&](std::optional<DbInfo>& info) -> Result<bool> {
      if (info) return false;
      info = new_container_info(t.account, t.container, t.partition, t.device, ts.internal(),
                                rec.storage_policy_index);
      return true;
    });
    if (!s.ok()) return store_failure(s);
  }
  // As Swift's .pending file: the row is not fsynced unless the operator asks (db_server.h).
  Status s = (*store)->merge_objects(
      t.db, {rec}, nullptr, config_.sync_object_rows ? WalSync::kStore : WalSync::kUnsynced);
  if (!s.ok()) return store_failure(s);
  return swob_response(rec.deleted ? 204 : 201);
}

// ---- DELETE ----------------------------------------------------------------------------------

net::awaitable<void> ContainerServer::handle_delete(Exchange& ex, const Target& t) {
  const Request& req = ex.request();
  OrRefusal<Timestamp> ts = request_timestamp(req);
  if (!ts) co_return co_await ex.reply(std::move(ts).refusal());
  OrRefusal<common::io::BlockingPool*> found = co_await device_pool(req, t);
  if (!found) co_return co_await ex.reply(std::move(found).refusal());
  common::io::BlockingPool* pool = *found;
  PolicyIndex policy = request_policy_index(req, config_.swift.policies);
  if (t.object) {  // device check, then the row
    ObjectRecord rec;
    rec.name = *t.object;
    rec.created_at.assign(req.headers.get_or("X-Timestamp", ""));
    rec.content_type = "application/deleted";
    rec.etag = "noetag";
    rec.deleted = true;
    rec.storage_policy_index = policy ? policy->value_or(0) : 0;
    auto merge = [&](Waiting waiting, ListingStore* now_store) -> std::optional<Response> {
      if (!policy) return std::move(policy).refusal();
      return put_row(req, t, *ts, rec, waiting, now_store);
    };
    if (ListingStore* now = devices_.checked_store(t.device, /*space=*/false)) {
      if (auto done = merge(Waiting::kNever, now)) co_return co_await ex.reply(std::move(*done));
    }
    Response r = co_await pool->call([&]() -> Response {
      if (!devices_.check_device(t.device).ok()) return insufficient_storage(t.device);
      return *merge(Waiting::kMay, nullptr);
    });
    co_return co_await ex.reply(std::move(r));
  }
  if (auto refused = co_await refusal(t, policy, false)) {
    co_return co_await ex.reply(std::move(*refused));
  }

  struct Deleted {
    bool existed = false;
    DbInfo info;
  };
  OrRefusal<Deleted> out = co_await pool->call([&]() -> OrRefusal<Deleted> {
    auto store = devices_.store(t.device);
    if (!store.ok()) return swob_response(500);
    Deleted done;
    std::optional<Response> refused;
    std::string stamp = ts->internal();
    Status s = (*store)->update_info(t.db, [&](std::optional<DbInfo>& info) -> Result<bool> {
      if (!info) {
        refused = swob_response(404);
        return false;
      }
      if (!info->empty(kType)) {
        refused = swob_response(409);
        return false;
      }
      done.existed = !timestamp_or_zero(info->put_timestamp).is_zero() && !info->is_deleted(kType);
      // Swift's delete_db(): clear the metadata, then mark the database deleted.
      DbMetadata cleared;
      for (const auto& [key, item] : info->metadata) {
        bool kept = false;
        for (std::string_view k : kKeptOnDelete) kept = kept || common::http::iequals(key, k);
        if (!kept) cleared[key] = MetaItem{"", stamp};
      }
      (void)merge_metadata(*info, cleared, false, config_.swift.constraints);
      if (info->delete_timestamp < stamp) {
        info->delete_timestamp = stamp;
        info->status = "DELETED";
        info->status_changed_at = stamp;
      }
      if (!info->is_deleted(kType)) refused = swob_response(409);  // written all the same
      done.info = *info;
      return true;
    });
    if (!s.ok()) return store_failure(s);
    if (refused) return std::move(*refused);
    return done;
  });
  if (!out) co_return co_await ex.reply(std::move(out).refusal());
  OrRefusal<std::optional<AccountUpdate>> update = account_update_of(req, t);
  if (!update) co_return co_await ex.reply(std::move(update).refusal());
  if (auto failed = co_await account_update(std::move(*update), out->info)) {
    co_return co_await ex.reply(std::move(*failed));
  }
  co_return co_await ex.reply(swob_response(out->existed ? 204 : 404));
}

// ---- POST ------------------------------------------------------------------------------------

net::awaitable<void> ContainerServer::handle_post(Exchange& ex, const Target& t) {
  const Request& req = ex.request();
  OrRefusal<Timestamp> ts = request_timestamp(req);
  if (!ts) co_return co_await ex.reply(std::move(ts).refusal());
  if (auto bad = bad_sync_to(req)) co_return co_await ex.reply(std::move(*bad));
  OrRefusal<common::io::BlockingPool*> found = co_await device_pool(req, t);
  if (!found) co_return co_await ex.reply(std::move(found).refusal());
  common::io::BlockingPool* pool = *found;
  Response r = co_await pool->call([&]() -> Response {
    if (!devices_.check_device(t.device).ok() || !devices_.check_free_space(t.device).ok()) {
      return insufficient_storage(t.device);
    }
    auto store = devices_.store(t.device);
    if (!store.ok()) return swob_response(500);
    std::string stamp = ts->internal();
    DbMetadata md = request_metadata(req, kType, config_.allow_versions, *ts);
    std::optional<Response> answer;
    Status s = (*store)->update_info(t.db, [&](std::optional<DbInfo>& info) -> Result<bool> {
      if (!info || info->is_deleted(kType)) {
        answer = swob_response(404);
        return false;
      }
      bool changed = false;
      if (info->put_timestamp < stamp) {
        info->put_timestamp = stamp;
        changed = true;
      }
      bool new_sync_to = sync_to_changes(*info, md);
      OrRefusal<bool> merged = merge_metadata(*info, md, true, config_.swift.constraints);
      if (!merged) {
        answer = std::move(merged).refusal();
        return changed;  // Swift has already saved the new put_timestamp
      }
      if (new_sync_to) reset_sync_points(*info);
      return changed || *merged || new_sync_to;
    });
    if (!s.ok()) return store_failure(s);
    return answer ? std::move(*answer) : swob_response(204);
  });
  co_return co_await ex.reply(std::move(r));
}

// ---- HEAD and GET ----------------------------------------------------------------------------

net::awaitable<void> ContainerServer::handle_head(Exchange& ex, const Target& t) {
  const Request& req = ex.request();
  std::optional<std::string> format = common::http::query_param(req.query(), "format");
  if (format && !format->empty() && !common::check_utf8(*format, true)) {
    co_return co_await ex.reply(no_body(plain_error(400, "\"format\" parameter not valid UTF-8")));
  }
  OrRefusal<std::string> ctype = listing_content_type(req, format);
  if (!ctype) co_return co_await ex.reply(no_body(std::move(ctype).refusal()));
  OrRefusal<common::io::BlockingPool*> found = co_await device_pool(req, t);
  if (!found) co_return co_await ex.reply(std::move(found).refusal());
  common::io::BlockingPool* pool = *found;
  Response r = co_await pool->call([&]() -> Response {
    if (!devices_.check_device(t.device).ok()) return insufficient_storage(t.device);
    auto store = devices_.store(t.device);
    if (!store.ok()) return swob_response(500);
    auto info = (*store)->get_info(t.db);
    if (!info.ok()) return swob_response(500);
    bool deleted = !*info || (*info)->is_deleted(kType);
    Response resp = swob_response(deleted ? 404 : 204);
    for (const auto& [k, v] : container_headers(*info, deleted)) resp.headers.set(k, v);
    if (deleted) return resp;
    add_metadata_headers(resp.headers, **info, config_.allow_versions);
    resp.headers.set("Content-Type", *ctype + "; charset=utf-8");
    resp.headers.set("Last-Modified", common::http::format_http_date(
                                          timestamp_or_zero((*info)->put_timestamp).ceil()));
    return resp;
  });
  co_return co_await ex.reply(no_body(std::move(r)));
}

namespace {

common::listing::ObjectItem listing_item(const ObjectEntry& e) {
  common::listing::ObjectItem item;
  item.name = e.row.name;
  if (e.subdir) {
    item.subdir = true;
    return item;
  }
  item.bytes = e.row.size;
  item.hash = e.row.etag;
  auto [type, swift_bytes] = common::http::extract_swift_bytes(e.row.content_type);
  item.content_type = std::move(type);
  if (swift_bytes) {
    if (auto n = parse_int(*swift_bytes)) item.bytes = *n;
  }
  auto ts = common::decode_timestamps(e.row.created_at);
  Timestamp meta = !ts.ok() ? Timestamp() : ts->t3 ? *ts->t3 : ts->t2 ? *ts->t2 : ts->t1;
  item.last_modified = meta.isoformat();
  return item;
}

}  // namespace

net::awaitable<void> ContainerServer::handle_get(Exchange& ex, const Target& t) {
  const Request& req = ex.request();
  OrRefusal<ListingParams> params =
      listing_params(req, config_.swift.constraints.container_listing_limit, true);
  if (!params) co_return co_await ex.reply(std::move(params).refusal());
  OrRefusal<std::string> ctype = listing_content_type(req, params->format);
  if (!ctype) co_return co_await ex.reply(std::move(ctype).refusal());
  OrRefusal<common::io::BlockingPool*> found = co_await device_pool(req, t);
  if (!found) co_return co_await ex.reply(std::move(found).refusal());
  common::io::BlockingPool* pool = *found;
  Response r = co_await pool->call([&]() -> Response {
    if (!devices_.check_device(t.device).ok()) return insufficient_storage(t.device);
    auto store = devices_.store(t.device);
    if (!store.ok()) return swob_response(500);
    auto info = (*store)->get_info(t.db);
    if (!info.ok()) return swob_response(500);
    PolicyIndex policy = request_policy_index(req, config_.swift.policies);
    if (!policy) return std::move(policy).refusal();
    bool deleted = !*info || (*info)->is_deleted(kType);
    if (deleted) {
      Response resp = swob_response(404);
      for (const auto& [k, v] : container_headers(*info, true)) resp.headers.set(k, v);
      return resp;
    }
    const DbInfo& i = **info;
    ListingQuery q = params->query;
    q.storage_policy_index = policy->value_or(i.storage_policy_index);
    auto entries = (*store)->list_objects(t.db, q);
    if (!entries.ok()) return swob_response(500);
    std::vector<common::listing::ObjectItem> items;
    items.reserve(entries->size());
    for (const ObjectEntry& e : *entries) items.push_back(listing_item(e));
    Response resp;
    resp.status = 200;
    resp.headers = container_headers(*info, false);
    resp.headers.set("X-Backend-Record-Type", "object");
    resp.headers.set("X-Backend-Record-Storage-Policy-Index",
                     std::to_string(q.storage_policy_index));
    add_metadata_headers(resp.headers, i, config_.allow_versions);
    const std::string& type = *ctype;
    if (type.ends_with("/xml")) {
      resp.body = common::listing::to_xml(items, t.container);
    } else if (type.ends_with("/json")) {
      resp.body = common::listing::to_json(items);
    } else {
      resp.body = common::listing::to_plain(items);
    }
    resp.headers.set("Content-Type", type + "; charset=utf-8");
    resp.headers.set("Last-Modified",
                     common::http::format_http_date(timestamp_or_zero(i.put_timestamp).ceil()));
    if (resp.body.empty()) {
      resp.status = 204;
      resp.reason = "OK";  // Swift changes the code of its 200 and keeps the phrase
    }
    return resp;
  });
  co_return co_await ex.reply(std::move(r));
}

// ---- UPDATE ----------------------------------------------------------------------------------

net::awaitable<void> ContainerServer::handle_update(Exchange& ex, const Target& t) {
  const Request& req = ex.request();
  OrRefusal<Timestamp> ts = request_timestamp(req);
  if (!ts) co_return co_await ex.reply(std::move(ts).refusal());
  OrRefusal<common::io::BlockingPool*> found = co_await device_pool(req, t);
  if (!found) co_return co_await ex.reply(std::move(found).refusal());
  common::io::BlockingPool* pool = *found;
  PolicyIndex policy = request_policy_index(req, config_.swift.policies);
  if (auto refused = co_await refusal(t, policy, true)) {
    co_return co_await ex.reply(std::move(*refused));
  }
  // UPDATE bodies are rows for one container: a few MiB at most.
  constexpr size_t kMaxBody = 16 << 20;
  std::optional<std::string> body = co_await read_whole_body(ex, kMaxBody);
  if (!body) co_return;
  Response r = co_await pool->call([&]() -> Response {
    // Parsed here, on the device's pool: a body of MiBs is not a network worker's job.
    std::optional<std::vector<ObjectRecord>> parsed = parse_object_rows(*body);
    if (!parsed) return plain_error(400, "Invalid UPDATE body");
    std::vector<ObjectRecord> records = std::move(*parsed);
    auto store = devices_.store(t.device);
    if (!store.ok()) return swob_response(500);
    if (should_autocreate(req, t.account, config_.auto_create_account_prefix)) {
      if (!*policy) {
        return common::http::swob_response_with_body(
            400, "X-Backend-Storage-Policy-Index header is required");
      }
      Status s = (*store)->update_info(t.db, [&](std::optional<DbInfo>& info) -> Result<bool> {
        if (info) return false;
        info = new_container_info(t.account, t.container, t.partition, t.device,
                                  ts->internal(), **policy);
        return true;
      });
      if (!s.ok()) return store_failure(s);
    }
    Status s = (*store)->merge_objects(t.db, std::move(records));
    if (!s.ok()) return store_failure(s);
    return swob_response(202);
  });
  co_return co_await ex.reply(std::move(r));
}

// ---- refusals and account updates ------------------------------------------------------------

net::awaitable<OrRefusal<common::io::BlockingPool*>> ContainerServer::device_pool(
    const Request& req, const Target& t) {
  common::io::BlockingPool* pool = co_await devices_.pool_for(t.device);
  if (pool) co_return pool;
  Response r = insufficient_storage(t.device);
  co_return req.method == "HEAD" ? no_body(std::move(r)) : std::move(r);
}

net::awaitable<std::optional<Response>> ContainerServer::refusal(const Target& t,
                                                                 const PolicyIndex& policy,
                                                                 bool needs_space) {
  common::io::BlockingPool* pool = co_await devices_.pool_for(t.device);
  if (!pool) co_return insufficient_storage(t.device);
  bool device_ok = co_await pool->call([&] {
    return devices_.check_device(t.device).ok() &&
           (!needs_space || devices_.check_free_space(t.device).ok());
  });
  if (!device_ok) co_return insufficient_storage(t.device);
  if (!policy) co_return policy.refusal();
  co_return std::nullopt;
}

OrRefusal<std::optional<ContainerServer::AccountUpdate>> ContainerServer::account_update_of(
    const Request& req, const Target& t) const {
  AccountUpdate u;
  u.hosts = split_stripped(req.headers.get_or("X-Account-Host", ""));
  u.devices = split_stripped(req.headers.get_or("X-Account-Device", ""));
  if (u.hosts.size() > common::kMaxUpdateHosts) {
    APUS_LOG_ERROR("ERROR Account update failed: " + std::to_string(u.hosts.size()) +
                   " hosts in request, more than " + std::to_string(common::kMaxUpdateHosts));
    return swob_response(400);
  }
  if (u.hosts.size() != u.devices.size()) {
    APUS_LOG_ERROR("ERROR Account update failed: different numbers of hosts and devices in "
                   "request: \"" + std::string(req.headers.get_or("X-Account-Host", "")) +
                   "\" vs \"" + std::string(req.headers.get_or("X-Account-Device", "")) + "\"");
    return swob_response(400);
  }
  u.partition.assign(req.headers.get_or("X-Account-Partition", ""));
  if (u.partition.empty()) return std::optional<AccountUpdate>();
  u.path = "/" + common::http::quote(t.account) + "/" + common::http::quote(t.container);
  u.trans_id.assign(req.headers.get_or("X-Trans-Id", "-"));
  u.referer = common::http::as_referer(req);
  u.override_deleted =
      common::http::iequals(req.headers.get_or("X-Account-Override-Deleted", "no"), "yes");
  return std::optional<AccountUpdate>(std::move(u));
}

net::awaitable<std::optional<Response>> ContainerServer::account_update(
    std::optional<AccountUpdate> update, const DbInfo& info) {
  if (!update) co_return std::nullopt;
  if (!config_.account_update_async) co_return co_await send_account_update(std::move(*update), info);
  if (async_account_updates_.fetch_add(1) >= kMaxAsyncAccountUpdates) {
    --async_account_updates_;
    // Nothing is lost (the database records what the account was last told), but an overload
    // must show: counted, and said at most once a minute.
    account_updates_deferred_.inc();
    const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                            std::chrono::steady_clock::now().time_since_epoch())
                            .count();
    int64_t last = deferred_warned_at_.load();
    if (now - last >= 60 && deferred_warned_at_.compare_exchange_strong(last, now)) {
      APUS_LOG_WARNING("account updates left to the container updater: more than " +
                       std::to_string(kMaxAsyncAccountUpdates) + " in flight");
    }
    co_return std::nullopt;
  }
  auto done = [this] { --async_account_updates_; };
  common::spawn_logged(
      co_await net::this_coro::executor,
      [this, update = std::move(*update), info, done]() mutable -> net::awaitable<void> {
        (void)co_await send_account_update(std::move(update), std::move(info));
        done();
      },
      "account update", done);
  co_return std::nullopt;
}

net::awaitable<std::optional<Response>> ContainerServer::send_account_update(AccountUpdate u,
                                                                             DbInfo info) {
  common::ScopedTimer timer(phase_account_update_);
  common::http::ClientOptions options;
  options.conn_timeout = config_.conn_timeout;
  options.node_timeout = config_.node_timeout;
  auto& pool = common::http::ConnectionPool::for_this_thread();
  size_t not_found = 0;
  for (size_t i = 0; i < u.hosts.size(); ++i) {
    auto host_port = common::split_host_port(u.hosts[i]);
    if (!host_port) {
      APUS_LOG_ERROR("ERROR account update failed: bad host " + u.hosts[i] +
                     " (will retry later)");
      continue;
    }
    common::http::ClientRequest out;
    out.method = "PUT";
    out.target = "/" + common::http::quote(u.devices[i]) + "/" +
                 common::http::quote(u.partition) + u.path;
    out.headers.set("X-Put-Timestamp", info.put_timestamp);
    out.headers.set("X-Delete-Timestamp", info.delete_timestamp);
    out.headers.set("X-Object-Count", std::to_string(info.container_objects()));
    out.headers.set("X-Bytes-Used", std::to_string(info.container_bytes()));
    out.headers.set("X-Trans-Id", u.trans_id);
    out.headers.set("X-Backend-Storage-Policy-Index", std::to_string(info.storage_policy_index));
    static const std::string user_agent = "container-server " + std::to_string(::getpid());
    out.headers.set("User-Agent", user_agent);
    out.headers.set("Referer", u.referer);
    if (u.override_deleted) out.headers.set("X-Account-Override-Deleted", "yes");
    out.content_length = 0;
    auto resp = co_await common::http::simple_request(pool, options, host_port->first,
                                                      host_port->second, std::move(out));
    if (!resp.ok()) {
      APUS_LOG_ERROR("ERROR account update failed with " + u.hosts[i] + "/" + u.devices[i] +
                     " (will retry later): " + resp.status().to_string());
    } else if (resp->head.status == 404) {
      ++not_found;
    } else if (resp->head.status < 200 || resp->head.status >= 300) {
      APUS_LOG_ERROR("ERROR Account update failed with " + u.hosts[i] + "/" + u.devices[i] +
                     " (will retry later): Response " + std::to_string(resp->head.status));
    }
  }
  if (!u.hosts.empty() && not_found == u.hosts.size()) co_return swob_response(404);
  co_return std::nullopt;
}

}  // namespace apus::container
