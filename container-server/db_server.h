// What the container and account servers share: their config, the per-device disk pools and
// listing stores, and the request rules both apply the same way (device checks, metadata,
// listing parameters and formats), each as Swift's servers do.
//
// Thread-safe: DbDevices hands out per-device pools and stores under a mutex; stores open
// lazily on a pool thread, outside that mutex.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <boost/asio/awaitable.hpp>

#include "common/config/config.h"
#include "common/config/swift_conf.h"
#include "common/http/server.h"
#include "common/io/blocking_pool.h"
#include "common/io/device_pools.h"
#include "common/io/device.h"
#include "common/io/fs.h"
#include "common/metrics/metrics.h"
#include "common/periodic_thread.h"
#include "common/thread_annotations.h"
#include "common/timestamp.h"
#include "container-server/listing_db.h"

namespace apus::container {

struct DbServerConfig {
  DbType type = DbType::kContainer;
  common::http::ServerOptions server;  // bind_ip/port, workers, client_timeout, backlog...
  std::string devices = "/srv/node";
  bool mount_check = true;
  common::io::FreeSpaceReserve fallocate_reserve;
  double node_timeout = 3.0;
  double conn_timeout = 0.5;
  bool allow_versions = false;  // containers: X-Versions-Location is stored too
  std::vector<std::string> allowed_sync_hosts = {"127.0.0.1"};
  bool sync_writes = true;      // db_sync_writes: fsync RocksDB's WAL on every write...
  // ...but the object rows of object servers and updaters, unless db_sync_object_rows: Swift
  // appends those to a .pending file without fsync (listing_db.h, WalSync).
  bool sync_object_rows = false;
  // account_update_mode = async (containers): a PUT or DELETE is answered once its database
  // is written, and the account update goes meanwhile (see ContainerServer).
  bool account_update_async = false;
  int threads_per_disk = 2;
  bool replication_server = true;
  std::string auto_create_account_prefix = ".";
  std::string log_name;
  std::string swift_dir = "/etc/swift";
  common::SwiftConf swift;

  // Reads the [app:...] section named by [pipeline:main] of a container-server.conf or
  // account-server.conf and the swift.conf in its swift_dir. Errors name file, section and key.
  static common::Result<DbServerConfig> from_config(const common::Config& conf, DbType type);
  // "container-server" or "account-server".
  std::string server_type() const;
};

class DbDevices {
 public:
  // `fs` and `metrics` (nullable) must outlive this.
  DbDevices(const DbServerConfig& config, common::io::Fs& fs, common::Metrics* metrics);
  ~DbDevices();

  // The disk pool for a request naming `device`, or nullptr (answer 507) when no such device
  // exists. A device gets its own pool only after check_device() has found it, on the one
  // shared probe pool: names that are not devices never make threads (a client could
  // otherwise create a pool per random name). Known devices answer at once, without a probe;
  // their jobs still check the device, which may have gone since. `device` must live until
  // the result is awaited. Any thread.
  boost::asio::awaitable<common::io::BlockingPool*> pool_for(const std::string& device);
  // The disk pool of `device`, created on first use. REQUIRES: the device was found on disk
  // (a walk over the devices directory, or check_device() passed). Any thread.
  common::io::BlockingPool& pool(const std::string& device);
  // 507-worthy InsufficientStorage when the device is missing or unmounted. Pool thread.
  common::Status check_device(const std::string& device);
  // InsufficientStorage when free space is below fallocate_reserve. Pool thread.
  common::Status check_free_space(const std::string& device);
  // The listing store of `device` for a request served on its event loop's thread: when the
  // store is open and check_device() passed within the last kCheckedFor (and, with `space`,
  // check_free_space() too), else nullptr (then check and open on the pool). Both checks touch
  // the disk, which may hang, so such a request takes their recent verdict instead: it learns
  // of a device unmounted or filled up to its reserve at most that late (an unmount also fails
  // while the store holds the device's files open). Any thread; no I/O.
  static constexpr std::chrono::seconds kCheckedFor{1};
  ListingStore* checked_store(const std::string& device, bool space);
  // The listing store of `device`, opened on first use (IOError when RocksDB cannot open it).
  // REQUIRES: check_device(device) passed. Pool thread.
  common::Result<ListingStore*> store(const std::string& device);
  // Whether `device` holds a store already (so a walk need not create one). Pool thread.
  bool has_store(const std::string& device);
  common::io::Fs& fs() { return fs_; }
  common::Metrics* metrics() { return metrics_; }

  // Opens the store of a device directory; the default is ListingStore::open. Tests replace
  // it to make an open slow or fail. Call before any store() call.
  using StoreOpener = std::function<common::Result<std::unique_ptr<ListingStore>>(
      const std::string& path, StoreOptions options)>;
  void set_store_opener_for_test(StoreOpener opener) { opener_ = std::move(opener); }
  // Per-device pools made so far (the probe pool not counted).
  size_t pool_count_for_test();

 private:
  // One device's store. mutex_ only finds (or adds) the slot; the open itself runs under the
  // slot's own mutex, so a slow open on one device (a RocksDB recovery, a sick disk) holds up
  // only the requests for that device.
  struct StoreSlot {
    common::Mutex open_mutex;  // held across the open of this device's store
    std::unique_ptr<ListingStore> store APUS_GUARDED_BY(open_mutex);  // set once, never reset
    std::atomic<ListingStore*> ready{nullptr};  // store.get() once open: the lock-free path
    // When check_device() and check_free_space() last passed (steady clock, ns).
    std::atomic<int64_t> device_ok_ns{std::numeric_limits<int64_t>::min()};
    std::atomic<int64_t> space_ok_ns{std::numeric_limits<int64_t>::min()};
  };
  std::string store_dir(const std::string& device) const;
  // fallocate_reserve in bytes on `device` (0 when unknown).
  uint64_t reserve_bytes(const std::string& device);
  StoreSlot& slot(const std::string& device);
  // The slot of `device`, or nullptr when it has none yet (creates none).
  StoreSlot* find_slot(const std::string& device);

  const DbServerConfig& config_;
  common::io::Fs& fs_;
  common::Metrics* metrics_;
  StoreOpener opener_;
  // The disk pools, made only for devices that exist (see pool_for()). A pointer, so the
  // destructor can end them before the stores their jobs use.
  std::unique_ptr<common::io::DevicePools> pools_;
  common::Mutex mutex_;
  std::map<std::string, std::unique_ptr<StoreSlot>> stores_ APUS_GUARDED_BY(mutex_);
};

// Reclaim: the part of Swift's container/account replicator that forgets. Every `interval`
// seconds ([container-replicator] or [account-replicator], Swift's option names) it visits
// each database with tombstones or emptied metadata and removes what is older than
// `reclaim_age`; deleted, empty databases past it go entirely. A pass reads every database's
// info once; databases without tombstones cost nothing more.
//
// Thread-safe: start()/stop() from the controlling thread; passes run on a thread of its own.
class Reclaimer {
 public:
  // `devices` and `config` must outlive this. Bad option values give InvalidArgument.
  static common::Result<std::unique_ptr<Reclaimer>> create(const common::Config& conf,
                                                           const DbServerConfig& config,
                                                           DbDevices& devices);
  ~Reclaimer();
  void start();
  void stop();
  // One pass over every device; returns the rows removed.
  int64_t run_once();

 private:
  Reclaimer(const DbServerConfig& config, DbDevices& devices, double interval,
            double reclaim_age);
  const DbServerConfig& config_;
  DbDevices& devices_;
  double reclaim_age_;
  std::atomic<bool> cancelled_{false};
  common::PeriodicThread thread_;
};

// ---- request rules ---------------------------------------------------------------------------

// A decimal integer header value (surrounding spaces allowed, as Python's int()), or nullopt.
std::optional<int64_t> parse_int(std::string_view s);

// A response with a text/plain body (Swift's validation errors).
common::http::Response plain_error(int status, std::string body);

// X-Timestamp as Swift's valid_timestamp(), or 400 "Missing X-Timestamp header" / "Invalid
// X-Timestamp header" when absent or bad.
common::http::OrRefusal<common::Timestamp> request_timestamp(const common::http::Request& req);

// X-Backend-Storage-Policy-Index checked against the policies: nullopt when absent, the index,
// or 400 "Invalid X-Backend-Storage-Policy-Index ..." (as Swift words it). Callers that must
// check the device first keep the refusal for later (ContainerServer::refusal()).
using PolicyIndex = common::http::OrRefusal<std::optional<int>>;
PolicyIndex request_policy_index(const common::http::Request& req,
                                 const common::StoragePolicies& policies);

// The metadata a request sets, each item stamped with `ts`: X-<Type>-Meta-* and
// X-<Type>-Sysmeta-* headers, plus the container headers Swift saves (ACLs, sync, versions),
// under the names Swift stores (title case, '_' as '-').
DbMetadata request_metadata(const common::http::Request& req, DbType type, bool allow_versions,
                            const common::Timestamp& ts);

// Swift's update_metadata(): folds `updates` into `info.metadata`, an item replacing the stored
// one only when its timestamp is newer. Returns whether anything changed. With `validate`, a
// result over the metadata limits is refused with Swift's 400 ("Too many metadata items; max
// 90", "Total metadata too large; max 4096", "Metadata must be valid UTF-8") and
// `info.metadata` is left as it was; without it, nothing is refused.
common::http::OrRefusal<bool> merge_metadata(DbInfo& info, const DbMetadata& updates,
                                             bool validate,
                                             const common::Constraints& constraints);

// Whether a stored metadata item is returned in container responses (containers return only
// user/sys metadata and the saved headers; accounts all of it).
bool returned_metadata(std::string_view key, DbType type, bool allow_versions);

// The query parameters of a listing request, decoded and checked as Swift's get_param() and
// constrain_req_limit() do: refused with 400 '"<name>" parameter not valid UTF-8' or 412
// "Maximum limit is N".
struct ListingParams {
  ListingQuery query;
  std::optional<std::string> format;
};
common::http::OrRefusal<ListingParams> listing_params(const common::http::Request& req,
                                                      int64_t max_limit, bool container);

// The negotiated listing content type (format param or Accept), or Swift's 400/406.
common::http::OrRefusal<std::string> listing_content_type(
    const common::http::Request& req, const std::optional<std::string>& format);

// Walks every database of `device` in name order, a page of `page_size` infos at a time read
// on the device's disk pool, handing each page to `fn` (on the caller's executor), which returns
// false to stop. Does nothing for a device that is missing or unmounted, or that has no store
// yet; a store that cannot be read is logged (naming `what`) and ends the walk.
using InfoPage = std::vector<std::pair<std::string, DbInfo>>;
boost::asio::awaitable<void> walk_infos(
    DbDevices& devices, const std::string& device, size_t page_size, std::string_view what,
    const std::function<boost::asio::awaitable<bool>(InfoPage&)>& fn);

// A request body read whole, at most `max` bytes: nullopt when the client went away, or when
// the body is longer (then 413 has been answered).
boost::asio::awaitable<std::optional<std::string>> read_whole_body(common::http::Exchange& ex,
                                                                   size_t max);

// Swift's HTTPInsufficientStorage for `device`.
common::http::Response insufficient_storage(const std::string& device);

// The answer to a failed write to a listing store: the one mapping, common::to_http_status()
// (507 for a full disk, 404 for a database that is gone, 500 for I/O errors). A failed read or
// store open answers 500 whatever the cause, as Swift's catch-all does for a database it
// cannot read.
common::http::Response store_failure(const common::Status& s);

// A new database id: "<uuid4>-<device>".
std::string new_db_id(std::string_view device);

// Validates a storage-server path: "/<device>/<partition>/<account>[/...]" split as Swift's
// split_and_validate_path() (400 with its message) plus the reserved-name rules of
// validate_internal_*. The segments: min..max entries, the last taking the rest when
// `rest_with_last`.
using PathSegments = std::vector<std::optional<std::string>>;
common::http::OrRefusal<PathSegments> split_storage_path(std::string_view decoded_path,
                                                         int min_segments, int max_segments,
                                                         bool rest_with_last);

// A response to HEAD as swob makes it: no body; Content-Length the length of an explicit body
// (a text error), or 0 in place of swob's own explanation page.
common::http::Response no_body(common::http::Response r);

// A container or account server: the request handler over its config and devices.
class DbServer {
 public:
  virtual ~DbServer() = default;
  virtual boost::asio::awaitable<void> handle(common::http::Exchange& ex) = 0;
  // Background work that runs while the server serves (the container updater).
  virtual void start_background() {}
  virtual void stop_background() {}
  // SIGUSR2: the background passes an operator can ask for run now (the container updater's).
  virtual void request_background_pass();
};
// Builds a server from its program config; InvalidArgument for a bad option.
using MakeDbServer = std::function<common::Result<std::unique_ptr<DbServer>>(
    const common::Config& conf, const DbServerConfig& config, DbDevices& devices)>;

// main() of both programs: reads CONFIG_FILE (argv[1]), sets up logging and metrics, serves
// with the server `make` builds until SIGTERM. Returns the exit code.
int run_db_server(int argc, char** argv, DbType type, const MakeDbServer& make);

}  // namespace apus::container
