#include "container-server/db_server.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <random>
#include <thread>

#include "common/constraints.h"
#include "common/http/headers.h"
#include "common/http/server_config.h"
#include "common/http/swob.h"
#include "common/http/url.h"
#include "common/listing_format.h"
#include "common/log/log.h"
#include "common/process.h"
#include "common/recon.h"
#include "common/statsd.h"

namespace apus::container {

namespace net = boost::asio;
using common::Result;
using common::Status;
using common::Timestamp;
using common::http::OrRefusal;
using common::http::Request;
using common::http::Response;

// ---- configuration ---------------------------------------------------------------------------

Result<DbServerConfig> DbServerConfig::from_config(const common::Config& conf, DbType type) {
  DbServerConfig c;
  c.type = type;
  std::string app = c.server_type();
  if (auto pipeline = conf.pipeline(); pipeline.ok() && !pipeline->empty()) app = pipeline->back();
  common::Section s = conf.section("app:" + app);

  c.server.server_type = c.server_type();
  c.server.bind_ip = s.get_string("bind_ip", "0.0.0.0");
  int64_t port = type == DbType::kContainer ? 6201 : 6202;
  APUS_ASSIGN_OR_RETURN(port, s.get_int("bind_port", port));
  c.server.bind_port = static_cast<uint16_t>(port);
  int64_t workers = std::max(1u, std::thread::hardware_concurrency());
  if (s.get_string("workers", "auto") != "auto") {
    APUS_ASSIGN_OR_RETURN(workers, s.get_int("workers", workers));
  }
  c.server.workers = static_cast<int>(std::max<int64_t>(1, workers));
  int64_t backlog = 4096;
  APUS_ASSIGN_OR_RETURN(backlog, s.get_int("backlog", 4096));
  c.server.backlog = static_cast<int>(backlog);
  APUS_ASSIGN_OR_RETURN(c.server.reuse_port, s.get_bool("reuse_port", false));
  APUS_ASSIGN_OR_RETURN(c.server.client_timeout, s.get_double("client_timeout", 60));
  APUS_RETURN_IF_ERROR(common::http::read_runtime_options(s, &c.server));

  c.devices = s.get_string("devices", "/srv/node");
  APUS_ASSIGN_OR_RETURN(c.mount_check, s.get_bool("mount_check", true));
  auto reserve = common::io::FreeSpaceReserve::parse(s.get_string("fallocate_reserve", "1%"));
  if (!reserve.ok()) return s.invalid("fallocate_reserve", reserve.status().message());
  c.fallocate_reserve = *reserve;
  APUS_ASSIGN_OR_RETURN(c.node_timeout, s.get_double("node_timeout", 3));
  APUS_ASSIGN_OR_RETURN(c.conn_timeout, s.get_double("conn_timeout", 0.5));
  if (type == DbType::kContainer) {
    APUS_ASSIGN_OR_RETURN(c.allow_versions, s.get_bool("allow_versions", false));
    c.allowed_sync_hosts = s.get_list("allowed_sync_hosts", "127.0.0.1");
    std::string mode = s.get_string("account_update_mode", "sync");
    if (mode != "sync" && mode != "async") {
      return s.invalid("account_update_mode", "must be sync or async");
    }
    c.account_update_async = mode == "async";
  }
  APUS_ASSIGN_OR_RETURN(c.sync_writes, s.get_bool("db_sync_writes", true));
  APUS_ASSIGN_OR_RETURN(c.sync_object_rows, s.get_bool("db_sync_object_rows", false));
  int64_t threads = 2;
  APUS_ASSIGN_OR_RETURN(threads, s.get_int("threads_per_disk", 2));
  c.threads_per_disk = static_cast<int>(std::max<int64_t>(1, threads));
  std::string replication = s.get_string("replication_server", "");
  c.replication_server = replication.empty() || common::config_true_value(replication);
  c.log_name = s.get_string("log_name", c.server_type());

  c.swift_dir = s.get_string("swift_dir", "/etc/swift");
  auto swift = common::load_swift_conf(c.swift_dir + "/swift.conf");
  if (!swift.ok()) return swift.status();
  c.swift = std::move(*swift);
  // The deprecated server option wins over swift.conf's, as in Swift.
  c.auto_create_account_prefix = s.get_string("auto_create_account_prefix",
                                              c.swift.constraints.auto_create_account_prefix);
  if (c.auto_create_account_prefix.empty()) {
    c.auto_create_account_prefix = c.swift.constraints.auto_create_account_prefix;
  }
  return c;
}

std::string DbServerConfig::server_type() const {
  return type == DbType::kContainer ? "container-server" : "account-server";
}

// ---- devices ---------------------------------------------------------------------------------

DbDevices::DbDevices(const DbServerConfig& config, common::io::Fs& fs, common::Metrics* metrics)
    : config_(config),
      fs_(fs),
      metrics_(metrics),
      opener_(&ListingStore::open),
      pools_(std::make_unique<common::io::DevicePools>(
          "db", config_.threads_per_disk,
          [this](const std::string& device) { return check_device(device); }, metrics_)) {}

DbDevices::~DbDevices() {
  // Pools first: their queued jobs may still use a store.
  pools_.reset();
  common::MutexLock lock(&mutex_);
  stores_.clear();
}

boost::asio::awaitable<common::io::BlockingPool*> DbDevices::pool_for(const std::string& device) {
  return pools_->checked(device);
}

common::io::BlockingPool& DbDevices::pool(const std::string& device) { return pools_->get(device); }

size_t DbDevices::pool_count_for_test() { return pools_->size(); }

// Only a check that passed makes a slot: names that are not devices make none.
Status DbDevices::check_device(const std::string& device) {
  Status s = common::io::check_device(fs_, config_.devices, device, config_.mount_check);
  if (s.ok()) {
    slot(device).device_ok_ns.store(common::steady_now_ns(), std::memory_order_relaxed);
  }
  return s;
}

Status DbDevices::check_free_space(const std::string& device) {
  Status s =
      common::io::check_free_space(fs_, config_.devices, device, config_.fallocate_reserve);
  if (s.ok()) {
    slot(device).space_ok_ns.store(common::steady_now_ns(), std::memory_order_relaxed);
  }
  return s;
}

ListingStore* DbDevices::checked_store(const std::string& device, bool space) {
  StoreSlot* s = find_slot(device);
  if (s == nullptr) return nullptr;
  const int64_t since =
      common::steady_now_ns() - std::chrono::nanoseconds(kCheckedFor).count();
  if (s->device_ok_ns.load(std::memory_order_relaxed) <= since) return nullptr;
  if (space && s->space_ok_ns.load(std::memory_order_relaxed) <= since) return nullptr;
  return s->ready.load(std::memory_order_acquire);
}

std::string DbDevices::store_dir(const std::string& device) const {
  return config_.devices + "/" + device +
         (config_.type == DbType::kContainer ? "/apus-containers" : "/apus-accounts");
}

bool DbDevices::has_store(const std::string& device) {
  auto st = fs_.stat(store_dir(device));
  return st.ok() && st->exists;
}

namespace {

// A ListingStore that records how long each call took, by phase, in apus_db_phase_seconds.
class TimedStore final : public ListingStore {
 public:
  TimedStore(std::unique_ptr<ListingStore> inner, common::Metrics& metrics, StoreOptions options)
      : ListingStore(options), inner_(std::move(inner)) {
    auto phase = [&](const char* name) {
      return metrics.histogram("apus_db_phase_seconds",
                               "Time spent in each listing-store operation", {{"phase", name}},
                               common::Metrics::latency_buckets());
    };
    info_read_ = phase("info_read");
    info_write_ = phase("info_write");
    row_merge_ = phase("row_merge");
    // Object rows merged without waiting for the WAL's fsync (db_sync_object_rows = false):
    // on a disk pool thread, on the event loop's thread (Waiting::kNever), or tried there and
    // given up (Unavailable: then merged on the pool, timed again there).
    row_merge_unsynced_ = phase("row_merge_unsynced");
    row_merge_in_loop_ = phase("row_merge_in_loop");
    row_merge_deferred_ = phase("row_merge_deferred");
    listing_ = phase("listing");
  }
  Result<std::optional<DbInfo>> get_info(std::string_view db) override {
    common::ScopedTimer t(info_read_);
    return inner_->get_info(db);
  }
  Result<std::vector<std::pair<std::string, DbInfo>>> list_infos(std::string_view after,
                                                                 size_t limit) override {
    return inner_->list_infos(after, limit);
  }
  Status update_info(std::string_view db, const InfoUpdate& fn) override {
    common::ScopedTimer t(info_write_);
    return inner_->update_info(db, fn);
  }
  Result<int64_t> reclaim(std::string_view db, const std::string& age) override {
    return inner_->reclaim(db, age);
  }
  Status merge_objects(std::string_view db, std::vector<ObjectRecord> records,
                       const SyncPoint* source, WalSync sync, Waiting waiting) override {
    if (waiting == Waiting::kNever) {
      auto start = std::chrono::steady_clock::now();
      Status s = inner_->merge_objects(db, std::move(records), source, sync, waiting);
      (s.code() == Status::Code::kUnavailable ? row_merge_deferred_ : row_merge_in_loop_)
          .observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
                       .count());
      return s;
    }
    common::ScopedTimer t(sync == WalSync::kUnsynced && options_.sync_writes
                              ? row_merge_unsynced_
                              : row_merge_);
    return inner_->merge_objects(db, std::move(records), source, sync, waiting);
  }
  Status merge_containers(std::string_view db, std::vector<ContainerRecord> records,
                          const SyncPoint* source) override {
    common::ScopedTimer t(row_merge_);
    return inner_->merge_containers(db, std::move(records), source);
  }
  Result<std::vector<SyncPoint>> get_syncs(std::string_view db) override {
    return inner_->get_syncs(db);
  }
  Status merge_syncs(std::string_view db, const std::vector<SyncPoint>& points) override {
    return inner_->merge_syncs(db, points);
  }
  Status remove_db(std::string_view db, std::string_view id, int64_t max_row) override {
    return inner_->remove_db(db, id, max_row);
  }
  Status remove_db_if_unchanged(std::string_view db, const DbInfo& expected) override {
    return inner_->remove_db_if_unchanged(db, expected);
  }
  Result<RowAudit> audit_rows(std::string_view db) override { return inner_->audit_rows(db); }
  Status verify_checksums() override { return inner_->verify_checksums(); }
  Result<std::vector<ContainerRecord>> containers_since(std::string_view db, int64_t after_rowid,
                                                        size_t limit) override {
    common::ScopedTimer t(listing_);
    return inner_->containers_since(db, after_rowid, limit);
  }
  Result<std::vector<ObjectEntry>> list_objects(std::string_view db,
                                                const ListingQuery& q) override {
    common::ScopedTimer t(listing_);
    return inner_->list_objects(db, q);
  }
  Result<std::vector<ContainerEntry>> list_containers(std::string_view db,
                                                      const ListingQuery& q) override {
    common::ScopedTimer t(listing_);
    return inner_->list_containers(db, q);
  }
  Result<std::vector<ObjectRecord>> objects_since(std::string_view db, int64_t after_rowid,
                                                  size_t limit) override {
    common::ScopedTimer t(listing_);
    return inner_->objects_since(db, after_rowid, limit);
  }

 private:
  std::unique_ptr<ListingStore> inner_;
  common::HistogramHandle info_read_, info_write_, row_merge_, row_merge_unsynced_,
      row_merge_in_loop_, row_merge_deferred_, listing_;
};

}  // namespace

uint64_t DbDevices::reserve_bytes(const std::string& device) {
  const common::io::FreeSpaceReserve& reserve = config_.fallocate_reserve;
  if (reserve.amount <= 0) return 0;
  if (!reserve.is_percent) return static_cast<uint64_t>(reserve.amount);
  auto space = fs_.statvfs(config_.devices + "/" + device);
  if (!space.ok()) return 0;  // the server's own check before each write still holds
  return static_cast<uint64_t>(static_cast<double>(space->total_bytes) * reserve.amount / 100);
}

DbDevices::StoreSlot& DbDevices::slot(const std::string& device) {
  common::MutexLock lock(&mutex_);
  auto& slot = stores_[device];
  if (!slot) slot = std::make_unique<StoreSlot>();
  return *slot;  // slots live as long as this object
}

DbDevices::StoreSlot* DbDevices::find_slot(const std::string& device) {
  common::MutexLock lock(&mutex_);
  auto it = stores_.find(device);
  return it == stores_.end() ? nullptr : it->second.get();
}

Result<ListingStore*> DbDevices::store(const std::string& device) {
  StoreSlot& s = slot(device);
  if (ListingStore* ready = s.ready.load(std::memory_order_acquire)) return ready;
  // Callers for the same device wait here for one open; other devices are not held up.
  common::MutexLock lock(&s.open_mutex);
  if (!s.store) {
    StoreOptions options;
    options.type = config_.type;
    options.sync_writes = config_.sync_writes;
    options.reserve_bytes = reserve_bytes(device);
    auto opened = opener_(store_dir(device), options);
    if (!opened.ok()) return opened.status();  // the next request tries again
    s.store = std::move(*opened);
    if (metrics_) s.store = std::make_unique<TimedStore>(std::move(s.store), *metrics_, options);
    s.ready.store(s.store.get(), std::memory_order_release);
  }
  return s.store.get();
}

// ---- reclaim ---------------------------------------------------------------------------------

Result<std::unique_ptr<Reclaimer>> Reclaimer::create(const common::Config& conf,
                                                     const DbServerConfig& config,
                                                     DbDevices& devices) {
  common::Section s = conf.section(config.type == DbType::kContainer ? "container-replicator"
                                                                     : "account-replicator");
  double interval = 30, reclaim_age = 604800;
  APUS_ASSIGN_OR_RETURN(interval, s.get_double("interval", 30));
  APUS_ASSIGN_OR_RETURN(reclaim_age, s.get_double("reclaim_age", 604800));
  return std::unique_ptr<Reclaimer>(
      new Reclaimer(config, devices, std::max(1.0, interval), reclaim_age));
}

Reclaimer::Reclaimer(const DbServerConfig& config, DbDevices& devices, double interval,
                     double reclaim_age)
    : config_(config),
      devices_(devices),
      reclaim_age_(reclaim_age),
      thread_(interval, /*spread_start=*/false, [this] { (void)run_once(); }) {}

Reclaimer::~Reclaimer() { stop(); }

void Reclaimer::start() { thread_.start(); }

void Reclaimer::stop() {
  cancelled_ = true;  // a pass under way ends after its current page
  thread_.stop();
}

int64_t Reclaimer::run_once() {
  auto listed = devices_.fs().list_dir(config_.devices);
  if (!listed.ok()) return 0;
  std::string age = Timestamp::from_time_point(
                        std::chrono::system_clock::now() -
                        std::chrono::duration_cast<std::chrono::system_clock::duration>(
                            std::chrono::duration<double>(reclaim_age_)))
                        .internal();
  int64_t removed = 0;
  for (const auto& device : *listed) {
    if (!devices_.check_device(device).ok() || !devices_.has_store(device)) continue;
    auto store = devices_.store(device);
    if (!store.ok()) continue;
    std::string after;
    for (;;) {
      auto page = (*store)->list_infos(after, 1000);
      if (!page.ok() || page->empty()) break;
      after = page->back().first;
      for (const auto& [db, info] : *page) {
        bool emptied_meta = std::any_of(info.metadata.begin(), info.metadata.end(),
                                        [](const auto& m) { return m.second.value.empty(); });
        if (info.tombstones == 0 && !emptied_meta && !info.is_deleted(config_.type)) continue;
        auto n = (*store)->reclaim(db, age);
        if (n.ok()) removed += *n;
      }
      if (cancelled_.load()) return removed;
    }
  }
  if (removed) APUS_LOG_INFO("reclaimed " + std::to_string(removed) + " rows older than " + age);
  return removed;
}

// ---- request rules ---------------------------------------------------------------------------

std::optional<int64_t> parse_int(std::string_view s) {
  std::string text(s);
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || end == text.c_str() || errno != 0) return std::nullopt;
  while (std::isspace(static_cast<unsigned char>(*end))) ++end;
  if (*end != '\0') return std::nullopt;
  return v;
}

Response plain_error(int status, std::string body) {
  return common::http::text_response(status, std::move(body));
}

Response insufficient_storage(const std::string& device) {
  return common::http::swob_response(507, device);
}

Response no_body(Response r) {
  // swob declares the length of an explicit body (and sends none); its own explanation pages
  // are not made for HEAD at all, so those answers declare 0.
  bool swob_default = r.body.starts_with("<html><h1>");
  r.headers.set("Content-Length", swob_default ? "0" : std::to_string(r.body.size()));
  r.body.clear();
  return r;
}

Response store_failure(const Status& s) {
  return common::http::swob_response(common::to_http_status(s));
}

OrRefusal<Timestamp> request_timestamp(const Request& req) {
  auto header = req.headers.get("X-Timestamp");
  if (!header) return plain_error(400, "Missing X-Timestamp header");
  auto ts = Timestamp::parse(*header);
  if (!ts.ok()) return plain_error(400, "Invalid X-Timestamp header");
  return *ts;
}

PolicyIndex request_policy_index(const Request& req, const common::StoragePolicies& policies) {
  auto header = req.headers.get("X-Backend-Storage-Policy-Index");
  if (!header) return std::optional<int>();
  std::string text(*header);
  std::optional<int64_t> v = parse_int(text);  // Python's int(): spaces and a sign are fine
  const common::StoragePolicy* policy = v ? policies.by_index(*v) : nullptr;
  if (!policy) {
    // Swift formats the header with %r: quoted while still a string, bare once an int.
    std::string shown = v ? std::to_string(*v) : "'" + text + "'";
    return plain_error(400, "Invalid X-Backend-Storage-Policy-Index " + shown);
  }
  return std::optional<int>(policy->index);
}

namespace {

constexpr std::string_view kContainerSaved[] = {"x-container-read", "x-container-write",
                                                "x-container-sync-key", "x-container-sync-to"};

bool longer_prefix(std::string_view key, std::string_view prefix) {
  return key.size() > prefix.size() && common::http::istarts_with(key, prefix);
}

bool is_sys_or_user_meta(std::string_view key, DbType type) {
  if (type == DbType::kContainer) {
    return longer_prefix(key, "x-container-meta-") || longer_prefix(key, "x-container-sysmeta-");
  }
  return longer_prefix(key, "x-account-meta-") || longer_prefix(key, "x-account-sysmeta-");
}

bool is_saved_container_header(std::string_view key, bool allow_versions) {
  for (std::string_view saved : kContainerSaved) {
    if (common::http::iequals(key, saved)) return true;
  }
  return allow_versions && common::http::iequals(key, "x-versions-location");
}

// How swob names a header it read from the WSGI environ: '_' as '-', then str.title().
std::string stored_name(std::string_view header) {
  std::string name(header);
  std::replace(name.begin(), name.end(), '_', '-');
  return common::http::title_case(name);
}

}  // namespace

bool returned_metadata(std::string_view key, DbType type, bool allow_versions) {
  if (type == DbType::kAccount) return true;
  return is_sys_or_user_meta(key, type) || is_saved_container_header(key, allow_versions);
}

DbMetadata request_metadata(const Request& req, DbType type, bool allow_versions,
                            const Timestamp& ts) {
  DbMetadata md;
  std::string stamp = ts.internal();
  for (const auto& [name, value] : req.headers) {
    bool wanted = is_sys_or_user_meta(name, type) ||
                  (type == DbType::kContainer && is_saved_container_header(name, allow_versions));
    if (wanted) md[stored_name(name)] = MetaItem{value, stamp};
  }
  return md;
}

OrRefusal<bool> merge_metadata(DbInfo& info, const DbMetadata& updates, bool validate,
                               const common::Constraints& constraints) {
  if (updates.empty()) return false;
  DbMetadata merged = info.metadata;
  bool changed = false;
  for (const auto& [key, item] : updates) {
    auto it = merged.find(key);
    if (it == merged.end() || item.timestamp > it->second.timestamp) {
      merged[key] = item;
      changed = true;
    }
  }
  if (!changed) return false;
  if (validate) {
    auto invalid = [](std::string body) {
      return common::http::swob_response_with_body(400, std::move(body));
    };
    int64_t count = 0, size = 0;
    for (const auto& [key, item] : merged) {
      if ((!key.empty() && !common::check_utf8(key)) ||
          (!item.value.empty() && !common::check_utf8(item.value))) {
        return invalid("Metadata must be valid UTF-8");
      }
      for (std::string_view prefix : {"x-account-meta-", "x-container-meta-"}) {
        if (!item.value.empty() && common::http::istarts_with(key, prefix)) {
          ++count;
          size += static_cast<int64_t>(key.size() - prefix.size() + item.value.size());
        }
      }
    }
    if (count > constraints.max_meta_count) {
      return invalid("Too many metadata items; max " +
                     std::to_string(constraints.max_meta_count));
    }
    if (size > constraints.max_meta_overall_size) {
      return invalid("Total metadata too large; max " +
                     std::to_string(constraints.max_meta_overall_size));
    }
  }
  info.metadata = std::move(merged);
  return true;
}

OrRefusal<ListingParams> listing_params(const Request& req, int64_t max_limit, bool container) {
  ListingParams out;
  std::map<std::string, std::string> params;
  for (auto& [k, v] : common::http::parse_query(req.query())) params[k] = std::move(v);
  // Swift decodes each parameter as UTF-8 and answers 400 naming the first that is not, in
  // the order it reads them.
  static constexpr std::string_view kContainerOrder[] = {
      "marker", "end_marker", "prefix", "delimiter", "path", "format", "reverse", "states",
      "includes", "limit"};
  static constexpr std::string_view kAccountOrder[] = {"prefix", "delimiter", "reverse", "limit",
                                                       "marker", "end_marker", "format"};
  std::span<const std::string_view> order =
      container ? std::span<const std::string_view>(kContainerOrder)
                : std::span<const std::string_view>(kAccountOrder);
  ListingQuery& q = out.query;
  q.limit = max_limit;
  for (std::string_view name : order) {
    auto it = params.find(std::string(name));
    if (it == params.end() || it->second.empty()) continue;
    const std::string& value = it->second;
    if (!common::check_utf8(value, /*internal=*/true)) {
      return plain_error(400, "\"" + std::string(name) + "\" parameter not valid UTF-8");
    }
    if (name != "limit" || !std::all_of(value.begin(), value.end(), ::isdigit)) continue;
    if (value.size() > 18 || std::stoll(value) > max_limit) {
      return common::http::swob_response_with_body(
          412, "Maximum limit is " + std::to_string(max_limit));
    }
    q.limit = std::stoll(value);
  }
  auto get = [&](const char* name) -> std::optional<std::string> {
    auto it = params.find(name);
    if (it == params.end()) return std::nullopt;
    return it->second;
  };
  q.marker = get("marker").value_or("");
  q.end_marker = get("end_marker");
  q.prefix = get("prefix");
  q.delimiter = get("delimiter");
  if (container) q.path = get("path");
  q.reverse = common::config_true_value(get("reverse").value_or(""));
  q.allow_reserved = common::config_true_value(
      req.headers.get_or("X-Backend-Allow-Reserved-Names", ""));
  out.format = get("format");
  return out;
}

OrRefusal<std::string> listing_content_type(const Request& req,
                                            const std::optional<std::string>& format) {
  std::optional<std::string_view> fmt;
  if (format) fmt = *format;
  auto n = common::listing::negotiate(fmt, req.headers.get("Accept"));
  if (n.status == 0) return std::move(n.content_type);
  if (n.status == 400) return common::http::swob_response_with_body(400, n.error_body);
  return common::http::swob_response(n.status);
}

net::awaitable<void> walk_infos(DbDevices& devices, const std::string& device, size_t page_size,
                                std::string_view what,
                                const std::function<net::awaitable<bool>(InfoPage&)>& fn) {
  auto& disk = devices.pool(device);
  bool usable = co_await disk.call(
      [&] { return devices.check_device(device).ok() && devices.has_store(device); });
  if (!usable) co_return;
  std::string after;
  for (;;) {
    auto page = co_await disk.call([&]() -> Result<InfoPage> {
      auto store = devices.store(device);
      if (!store.ok()) return store.status();
      return (*store)->list_infos(after, page_size);
    });
    if (!page.ok()) {
      APUS_LOG_ERROR(std::string(what) + " of " + device + ": " + page.status().to_string());
      co_return;
    }
    if (page->empty()) co_return;
    after = page->back().first;
    if (!co_await fn(*page)) co_return;
  }
}

net::awaitable<std::optional<std::string>> read_whole_body(common::http::Exchange& ex,
                                                          size_t max) {
  common::http::WholeBody body = co_await common::http::read_body_at_most(ex, max);
  if (body.outcome == common::http::WholeBody::Outcome::kTooLarge) {
    co_await ex.reply(common::http::swob_response(413));
  }
  if (body.outcome != common::http::WholeBody::Outcome::kRead) co_return std::nullopt;
  co_return std::move(body.bytes);
}

std::string new_db_id(std::string_view device) {
  thread_local std::mt19937_64 rng(std::random_device{}());
  uint64_t hi = rng(), lo = rng();
  hi = (hi & 0xFFFFFFFFFFFF0FFFULL) | 0x0000000000004000ULL;  // version 4
  lo = (lo & 0x3FFFFFFFFFFFFFFFULL) | 0x8000000000000000ULL;  // RFC 4122 variant
  char buf[64];
  std::snprintf(buf, sizeof buf, "%08x-%04x-%04x-%04x-%012llx",
                static_cast<unsigned>(hi >> 32), static_cast<unsigned>(hi >> 16 & 0xFFFF),
                static_cast<unsigned>(hi & 0xFFFF), static_cast<unsigned>(lo >> 48),
                static_cast<unsigned long long>(lo & 0xFFFFFFFFFFFFULL));
  return std::string(buf) + "-" + std::string(device);
}

OrRefusal<PathSegments> split_storage_path(std::string_view decoded_path, int min_segments,
                                           int max_segments, bool rest_with_last) {
  auto segs = common::http::split_path(decoded_path, min_segments, max_segments, rest_with_last);
  Status valid = segs.ok() ? common::http::validate_device_partition(*(*segs)[0], *(*segs)[1])
                           : segs.status();
  if (!valid.ok()) return plain_error(400, valid.message());
  PathSegments segments = std::move(*segs);
  auto bad_request = [](std::string body) {
    return common::http::swob_response_with_body(400, std::move(body));
  };
  // Reserved names ("\x00" inside a name) must start with it: validate_internal_*.
  static constexpr std::string_view kKinds[] = {"account", "container", "object"};
  for (size_t i = 2; i < segments.size() && i < 5; ++i) {
    const auto& name = segments[i];
    if (!name || name->empty()) continue;
    if (i == 4) {
      const std::string& account = *segments[2];
      if (account.rfind(".", 0) == 0 || account == ".misplaced_objects") continue;
    }
    if (name->find('\0') != std::string::npos && (*name)[0] != '\0') {
      return bad_request("Invalid reserved-namespace " + std::string(kKinds[i - 2]));
    }
    if (i == 4) {
      bool reserved_container = (*segments[3])[0] == '\0';
      bool reserved_object = (*name)[0] == '\0';
      if (reserved_container && !reserved_object) {
        return bad_request("Invalid user-namespace object in reserved-namespace container");
      }
      if (reserved_object && !reserved_container) {
        return bad_request("Invalid reserved-namespace object in user-namespace container");
      }
    }
  }
  return segments;
}

void DbServer::request_background_pass() {
  APUS_LOG_WARNING("SIGUSR2: this server has no background pass to run");
}

// ---- main ------------------------------------------------------------------------------------

int run_db_server(int argc, char** argv, DbType type, const MakeDbServer& make) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s CONFIG_FILE\n", argv[0]);
    return 2;
  }
  common::tune_malloc(argv);
  common::block_stop_signals();
  auto conf = common::load_program_config(argv[1]);
  if (!conf.ok()) {
    std::fprintf(stderr, "%s\n", conf.status().message().c_str());
    return 1;
  }
  auto config = DbServerConfig::from_config(*conf, type);
  Status logging = config.ok()
                       ? common::configure_logging(
                             conf->section("app:" + config->server_type()), config->log_name)
                       : config.status();
  if (!logging.ok()) {
    std::fprintf(stderr, "%s\n", logging.message().c_str());
    return 1;
  }
  common::Metrics metrics(type == DbType::kContainer ? "container" : "account");
  DbDevices devices(*config, common::io::default_fs(), &metrics);
  auto made = make(*conf, *config, devices);
  if (!made.ok()) {
    std::fprintf(stderr, "%s\n", made.status().message().c_str());
    return 1;
  }
  std::unique_ptr<DbServer> server = std::move(made).value();
  auto recon = common::ReconConfig::from_config(*conf, APUS_SWIFT_VERSION);
  auto statsd = common::StatsdClient::from_section(conf->section("app:" + config->server_type()),
                                                   config->log_name);
  for (const Status& s : {recon.status(), statsd.status()}) {
    if (!s.ok()) {
      std::fprintf(stderr, "%s\n", s.message().c_str());
      return 1;
    }
  }
  common::http::Server http(
      config->server,
      common::with_recon(std::move(*recon),
                         [&server](common::http::Exchange& ex) { return server->handle(ex); }),
      &metrics,
      common::with_request_timing(std::shared_ptr<common::StatsdClient>(std::move(*statsd)),
                                  type == DbType::kContainer ? "container" : "account",
                                  common::storage_access_logger()));
  if (auto s = http.start(); !s.ok()) {
    APUS_LOG_ERROR("cannot start: " + s.to_string());
    std::fprintf(stderr, "cannot start: %s\n", s.to_string().c_str());
    return 1;
  }
  APUS_LOG_INFO(config->server_type() + " listening on " + config->server.bind_ip + ":" +
                std::to_string(http.port()) + " with " + std::to_string(config->server.workers) +
                " workers");
  auto reclaimer = Reclaimer::create(*conf, *config, devices);
  if (!reclaimer.ok()) {
    std::fprintf(stderr, "%s\n", reclaimer.status().message().c_str());
    return 1;
  }
  server->start_background();
  (*reclaimer)->start();
  http.run_until_signal([&server] { server->request_background_pass(); });
  (*reclaimer)->stop();
  server->stop_background();
  return 0;
}

}  // namespace apus::container
