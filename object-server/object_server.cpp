#include "object-server/object_server.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <thread>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>

#include "common/crypto/crc32c.h"
#include "common/crypto/md5.h"
#include "common/http/client.h"
#include "common/http/date.h"
#include "common/http/mime.h"
#include "common/http/range.h"
#include "common/http/server_config.h"
#include "common/http/swob.h"
#include "common/http/url.h"
#include "common/log/log.h"
#include "common/pickle.h"
#include "object-server/delete_at.h"

namespace apus::object {

namespace net = boost::asio;
using common::Result;
using common::Status;
using common::Timestamp;
using common::http::Exchange;
using common::http::HeaderMap;
using common::http::iequals;
using common::http::istarts_with;
using common::http::MimeSplitter;
using common::http::OrRefusal;
using common::http::Request;
using common::http::Response;
using common::http::swob_response;
using common::http::swob_response_with_body;
using common::http::text_response;
using common::http::title_case;

namespace {

constexpr std::string_view kUserMeta = "x-object-meta-";
constexpr std::string_view kSysMeta = "x-object-sysmeta-";
constexpr std::string_view kTransientSysMeta = "x-object-transient-sysmeta-";

bool has_prefix_and_more(std::string_view key, std::string_view prefix) {
  return key.size() > prefix.size() && istarts_with(key, prefix);
}
bool is_user_or_sys_meta(std::string_view key) {
  return has_prefix_and_more(key, kUserMeta) || has_prefix_and_more(key, kSysMeta);
}
bool is_sys_meta(std::string_view key) { return has_prefix_and_more(key, kSysMeta); }
bool is_transient_sysmeta(std::string_view key) {
  return has_prefix_and_more(key, kTransientSysMeta);
}

Response with_header(Response r, std::string_view name, std::string_view value) {
  r.headers.set(name, value);
  return r;
}

// Swift's 507 for a device that is not there (no body for HEAD, as swob writes none).
Response device_unavailable(const Request& req, const std::string& device) {
  Response r = swob_response(507, device);
  if (req.method == "HEAD") r.body.clear();
  return r;
}

// The one translation from a failed disk operation to the answer, as Swift's object server
// gives it: a full or missing device is 507 naming it (DiskFileNoSpace,
// DiskFileDeviceUnavailable); anything else is this server's own failure, 500 (Swift's OSErrors
// end in its catch-all). The codes keep their filesystem meaning here (NotFound: a path raced
// away; Conflict: something in the way, EEXIST or a file where a directory should be), which
// says nothing about the object the client named: no 404 or 409 comes from a disk failure.
// What the client's request meets on disk (a missing, deleted or colliding object) is not a
// failure but a DiskObject::State, answered by the handlers (and open_checked()).
Response disk_error(const Status& s, const std::string& device) {
  if (s.code() == Status::Code::kInsufficientStorage) return swob_response(507, device);
  APUS_LOG_ERROR("disk error on " + device + ": " + s.to_string());
  return swob_response(500);
}

// The device and partition of a split path (Swift's validate_device_partition), or the 400.
std::optional<Response> check_device_partition(
    const Result<std::vector<std::optional<std::string>>>& segs) {
  Status valid = segs.ok() ? common::http::validate_device_partition(*(*segs)[0], *(*segs)[1])
                           : segs.status();
  if (!valid.ok()) return text_response(400, valid.message());
  return std::nullopt;
}

// The storage policy X-Backend-Storage-Policy-Index names ("" is 0), or Swift's 503.
OrRefusal<int> policy_index(const common::StoragePolicies& policies, const Request& req) {
  std::string_view header = req.headers.get_or("X-Backend-Storage-Policy-Index", "");
  const common::StoragePolicy* policy = policies.by_index_string(header);
  if (!policy) return text_response(503, "No policy with index " + std::string(header));
  return static_cast<int>(policy->index);
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The body of a PUT: usually the object's bytes. For Swift's MIME PUT (its proxy sends metadata
// footers when encryption is on, and a multiphase commit for EC) it is a multipart MIME
// document whose first part holds the object's bytes and whose later parts hold the footer
// JSON and the commit confirmation.
class PutBody {
 public:
  struct Document {
    HeaderMap headers;
    std::string body;
  };

  explicit PutBody(Exchange& ex) : ex_(ex) {}

  // Switches to MIME and reads up to the first document's body (the object's bytes).
  net::awaitable<Status> start_mime(std::string boundary, size_t chunk_size) {
    splitter_.emplace(boundary);
    // Reads into input_ carry the framing (document headers, the footer, the epilogue) and
    // the object's first bytes; the rest of its bytes are read straight into the caller's
    // buffer (read_mime). So it need not be a whole chunk.
    input_.assign(std::min(chunk_size, kFramingReadBytes), '\0');
    auto e = co_await next_event();
    if (!e.ok()) co_return e.status();
    in_document_ = *e == MimeSplitter::Event::kHeaders;
    co_return Status();
  }

  // The object's bytes, up to buf.size(); 0 at their end. A plain body is the exchange's own
  // (no coroutine frame of ours per chunk on the common path).
  net::awaitable<Result<size_t>> read(std::span<char> buf) {
    return splitter_ ? read_mime(buf) : ex_.read_body(buf);
  }

  // The next document after the current one, its body read whole (at most max_bytes, or
  // InvalidArgument); nullopt when there is none.
  net::awaitable<Result<std::optional<Document>>> next_document(size_t max_bytes) {
    pending_ = {};
    while (in_document_) {  // what is left of the current one
      auto e = co_await next_event();
      if (!e.ok()) co_return e.status();
      in_document_ = *e == MimeSplitter::Event::kData;
    }
    auto e = co_await next_event();
    if (!e.ok()) co_return e.status();
    if (*e != MimeSplitter::Event::kHeaders) co_return std::optional<Document>();
    Document doc{splitter_->headers(), {}};
    for (in_document_ = true; in_document_;) {
      auto d = co_await next_event();
      if (!d.ok()) co_return d.status();
      if (*d != MimeSplitter::Event::kData) {
        in_document_ = false;
      } else if (doc.body.size() + splitter_->data().size() > max_bytes) {
        malformed_ = true;
        co_return Status::invalid_argument("MIME document too large");
      } else {
        doc.body += splitter_->data();
      }
    }
    co_return std::optional<Document>(std::move(doc));
  }

  // Reads the rest of the body, whatever it holds (Swift drains it before answering), and
  // then the request's own end: the closing delimiter comes before the last chunk of a
  // chunked body (as the proxy sends it), and a body not read to its end makes the runtime
  // close the connection, so every PUT would cost the proxy a new one. At most
  // kMaxEpilogueBytes more of an epilogue are read: past that, the connection closes instead.
  net::awaitable<Status> drain() {
    pending_ = {};
    for (;;) {
      auto e = co_await next_event();
      if (!e.ok()) co_return e.status();
      if (*e == MimeSplitter::Event::kEnd) break;
    }
    // Reads stop one byte past the bound, which is how a longer epilogue shows. (The read that
    // found the closing delimiter may have brought up to a chunk of epilogue along, which the
    // splitter dropped.)
    for (size_t epilogue = 0; epilogue <= kMaxEpilogueBytes;) {
      const size_t room = std::min(input_.size(), kMaxEpilogueBytes + 1 - epilogue);
      auto n = co_await ex_.read_body(std::span(input_.data(), room));
      if (!n.ok()) co_return n.status();
      if (*n == 0) break;
      epilogue += *n;
    }
    co_return Status();
  }

  // Set when the MIME framing was wrong (rather than the client slow or gone).
  bool malformed() const { return malformed_; }
  bool is_mime() const { return splitter_.has_value(); }

 private:
  net::awaitable<Result<size_t>> read_mime(std::span<char> buf) {
    for (;;) {
      if (!pending_.empty()) {
        size_t n = std::min(buf.size(), pending_.size());
        std::memcpy(buf.data(), pending_.data(), n);
        pending_.remove_prefix(n);
        co_return n;
      }
      if (!in_document_) co_return size_t{0};
      // The common case: the body's bytes are read straight into `buf` and scanned there for
      // the delimiter (one copy, the kernel's, instead of three).
      std::optional<std::string_view> tail;
      if (buf.size() >= 2 * splitter_->delimiter_size()) tail = splitter_->take_body_tail();
      if (tail) {
        const size_t held = tail->size();
        std::memcpy(buf.data(), tail->data(), held);
        auto n = co_await ex_.read_body(buf.subspan(held));
        if (!n.ok()) co_return n.status();
        std::string_view region(buf.data(), held + *n);
        if (*n == 0) {  // the input ended: the splitter decides what the tail was
          splitter_->feed(region);
          splitter_->finish();
          continue;
        }
        if (size_t body = splitter_->body_in_place(region); body > 0) co_return body;
        continue;
      }
      auto e = co_await next_event();
      if (!e.ok()) co_return e.status();
      if (*e == MimeSplitter::Event::kData) {
        pending_ = splitter_->data();
      } else {
        in_document_ = false;
      }
    }
  }

  // The splitter's next event, reading more of the request body when it needs it.
  net::awaitable<Result<MimeSplitter::Event>> next_event() {
    for (;;) {
      MimeSplitter::Event e = splitter_->next();
      if (e == MimeSplitter::Event::kError) {
        malformed_ = true;
        co_return Status::invalid_argument(splitter_->error());
      }
      if (e != MimeSplitter::Event::kNeedMore) co_return e;
      auto n = co_await ex_.read_body(std::span(input_.data(), input_.size()));
      if (!n.ok()) co_return n.status();
      if (*n == 0) {
        splitter_->finish();
      } else {
        splitter_->feed(std::string_view(input_.data(), *n));
      }
    }
  }

  static constexpr size_t kMaxEpilogueBytes = 64 << 10;
  static constexpr size_t kFramingReadBytes = 16 << 10;

  Exchange& ex_;
  std::optional<MimeSplitter> splitter_;
  std::string input_;         // read buffer for the request body
  std::string_view pending_;  // body bytes from the splitter not yet handed out
  bool in_document_ = false;  // the current document has not ended
  bool malformed_ = false;
};

// Footer documents are a few KiB of JSON; this bounds what a broken peer can make us buffer.
constexpr size_t kMaxFooterBytes = 1 << 20;

// The footer JSON as header pairs, as Swift's HeaderKeyDict(json.loads(...)) holds them: names
// title-cased, strings back to their wire bytes, numbers and booleans as Python's str() of
// them, nulls dropped. nullopt for anything but an object of such values.
std::optional<HeaderMap> parse_footer_json(std::string_view body) {
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(body, ec);
  if (ec || !v.is_object()) return std::nullopt;
  HeaderMap out;
  for (const auto& [key, value] : v.as_object()) {
    std::string name = title_case(common::pickle::wsgi_bytes(key).value_or(std::string(key)));
    std::string text;
    switch (value.kind()) {
      case boost::json::kind::string: {
        std::string_view utf8 = value.as_string();
        text = common::pickle::wsgi_bytes(utf8).value_or(std::string(utf8));
        break;
      }
      case boost::json::kind::int64:
        text = std::to_string(value.as_int64());
        break;
      case boost::json::kind::uint64:
        text = std::to_string(value.as_uint64());
        break;
      case boost::json::kind::double_:
        text = common::pickle::python_float_repr(value.as_double());
        break;
      case boost::json::kind::bool_:
        text = value.as_bool() ? "True" : "False";
        break;
      case boost::json::kind::null:
        out.erase(name);
        continue;
      default:
        return std::nullopt;
    }
    out.set(name, text);
  }
  return out;
}

// Swift's `slow`, a knob for simulating slow devices: the answer to a PUT or DELETE waits
// until the request is `slow` seconds old.
class SlowExchange final : public common::http::ExchangeWrapper {
 public:
  SlowExchange(Exchange& inner, std::chrono::steady_clock::time_point not_before)
      : ExchangeWrapper(inner), not_before_(not_before) {}

 protected:
  net::awaitable<Status> do_respond(Response response) override {
    co_await wait();
    co_return co_await ExchangeWrapper::do_respond(std::move(response));
  }
  net::awaitable<Status> do_start_response(int status, HeaderMap headers,
                                           std::optional<uint64_t> length) override {
    co_await wait();
    co_return co_await ExchangeWrapper::do_start_response(status, std::move(headers), length);
  }

 private:
  net::awaitable<void> wait() {
    net::steady_timer timer(co_await net::this_coro::executor, not_before_);
    (void)co_await timer.async_wait(net::as_tuple(net::use_awaitable));
  }
  std::chrono::steady_clock::time_point not_before_;
};

// The answer to a PUT whose body could not be read: malformed MIME is the sender's error (400;
// Swift answers 500 for a bad starting boundary), a slow client 408, a vanished one 499.
Response body_failure(const PutBody& body, const Status& s) {
  if (body.malformed()) return swob_response_with_body(400, s.message());
  return swob_response(s.is_timeout() ? 408 : 499);
}

// Reads the footer document of a MIME PUT into `footers`; a refusal when it is missing or bad.
net::awaitable<std::optional<Response>> read_footers(PutBody& body, HeaderMap& footers) {
  auto doc = co_await body.next_document(kMaxFooterBytes);
  if (!doc.ok()) co_return body_failure(body, doc.status());
  if (!*doc) co_return swob_response_with_body(400, "couldn't find footer MIME doc");
  auto want_md5 = (*doc)->headers.get("Content-MD5");
  if (!want_md5 || want_md5->empty()) {
    co_return swob_response_with_body(400, "no Content-MD5 in footer");
  }
  if (*want_md5 != common::crypto::md5_hex((*doc)->body)) {
    co_return swob_response_with_body(422, "footer MD5 mismatch");
  }
  auto parsed = parse_footer_json((*doc)->body);
  if (!parsed) co_return swob_response_with_body(400, "invalid JSON for footer doc");
  footers = std::move(*parsed);
  co_return std::nullopt;
}

}  // namespace

// What every handler needs from the request line and backend headers.
struct ObjectServer::Parsed {
  const Request* req = nullptr;
  Location loc;
  Timestamp timestamp;  // X-Timestamp (now for GET/HEAD without one)
};

// ---- configuration ---------------------------------------------------------------------------

Result<ObjectServerConfig> ObjectServerConfig::from_config(const common::Config& conf) {
  ObjectServerConfig c;
  std::string app = "object-server";
  if (auto pipeline = conf.pipeline(); pipeline.ok() && !pipeline->empty()) app = pipeline->back();
  common::Section s = conf.section("app:" + app);
  auto get_int = [&](const char* key, int64_t def) -> Result<int64_t> { return s.get_int(key, def); };
  auto get_double = [&](const char* key, double def) -> Result<double> {
    return s.get_double(key, def);
  };
  auto get_bool = [&](const char* key, bool def) -> Result<bool> { return s.get_bool(key, def); };

  c.server.server_type = "object-server";
  c.server.bind_ip = s.get_string("bind_ip", "0.0.0.0");
  int64_t port = 6200, workers = std::max(1u, std::thread::hardware_concurrency());
  APUS_ASSIGN_OR_RETURN(port, get_int("bind_port", 6200));
  if (s.get_string("workers", "auto") != "auto") APUS_ASSIGN_OR_RETURN(workers, get_int("workers", workers));
  c.server.bind_port = static_cast<uint16_t>(port);
  c.server.workers = static_cast<int>(std::max<int64_t>(1, workers));
  int64_t backlog = 4096;
  APUS_ASSIGN_OR_RETURN(backlog, get_int("backlog", 4096));
  c.server.backlog = static_cast<int>(backlog);
  APUS_ASSIGN_OR_RETURN(c.server.reuse_port, get_bool("reuse_port", false));
  APUS_ASSIGN_OR_RETURN(c.server.client_timeout, get_double("client_timeout", 60));
  APUS_RETURN_IF_ERROR(common::http::read_runtime_options(s, &c.server));
  c.server.builtin_healthcheck = true;

  c.disk.devices = s.get_string("devices", "/srv/node");
  APUS_ASSIGN_OR_RETURN(c.disk.mount_check, get_bool("mount_check", true));
  APUS_ASSIGN_OR_RETURN(c.disk.fsync_on_close, get_bool("fsync_on_close", true));
  int64_t mb = 512;
  APUS_ASSIGN_OR_RETURN(mb, get_int("mb_per_sync", 512));
  c.disk.mb_per_sync = static_cast<uint64_t>(std::max<int64_t>(0, mb));
  APUS_ASSIGN_OR_RETURN(c.disk.reclaim_age, get_int("reclaim_age", 604800));
  int64_t keep = 5242880;
  APUS_ASSIGN_OR_RETURN(keep, get_int("keep_cache_size", 5242880));
  c.disk.keep_cache_size = static_cast<uint64_t>(std::max<int64_t>(0, keep));
  APUS_ASSIGN_OR_RETURN(c.keep_cache_private, get_bool("keep_cache_private", false));
  auto reserve = common::io::FreeSpaceReserve::parse(s.get_string("fallocate_reserve", "1%"));
  if (!reserve.ok()) return s.invalid("fallocate_reserve", reserve.status().message());
  c.disk.fallocate_reserve = *reserve;

  int64_t chunk = 65536;
  APUS_ASSIGN_OR_RETURN(chunk, get_int("network_chunk_size", 65536));
  c.network_chunk_size = static_cast<size_t>(std::max<int64_t>(4096, chunk));
  APUS_ASSIGN_OR_RETURN(chunk, get_int("disk_chunk_size", 65536));
  c.disk_chunk_size = static_cast<size_t>(std::max<int64_t>(4096, chunk));
  APUS_ASSIGN_OR_RETURN(c.max_upload_time, get_double("max_upload_time", 86400));
  APUS_ASSIGN_OR_RETURN(c.conn_timeout, get_double("conn_timeout", 0.5));
  APUS_ASSIGN_OR_RETURN(c.node_timeout, get_double("node_timeout", 3));
  APUS_ASSIGN_OR_RETURN(c.container_update_timeout, get_double("container_update_timeout", 1));
  std::string mode = s.get_string("container_update_mode", "sync");
  if (mode != "sync" && mode != "async") {
    return s.invalid("container_update_mode", "must be sync or async");
  }
  c.container_update_async = mode == "async";
  int64_t threads = 2;
  APUS_ASSIGN_OR_RETURN(threads, get_int("threads_per_disk", 2));
  c.threads_per_disk = static_cast<int>(std::max<int64_t>(1, threads));
  std::string replication = s.get_string("replication_server", "");
  c.replication_server = replication.empty() || common::config_true_value(replication);
  int64_t concurrency = 4;
  APUS_ASSIGN_OR_RETURN(concurrency, get_int("replication_concurrency", 4));
  c.replication_concurrency = static_cast<int>(std::clamp<int64_t>(concurrency, 0, 1 << 20));
  APUS_ASSIGN_OR_RETURN(concurrency, get_int("replication_concurrency_per_device", 1));
  c.replication_concurrency_per_device =
      static_cast<int>(std::clamp<int64_t>(concurrency, 0, 1024));
  APUS_ASSIGN_OR_RETURN(c.replication_lock_timeout, get_double("replication_lock_timeout", 15));
  APUS_ASSIGN_OR_RETURN(c.replication_failure_threshold,
                        get_int("replication_failure_threshold", 100));
  APUS_ASSIGN_OR_RETURN(c.replication_failure_ratio, get_double("replication_failure_ratio", 1.0));
  std::string allowed = s.get_string(
      "allowed_headers",
      "Content-Disposition, Content-Encoding, X-Delete-At, X-Object-Manifest, "
      "X-Static-Large-Object, Cache-Control, Content-Language, Expires, X-Robots-Tag");
  for (const auto& h : common::list_from_csv(allowed)) {
    c.allowed_headers.insert(common::http::to_lower(h));
  }
  c.log_name = s.get_string("log_name", "object-server");
  APUS_ASSIGN_OR_RETURN(c.log_requests, get_bool("log_requests", true));
  APUS_ASSIGN_OR_RETURN(c.slow, get_double("slow", 0));
  APUS_ASSIGN_OR_RETURN(c.expiring_objects_container_divisor,
                        get_int("expiring_objects_container_divisor", 86400));
  if (c.expiring_objects_container_divisor <= 0) {
    return s.invalid("expiring_objects_container_divisor", "must be a positive integer");
  }

  std::string swift_dir = s.get_string("swift_dir", "/etc/swift");
  auto swift = common::load_swift_conf(swift_dir + "/swift.conf");
  if (!swift.ok()) return swift.status();
  c.swift = std::move(*swift);
  c.expiring_objects_account = std::string(c.swift.constraints.auto_create_account_prefix) +
                               s.get_string("expiring_objects_account_name", "expiring_objects");
  return c;
}

// ---- server ---------------------------------------------------------------------------------

ObjectServer::ObjectServer(ObjectServerConfig config, common::io::Fs& fs,
                           common::Metrics* metrics)
    : config_(std::move(config)),
      disk_(fs, config_.disk,
            common::HashPathConfig{config_.swift.hash_path_prefix,
                                   config_.swift.hash_path_suffix}),
      metrics_(metrics),
      pools_("disk", config_.threads_per_disk,
             [this](const std::string& device) { return disk_.check_device(device); }, metrics),
      updates_({.conn_timeout = config_.conn_timeout,
                .node_timeout = config_.node_timeout,
                .async_mode = config_.container_update_async},
               disk_, [this](const std::string& device) -> common::io::BlockingPool& {
                 return pools_.get(device);
               }) {
  if (metrics_) {
    auto phase = [&](const char* name) {
      return metrics_->histogram("apus_object_phase_seconds",
                                 "Time spent in each phase of object requests", {{"phase", name}},
                                 common::Metrics::latency_buckets());
    };
    phase_body_ = phase("body_read");
    phase_write_ = phase("write");
    phase_commit_ = phase("commit");  // metadata, fsync, rename, directory fsync
    phase_update_ = phase("container_update");
  }
}

ObjectServer::~ObjectServer() = default;

net::awaitable<void> ObjectServer::handle(Exchange& ex) {
  const auto started = std::chrono::steady_clock::now();
  const Request& req = ex.request();
  const std::string& method = req.method;
  static const std::array<std::string_view, 8> kPublic = {
      "DELETE", "GET", "HEAD", "OPTIONS", "POST", "PUT", "REPLICATE", "SSYNC"};
  if (method == "OPTIONS") {
    Response r;
    r.headers.set("Allow", "DELETE, GET, HEAD, OPTIONS, POST, PUT, REPLICATE, SSYNC");
    r.headers.set("Server", "object-server/" APUS_SWIFT_VERSION);
    co_return co_await ex.reply(std::move(r));
  }
  if (std::find(kPublic.begin(), kPublic.end(), method) == kPublic.end()) {
    co_return co_await ex.reply(swob_response(405));
  }

  std::string path = common::http::percent_decode(req.path());
  if (!common::check_utf8(path, /*internal=*/true)) {
    Response r = swob_response(412);
    r.body = "Invalid UTF8 or contains NULL";
    co_return co_await ex.reply(std::move(r));
  }
  if (method == "REPLICATE") co_return co_await handle_replicate(ex, path);
  if (method == "SSYNC") co_return co_await handle_ssync(ex, path);
  OrRefusal<Parsed> parsed = parse_object_request(req, path);
  if (!parsed) co_return co_await ex.reply(std::move(parsed).refusal());
  Parsed& p = *parsed;

  if (method == "GET" || method == "HEAD") {
    co_await handle_get_head(ex, p);
  } else if (method == "POST") {
    co_await handle_post(ex, p);
  } else if (config_.slow > 0) {
    SlowExchange slow(ex, started + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                        std::chrono::duration<double>(config_.slow)));
    co_await (method == "PUT" ? handle_put(slow, p) : handle_delete(slow, p));
  } else {
    co_await (method == "PUT" ? handle_put(ex, p) : handle_delete(ex, p));
  }
}

OrRefusal<ObjectServer::Parsed> ObjectServer::parse_object_request(const Request& req,
                                                                  const std::string& path) const {
  auto segs = common::http::split_path(path, 5, 5, true);
  if (auto refusal = check_device_partition(segs)) return std::move(*refusal);
  Parsed p;
  p.req = &req;
  p.loc.device = *(*segs)[0];
  p.loc.partition = *(*segs)[1];
  p.loc.account = *(*segs)[2];
  p.loc.container = *(*segs)[3];
  p.loc.object = *(*segs)[4];
  OrRefusal<int> policy = policy_index(config_.swift.policies, req);
  if (!policy) return std::move(policy).refusal();
  p.loc.policy = *policy;
  if (auto power = req.headers.get("X-Backend-Next-Part-Power"); power && !power->empty()) {
    int64_t n = common::parse_python_int(*power).value_or(0);
    if (n < 1 || n > 32) return text_response(400, "Invalid X-Backend-Next-Part-Power");
    p.loc.next_part_power = static_cast<int>(n);
  }
  auto ts_header = req.headers.get("X-Timestamp");
  if (!ts_header && (req.method == "GET" || req.method == "HEAD")) {
    p.timestamp = Timestamp::now();
  } else if (!ts_header) {
    return text_response(400, "Missing X-Timestamp header");
  } else {
    auto ts = Timestamp::parse(*ts_header);
    if (!ts.ok()) return text_response(400, "Invalid X-Timestamp header");
    p.timestamp = *ts;
  }
  return p;
}

void ObjectServer::copy_allowed_headers(const Request& req, Metadata& md) const {
  // allowed_headers and any the replicator names, stored under Swift's title-cased names.
  for (const auto& h :
       common::split_words(req.headers.get_or("X-Backend-Replication-Headers", ""))) {
    if (auto v = req.headers.get(h)) set_meta(md, title_case(h), *v);
  }
  for (const auto& h : config_.allowed_headers) {
    if (auto v = req.headers.get(h)) set_meta(md, title_case(h), *v);
  }
}

bool ObjectServer::is_allowed_header(std::string_view name) const {
  // A handful of names, read for each metadata key of every GET: compared in place, not
  // lower-cased into a copy first.
  return std::any_of(config_.allowed_headers.begin(), config_.allowed_headers.end(),
                     [&](const std::string& allowed) { return iequals(allowed, name); });
}

OrRefusal<DiskObject> ObjectServer::open_checked(const Location& loc) {
  if (!disk_.check_device(loc.device).ok()) return swob_response(507, loc.device);
  auto obj = disk_.open(loc);
  if (!obj.ok()) return disk_error(obj.status(), loc.device);
  // Another name's data under this hash: Swift refuses every method with 403 (its
  // DiskFileCollision, caught above the handlers).
  if (obj->state == DiskObject::State::kCollision) return swob_response(403);
  return std::move(*obj);
}

// ---- REPLICATE ------------------------------------------------------------------------------

net::awaitable<void> ObjectServer::handle_replicate(Exchange& ex, const std::string& path) {
  const Request& req = ex.request();
  if (!config_.replication_server) co_return co_await ex.reply(swob_response(405));
  // /<device>/<partition>[/<suffix>-<suffix>...]
  auto segs = common::http::split_path(path, 2, 3, true);
  if (auto refusal = check_device_partition(segs)) co_return co_await ex.reply(std::move(*refusal));
  OrRefusal<int> policy = policy_index(config_.swift.policies, req);
  if (!policy) co_return co_await ex.reply(std::move(policy).refusal());
  Location loc;
  loc.device = *(*segs)[0];
  loc.partition = *(*segs)[1];
  loc.policy = *policy;
  std::vector<std::string> recalculate;
  if ((*segs)[2] && !(*segs)[2]->empty()) {
    std::string_view rest = *(*segs)[2];
    size_t start = 0;
    while (start <= rest.size()) {
      size_t dash = rest.find('-', start);
      if (dash == std::string_view::npos) dash = rest.size();
      recalculate.emplace_back(rest.substr(start, dash - start));
      start = dash + 1;
    }
  }
  common::io::BlockingPool* pool = co_await pools_.checked(loc.device);
  if (!pool) co_return co_await ex.reply(device_unavailable(req, loc.device));
  Response r = co_await pool->call([&]() -> Response {
    if (!disk_.check_device(loc.device).ok()) return swob_response(507, loc.device);
    if (!recalculate.empty()) {
      // Swift 2.30: suffixes named in the path are only marked for the next rehash, and the
      // answer is None.
      for (const auto& suffix : recalculate) {
        if (!is_valid_suffix(suffix)) continue;
        Status s = disk_.mark_suffix_dirty(loc, suffix);
        if (!s.ok()) return disk_error(s, loc.device);
      }
      Response none = swob_response(200);
      none.body = common::pickle::dumps(common::pickle::Value::none(), 2);
      return none;
    }
    auto hashes = disk_.get_hashes(loc, recalculate);
    if (!hashes.ok()) return disk_error(hashes.status(), loc.device);
    // The suffix -> hash dict, pickled at protocol 2 as Swift answers (py2 nodes read it).
    Response ok = swob_response(200);
    ok.body = hashes->pickled_suffixes();
    return ok;
  });
  co_return co_await ex.reply(std::move(r));
}

// ---- SSYNC ----------------------------------------------------------------------------------

net::awaitable<void> ObjectServer::handle_ssync(Exchange& ex, const std::string& path) {
  const Request& req = ex.request();
  if (!config_.replication_server) co_return co_await ex.reply(swob_response(405));
  auto segs = common::http::split_path(path, 2, 2, false);
  if (auto refusal = check_device_partition(segs)) co_return co_await ex.reply(std::move(*refusal));
  OrRefusal<int> policy = policy_index(config_.swift.policies, req);
  if (!policy) co_return co_await ex.reply(std::move(policy).refusal());
  // Fragment indexes are for EC policies, which this server refuses; a bad one is still 400.
  if (auto frag = req.headers.get("X-Backend-Ssync-Frag-Index"); frag && !frag->empty() &&
                                                                  !common::parse_python_int(*frag)) {
    co_return co_await ex.reply(
        text_response(400, "Invalid X-Backend-Ssync-Frag-Index '" + std::string(*frag) + "'"));
  }
  Location loc;
  loc.device = *(*segs)[0];
  loc.partition = *(*segs)[1];
  loc.policy = *policy;
  common::io::BlockingPool* pool = co_await pools_.checked(loc.device);
  if (!pool) co_return co_await ex.reply(device_unavailable(req, loc.device));
  // The answer starts at once: Swift's sender reads the status before it sends anything.
  HeaderMap h;
  h.set("X-Backend-Accept-No-Commit", "True");
  ex.read_body_after_head();
  if (!(co_await ex.start_response(200, std::move(h), std::nullopt)).ok()) co_return;
  co_await run_ssync(ex, loc, *pool);
}

// ---- PUT ------------------------------------------------------------------------------------

// Everything one PUT carries from step to step.
struct ObjectServer::PutState {
  PutState(Exchange& exchange, Parsed& parsed)
      : ex(exchange), req(exchange.request()), p(parsed), body(exchange) {}

  Exchange& ex;
  const Request& req;
  Parsed& p;
  common::io::BlockingPool* pool = nullptr;  // the device's, once it was found
  std::optional<uint64_t> fsize;             // the object's size, when announced
  DeleteAtRequest delete_at;
  Metadata orig_metadata;                // the object it replaces, if any
  bool dir_seen = false;                 // the open found the hash directory (the commit's)
  std::unique_ptr<ObjectWriter> writer;  // until committed or discarded
  PutBody body;
  bool footer = false;  // a MIME body with a metadata footer document
  HeaderMap footers;
  uint64_t received = 0;
  // The body's last batch, written in the commit's job (a small object's only batch: one
  // trip to the disk pool fewer per PUT).
  std::string last_batch;
  // The proxy's MD5 of the body comes in the footer, checked by CRC32C (kBodyChecksumHeader).
  bool md5_in_footer = false;
  common::crypto::Crc32c crc;  // of the bytes received
  std::string etag;            // MD5 of the bytes received
  Metadata md;       // what is stored
};

net::awaitable<void> ObjectServer::handle_put(Exchange& ex, Parsed& p) {
  PutState put(ex, p);
  std::optional<Response> refusal = check_put(put);
  if (!refusal && reads_body_first(put)) co_return co_await put_body_first(put);
  if (!refusal) refusal = co_await open_for_put(put);
  if (!refusal) refusal = co_await read_put_body(put);
  if (refusal) {
    // Every answer but 201 leaves nothing behind: the writer's temp file goes first.
    if (put.writer) co_await put.pool->call([&] { put.writer.reset(); });
    co_return co_await ex.reply(std::move(*refusal));
  }
  put.md = put_metadata(put);
  if (auto failed = co_await commit_put(put)) co_return co_await ex.reply(std::move(*failed));
  co_await answer_put(put);
}

bool ObjectServer::reads_body_first(const PutState& put) const {
  // Below a whole batch: the batch of that size is written before its end is seen.
  return !put.req.headers.contains("Expect") && put.fsize && *put.fsize < kPutWriteBatch;
}

net::awaitable<void> ObjectServer::put_body_first(PutState& put) {
  put.pool = co_await pools_.checked(put.p.loc.device);
  if (!put.pool) co_return co_await put.ex.reply(device_unavailable(put.req, put.p.loc.device));
  // What the body's checks find is answered after the existing object's, as when the body
  // comes after them.
  std::optional<Response> body_refusal = co_await read_put_body(put);
  if (!body_refusal) put.md = put_metadata(put);
  std::optional<Response> refusal;
  auto t_commit = std::chrono::steady_clock::now();
  Status committed = co_await put.pool->call([&] {
    refusal = check_existing(put);
    if (!refusal) refusal = std::move(body_refusal);
    if (!refusal) refusal = create_put_writer(put);
    return refusal ? Status() : write_and_commit(put);
  });
  phase_commit_.observe(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t_commit).count());
  if (refusal) co_return co_await put.ex.reply(std::move(*refusal));
  if (!committed.ok()) co_return co_await put.ex.reply(disk_error(committed, put.p.loc.device));
  if (auto failed = co_await drain_put_body(put)) {
    co_return co_await put.ex.reply(std::move(*failed));
  }
  co_await answer_put(put);
}

net::awaitable<std::optional<Response>> ObjectServer::read_put_body(PutState& put) {
  std::optional<Response> refusal = co_await start_put_body(put);
  if (!refusal) refusal = co_await receive_put_body(put);
  if (!refusal) refusal = co_await finish_put_body(put);
  co_return refusal;
}

net::awaitable<void> ObjectServer::answer_put(PutState& put) {
  co_await after_put(put);
  Response r = swob_response(201);
  r.headers.set("Etag", "\"" + put.etag + "\"");
  co_return co_await put.ex.reply(std::move(r));
}

std::optional<Response> ObjectServer::check_put(PutState& put) const {
  const Request& req = put.req;
  // Under eventlet a PUT without Content-Type reaches Swift's check as an empty one.
  common::CheckResult check;
  if (req.headers.contains("Content-Type")) {
    check = common::check_object_creation(config_.swift.constraints, req.headers, put.p.loc.object);
  } else {
    HeaderMap with_empty = req.headers;
    with_empty.set("Content-Type", "");
    check = common::check_object_creation(config_.swift.constraints, with_empty, put.p.loc.object);
  }
  if (!check.ok()) return text_response(check.status, check.body);
  OrRefusal<DeleteAtRequest> delete_at = check_delete_headers(req.headers, put.p.timestamp);
  if (!delete_at) return std::move(delete_at).refusal();
  put.delete_at = std::move(*delete_at);
  put.fsize = req.content_length;
  if (!put.fsize) {
    if (auto v = req.headers.get("X-Backend-Obj-Content-Length")) {
      std::optional<int64_t> n = common::parse_python_int(*v);
      if (!n || *n < 0) {
        return text_response(400,
                             "invalid literal for int() with base 10: '" + std::string(*v) + "'");
      }
      put.fsize = static_cast<uint64_t>(*n);
    }
  }
  return std::nullopt;
}

net::awaitable<std::optional<Response>> ObjectServer::open_for_put(PutState& put) {
  put.pool = co_await pools_.checked(put.p.loc.device);
  if (!put.pool) co_return device_unavailable(put.req, put.p.loc.device);
  // Before the body (and before "100 Continue"): device, existing state, preconditions.
  co_return co_await put.pool->call([&]() -> std::optional<Response> {
    std::optional<Response> refusal = check_existing(put);
    return refusal ? refusal : create_put_writer(put);
  });
}

std::optional<Response> ObjectServer::check_existing(PutState& put) {
  const Location& loc = put.p.loc;
  OrRefusal<DiskObject> obj = open_checked(loc);
  if (!obj) return std::move(obj).refusal();
  put.dir_seen = obj->dir_seen;
  Timestamp orig = obj->state == DiskObject::State::kMissing ? Timestamp() : obj->data_timestamp;
  if (obj->state == DiskObject::State::kExists) {
    put.orig_metadata = obj->metadata;
    if (auto inm = put.req.headers.get("If-None-Match")) {
      const std::string* etag = find_meta(obj->metadata, "ETag");
      for (const auto& tag : common::list_from_csv(*inm)) {
        if (tag == "*" || (etag && common::http::normalize_etag(tag) == *etag)) {
          return swob_response(412);
        }
      }
    }
  }
  if (orig >= put.p.timestamp && obj->state != DiskObject::State::kMissing) {
    return with_header(swob_response(409), "X-Backend-Timestamp", orig.internal());
  }
  return std::nullopt;
}

std::optional<Response> ObjectServer::create_put_writer(PutState& put) {
  auto writer = disk_.create_writer(put.p.loc, put.fsize, put.dir_seen);
  if (!writer.ok()) return disk_error(writer.status(), put.p.loc.device);
  put.writer = std::move(*writer);
  return std::nullopt;
}

net::awaitable<std::optional<Response>> ObjectServer::start_put_body(PutState& put) {
  // A MIME body comes with footers (Swift's proxy sends them when encryption is on) or for a
  // multiphase commit, which Swift uses for EC only. Apus stores replicated policies only, so
  // it does not offer multiphase commit in its 100 Continue: Swift's proxy then gives up on the
  // node rather than expect EC's durable-commit semantics.
  const HeaderMap& h = put.req.headers;
  put.footer = common::config_true_value(h.get_or("X-Backend-Obj-Metadata-Footer", ""));
  const bool multiphase =
      common::config_true_value(h.get_or("X-Backend-Obj-Multiphase-Commit", ""));
  if (auto checksum = h.get(common::http::kBodyChecksumHeader)) {
    if (!iequals(*checksum, "crc32c") || !put.footer) {
      co_return swob_response_with_body(400, "unsupported body checksum");
    }
    put.md5_in_footer = true;
  }
  if (!put.footer && !multiphase) co_return std::nullopt;
  std::string boundary(h.get_or("X-Backend-Obj-Multipart-Mime-Boundary", ""));
  if (boundary.empty()) co_return swob_response_with_body(400, "no MIME boundary");
  // The proxy sends footers only when the 100 Continue says we read them.
  if (put.footer) {
    HeaderMap can;
    can.set("X-Obj-Metadata-Footer", "yes");
    put.ex.set_continue_headers(std::move(can));
  }
  Status started = co_await put.body.start_mime(std::move(boundary), config_.network_chunk_size);
  if (!started.ok()) co_return body_failure(put.body, started);
  co_return std::nullopt;
}

net::awaitable<std::optional<Response>> ObjectServer::receive_put_body(PutState& put) {
  // The body: read in network_chunk_size pieces and checksummed on this worker (CRC32C always,
  // MD5 unless the footer brings it), written on the disk pool a batch of up to kWriteBatch
  // bytes at a time (a trip to the pool per 64 KiB cost more in thread switches than the
  // writes themselves).
  constexpr size_t kWriteBatch = kPutWriteBatch;
  constexpr size_t kReadPastBatch = 4096;
  const uint64_t max_size = static_cast<uint64_t>(config_.swift.constraints.max_file_size);
  std::optional<common::crypto::Md5> md5;  // none when the footer brings the proxy's
  if (!put.md5_in_footer) md5.emplace();
  // A batch and room to read past it: a chunk's worth, or for a body that fits in one batch
  // only enough to see its end (a 4 KiB PUT's buffer is then 8 KiB, not 68).
  const bool one_batch = put.fsize && *put.fsize < kWriteBatch;
  const size_t batch_bytes = one_batch ? static_cast<size_t>(*put.fsize) : kWriteBatch;
  const size_t read_past =
      one_batch ? std::min(config_.network_chunk_size, kReadPastBatch) : config_.network_chunk_size;
  std::string batch(batch_bytes + read_past, '\0');
  size_t batched = 0;
  double deadline = now_seconds() + config_.max_upload_time;
  double body_seconds = 0, write_seconds = 0;
  for (bool done = false; !done;) {
    auto t0 = std::chrono::steady_clock::now();
    auto n = co_await put.body.read(std::span(
        batch.data() + batched, std::min(config_.network_chunk_size, batch.size() - batched)));
    auto t1 = std::chrono::steady_clock::now();
    body_seconds += std::chrono::duration<double>(t1 - t0).count();
    if (!n.ok()) co_return body_failure(put.body, n.status());
    done = *n == 0;
    if (!done && now_seconds() > deadline) co_return swob_response(408);
    std::string_view piece(batch.data() + batched, *n);
    put.crc.update(piece);
    if (md5) md5->update(piece);
    batched += *n;
    put.received += *n;
    // A chunked body (or a MIME document) has no length to refuse up front: stop at the limit.
    if (put.received > max_size) co_return text_response(413, "Your request is too large.");
    if (batched == 0 || (!done && batched < batch.size() && batched < kWriteBatch)) continue;
    if (done) {
      batch.resize(batched);
      put.last_batch = std::move(batch);
      break;
    }
    // Read before the open (reads_body_first), a body longer than it said it was has no
    // writer for a batch before its last: refused as the length check below refuses it.
    if (!put.writer) co_return swob_response(499);
    std::string_view chunk(batch.data(), batched);
    Status w = co_await put.pool->call([&] { return put.writer->write(chunk); });
    batched = 0;
    write_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
    if (!w.ok()) co_return disk_error(w, put.p.loc.device);
  }
  phase_body_.observe(body_seconds);
  phase_write_.observe(write_seconds);
  if (put.fsize && *put.fsize != put.received) co_return swob_response(499);
  if (md5) put.etag = md5->hex_digest();
  co_return std::nullopt;
}

namespace {

bool is_md5_hex(std::string_view s) {
  return s.size() == 32 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

}  // namespace

std::optional<Response> ObjectServer::take_footer_md5(PutState& put) const {
  auto md5 = put.footers.get(common::http::kBodyMd5Footer);
  auto crc = put.footers.get(common::http::kBodyCrc32cFooter);
  std::optional<uint32_t> want_crc =
      crc ? common::crypto::parse_crc32c_hex(*crc) : std::nullopt;
  if (!md5 || !is_md5_hex(*md5) || !want_crc) {
    return swob_response_with_body(400, "no body checksum in footer");
  }
  if (*want_crc != put.crc.value()) {
    // The bytes changed between the proxy and here: refused as Swift refuses an MD5 mismatch.
    APUS_LOG_WARNING("PUT " + put.p.loc.name() + ": body CRC32C " + put.crc.hex() +
                     " does not match the proxy's " + std::string(*crc));
    return swob_response(422);
  }
  put.etag = std::string(*md5);
  return std::nullopt;
}

net::awaitable<std::optional<Response>> ObjectServer::finish_put_body(PutState& put) {
  if (put.footer) {
    if (auto refusal = co_await read_footers(put.body, put.footers)) co_return refusal;
  }
  if (put.md5_in_footer) {
    if (auto refusal = take_footer_md5(put)) co_return refusal;
  }
  put.footers.erase(common::http::kBodyMd5Footer);
  put.footers.erase(common::http::kBodyCrc32cFooter);
  // The footer's ETag (encryption's, of the bytes as stored) wins over the request's.
  std::string client_etag(put.req.headers.get_or("Etag", ""));
  if (auto f = put.footers.get("Etag"); f && !f->empty()) {
    client_etag = common::http::to_lower(*f);
  }
  put.footers.erase("Etag");
  if (std::string want(common::http::normalize_etag(client_etag));
      !want.empty() && common::http::to_lower(want) != put.etag) {
    co_return swob_response(422);
  }
  co_return std::nullopt;
}

Metadata ObjectServer::put_metadata(const PutState& put) const {
  const Request& req = put.req;
  Metadata md = {{"X-Timestamp", put.p.timestamp.internal()},
                 {"Content-Type", std::string(req.headers.get_or("Content-Type", ""))},
                 {"Content-Length", std::to_string(put.received)},
                 {"ETag", put.etag}};
  for (const HeaderMap* source : {&req.headers, &put.footers}) {
    for (const auto& [k, v] : *source) {
      if (is_user_or_sys_meta(k) || is_transient_sysmeta(k)) set_meta(md, title_case(k), v);
    }
  }
  copy_allowed_headers(req, md);
  if (put.delete_at.value && req.headers.contains("X-Delete-After") &&
      is_allowed_header("X-Delete-At")) {
    set_meta(md, "X-Delete-At", *put.delete_at.value);  // what X-Delete-After became
  }
  set_meta(md, "name", put.p.loc.name());
  // Last, so that no header (a replication sender's included) replaces the computed value.
  set_meta(md, kCrc32cMetaKey, stored_crc32c(put.crc.hex(), put.etag));
  return md;
}

net::awaitable<std::optional<Response>> ObjectServer::commit_put(PutState& put) {
  auto t_commit = std::chrono::steady_clock::now();
  Status committed = co_await put.pool->call([&] { return write_and_commit(put); });
  phase_commit_.observe(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t_commit).count());
  if (!committed.ok()) co_return disk_error(committed, put.p.loc.device);
  co_return co_await drain_put_body(put);
}

Status ObjectServer::write_and_commit(PutState& put) {
  Status s = put.last_batch.empty() ? Status() : put.writer->write(put.last_batch);
  if (s.ok()) s = put.writer->commit(put.md, put.p.timestamp);
  put.writer.reset();
  return s;
}

net::awaitable<std::optional<Response>> ObjectServer::drain_put_body(PutState& put) {
  if (put.body.is_mime()) {
    // Anything after the footer is read and dropped, as Swift does, before the answer.
    if (Status drained = co_await put.body.drain(); !drained.ok()) {
      co_return body_failure(put.body, drained);
    }
  }
  co_return std::nullopt;
}

net::awaitable<void> ObjectServer::after_put(PutState& put) {
  int64_t orig_delete_at = delete_at_of(put.orig_metadata);
  int64_t new_delete_at = put.delete_at.delete_at;
  if (orig_delete_at != new_delete_at) {
    if (new_delete_at) co_await delete_at_update(put.p, "PUT", new_delete_at);
    if (orig_delete_at) co_await delete_at_update(put.p, "DELETE", orig_delete_at);
  }
  HeaderMap update;
  update.set("X-Size", std::to_string(put.received));
  update.set("X-Content-Type", *find_meta(put.md, "Content-Type"));
  update.set("X-Timestamp", put.p.timestamp.internal());
  update.set("X-Etag", put.etag);
  // Overrides: the x-backend- form first, so the sysmeta form (the one middlewares use) wins.
  // Footers come after the request's headers within each form.
  for (std::string_view prefix :
       {"x-backend-container-update-override-", "x-object-sysmeta-container-update-override-"}) {
    for (const HeaderMap* source :
         {&put.req.headers, static_cast<const HeaderMap*>(&put.footers)}) {
      for (const auto& [k, v] : *source) {
        if (istarts_with(k, prefix)) update.set("X-" + title_case(k.substr(prefix.size())), v);
      }
    }
  }
  co_await container_update(put.p, "PUT", std::move(update));
}

// ---- GET / HEAD -----------------------------------------------------------------------------

net::awaitable<void> ObjectServer::handle_get_head(Exchange& ex, Parsed& p) {
  const Request& req = ex.request();
  bool open_expired = common::config_true_value(req.headers.get_or("X-Backend-Replication", "")) ||
                      common::config_true_value(req.headers.get_or("X-Backend-Open-Expired", ""));
  common::io::BlockingPool* pool_ptr = co_await pools_.checked(p.loc.device);
  if (!pool_ptr) co_return co_await ex.reply(device_unavailable(req, p.loc.device));
  common::io::BlockingPool& pool = *pool_ptr;
  // swob writes its explanation pages for GET only: a HEAD answer has no body and length 0.
  bool head = req.method == "HEAD";
  // A small object's GET reads its body in the job that opens it: one hand-off to the disk
  // pool and back instead of two, which is most of a 4 KiB GET's cost in this server.
  std::optional<std::string> small_body;
  OrRefusal<DiskObject> opened = co_await pool.call([&] {
    OrRefusal<DiskObject> o = open_checked(p.loc);
    if (!head && o && o->state == DiskObject::State::kExists) {
      small_body = read_small_body(*o, keep_cache(req, o->size));
    }
    return o;
  });
  if (!opened) {
    Response refusal = std::move(opened).refusal();
    if (head) refusal.body.clear();
    co_return co_await ex.reply(std::move(refusal));
  }
  DiskObject& obj = *opened;
  bool expired = !open_expired && DiskFileManager::is_expired(obj, p.timestamp);
  if (obj.state != DiskObject::State::kExists || expired) {
    Response r = swob_response(404);
    if (obj.state == DiskObject::State::kDeleted || expired) {
      r.headers.set("X-Backend-Timestamp", obj.timestamp.internal());
    }
    auto outcome =
        common::http::evaluate_conditional(req.headers, {.etag = "", .not_found = true});
    if (outcome == common::http::ConditionalOutcome::kPreconditionFailed) {
      r = swob_response(412);
    }
    if (head) r.body.clear();
    co_return co_await ex.reply(std::move(r));
  }
  co_await send_object(ex, p, obj, small_body ? &*small_body : nullptr);
}

namespace {

// A large GET's read size and the most all of them may hold at once (32 GETs' two buffers).
constexpr size_t kLargeReadBytes = 1 << 20;
constexpr int64_t kLargeReadHeld = 2 * int64_t{kLargeReadBytes};  // a GET's two buffers
constexpr int64_t kMaxLargeReadBytes = 64 << 20;

// What a whole read checks the bytes against: the CRC32C stored with the body when there is one
// and the ETag is the one it was stored with (a pass at memory speed), else the MD5 against the
// ETag, as Swift's reader checks.
class WholeBodyCheck {
 public:
  WholeBodyCheck(const Metadata& data_metadata, std::string etag)
      : want_crc_(stored_crc32c_for(data_metadata, etag)), etag_(std::move(etag)) {
    if (!want_crc_) md5_.emplace();
  }
  void update(std::string_view data) {
    if (md5_) {
      md5_->update(data);
    } else {
      crc_.update(data);
    }
  }
  bool matches() const { return md5_ ? md5_->hex_digest() == etag_ : crc_.value() == *want_crc_; }
  // The quarantine's reason.
  const char* mismatch() const {
    return md5_ ? "ETag and file's md5 do not match"
                : "stored CRC32C and file's contents do not match";
  }

 private:
  std::optional<uint32_t> want_crc_;
  std::string etag_;
  common::crypto::Crc32c crc_;
  std::optional<common::crypto::Md5> md5_;
};

}  // namespace

bool ObjectServer::keep_cache(const Request& req, uint64_t size) const {
  // Swift's keep_cache: what a GET reads stays in the page cache only for small objects
  // (keep_cache_size) read without a token (or any, with keep_cache_private); otherwise each
  // read MiB is dropped, so big and private reads do not push out what public reads share.
  return (config_.keep_cache_private || (!req.headers.contains("X-Auth-Token") &&
                                         !req.headers.contains("X-Storage-Token"))) &&
         size < config_.disk.keep_cache_size;
}

std::optional<std::string> ObjectServer::read_small_body(const DiskObject& obj, bool keep) {
  if (obj.size == 0 || obj.size > config_.disk_chunk_size) return std::nullopt;
  std::string body(static_cast<size_t>(obj.size), '\0');
  size_t off = 0;
  while (off < body.size()) {
    auto n = disk_.read(obj, off, std::span(body.data() + off, body.size() - off));
    if (!n.ok() || *n == 0) return std::nullopt;
    off += *n;
  }
  if (!keep) disk_.drop_cache(obj, 0, obj.size);
  return body;
}

net::awaitable<void> ObjectServer::send_object(Exchange& ex, Parsed& p, DiskObject& obj,
                                               const std::string* small_body) {
  const Request& req = ex.request();
  const Metadata& md = obj.metadata;
  static const std::string kNoEtag;
  const std::string& etag = find_meta(md, "ETag") ? *find_meta(md, "ETag") : kNoEtag;
  auto meta_ts = Timestamp::parse(find_meta(md, "X-Timestamp") ? *find_meta(md, "X-Timestamp")
                                                                : obj.timestamp.internal());
  Timestamp x_ts = meta_ts.ok() ? *meta_ts : obj.timestamp;

  HeaderMap h;
  h.reserve(md.size() + 8);
  const std::string* ctype = find_meta(md, "Content-Type");
  h.set("Content-Type", ctype ? *ctype : "application/octet-stream");
  for (const auto& [k, v] : md) {
    if (is_user_or_sys_meta(k) || is_transient_sysmeta(k) || is_allowed_header(k)) {
      h.set(title_case(k), v);
    }
  }
  h.set("Etag", "\"" + etag + "\"");
  h.set("Last-Modified", common::http::format_http_date(x_ts.ceil()));
  if (const auto* enc = find_meta(md, "Content-Encoding")) h.set("Content-Encoding", *enc);
  h.set("X-Timestamp", x_ts.normal());
  h.set("X-Backend-Timestamp", x_ts.internal());
  const std::string data_timestamp = obj.data_timestamp.internal();
  h.set("X-Backend-Data-Timestamp", data_timestamp);
  h.set("X-Backend-Durable-Timestamp", data_timestamp);

  // X-Backend-Etag-Is-At: the first listed metadata key present holds the etag to compare.
  std::string_view conditional_etag = etag;
  if (auto at = req.headers.get("X-Backend-Etag-Is-At")) {
    common::any_csv_item(*at, [&](std::string_view key) {
      const std::string* value = find_meta_ci(md, key);
      if (value) conditional_etag = *value;
      return value != nullptr;
    });
  }
  auto outcome = common::http::evaluate_conditional(
      req.headers, {.etag = conditional_etag, .last_modified = x_ts.ceil(), .not_found = false});
  if (outcome != common::http::ConditionalOutcome::kProceed) {
    Response r;
    r.status = outcome == common::http::ConditionalOutcome::kNotModified ? 304 : 412;
    r.headers = std::move(h);
    r.headers.set("Content-Length", "0");
    co_return co_await ex.reply(std::move(r));
  }
  bool head = req.method == "HEAD";
  if (head) {
    Response r;
    r.headers = std::move(h);
    r.headers.set("Content-Length", std::to_string(obj.size));
    co_return co_await ex.reply(std::move(r));
  }

  // X-Backend-Ignore-Range-If-Metadata-Present (sent by dlo and slo): an object holding any of
  // the listed metadata is answered whole whatever the Range, as Swift's object server does, so
  // a large object's manifest keeps its own headers.
  std::optional<std::string_view> range_header = req.headers.get("Range");
  if (auto ignore = req.headers.get("X-Backend-Ignore-Range-If-Metadata-Present")) {
    if (common::any_csv_item(
            *ignore, [&](std::string_view key) { return find_meta_ci(md, key) != nullptr; })) {
      range_header.reset();
    }
  }
  auto range = common::http::evaluate_range(range_header, obj.size);
  if (range.outcome == common::http::RangeOutcome::kUnsatisfiable) {
    // The object's headers stay (its Content-Type too), with Swift's 416 page as the body.
    Response r = swob_response(416);
    for (const auto& [k, v] : h) r.headers.set(k, v);
    r.headers.set("Content-Range", common::http::unsatisfied_content_range(obj.size));
    co_return co_await ex.reply(std::move(r));
  }

  common::io::BlockingPool& pool = pools_.get(p.loc.device);
  const bool keep = keep_cache(req, obj.size);
  constexpr uint64_t kDropCacheWindow = 1 << 20;
  // Two buffers: the disk pool reads the next chunk while this worker hashes and sends the
  // current one, so a large GET waits on the disk and the network at once, not in turn. None
  // when the body was read with the open; no bigger than the object. A large object is read
  // kLargeReadBytes at a time while the server's budget for such buffers lasts: a trip to the
  // disk pool per 64 KiB cost a 16 MiB GET 256 hand-offs (perf: 14% of its CPU in them).
  size_t chunk = config_.disk_chunk_size;
  struct LargeReadBuffers {
    std::atomic<int64_t>* held = nullptr;
    ~LargeReadBuffers() {
      if (held) held->fetch_sub(kLargeReadHeld, std::memory_order_relaxed);
    }
  } large_buffers;
  if (!small_body && obj.size >= 4 * kLargeReadBytes && kLargeReadBytes > chunk) {
    if (large_read_bytes_.fetch_add(kLargeReadHeld, std::memory_order_relaxed) +
            kLargeReadHeld <= kMaxLargeReadBytes) {
      large_buffers.held = &large_read_bytes_;
      chunk = kLargeReadBytes;
    } else {
      large_read_bytes_.fetch_sub(kLargeReadHeld, std::memory_order_relaxed);
    }
  }
  const size_t buf_size =
      small_body ? 0 : static_cast<size_t>(std::min<uint64_t>(chunk, obj.size));
  // Left uninitialised: every byte sent is read into them first (zeroing cost a 16 MiB GET
  // 2 MiB of memset).
  std::array<std::unique_ptr<char[]>, 2> bufs;
  if (buf_size > 0) {
    for (auto& buf : bufs) buf = std::make_unique_for_overwrite<char[]>(buf_size);
  }
  // A read of the whole file whose bytes do not match their checksum: the file is bad and goes
  // to quarantine (the next reader gets another replica), as Swift's reader does for any read
  // from byte 0 to the end. Done before the last chunk goes out, so a client that has read the
  // whole body finds the object gone. False on a mismatch.
  auto check_whole = [&](const WholeBodyCheck& check) -> net::awaitable<bool> {
    if (check.matches()) co_return true;
    Location loc = p.loc;
    co_await pool.call([&] {
      if (auto hash = disk_.object_hash(loc); hash.ok()) {
        disk_.quarantine(loc, *hash, check.mismatch()).ignore();
      }
    });
    co_return false;
  };
  // Apus's proxy asks for a verified read (kVerifiedReadHeader) of whole segments: on a
  // mismatch the last chunk is held back, so the reader sees a short body instead of wrong
  // bytes and need not hash them itself. Swift's reader (and a request without the header)
  // sends the whole body anyway, as Swift's probe tests expect.
  const bool verified_read = req.headers.contains(common::http::kVerifiedReadHeader) &&
                             obj.size > 0 &&
                             (range.outcome == common::http::RangeOutcome::kWhole ||
                              (range.ranges.size() == 1 && range.ranges.front().start == 0 &&
                               range.ranges.front().end == obj.size));
  if (verified_read) h.set(common::http::kVerifiedReadHeader, "yes");
  // Streams [start, end) of the object, checking the MD5 when it is the whole file; false when
  // the client or the disk failed.
  auto stream_range = [&](uint64_t start, uint64_t end, bool whole) -> net::awaitable<bool> {
    using namespace boost::asio::experimental::awaitable_operators;
    Result<size_t> got = size_t{0};
    Status sent;
    uint64_t cached_from = start;  // read but not yet dropped from the cache
    auto read_into = [&](uint64_t off, size_t idx) -> net::awaitable<void> {
      if (small_body) {  // already read: the rest of the range at once
        got = static_cast<size_t>(end - off);
        co_return;
      }
      size_t want = static_cast<size_t>(std::min<uint64_t>(buf_size, end - off));
      got = co_await pool.call([&, off, idx, want] {
        auto n = disk_.read(obj, off, std::span(bufs[idx].get(), want));
        uint64_t read_to = off + (n.ok() ? *n : 0);
        if (!keep &&
            (read_to - cached_from >= kDropCacheWindow || read_to >= end || !n.ok() || *n == 0)) {
          disk_.drop_cache(obj, cached_from, read_to - cached_from);
          cached_from = read_to;
        }
        return n;
      });
    };
    std::optional<WholeBodyCheck> check;
    if (whole) check.emplace(obj.data_metadata, etag);
    auto send = [&](std::string_view data) -> net::awaitable<void> {
      if (check) check->update(data);
      sent = co_await ex.write_body(data);
    };
    uint64_t off = start;
    size_t cur = 0;
    co_await read_into(off, cur);
    for (;;) {
      if (!got.ok() || *got == 0) co_return false;
      std::string_view data(small_body ? small_body->data() + off : bufs[cur].get(), *got);
      uint64_t next = off + *got;
      if (next >= end) {
        if (check) {
          check->update(data);
          if (!co_await check_whole(*check) && verified_read) {
            // The quarantine's own line names the file.
            APUS_LOG_WARNING(std::string("verified read: ") + check->mismatch() +
                             "; last chunk held back");
            co_return false;
          }
          sent = co_await ex.write_body(data);
        } else {
          co_await send(data);
        }
        co_return sent.ok();
      }
      co_await (read_into(next, cur ^ 1) && send(data));
      if (!sent.ok()) co_return false;
      off = next;
      cur ^= 1;
    }
  };

  // A body read with the open goes out with the head, in one write.
  if (small_body) ex.hold_head_for_body();
  if (range.outcome == common::http::RangeOutcome::kWhole) {
    if (!(co_await ex.start_response(200, std::move(h), obj.size)).ok()) co_return;
    bool ok = co_await stream_range(0, obj.size, /*whole=*/true);
    if (!ok) co_return;  // the runtime closes the connection on a short body
    (void)co_await ex.finish_response();
    co_return;
  }

  if (range.ranges.size() == 1) {
    const auto& r = range.ranges.front();
    h.set("Content-Range", common::http::content_range_value(r, obj.size));
    if (!(co_await ex.start_response(206, std::move(h), r.size())).ok()) co_return;
    // A range from 0 to the end (bytes=0-, bytes=-<size>, or past the end) is a whole read.
    if (co_await stream_range(r.start, r.end, r.start == 0 && r.end == obj.size)) {
      (void)co_await ex.finish_response();
    }
    co_return;
  }
  std::string boundary = common::http::random_boundary();
  std::string type(h.get_or("Content-Type", "application/octet-stream"));
  h.set("Content-Type", common::http::multipart_content_type(boundary));
  uint64_t length =
      common::http::multipart_body_length(range.ranges, boundary, type, obj.size);
  if (!(co_await ex.start_response(206, std::move(h), length)).ok()) co_return;
  for (const auto& r : range.ranges) {
    if (!(co_await ex.write_body(common::http::multipart_part_header(boundary, type, r, obj.size)))
             .ok()) {
      co_return;
    }
    if (!co_await stream_range(r.start, r.end, false)) co_return;
    if (!(co_await ex.write_body("\r\n")).ok()) co_return;
  }
  if (!(co_await ex.write_body(common::http::multipart_terminator(boundary))).ok()) co_return;
  (void)co_await ex.finish_response();
}

// ---- POST -----------------------------------------------------------------------------------

net::awaitable<void> ObjectServer::handle_post(Exchange& ex, Parsed& p) {
  const Request& req = ex.request();
  int64_t new_delete_at = 0;
  if (auto v = req.headers.get("X-Delete-At"); v && !v->empty()) {
    // Swift's int() raises here and answers 500; a 400 as its PUT gives is the honest answer.
    std::optional<int64_t> parsed = common::parse_python_int_saturating(*v);
    if (!parsed) co_return co_await ex.reply(text_response(400, "Non-integer X-Delete-At"));
    new_delete_at = *parsed;
  }
  if (new_delete_at && static_cast<double>(new_delete_at) < p.timestamp.seconds()) {
    co_return co_await ex.reply(text_response(400, "X-Delete-At in past"));
  }
  Timestamp req_ctype_ts;
  if (req.headers.contains("Content-Type") && !req.headers.get_or("Content-Type", "").empty()) {
    auto t = Timestamp::parse(req.headers.get_or("Content-Type-Timestamp", p.timestamp.internal()));
    req_ctype_ts = t.ok() ? *t : p.timestamp;
  }
  common::io::BlockingPool* pool_ptr = co_await pools_.checked(p.loc.device);
  if (!pool_ptr) co_return co_await ex.reply(device_unavailable(req, p.loc.device));
  common::io::BlockingPool& pool = *pool_ptr;
  struct Posted {
    Response accepted;  // the 202
    HeaderMap update;
    int64_t old_delete_at = 0;  // set when the POST changes X-Delete-At
    int64_t new_delete_at = 0;
  };
  OrRefusal<Posted> posted = co_await pool.call([&]() -> OrRefusal<Posted> {
    OrRefusal<DiskObject> obj = open_checked(p.loc);
    if (!obj) return std::move(obj).refusal();
    bool replication = common::config_true_value(req.headers.get_or("X-Backend-Replication", ""));
    bool expired = !replication && DiskFileManager::is_expired(*obj, p.timestamp);
    if (obj->state != DiskObject::State::kExists || expired) return swob_response(404);
    Posted out;
    const Metadata& orig = obj->metadata;
    Timestamp orig_ts = obj->timestamp;
    if (const auto* v = find_meta(orig, "X-Timestamp")) {
      if (auto t = Timestamp::parse(*v); t.ok()) orig_ts = *t;
    }
    if (orig_ts >= p.timestamp && obj->ctype_timestamp >= req_ctype_ts) {
      return with_header(swob_response(409), "X-Backend-Timestamp", orig_ts.internal());
    }
    Metadata md;
    if (p.timestamp > orig_ts) {
      md.emplace_back("X-Timestamp", p.timestamp.internal());
      for (const auto& [k, v] : req.headers) {
        if (has_prefix_and_more(k, kUserMeta) || is_transient_sysmeta(k)) {
          set_meta(md, title_case(k), v);
        }
      }
      copy_allowed_headers(req, md);
      if (delete_at_of(orig) != new_delete_at) {
        out.old_delete_at = delete_at_of(orig);
        out.new_delete_at = new_delete_at;
      }
    } else {
      // Only the content-type changes: keep the POST-able set as it is.
      for (const auto& [k, v] : orig) {
        std::string lower = common::http::to_lower(k);
        bool fixed = lower == "content-length" || lower == "etag" || lower == "deleted" ||
                     lower == "x-static-large-object" || lower == "name" || is_sys_meta(k);
        if (!fixed && k != "Content-Type" && k != "Content-Type-Timestamp") set_meta(md, k, v);
      }
    }
    std::string ctype;
    Timestamp ctype_ts;
    std::optional<Timestamp> new_ctype_ts;
    if (req_ctype_ts > obj->ctype_timestamp) {
      ctype = std::string(req.headers.get_or("Content-Type", ""));
      ctype_ts = req_ctype_ts;
      new_ctype_ts = req_ctype_ts;
      set_meta(md, "Content-Type", ctype);
      set_meta(md, "Content-Type-Timestamp", ctype_ts.internal());
    } else {
      ctype = find_meta(orig, "Content-Type") ? *find_meta(orig, "Content-Type") : "";
      ctype_ts = obj->ctype_timestamp;
      if (ctype_ts != obj->data_timestamp) {
        set_meta(md, "Content-Type", ctype);
        set_meta(md, "Content-Type-Timestamp", ctype_ts.internal());
        new_ctype_ts = ctype_ts;
      }
    }
    set_meta(md, "name", p.loc.name());
    Timestamp meta_ts = *Timestamp::parse(*find_meta(md, "X-Timestamp"));
    Status s = disk_.write_meta(p.loc, md, meta_ts, new_ctype_ts);
    if (!s.ok()) return disk_error(s, p.loc.device);
    std::string update_ctype = ctype;
    if (ctype_ts != obj->data_timestamp) {
      // SLO's swift_bytes on the data's content type must reach the container listing still.
      const std::string* data_ct = find_meta(obj->data_metadata, "Content-Type");
      if (data_ct) {
        auto pos = data_ct->find(";swift_bytes=");
        if (pos != std::string::npos) update_ctype += data_ct->substr(pos);
      }
    }
    out.update.set("X-Size", find_meta(orig, "Content-Length") ? *find_meta(orig, "Content-Length") : "0");
    out.update.set("X-Content-Type", update_ctype);
    out.update.set("X-Timestamp", obj->data_timestamp.internal());
    out.update.set("X-Content-Type-Timestamp", ctype_ts.internal());
    out.update.set("X-Meta-Timestamp", meta_ts.internal());
    out.update.set("X-Etag", find_meta(orig, "ETag") ? *find_meta(orig, "ETag") : "");
    for (std::string_view prefix : {"x-object-sysmeta-container-update-override-"}) {
      for (const auto& [k, v] : orig) {
        if (istarts_with(k, prefix)) out.update.set("X-" + title_case(k.substr(prefix.size())), v);
      }
    }
    out.accepted = swob_response(202);
    out.accepted.headers.set("X-Backend-Content-Type", ctype);
    for (const auto& [k, v] : orig) {
      if (is_sys_meta(k)) out.accepted.headers.set(title_case(k), v);
    }
    return out;
  });
  if (!posted) co_return co_await ex.reply(std::move(posted).refusal());
  if (posted->new_delete_at) co_await delete_at_update(p, "PUT", posted->new_delete_at);
  if (posted->old_delete_at) co_await delete_at_update(p, "DELETE", posted->old_delete_at);
  co_await container_update(p, "PUT", std::move(posted->update));
  co_return co_await ex.reply(std::move(posted->accepted));
}

// ---- DELETE ---------------------------------------------------------------------------------

net::awaitable<void> ObjectServer::handle_delete(Exchange& ex, Parsed& p) {
  const Request& req = ex.request();
  std::optional<Timestamp> if_delete_at;
  if (auto v = req.headers.get("X-If-Delete-At")) {
    auto t = Timestamp::parse(*v);
    if (!t.ok()) {
      co_return co_await ex.reply(swob_response_with_body(400, "Bad X-If-Delete-At header value"));
    }
    if_delete_at = *t;
  }
  common::io::BlockingPool* pool_ptr = co_await pools_.checked(p.loc.device);
  if (!pool_ptr) co_return co_await ex.reply(device_unavailable(req, p.loc.device));
  common::io::BlockingPool& pool = *pool_ptr;
  // What a DELETE that went ahead did, and its answer (which may be a failed tombstone write:
  // as in Swift, the queue row is removed all the same). A refusal did nothing.
  struct Deleted {
    Response response;
    bool update = false;
    int64_t orig_delete_at = 0;  // the queue row to remove
  };
  OrRefusal<Deleted> result = co_await pool.call([&]() -> OrRefusal<Deleted> {
    OrRefusal<DiskObject> obj = open_checked(p.loc);
    if (!obj) return std::move(obj).refusal();
    Timestamp orig_ts;  // zero when nothing is there
    Metadata orig_md;
    int status = 404;
    bool expired = DiskFileManager::is_expired(*obj, p.timestamp);
    if (obj->state == DiskObject::State::kDeleted) {
      orig_ts = obj->timestamp;
    } else if (expired) {
      orig_ts = obj->data_timestamp;
      orig_md = obj->metadata;
    } else if (obj->state == DiskObject::State::kExists) {
      orig_ts = obj->data_timestamp;
      orig_md = obj->metadata;
      status = orig_ts < p.timestamp ? 204 : 409;
    }
    if (if_delete_at) {
      // No tombstone unless the X-Delete-At it names is the stored one.
      if (orig_ts.is_zero()) return swob_response(404);
      if (orig_ts >= p.timestamp) return swob_response(409);
      auto stored = Timestamp::from_seconds(static_cast<double>(delete_at_of(orig_md)));
      if (!stored.ok() || *stored != *if_delete_at) {
        return swob_response_with_body(412, "X-If-Delete-At and X-Delete-At do not match");
      }
      status = 204;
    }
    Deleted out;
    out.orig_delete_at = delete_at_of(orig_md);
    if (orig_ts < p.timestamp) {
      Status s = disk_.write_tombstone(p.loc, p.timestamp, {}, obj->dir_seen);
      if (!s.ok()) {
        out.response = disk_error(s, p.loc.device);
        return out;
      }
      out.update = true;
    }
    out.response = swob_response(status);
    out.response.headers.set("X-Backend-Timestamp", std::max(orig_ts, p.timestamp).internal());
    const std::string* ct = find_meta(orig_md, "Content-Type");
    out.response.headers.set("X-Backend-Content-Type", ct ? *ct : "");
    return out;
  });
  if (!result) co_return co_await ex.reply(std::move(result).refusal());
  if (result->orig_delete_at) co_await delete_at_update(p, "DELETE", result->orig_delete_at);
  if (result->update) {
    HeaderMap update;
    update.set("X-Timestamp", p.timestamp.internal());
    co_await container_update(p, "DELETE", std::move(update));
  }
  co_return co_await ex.reply(std::move(result->response));
}

// ---- container updates ----------------------------------------------------------------------

net::awaitable<void> ObjectServer::container_update(const Parsed& p, std::string op,
                                                    HeaderMap update_headers) {
  auto update = container_update_for(*p.req, p.loc, std::move(op), std::move(update_headers));
  if (!update) co_return;
  auto start = std::chrono::steady_clock::now();
  co_await updates_.send(std::make_shared<const ContainerUpdate>(std::move(*update)),
                         config_.container_update_timeout);
  phase_update_.observe(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

net::awaitable<void> ObjectServer::delete_at_update(const Parsed& p, std::string op,
                                                    int64_t delete_at) {
  auto hash = disk_.object_hash(p.loc);
  if (!hash.ok()) co_return;
  auto update = delete_at_update_for(
      *p.req, p.loc, p.timestamp, std::move(op), delete_at, *hash,
      {config_.expiring_objects_account, config_.expiring_objects_container_divisor});
  if (!update) co_return;
  // Swift sends these one by one and waits for each (conn_timeout + node_timeout at most).
  co_await updates_.send(std::make_shared<const ContainerUpdate>(std::move(*update)),
                         config_.conn_timeout + config_.node_timeout);
}

}  // namespace apus::object
