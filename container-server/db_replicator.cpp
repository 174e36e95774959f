#include "container-server/db_replicator.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>

#include "common/async.h"
#include "common/crypto/md5.h"
#include "common/http/client.h"
#include "common/http/url.h"
#include "common/io/device.h"
#include "common/log/log.h"
#include "common/misplaced_queue.h"
#include "common/process.h"
#include "common/recon_cache.h"
#include "common/timestamp.h"
#include "container-server/db_replication.h"

namespace apus::container {

namespace net = boost::asio;
using common::Result;
using common::Status;

namespace {

// Infos read per page of a device walk.
constexpr size_t kInfoPage = 1000;
// The most a peer's answer to "sync" may hold: its info with metadata (at most a few KiB in
// Swift's limits; metadata of replicas made by other means may be larger).
constexpr size_t kMaxAnswer = 1 << 20;

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// What a peer's confirmation covers: every field a "sync" sends, and the rows (max_row).
std::string fingerprint(const DbInfo& info) {
  std::string all;
  for (const std::string* s : {&info.id, &info.hash, &info.created_at, &info.put_timestamp,
                               &info.delete_timestamp, &info.status, &info.status_changed_at}) {
    all += *s;
    all += '\n';
  }
  all += std::to_string(info.max_row) + "\n" + std::to_string(info.storage_policy_index) + "\n";
  for (const auto& [key, item] : info.metadata) all += key + "\n" + item.value + "\n" + item.timestamp + "\n";
  auto digest = common::crypto::md5(all);
  return std::string(reinterpret_cast<const char*>(digest.data()), digest.size());
}

enum class PeerResult { kInStep, kFailed, kUnmounted };

}  // namespace

// ---- configuration ---------------------------------------------------------------------------

std::string DbReplicatorConfig::kind() const {
  return type == DbType::kContainer ? "container" : "account";
}

Result<DbReplicatorConfig> DbReplicatorConfig::from_config(const common::Config& conf,
                                                           DbType type) {
  DbReplicatorConfig c;
  c.type = type;
  common::Section s = conf.section(c.kind() + "-replicator");
  c.devices = s.get_string("devices", "/srv/node");
  APUS_ASSIGN_OR_RETURN(c.mount_check, s.get_bool("mount_check", true));
  c.swift_dir = s.get_string("swift_dir", "/etc/swift");
  c.bind_ip = s.get_string("bind_ip", "0.0.0.0");
  int64_t n = 0;
  APUS_ASSIGN_OR_RETURN(n, s.get_int("bind_port", type == DbType::kContainer ? 6201 : 6202));
  c.bind_port = static_cast<int>(n);
  // Swift: float(interval or run_pause or 30); run_pause is the deprecated name.
  const char* interval_key = !s.get_string("interval", "").empty()    ? "interval"
                             : !s.get_string("run_pause", "").empty() ? "run_pause"
                                                                      : nullptr;
  if (interval_key) {
    APUS_ASSIGN_OR_RETURN(c.interval, s.get_double(interval_key, 30));
    if (c.interval <= 0) return s.invalid(interval_key, "must be positive");
  }
  APUS_ASSIGN_OR_RETURN(n, s.get_int("concurrency", 8));
  if (n < 1) return s.invalid("concurrency", "must be at least 1");
  c.concurrency = static_cast<int>(std::min<int64_t>(n, 1000));
  APUS_ASSIGN_OR_RETURN(c.databases_per_second, s.get_double("databases_per_second", 50));
  APUS_ASSIGN_OR_RETURN(c.node_timeout, s.get_double("node_timeout", 10));
  APUS_ASSIGN_OR_RETURN(c.conn_timeout, s.get_double("conn_timeout", 0.5));
  APUS_ASSIGN_OR_RETURN(n, s.get_int("per_diff", 1000));
  if (n < 1 || n > 100000) return s.invalid("per_diff", "must be 1 to 100000");
  c.per_diff = static_cast<int>(n);
  if (!s.get_string("max_diffs", "").empty()) {  // Swift: int(max_diffs or 100)
    APUS_ASSIGN_OR_RETURN(n, s.get_int("max_diffs", 100));
    if (n < 1) return s.invalid("max_diffs", "must be at least 1");
    c.max_diffs = static_cast<int>(std::min<int64_t>(n, 1000000));
  }
  std::string handoff_delete = s.get_string("handoff_delete", "auto");
  if (handoff_delete != "auto") {
    APUS_ASSIGN_OR_RETURN(n, s.get_int("handoff_delete", 0));
    if (n < 0) return s.invalid("handoff_delete", "must be auto or a count");
    c.handoff_delete = static_cast<int>(n);
  }
  APUS_ASSIGN_OR_RETURN(c.reclaim_age, s.get_double("reclaim_age", 604800));
  APUS_ASSIGN_OR_RETURN(c.recheck_interval, s.get_double("recheck_interval", 3600));
  if (c.recheck_interval < 0) return s.invalid("recheck_interval", "must not be negative");
  c.recon_cache_path = s.get_string("recon_cache_path", "/var/cache/swift");
  c.log_name = s.get_string("log_name", c.kind() + "-replicator");
  auto swift = common::load_swift_conf(c.swift_dir + "/swift.conf");
  if (!swift.ok()) return swift.status();
  c.swift = std::move(*swift);
  return c;
}

// ---- the replicator --------------------------------------------------------------------------

struct DbReplicator::Impl {
  // A replica every peer confirmed: its fingerprint then, when, and the pass that saw it last
  // (entries of databases gone are dropped after a whole pass).
  struct Confirmed {
    std::string fingerprint;
    double at = 0;
    uint64_t seen_pass = 0;
  };

  DbReplicatorConfig config;
  common::io::Fs& fs;
  std::unique_ptr<ring::Ring> ring;
  std::vector<std::string> my_ips;
  std::string user_agent;
  FollowedStores stores;
  std::unique_ptr<common::http::ConnectionPool> pool;
  std::map<std::string, Confirmed> confirmed;  // by device + "/" + db
  // When each followed store last caught up with its server in offer_current_policy() (max:
  // its catch-up failed this pass).
  std::map<const ListingStore*, std::chrono::steady_clock::time_point> last_catch_up;
  uint64_t pass = 0;
  bool compare_all = true;  // this pass skips nothing
  // Set by run_forever: a pass stops starting databases once it is set (those in flight
  // finish), so the process exits promptly at SIGTERM.
  const std::atomic<bool>* stop = nullptr;
  bool stopping() const { return stop && stop->load(); }
  DbReplicationStats stats;
  // One more of a pass's stat, also sent to StatsD under Swift's name for it.
  void count(uint64_t DbReplicationStats::*stat, std::string_view name) {
    ++(stats.*stat);
    config.statsd.increment(name);
  }

  // Databases in flight and the pacing of their starts.
  int in_flight = 0;
  std::unique_ptr<net::steady_timer> slot_freed;
  std::chrono::steady_clock::time_point next_start;

  Impl(DbReplicatorConfig c, common::io::Fs& f, std::unique_ptr<ring::Ring> r)
      : config(std::move(c)),
        fs(f),
        ring(std::move(r)),
        my_ips(ring::local_ips(config.bind_ip)),
        user_agent(config.kind() + "-replicator " + std::to_string(::getpid())),
        stores(config.devices, config.type, f) {}

  common::http::ClientOptions timeouts() const {
    return {.conn_timeout = config.conn_timeout, .node_timeout = config.node_timeout};
  }

  net::awaitable<void> replicate_device(const std::string& device, const DbPassFilter& filter);
  net::awaitable<void> replicate_db(ListingStore& store, std::string device, std::string db,
                                    DbInfo info);
  // `self`: this node's device holding the replica (its server takes what the peer has
  // newer), or nullptr.
  net::awaitable<PeerResult> sync_with(ListingStore& store, const ring::Device& peer,
                                       uint32_t part, const std::string& db, const DbInfo& info,
                                       const ring::Device* self);
  net::awaitable<PeerResult> send_rows(ListingStore& store, const ring::Device& peer,
                                       uint32_t part, const std::string& db, const DbInfo& info,
                                       int64_t point);
  net::awaitable<bool> remove_handoff(const ring::Device& self, const std::string& db,
                                      const DbInfo& info);
  // `info` replaced by this replica's current info when its storage policy changed since
  // `info` was read (see replicate_db).
  void offer_current_policy(ListingStore& store, const std::string& db, DbInfo& info);
  // Swift's _post_replicate_hook: rows of a container in a policy other than the container's
  // (both sides of a split-brain PUT took writes) are queued for the container reconciler.
  // False when some rows could not be queued (the next pass tries again).
  net::awaitable<bool> queue_misplaced(ListingStore& store, const ring::Device* self,
                                       const std::string& db, const DbInfo& info,
                                       bool replicated);
  // Queue entries for `rows` into the queue container `queue` (.misplaced_objects/<hour>),
  // on a majority of its replicas.
  net::awaitable<bool> feed_reconciler(const std::string& queue,
                                       const std::vector<ObjectRecord>& rows);
  // A Swift server without the replica: made with a backend PUT (see sync_with).
  net::awaitable<bool> create_on_swift(const ring::Device& peer, uint32_t part,
                                       const DbInfo& info, const std::string& where);
  // A REPLICATE of `body` to `dev` for database `db`'s hash under partition `part`.
  net::awaitable<Result<common::http::SimpleResponse>> replicate(const ring::Device& dev,
                                                                 const std::string& part,
                                                                 const std::string& db,
                                                                 const std::string& body);
  void write_recon();
};

net::awaitable<Result<common::http::SimpleResponse>> DbReplicator::Impl::replicate(
    const ring::Device& dev, const std::string& part, const std::string& db,
    const std::string& body) {
  common::http::ClientRequest request;
  request.method = "REPLICATE";
  request.target = "/" + common::http::quote(dev.device) + "/" + part + "/" +
                   db.substr(db.find('/') + 1);
  request.headers.set("User-Agent", user_agent);
  request.headers.set("Content-Type", "application/json");
  request.content_length = body.size();
  co_return co_await common::http::simple_request(*pool, timeouts(), dev.replication_ip,
                                                  static_cast<uint16_t>(dev.replication_port),
                                                  std::move(request), body, kMaxAnswer);
}

net::awaitable<PeerResult> DbReplicator::Impl::send_rows(ListingStore& store,
                                                         const ring::Device& peer, uint32_t part,
                                                         const std::string& db,
                                                         const DbInfo& info, int64_t point) {
  count(&DbReplicationStats::diff, "diffs");
  const std::string part_str = std::to_string(part);
  const size_t per_diff = static_cast<size_t>(config.per_diff);
  auto next_batch = [&](int64_t after) -> Result<std::string> {
    if (config.type == DbType::kContainer) {
      auto rows = store.objects_since(db, after, per_diff);
      if (!rows.ok()) return rows.status();
      if (rows->empty()) return std::string();
      point = rows->back().rowid;
      stats.rows_sent += rows->size();
      return merge_items_request(*rows, info.id);
    }
    auto rows = store.containers_since(db, after, per_diff);
    if (!rows.ok()) return rows.status();
    if (rows->empty()) return std::string();
    point = rows->back().rowid;
    stats.rows_sent += rows->size();
    return merge_items_request(*rows, info.id);
  };
  auto sent_ok = [&](const Result<common::http::SimpleResponse>& r) {
    if (!r.ok()) {
      APUS_LOG_ERROR("ERROR reading HTTP response from " + peer.replication_ip + ":" +
                     std::to_string(peer.replication_port) + "/" + peer.device + ": " +
                     r.status().to_string());
      return false;
    }
    if (r->head.status < 200 || r->head.status >= 300) {
      APUS_LOG_ERROR("ERROR Bad response " + std::to_string(r->head.status) + " from " +
                     peer.replication_ip + ":" + std::to_string(peer.replication_port));
      return false;
    }
    return true;
  };
  auto batch = next_batch(point);
  for (int diffs = 0; batch.ok() && !batch->empty() && diffs < config.max_diffs; ++diffs) {
    if (!sent_ok(co_await replicate(peer, part_str, db, *batch))) co_return PeerResult::kFailed;
    batch = next_batch(point);
  }
  if (!batch.ok()) {
    APUS_LOG_ERROR("ERROR reading rows of " + db + ": " + batch.status().to_string());
    co_return PeerResult::kFailed;
  }
  if (!batch->empty()) {
    APUS_LOG_DEBUG("Synchronization for " + db + " has fallen more than " +
                   std::to_string(config.max_diffs * config.per_diff) +
                   " rows behind; moving on and will try again next pass.");
    count(&DbReplicationStats::diff_capped, "diff_caps");
    co_return PeerResult::kFailed;
  }
  auto syncs = store.get_syncs(db);
  if (!syncs.ok()) co_return PeerResult::kFailed;
  if (!sent_ok(co_await replicate(peer, part_str, db, merge_syncs_request(*syncs)))) {
    co_return PeerResult::kFailed;
  }
  co_return PeerResult::kInStep;
}

net::awaitable<PeerResult> DbReplicator::Impl::sync_with(ListingStore& store,
                                                         const ring::Device& peer, uint32_t part,
                                                         const std::string& db,
                                                         const DbInfo& info,
                                                         const ring::Device* self) {
  const std::string part_str = std::to_string(part);
  const std::string where = peer.replication_ip + ":" + std::to_string(peer.replication_port) +
                            "/" + peer.device;
  const bool several_policies = config.swift.policies.all().size() > 1;
  auto r = co_await replicate(peer, part_str, db, sync_request(info, config.type, several_policies));
  if (!r.ok()) {
    APUS_LOG_ERROR("ERROR reading HTTP response from " + where + ": " + r.status().to_string());
    co_return PeerResult::kFailed;
  }
  const int status = r->head.status;
  if (status == 507) {
    APUS_LOG_ERROR("ERROR Remote drive not mounted " + where);
    co_return PeerResult::kUnmounted;
  }
  if (status == 404) {
    if (!r->head.headers.get(kApusDbReplicationHeader)) {
      // A Swift server takes a new replica only as a whole SQLite file. Apus makes it with the
      // backend PUT the proxy would send instead; the "sync" that follows brings the metadata
      // (with its own timestamps) and the timestamps, and then every row goes.
      if (!co_await create_on_swift(peer, part, info, where)) co_return PeerResult::kFailed;
      r = co_await replicate(peer, part_str, db, sync_request(info, config.type, several_policies));
      if (!r.ok() || r->head.status < 200 || r->head.status >= 300) {
        APUS_LOG_ERROR("ERROR syncing " + db + " with " + where + " after making it there");
        co_return PeerResult::kFailed;
      }
      count(&DbReplicationStats::created, "rsyncs");
      co_return co_await send_rows(store, peer, part, db, info, -1);
    }
    auto made = co_await replicate(peer, part_str, db, create_db_request(info, config.type));
    if (!made.ok() || (made->head.status != 201 && made->head.status != 202)) {
      APUS_LOG_ERROR("ERROR creating " + db + " on " + where + ": " +
                     (made.ok() ? std::to_string(made->head.status) : made.status().to_string()));
      co_return PeerResult::kFailed;
    }
    count(&DbReplicationStats::created, "rsyncs");
    co_return co_await send_rows(store, peer, part, db, info, -1);
  }
  if (status < 200 || status >= 300) {
    APUS_LOG_ERROR("ERROR Bad response " + std::to_string(status) + " from " + where);
    co_return PeerResult::kFailed;
  }
  auto remote = parse_sync_answer(r->body);
  if (!remote.ok()) {
    APUS_LOG_ERROR("ERROR bad sync answer from " + where + ": " + remote.status().to_string());
    co_return PeerResult::kFailed;
  }
  // The peer's newer metadata, timestamps or better policy come here too (Swift's replicator
  // merges them into its own database), through our own server.
  DbInfo merged = info;
  if (self && merge_remote_info(merged, config.type, *remote)) {
    auto m = co_await replicate(*self, info.partition, db, merge_info_request(r->body));
    if (!m.ok() || m->head.status != 204) {
      APUS_LOG_WARNING("cannot merge " + where + "'s info of " + db + " here: " +
                       (m.ok() ? std::to_string(m->head.status) : m.status().to_string()));
    }
  }
  if (remote->point >= info.max_row) {
    count(&DbReplicationStats::no_change, "no_changes");
    co_return PeerResult::kInStep;
  }
  if (remote->hash == info.hash) {
    count(&DbReplicationStats::hashmatch, "hashmatches");
    co_return PeerResult::kInStep;
  }
  co_return co_await send_rows(store, peer, part, db, info, remote->point);
}

net::awaitable<bool> DbReplicator::Impl::create_on_swift(const ring::Device& peer, uint32_t part,
                                                         const DbInfo& info,
                                                         const std::string& where) {
  common::http::ClientRequest request;
  request.method = "PUT";
  std::string path = "/" + info.account;
  if (config.type == DbType::kContainer) path += "/" + info.container;
  request.target = "/" + common::http::quote(peer.device) + "/" + std::to_string(part) +
                   common::http::quote(path);
  request.headers.set("User-Agent", user_agent);
  // The replica's own put timestamp (a newer one would look like a new PUT), no account
  // update, reserved names allowed.
  request.headers.set("X-Timestamp", common::timestamp_or_zero(info.put_timestamp).internal());
  request.headers.set("X-Backend-Allow-Reserved-Names", "true");
  if (config.type == DbType::kContainer) {
    request.headers.set("X-Backend-Storage-Policy-Index",
                        std::to_string(info.storage_policy_index));
  }
  request.content_length = 0;
  auto r = co_await common::http::simple_request(*pool, timeouts(), peer.replication_ip,
                                                 static_cast<uint16_t>(peer.replication_port),
                                                 std::move(request), {}, kMaxAnswer);
  if (!r.ok() || (r->head.status != 201 && r->head.status != 202)) {
    APUS_LOG_ERROR("ERROR making " + path + " on " + where + ": " +
                   (r.ok() ? std::to_string(r->head.status) : r.status().to_string()));
    co_return false;
  }
  co_return true;
}

namespace {

using common::kMisplacedObjectsAccount;

// The queue container of a misplaced row: by its newest timestamp (Swift feeds the reconciler
// by the row's meta time). Empty for a row whose created_at is unreadable.
std::string queue_container(const ObjectRecord& row) {
  auto ts = common::decode_timestamps(row.created_at);
  if (!ts.ok()) return {};
  return common::misplaced_container_name(ts->t3 ? *ts->t3 : ts->t2 ? *ts->t2 : ts->t1);
}

// The queue row of a misplaced object row: its place, its created_at as timestamp and etag,
// its operation as content type.
ObjectRecord queue_entry(const DbInfo& info, const ObjectRecord& row) {
  ObjectRecord q;
  q.name = common::misplaced_entry_name(row.storage_policy_index, info.account, info.container,
                                        row.name);
  q.created_at = row.created_at;
  q.etag = row.created_at;
  q.content_type = std::string(row.deleted ? common::kMisplacedDeleteType
                                           : common::kMisplacedPutType);
  q.size = 0;
  q.storage_policy_index = 0;
  return q;
}

}  // namespace

net::awaitable<bool> DbReplicator::Impl::feed_reconciler(const std::string& queue,
                                                         const std::vector<ObjectRecord>& rows) {
  auto nodes = ring->get_nodes(kMisplacedObjectsAccount, queue);
  if (!nodes.ok()) co_return false;
  const std::string body = object_rows_body(rows);
  size_t taken = 0;
  for (const ring::Node& node : nodes->nodes) {
    const ring::Device& dev = *node.device;
    common::http::ClientRequest request;
    request.method = "UPDATE";  // rows merged, the queue container made if missing
    request.target = "/" + common::http::quote(dev.device) + "/" +
                     std::to_string(nodes->partition) +
                     common::http::quote("/" + std::string(kMisplacedObjectsAccount) + "/" + queue);
    request.headers.set("User-Agent", user_agent);
    request.headers.set("X-Timestamp", common::Timestamp::now().internal());
    request.headers.set("X-Backend-Storage-Policy-Index", "0");
    request.headers.set("Content-Type", "application/json");
    request.content_length = body.size();
    auto r = co_await common::http::simple_request(*pool, timeouts(), dev.replication_ip,
                                                   static_cast<uint16_t>(dev.replication_port),
                                                   std::move(request), body, kMaxAnswer);
    if (r.ok() && r->head.status >= 200 && r->head.status < 300) {
      ++taken;
    } else {
      APUS_LOG_WARNING("Failed to queue " + std::to_string(rows.size()) +
                       " misplaced objects in " + std::string(kMisplacedObjectsAccount) + "/" + queue +
                       " on " + dev.replication_ip + ":" + std::to_string(dev.replication_port) +
                       "/" + dev.device + ": " +
                       (r.ok() ? std::to_string(r->head.status) : r.status().to_string()));
    }
  }
  co_return taken > nodes->nodes.size() / 2;
}

net::awaitable<bool> DbReplicator::Impl::queue_misplaced(ListingStore& store,
                                                         const ring::Device* self,
                                                         const std::string& db,
                                                         const DbInfo& info, bool replicated) {
  if (config.type != DbType::kContainer || info.account == kMisplacedObjectsAccount || !self) {
    co_return true;
  }
  // Rows of another policy exist only where the policy stats name one.
  const bool several =
      std::any_of(info.policy_stats.begin(), info.policy_stats.end(),
                  [&](const auto& p) { return p.first != info.storage_policy_index; });
  if (!several) co_return true;
  int64_t point = info.reconciler_sync_point, queued_to = point;
  bool errors = false;
  while (point < info.max_row) {
    auto rows = store.objects_since(db, point, static_cast<size_t>(config.per_diff));
    if (!rows.ok()) {
      errors = true;
      break;
    }
    if (rows->empty()) break;
    std::map<std::string, std::vector<ObjectRecord>> by_queue;
    for (const ObjectRecord& row : *rows) {
      if (row.storage_policy_index == info.storage_policy_index) continue;
      std::string queue = queue_container(row);
      if (queue.empty()) continue;  // a timestamp no reconciler could place
      by_queue[queue].push_back(queue_entry(info, row));
    }
    for (const auto& [queue, entries] : by_queue) {
      if (co_await feed_reconciler(queue, entries)) {
        stats.misplaced_queued += entries.size();
      } else {
        errors = true;
      }
    }
    point = rows->back().rowid;
    if (!errors) queued_to = point;  // the point only moves past rows queued everywhere before
  }
  if (queued_to > info.reconciler_sync_point) {
    APUS_LOG_INFO("Queued misplaced object rows of " + db + " up to row " +
                  std::to_string(queued_to) + " for the container reconciler");
  }
  // As Swift: the point moves only after a replication most peers took, so a row another
  // replica has too is queued by it as well, never by nobody.
  if (queued_to > info.reconciler_sync_point && replicated) {
    auto r = co_await replicate(*self, info.partition, db, reconciler_sync_request(queued_to));
    if (!r.ok() || r->head.status != 204) {
      APUS_LOG_WARNING("cannot record the reconciler sync point of " + db + ": " +
                       (r.ok() ? std::to_string(r->head.status) : r.status().to_string()));
    }
  }
  co_return !errors;
}

net::awaitable<bool> DbReplicator::Impl::remove_handoff(const ring::Device& self,
                                                        const std::string& db,
                                                        const DbInfo& info) {
  auto r = co_await replicate(self, info.partition, db, remove_db_request(info.id, info.max_row));
  if (!r.ok() || r->head.status != 204) {
    // 409: rows came meanwhile; the next pass sends them and tries again.
    APUS_LOG_DEBUG("Not deleting db " + db + " (" +
                   (r.ok() ? std::to_string(r->head.status) : r.status().to_string()) + ")");
    co_return false;
  }
  ++stats.remove;
  config.statsd.increment("removes." + self.device);
  co_return true;
}

void DbReplicator::Impl::offer_current_policy(ListingStore& store, const std::string& db,
                                              DbInfo& info) {
  // The follower sees the server's writes as of its last catch-up: at most one every 10 ms
  // per store, so a pass over many containers of several policies pays for a hundred a second
  // at most. A store whose catch-up failed is not tried again this pass (one warning, not
  // one per database and peer); its replicas are offered what was read, as Swift offers.
  const auto now = std::chrono::steady_clock::now();
  auto& last = last_catch_up[&store];
  if (last == std::chrono::steady_clock::time_point::max()) return;
  if (now - last >= std::chrono::milliseconds(10)) {
    if (Status s = store.catch_up(); !s.ok()) {
      APUS_LOG_WARNING("listing store catch-up failed, replicas of this pass offered as read: " +
                       s.to_string());
      last = std::chrono::steady_clock::time_point::max();
      return;
    }
    last = now;
  }
  auto current = store.get_info(db);
  if (current.ok() && *current && (*current)->storage_policy_index != info.storage_policy_index) {
    info = std::move(**current);
  }
}

net::awaitable<void> DbReplicator::Impl::replicate_db(ListingStore& store, std::string device,
                                                      std::string db, DbInfo info) {
  auto state = ring->state();
  auto part = state->get_part({config.swift.hash_path_prefix, config.swift.hash_path_suffix},
                              info.account,
                              config.type == DbType::kContainer ? info.container : "");
  if (!part.ok()) {
    APUS_LOG_ERROR("ERROR reading db " + db + ": " + part.status().to_string());
    count(&DbReplicationStats::failure, "failures");
    co_return;
  }
  std::vector<ring::Node> primaries;
  state->get_part_nodes(*part, &primaries);
  const ring::Device* self = nullptr;
  size_t self_index = primaries.size();
  for (size_t i = 0; i < primaries.size(); ++i) {
    const ring::Device& dev = *primaries[i].device;
    if (dev.device == device && ring::is_local_device(my_ips, config.bind_port, dev)) {
      self = &dev;
      self_index = i;
    }
  }
  const bool should_be_here = self && info.partition == std::to_string(*part);
  if (info.partition != std::to_string(*part)) {
    // Names quoted, as Swift logs them: a client chose them.
    APUS_LOG_ERROR("Found " + db + " for /" + common::http::quote(info.account) +
                   (config.type == DbType::kContainer ? "/" + common::http::quote(info.container)
                                                      : "") +
                   " when it should be on partition " + std::to_string(*part) +
                   "; will replicate out and remove.");
  }
  if (!self) {  // a handoff: this device is found among the ring's devices for the removal
    for (const auto& dev : state->devs()) {
      if (dev && dev->device == device && ring::is_local_device(my_ips, config.bind_port, *dev)) {
        self = &*dev;
      }
    }
  }
  // The peers: the primaries after this one in ring order, then those before it (Swift's
  // footnote [1]); all of them for a handoff.
  std::vector<const ring::Device*> peers;
  for (size_t k = 1; k <= primaries.size(); ++k) {
    const size_t i = (self_index == primaries.size() ? k - 1 : self_index + k) % primaries.size();
    if (i == self_index) continue;
    peers.push_back(primaries[i].device);
  }
  count(&DbReplicationStats::attempted, "attempts");
  ring::HandoffIterator more = state->get_more_nodes(*part);
  int successes = 0;
  bool all_ok = true;
  // Swift's replicator offers every peer the info it read before the first. While a split
  // brain settles, this replica's policy can change meanwhile (a peer's answer, another
  // replica's sync), and offering the policy it had can turn a peer back to the losing one,
  // which takes "now" as its status-change time and so beats replicas that took the winning
  // policy earlier: two passes can then leave the primaries disagreeing (Swift's probe tests
  // saw it here; bench/policy_convergence.py, random interleavings of two passes over four
  // nodes: 0.4-19% of runs by layout). A container replica whose policy changed offers the
  // current one instead (0-0.16% in the same model); nothing else is read again, so replicas
  // of one policy are offered exactly what Swift offers.
  const bool policies_may_differ =
      config.type == DbType::kContainer && config.swift.policies.all().size() > 1;
  for (size_t i = 0; i < peers.size(); ++i) {
    if (policies_may_differ) offer_current_policy(store, db, info);
    PeerResult result = co_await sync_with(store, *peers[i], *part, db, info, self);
    if (result == PeerResult::kInStep) {
      ++successes;
      count(&DbReplicationStats::success, "successes");
      continue;
    }
    all_ok = false;
    count(&DbReplicationStats::failure, "failures");
    if (result == PeerResult::kUnmounted) {
      ring::Node next;
      if (more.next(&next)) {
        peers.push_back(next.device);
      } else {
        APUS_LOG_ERROR("ERROR There are not enough handoff nodes to reach replica count for "
                       "partition " + std::to_string(*part));
      }
    }
  }
  const bool queued = co_await queue_misplaced(
      store, self, db, info, static_cast<size_t>(successes) >= peers.size() / 2 + 1);
  const std::string key = device + "/" + db;
  if (!should_be_here) {
    const bool enough = config.handoff_delete > 0 ? successes >= config.handoff_delete
                                                  : !peers.empty() && all_ok;
    if (enough && self) {
      if (co_await remove_handoff(*self, db, info)) confirmed.erase(key);
    }
    co_return;
  }
  if (all_ok && queued) {
    confirmed[key] = Confirmed{fingerprint(info), now_seconds(), pass};
  } else {
    confirmed.erase(key);
  }
}

net::awaitable<void> DbReplicator::Impl::replicate_device(const std::string& device,
                                                          const DbPassFilter& filter) {
  ListingStore* store = stores.follow(device);
  if (!store) co_return;
  // What a crash left in <device>/tmp (a database a Swift replicator sent by rsync and never
  // completed), as Swift's DB replicators remove it each pass.
  fs.remove_older_than(device_tmp_dir(config.devices, device),
                       std::chrono::seconds(static_cast<int64_t>(config.reclaim_age)));
  auto executor = co_await net::this_coro::executor;
  const double now = now_seconds();
  const auto pace = config.databases_per_second > 0
                        ? std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                              std::chrono::duration<double>(1.0 / config.databases_per_second))
                        : std::chrono::steady_clock::duration::zero();
  std::string after;
  for (;;) {
    auto page = store->list_infos(after, kInfoPage);
    if (!page.ok()) {
      APUS_LOG_ERROR("ERROR walking the " + config.kind() + " store of " + device + ": " +
                     page.status().to_string());
      co_return;
    }
    if (page->empty()) co_return;
    after = page->back().first;
    for (auto& [db, info] : *page) {
      if (stopping()) co_return;
      if (!filter.partitions.empty() && !filter.partitions.contains(info.partition)) continue;
      // Deleted and empty past reclaim_age: the server's reclaimer removes it (Swift's
      // replicator deletes it without replicating).
      auto deleted_at = common::Timestamp::parse(info.delete_timestamp);
      if (info.is_deleted(config.type) && info.empty(config.type) && deleted_at.ok() &&
          deleted_at->seconds() < now - config.reclaim_age) {
        continue;
      }
      const std::string key = device + "/" + db;
      auto known = confirmed.find(key);
      if (known != confirmed.end()) known->second.seen_pass = pass;
      if (!compare_all && known != confirmed.end() &&
          now - known->second.at < config.recheck_interval &&
          known->second.fingerprint == fingerprint(info)) {
        ++stats.skipped;
        continue;
      }
      // Wait for a free slot and for the pace.
      while (in_flight >= config.concurrency) {
        slot_freed->expires_at(net::steady_timer::time_point::max());
        (void)co_await slot_freed->async_wait(net::as_tuple(net::use_awaitable));
      }
      const auto now_steady = std::chrono::steady_clock::now();
      if (next_start > now_steady) {
        net::steady_timer wait(executor, next_start);
        (void)co_await wait.async_wait(net::as_tuple(net::use_awaitable));
      }
      next_start = std::max(next_start, now_steady) + pace;
      ++in_flight;
      common::spawn_logged(
          executor,
          [this, store, device, db = db, info = std::move(info)]() mutable
          -> net::awaitable<void> {
            const auto began = std::chrono::steady_clock::now();
            co_await replicate_db(*store, std::move(device), std::move(db), std::move(info));
            config.statsd.timing_since("timing", began);
            --in_flight;
            slot_freed->cancel();
          },
          "replicating a database", [this] {
            --in_flight;
            slot_freed->cancel();
          });
    }
  }
}

void DbReplicator::Impl::write_recon() {
  const double now = now_seconds();
  boost::json::object s;
  s["attempted"] = stats.attempted;
  s["success"] = stats.success;
  s["failure"] = stats.failure;
  s["no_change"] = stats.no_change;
  s["hashmatch"] = stats.hashmatch;
  s["diff"] = stats.diff;
  s["diff_capped"] = stats.diff_capped;
  s["remove"] = stats.remove;
  s["rsync"] = 0;
  s["remote_merge"] = 0;
  s["ts_repl"] = 0;
  s["empty"] = 0;
  s["deferred"] = 0;
  s["start"] = now - stats.seconds;
  boost::json::object recon;
  recon["replication_stats"] = s;
  recon["replication_time"] = stats.seconds;
  recon["replication_last"] = now;
  Status written = common::dump_recon_cache(
      config.recon_cache_path + "/" + config.kind() + ".recon", boost::json::serialize(recon));
  if (!written.ok()) APUS_LOG_ERROR("cannot write the recon cache: " + written.to_string());
}

DbReplicator::DbReplicator(DbReplicatorConfig config, common::io::Fs& fs,
                           std::unique_ptr<ring::Ring> ring)
    : impl_(std::make_unique<Impl>(std::move(config), fs, std::move(ring))) {}

DbReplicator::~DbReplicator() = default;

DbReplicationStats DbReplicator::run_once(const DbPassFilter& filter) {
  Impl& impl = *impl_;
  impl.stats = DbReplicationStats();
  ++impl.pass;
  const auto began = std::chrono::steady_clock::now();
  std::vector<std::string> devices;
  auto state = impl.ring->state();
  for (const auto& dev : state->devs()) {
    if (dev && ring::is_local_device(impl.my_ips, impl.config.bind_port, *dev)) {
      devices.push_back(dev->device);
    }
  }
  std::sort(devices.begin(), devices.end());
  devices.erase(std::unique(devices.begin(), devices.end()), devices.end());
  if (devices.empty()) {
    APUS_LOG_ERROR("Can't find itself " + impl.config.bind_ip + " with port " +
                   std::to_string(impl.config.bind_port) + " in ring file, not replicating");
  }
  APUS_LOG_INFO("Beginning replication run");
  net::io_context ioc(1);
  // The pool's sockets and the timer belong to `ioc`: they go before it does.
  impl.pool = std::make_unique<common::http::ConnectionPool>(impl.timeouts());
  impl.slot_freed = std::make_unique<net::steady_timer>(ioc);
  impl.next_start = std::chrono::steady_clock::now();
  common::spawn_logged(ioc.get_executor(), [&]() -> net::awaitable<void> {
    for (const std::string& device : devices) {
      if (impl.stopping()) break;
      if (!filter.devices.empty() && !filter.devices.contains(device)) continue;
      Status mounted = common::io::check_device(impl.fs, impl.config.devices, device,
                                                impl.config.mount_check);
      if (!mounted.ok()) {
        APUS_LOG_WARNING("Skipping: " + mounted.to_string());
        continue;
      }
      co_await impl.replicate_device(device, filter);
    }
  }, "replication pass");
  ioc.run();  // returns once the walk and every database it started are done
  impl.slot_freed.reset();
  impl.pool.reset();
  const bool whole = filter.devices.empty() && filter.partitions.empty() && !impl.stopping();
  impl.compare_all = impl.compare_all && !whole;
  if (whole) {
    std::erase_if(impl.confirmed, [&](const auto& e) { return e.second.seen_pass != impl.pass; });
  }
  // Keyed by store: a store reopened after a failed catch-up is a new key; a pass's worth at
  // most.
  impl.last_catch_up.clear();
  DbReplicationStats& st = impl.stats;
  st.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  char line[256];
  std::snprintf(line, sizeof line, "Attempted to replicate %llu dbs in %.5f seconds (%.5f/s)",
                static_cast<unsigned long long>(st.attempted), st.seconds,
                static_cast<double>(st.attempted) / (st.seconds + 0.0000001));
  APUS_LOG_INFO(line);
  APUS_LOG_INFO("Removed " + std::to_string(st.remove) + " dbs");
  APUS_LOG_INFO(std::to_string(st.success) + " successes, " + std::to_string(st.failure) +
                " failures");
  APUS_LOG_INFO("diff:" + std::to_string(st.diff) + " diff_capped:" +
                std::to_string(st.diff_capped) + " hashmatch:" + std::to_string(st.hashmatch) +
                " no_change:" + std::to_string(st.no_change) + " created:" +
                std::to_string(st.created) + " skipped_unchanged:" + std::to_string(st.skipped) +
                " rows_sent:" + std::to_string(st.rows_sent));
  if (whole) impl.write_recon();
  return st;
}

void DbReplicator::run_forever(const std::atomic<bool>& stop) {
  impl_->stop = &stop;
  common::run_passes(impl_->config.interval, stop, [this] { (void)run_once(); });
}

}  // namespace apus::container
