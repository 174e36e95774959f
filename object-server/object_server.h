// ObjectServer: Swift's object-server HTTP API (swift-protocol.md §6) on the Apus runtime.
//
// PUT, GET, HEAD, POST, DELETE and OPTIONS on /<device>/<partition>/<account>/<container>/<object>
// with the backend headers Swift's proxy sends and the response headers it expects. Disk work
// runs on one BlockingPool per device (`threads_per_disk` threads), so a slow disk only slows its
// own requests; handlers await it and never block their worker. After a PUT, POST or DELETE the
// container replicas named in X-Container-Host/-Device/-Partition are told: `sync` mode waits up
// to container_update_timeout and saves an async pending for any that failed; `async` mode saves
// the async pending at once and answers (apus-object-updater delivers it later); the updates
// themselves are built and sent by container_update.h.
//
// A device gets its pool only after check_device() found it (Swift's 507 otherwise): see
// common/io/device_pools.h, which the container and account servers share.
//
// Thread-safe: handle() runs on any worker; the pools are thread-safe.
#pragma once

#include <map>
#include <memory>
#include <atomic>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <boost/asio/awaitable.hpp>

#include "common/config/config.h"
#include "common/config/swift_conf.h"
#include "common/constraints.h"
#include "common/http/server.h"
#include "common/io/blocking_pool.h"
#include "common/io/device_pools.h"
#include "common/metrics/metrics.h"
#include "common/thread_annotations.h"
#include "object-server/container_update.h"
#include "object-server/diskfile.h"

namespace apus::object {

class SsyncInput;  // ssync.cpp

struct ObjectServerConfig {
  common::http::ServerOptions server;  // bind_ip/port, workers, client_timeout, backlog...
  DiskFileOptions disk;
  common::SwiftConf swift;  // hash path prefix/suffix, policies, constraints
  size_t network_chunk_size = 65536;
  size_t disk_chunk_size = 65536;
  double max_upload_time = 86400;
  double conn_timeout = 0.5;
  double node_timeout = 3.0;
  double container_update_timeout = 1.0;
  bool container_update_async = false;  // container_update_mode = async
  int threads_per_disk = 2;
  bool replication_server = true;
  // SSYNC receiver (Swift's names and defaults): requests at once in this server (0: any),
  // per device (lock files), how long to wait for the partition and device locks, and when
  // failed updates end a request early (at least the threshold, and more than ratio x successes).
  int replication_concurrency = 4;
  int replication_concurrency_per_device = 1;
  double replication_lock_timeout = 15;
  int64_t replication_failure_threshold = 100;
  double replication_failure_ratio = 1.0;
  bool keep_cache_private = false;        // GETs with a token may keep the page cache too
  std::set<std::string> allowed_headers;  // lower-case names
  std::string log_name = "object-server";
  bool log_requests = true;  // the access log line
  double slow = 0;           // PUT and DELETE answers wait until the request is this old (testing)
  std::string expiring_objects_account = ".expiring_objects";
  int64_t expiring_objects_container_divisor = 86400;  // one queue container per day

  // Reads [app:object-server] (found through [pipeline:main]) of an object-server.conf and the
  // swift.conf in its swift_dir. Errors name the file, section and key.
  static common::Result<ObjectServerConfig> from_config(const common::Config& conf);
};

class ObjectServer {
 public:
  // `fs` and `metrics` (nullable) must outlive the server.
  ObjectServer(ObjectServerConfig config, common::io::Fs& fs, common::Metrics* metrics);
  ~ObjectServer();

  // The request handler for common::http::Server.
  boost::asio::awaitable<void> handle(common::http::Exchange& ex);

  const ObjectServerConfig& config() const { return config_; }
  DiskFileManager& disk() { return disk_; }

 private:
  struct Parsed;
  // The object path and the headers every object method reads (policy, X-Timestamp...), or
  // Swift's answer refusing them.
  common::http::OrRefusal<Parsed> parse_object_request(const common::http::Request& req,
                                                       const std::string& path) const;
  boost::asio::awaitable<void> handle_put(common::http::Exchange& ex, Parsed& p);
  // The steps of a PUT, in order; each returns the answer that ends it early, if any.
  struct PutState;
  // Constraints, delete-at headers and the announced size.
  std::optional<common::http::Response> check_put(PutState& put) const;
  // A body is read in batches of this many bytes, each written in a trip to the disk pool.
  static constexpr size_t kPutWriteBatch = 1 << 20;
  // Whether the body comes before the open (put_body_first): sent without Expect:
  // 100-continue (as Apus's proxy sends a small body) and shorter than one batch.
  bool reads_body_first(const PutState& put) const;
  // A PUT whose body is read first: the open, its checks and the commit then take one trip
  // to the disk pool instead of two; Swift's answers, in Swift's order.
  boost::asio::awaitable<void> put_body_first(PutState& put);
  // The device, the object it replaces (If-None-Match, 409) and a writer (pool).
  boost::asio::awaitable<std::optional<common::http::Response>> open_for_put(PutState& put);
  // The object it replaces: If-None-Match (412) and a newer one (409). Disk pool.
  std::optional<common::http::Response> check_existing(PutState& put);
  // The writer of the new object's temp file. Disk pool.
  std::optional<common::http::Response> create_put_writer(PutState& put);
  // The body, from the start of its MIME document to its footer and ETag checks.
  boost::asio::awaitable<std::optional<common::http::Response>> read_put_body(PutState& put);
  // A MIME body (metadata footers) up to the object's bytes.
  boost::asio::awaitable<std::optional<common::http::Response>> start_put_body(PutState& put);
  // The object's bytes: hashed, written in batches, max_file_size enforced as they come.
  boost::asio::awaitable<std::optional<common::http::Response>> receive_put_body(PutState& put);
  // The footer document and the ETag check.
  boost::asio::awaitable<std::optional<common::http::Response>> finish_put_body(PutState& put);
  // The proxy's MD5 from the footer once the body's CRC32C matches the footer's
  // (kBodyChecksumHeader): the refusal when it is missing or does not match.
  std::optional<common::http::Response> take_footer_md5(PutState& put) const;
  // The metadata to store.
  Metadata put_metadata(const PutState& put) const;
  // The .data file into place (pool), then the rest of a MIME body.
  boost::asio::awaitable<std::optional<common::http::Response>> commit_put(PutState& put);
  // The last batch and the commit (disk pool).
  common::Status write_and_commit(PutState& put);
  // What follows a MIME body's footer, read and dropped.
  boost::asio::awaitable<std::optional<common::http::Response>> drain_put_body(PutState& put);
  // The container update and the 201.
  boost::asio::awaitable<void> answer_put(PutState& put);
  // The expiring-objects queue and the container listing.
  boost::asio::awaitable<void> after_put(PutState& put);
  boost::asio::awaitable<void> handle_replicate(common::http::Exchange& ex,
                                                const std::string& path);
  // SSYNC (ssync.h): the request's checks here, the protocol in ssync.cpp.
  boost::asio::awaitable<void> handle_ssync(common::http::Exchange& ex, const std::string& path);
  boost::asio::awaitable<void> run_ssync(common::http::Exchange& ex, const Location& loc,
                                         common::io::BlockingPool& pool);
  struct ReplicationLocks;
  boost::asio::awaitable<common::Result<ReplicationLocks>> take_replication_locks(
      const Location& loc, common::io::BlockingPool& pool);
  boost::asio::awaitable<common::Status> ssync_missing_check(common::http::Exchange& ex,
                                                             SsyncInput& input,
                                                             const Location& loc,
                                                             common::io::BlockingPool& pool);
  // The updates; *code is the status an error line gives (0 when none applies).
  boost::asio::awaitable<common::Status> ssync_updates(common::http::Exchange& ex,
                                                       SsyncInput& input, const Location& loc,
                                                       int* code);
  boost::asio::awaitable<void> handle_get_head(common::http::Exchange& ex, Parsed& p);
  boost::asio::awaitable<void> handle_post(common::http::Exchange& ex, Parsed& p);
  boost::asio::awaitable<void> handle_delete(common::http::Exchange& ex, Parsed& p);
  // `small_body`: the whole object's data when the job that opened it read it too.
  boost::asio::awaitable<void> send_object(common::http::Exchange& ex, Parsed& p,
                                           DiskObject& obj, const std::string* small_body);
  // Swift's keep_cache: whether a GET's reads of an object of `size` bytes stay in the page
  // cache.
  bool keep_cache(const common::http::Request& req, uint64_t size) const;
  // The whole data of an opened object no bigger than one disk chunk, read (and dropped from
  // the page cache unless `keep`) in the job that opened it; nullopt when bigger or the read
  // fails or ends short (the streaming path then reads it and reports that). Pool thread.
  std::optional<std::string> read_small_body(const DiskObject& obj, bool keep);
  // Tells the container replicas about a change, per container_update_mode.
  boost::asio::awaitable<void> container_update(const Parsed& p, std::string op,
                                                common::http::HeaderMap update_headers);
  // Adds or removes the object's row in the expiring-objects queue (X-Delete-At).
  boost::asio::awaitable<void> delete_at_update(const Parsed& p, std::string op, int64_t delete_at);
  // Stores allowed_headers and X-Backend-Replication-Headers from the request into `md`.
  void copy_allowed_headers(const common::http::Request& req, Metadata& md) const;
  // Whether allowed_headers names `name`, in any case.
  bool is_allowed_header(std::string_view name) const;
  // The object's state, or the answer refusing the request: 507 when its device is unavailable
  // or a disk failure says so, 403 for a name collision, 500 for other disk failures. Pool
  // thread.
  common::http::OrRefusal<DiskObject> open_checked(const Location& loc);
  ObjectServerConfig config_;
  DiskFileManager disk_;
  common::Metrics* metrics_;
  common::io::DevicePools pools_;  // the disk pools, made only for devices that exist
  UpdateSender updates_;  // after the pools: its deliveries use them
  std::atomic<int> ssync_running_{0};  // SSYNC requests being served
  // Bytes of read buffers held by large GETs (kLargeReadBytes each, two a GET), at most
  // kMaxLargeReadBytes: a GET beyond it reads disk_chunk_size at a time.
  std::atomic<int64_t> large_read_bytes_{0};
  common::HistogramHandle phase_body_, phase_write_, phase_commit_, phase_update_;
};

}  // namespace apus::object
