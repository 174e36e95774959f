// SSYNC: the line formats (ssync.h) and the receiver, ObjectServer::run_ssync.
#include "object-server/ssync.h"

#include <sys/file.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <vector>

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "common/config/config.h"
#include "common/http/headers.h"
#include "common/log/log.h"
#include "object-server/object_server.h"

namespace apus::object::ssync {

using common::Timestamp;

namespace {

std::vector<std::string_view> split_spaces(std::string_view s) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\n')) ++i;
    size_t start = i;
    while (i < s.size() && !(s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\n')) ++i;
    if (i > start) out.push_back(s.substr(start, i - start));
  }
  return out;
}

bool is_object_hash(std::string_view h) {
  if (h.size() != 32) return false;
  for (char c : h) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

// Python's int(v, 16) for what a sender writes ("%x" of a delta, possibly negative).
std::optional<int64_t> parse_hex_delta(std::string_view v) {
  bool negative = !v.empty() && v.front() == '-';
  if (negative) v.remove_prefix(1);
  if (v.starts_with("0x") || v.starts_with("0X")) v.remove_prefix(2);
  if (v.empty() || v.size() > 15) return std::nullopt;  // deltas stay far below 16^15
  int64_t n = 0;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n, 16);
  if (ec != std::errc() || end != v.data() + v.size()) return std::nullopt;
  return negative ? -n : n;
}

std::string hex_delta(int64_t delta) {
  char buf[24];
  char* p = buf;
  uint64_t magnitude = delta < 0 ? static_cast<uint64_t>(-delta) : static_cast<uint64_t>(delta);
  if (delta < 0) *p++ = '-';
  auto [end, ec] = std::to_chars(p, buf + sizeof(buf), magnitude, 16);
  (void)ec;
  return std::string(buf, end);
}

}  // namespace

std::optional<Offer> decode_missing(std::string_view line) {
  std::vector<std::string_view> parts = split_spaces(line);
  if (parts.size() < 2 || parts.size() > 3 || !is_object_hash(parts[0])) return std::nullopt;
  auto ts = Timestamp::parse(parts[1]);
  if (!ts.ok()) return std::nullopt;
  Offer offer;
  offer.hash = std::string(parts[0]);
  offer.ts_data = offer.ts_meta = offer.ts_ctype = *ts;
  if (parts.size() < 3) return offer;
  std::string_view rest = parts[2];
  while (!rest.empty()) {
    size_t comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    size_t colon = item.find(':');
    if (colon == std::string_view::npos) continue;  // Swift skips items without one
    std::string_view key = item.substr(0, colon);
    std::string_view value = item.substr(colon + 1);
    if (value.find(':') != std::string_view::npos) return std::nullopt;
    if (key == "m" || key == "t") {
      auto delta = parse_hex_delta(value);
      if (!delta) return std::nullopt;
      auto moved = ts->plus_delta(*delta);
      if (!moved.ok()) return std::nullopt;
      (key == "m" ? offer.ts_meta : offer.ts_ctype) = *moved;
    } else if (key == "durable") {
      offer.durable = common::config_true_value(value);
    }
  }
  return offer;
}

std::string encode_missing(const Offer& offer) {
  std::string msg = offer.hash + " " + offer.ts_data.internal();
  std::string extra;
  if (offer.ts_meta != offer.ts_data) {
    extra = "m:" + hex_delta(offer.ts_meta.raw() - offer.ts_data.raw());
    if (offer.ts_ctype != offer.ts_data) {
      extra += ",t:" + hex_delta(offer.ts_ctype.raw() - offer.ts_data.raw());
    }
  }
  if (!offer.durable) extra += std::string(extra.empty() ? "" : ",") + "durable:False";
  if (!extra.empty()) msg += " " + extra;
  return msg;
}

std::optional<std::string> encode_wanted(const Offer& remote, const LocalState& local) {
  bool data = false;
  bool meta = false;
  if (local.ts_data) {
    data = remote.ts_data > *local.ts_data;
    if (local.ts_meta && remote.ts_meta > *local.ts_meta) meta = true;
    if (local.ts_ctype && remote.ts_ctype > *local.ts_ctype && remote.ts_ctype > remote.ts_data) {
      meta = true;
    }
  } else {
    data = meta = true;
  }
  if (!data && !meta) return std::nullopt;
  return remote.hash + " " + (data ? "d" : "") + (meta ? "m" : "");
}

Wanted decode_wanted(std::string_view parts) {
  Wanted w;
  w.data = parts.find('d') != std::string_view::npos;
  w.meta = parts.find('m') != std::string_view::npos;
  if (!w.data && !w.meta) w.data = true;
  return w;
}

}  // namespace apus::object::ssync

// ---- The receiver ---------------------------------------------------------------------------

namespace apus::object {

namespace net = boost::asio;
using common::Result;
using common::Status;
using common::http::Exchange;
using common::http::HeaderMap;
using common::http::Request;
using common::http::Response;
using common::io::File;

namespace {

// A line of the request is at most this long (Swift reads lines of network_chunk_size): a
// sender never writes more than an update's header line, metadata included.
constexpr size_t kMaxLine = 65536;
// The headers of one update (its object's metadata) take at most this many bytes.
constexpr size_t kMaxUpdateHeaderBytes = 1 << 20;
// The answer to a missing check is held until the sender's list ends (the protocol's order): at
// most this much of it, some 1.5 million wanted objects, far beyond a partition's.
constexpr size_t kMaxWantedBytes = 64 << 20;
// Offered objects looked up on the disk pool at a time.
constexpr size_t kCheckBatch = 128;

std::string_view strip(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r' ||
                        s.front() == '\n')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' ||
                        s.back() == '\n')) {
    s.remove_suffix(1);
  }
  return s;
}

// What an error line may say: printable ASCII, at most 1 KiB of it.
std::string printable(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 1024)) out += (c >= 0x20 && c < 0x7f && c != '\'') ? c : '?';
  return out;
}

}  // namespace

// The request body of an SSYNC, read as lines (the protocol's messages) or as bytes (an update's
// object body).
class SsyncInput {
 public:
  SsyncInput(Exchange& ex, size_t chunk_size) : ex_(ex), chunk_size_(chunk_size) {}

  // The next line with its "\n", what is left before the end without one, or "" at the end.
  net::awaitable<Result<std::string>> readline() {
    for (;;) {
      size_t nl = buffer_.find('\n', pos_);
      if (nl != std::string::npos) {
        std::string line = buffer_.substr(pos_, nl + 1 - pos_);
        pos_ = nl + 1;
        co_return line;
      }
      if (buffer_.size() - pos_ > kMaxLine) co_return Status::invalid_argument("line too long");
      if (eof_) {
        std::string rest = buffer_.substr(pos_);
        pos_ = buffer_.size();
        co_return rest;
      }
      Status filled = co_await fill();
      if (!filled.ok()) co_return filled;
    }
  }

  // Up to out.size() bytes; 0 at the end.
  net::awaitable<Result<size_t>> read(std::span<char> out) {
    if (pos_ < buffer_.size()) {
      size_t n = std::min(out.size(), buffer_.size() - pos_);
      std::copy_n(buffer_.data() + pos_, n, out.data());
      pos_ += n;
      co_return n;
    }
    if (eof_) co_return size_t{0};
    auto got = co_await ex_.read_body(out);
    if (got.ok() && *got == 0) eof_ = true;
    co_return got;
  }

 private:
  net::awaitable<Status> fill() {
    buffer_.erase(0, pos_);
    pos_ = 0;
    const size_t had = buffer_.size();
    buffer_.resize(had + chunk_size_);
    auto got = co_await ex_.read_body(std::span<char>(buffer_.data() + had, chunk_size_));
    buffer_.resize(had + (got.ok() ? *got : 0));
    if (!got.ok()) co_return got.status();
    if (*got == 0) eof_ = true;
    co_return Status();
  }

  Exchange& ex_;
  const size_t chunk_size_;
  std::string buffer_;
  size_t pos_ = 0;
  bool eof_ = false;
};

namespace {

// One update (PUT, POST or DELETE) as a request to this object server: its body is the next
// Content-Length bytes of the SSYNC's, and its answer is kept, not sent.
class UpdateExchange final : public Exchange {
 public:
  UpdateExchange(Request request, SsyncInput& input, uint64_t length)
      : request_(std::move(request)), input_(input), left_(length) {}

  const Request& request() const override { return request_; }
  net::awaitable<Result<size_t>> read_body(std::span<char> buf) override {
    if (left_ == 0 || buf.empty()) co_return size_t{0};
    auto got = co_await input_.read(buf.first(std::min<uint64_t>(buf.size(), left_)));
    if (!got.ok()) co_return got;
    if (*got == 0) co_return Status::cancelled("early termination of an update's body");
    left_ -= *got;
    co_return *got;
  }
  net::awaitable<Status> send_continue() override { co_return Status(); }
  net::awaitable<Status> write_body(std::string_view chunk) override {
    if (body_.size() < 1024) body_.append(chunk.substr(0, 1024 - body_.size()));
    co_return Status();
  }
  net::awaitable<Status> finish_response() override { co_return Status(); }
  bool response_started() const override { return status_ != 0; }
  int response_status() const override { return status_; }

  // Body bytes the handler left unread.
  uint64_t left() const { return left_; }
  const std::string& body() const { return body_; }

 protected:
  net::awaitable<Status> do_respond(Response response) override {
    status_ = response.status;
    body_ = response.body.substr(0, 1024);
    co_return Status();
  }
  net::awaitable<Status> do_start_response(int status, HeaderMap,
                                           std::optional<uint64_t>) override {
    status_ = status;
    co_return Status();
  }

 private:
  Request request_;
  SsyncInput& input_;
  uint64_t left_;
  int status_ = 0;
  std::string body_;
};

// flock(LOCK_EX | LOCK_NB) on `path` (made if missing): the file while held, nullopt when
// someone else holds it. Pool thread.
Result<std::optional<File>> try_lock(common::io::Fs& fs, const std::string& path) {
  auto file = fs.open_append(path);
  if (!file.ok()) return file.status();
  if (::flock(file->fd(), LOCK_EX | LOCK_NB) == 0) return std::optional<File>(std::move(*file));
  if (errno == EWOULDBLOCK) return std::optional<File>();
  return common::io::from_errno(errno, "flock " + path);
}

}  // namespace

// Swift's replication_lock(): <part>/.lock-replication, then one of the device's
// replication_concurrency_per_device lock files (<dev>/.lock, .lock.1, ...), tried every 10 ms
// until replication_lock_timeout. Released when the files close.
struct ObjectServer::ReplicationLocks {
  std::optional<File> partition;
  std::optional<File> device;
};

net::awaitable<Result<ObjectServer::ReplicationLocks>> ObjectServer::take_replication_locks(
    const Location& loc, common::io::BlockingPool& pool) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(config_.replication_lock_timeout));
  const std::string part_dir = disk_.partition_dir(loc);
  const std::string dev_dir = config_.disk.devices + "/" + loc.device;
  const int per_device = config_.replication_concurrency_per_device;
  ReplicationLocks locks;
  net::steady_timer timer(co_await net::this_coro::executor);
  for (;;) {
    Status s = co_await pool.call([&]() -> Status {
      if (!locks.partition) {
        auto made = disk_.fs().mkdirs(part_dir);
        if (!made.ok()) return made.status();
        auto p = try_lock(disk_.fs(), part_dir + "/.lock-replication");
        if (!p.ok()) return p.status();
        locks.partition = std::move(*p);
      }
      if (!locks.partition || per_device <= 0) return Status();
      for (int i = 0; i < per_device && !locks.device; ++i) {
        auto d = try_lock(disk_.fs(), dev_dir + "/.lock" + (i ? "." + std::to_string(i) : ""));
        if (!d.ok()) return d.status();
        locks.device = std::move(*d);
      }
      return Status();
    });
    if (!s.ok()) co_return s;
    if (locks.partition && (per_device <= 0 || locks.device)) co_return std::move(locks);
    if (std::chrono::steady_clock::now() >= deadline) {
      co_return Status::timeout(
          std::to_string(config_.replication_lock_timeout) + " seconds: " +
          (locks.partition ? dev_dir + "/.lock" : part_dir + "/.lock-replication"));
    }
    timer.expires_after(std::chrono::milliseconds(10));
    co_await timer.async_wait(net::use_awaitable);
  }
}

net::awaitable<void> ObjectServer::run_ssync(Exchange& ex, const Location& loc,
                                             common::io::BlockingPool& pool) {
  const std::string where = ex.request().remote_addr + "/" + loc.device + "/" + loc.partition;
  if (!(co_await ex.write_body("\r\n")).ok()) co_return;
  // Swift's replication_semaphore: at most replication_concurrency at once in this server.
  struct Slot {
    std::atomic<int>& running;
    ~Slot() { running.fetch_sub(1); }
  };
  const int running = ssync_running_.fetch_add(1) + 1;
  Slot slot{ssync_running_};
  Status outcome;
  int code = 0;
  if (config_.replication_concurrency > 0 && running > config_.replication_concurrency) {
    outcome = Status::unavailable("The server is currently unavailable. Please try again later.");
    code = 503;
  } else {
    auto locks = co_await take_replication_locks(loc, pool);
    if (!locks.ok()) {
      outcome = locks.status();
      APUS_LOG_DEBUG(where + " SSYNC LOCK TIMEOUT: " + outcome.message());
    } else {
      SsyncInput input(ex, config_.network_chunk_size);
      outcome = co_await ssync_missing_check(ex, input, loc, pool);
      if (outcome.ok()) outcome = co_await ssync_updates(ex, input, loc, &code);
      if (outcome.code() == Status::Code::kCancelled) {
        APUS_LOG_ERROR(where + " ssync client disconnected: " + outcome.message());
        co_return;  // nobody to tell
      }
      if (!outcome.ok() && code == 0) {
        APUS_LOG_ERROR(where + " EXCEPTION in ssync receiver: " + outcome.to_string());
      }
    }
  }
  if (!outcome.ok()) {
    ex.close_without_reading_body();
    std::string line =
        ":ERROR: " + std::to_string(code) + " '" + printable(outcome.message()) + "'\n";
    if (!(co_await ex.write_body(line)).ok()) co_return;
  }
  (void)co_await ex.finish_response();
}

net::awaitable<Status> ObjectServer::ssync_missing_check(Exchange& ex, SsyncInput& input,
                                                         const Location& loc,
                                                         common::io::BlockingPool& pool) {
  auto first = co_await input.readline();
  if (!first.ok()) co_return first.status();
  if (first->empty()) co_return Status::cancelled("hung up before the missing check");
  if (strip(*first) != ":MISSING_CHECK: START") {
    co_return Status::invalid_argument("Looking for :MISSING_CHECK: START got " +
                                       std::string(strip(*first)));
  }
  std::string wanted;
  std::vector<ssync::Offer> batch;
  // What this node has of each offered object, from the names of its files (open_hash reads
  // the metadata too, and quarantines what is corrupt, as Swift's receiver does).
  auto check_batch = [&]() -> net::awaitable<Status> {
    if (batch.empty()) co_return Status();
    Status s = co_await pool.call([&]() -> Status {
      for (const ssync::Offer& offer : batch) {
        auto obj = disk_.open_hash(loc, offer.hash, std::nullopt);
        if (!obj.ok()) return obj.status();
        ssync::LocalState local;
        if (obj->state == DiskObject::State::kDeleted) {
          local.ts_data = obj->data_timestamp;
        } else if (obj->state == DiskObject::State::kExists) {
          local.ts_data = obj->data_timestamp;
          local.ts_meta = obj->timestamp;
          local.ts_ctype = obj->ctype_timestamp;
        }
        if (auto want = ssync::encode_wanted(offer, local)) {
          wanted.append(*want).append("\r\n");
        }
      }
      return Status();
    });
    batch.clear();
    if (s.ok() && wanted.size() > kMaxWantedBytes) {
      s = Status::invalid_argument("too many objects wanted in one missing check");
    }
    co_return s;
  };
  for (;;) {
    auto line = co_await input.readline();
    if (!line.ok()) co_return line.status();
    std::string_view text = strip(*line);
    if (line->empty() || text == ":MISSING_CHECK: END") break;
    auto offer = ssync::decode_missing(text);
    if (!offer) {
      co_return Status::invalid_argument("bad missing check line " + std::string(text));
    }
    batch.push_back(std::move(*offer));
    if (batch.size() >= kCheckBatch) {
      Status s = co_await check_batch();
      if (!s.ok()) co_return s;
    }
  }
  Status s = co_await check_batch();
  if (!s.ok()) co_return s;
  std::string answer = ":MISSING_CHECK: START\r\n" + wanted;
  if (wanted.empty()) answer += "\r\n";
  answer += ":MISSING_CHECK: END\r\n";
  if (!(co_await ex.write_body(answer)).ok()) co_return Status::cancelled("client gone");
  co_return Status();
}

net::awaitable<Status> ObjectServer::ssync_updates(Exchange& ex, SsyncInput& input,
                                                   const Location& loc, int* code) {
  auto first = co_await input.readline();
  if (!first.ok()) co_return first.status();
  if (first->empty()) co_return Status::cancelled("hung up before the updates");
  if (strip(*first) != ":UPDATES: START") {
    co_return Status::invalid_argument("Looking for :UPDATES: START got " +
                                       std::string(strip(*first)));
  }
  int64_t successes = 0;
  int64_t failures = 0;
  std::vector<char> scratch(config_.network_chunk_size);
  for (;;) {
    auto line = co_await input.readline();
    if (!line.ok()) co_return line.status();
    std::string_view text = strip(*line);
    if (line->empty() || text == ":UPDATES: END") break;
    size_t space = text.find(' ');
    if (space == std::string_view::npos) {
      co_return Status::invalid_argument("bad update line " + std::string(text));
    }
    Request sub;
    sub.method = std::string(text.substr(0, space));
    std::string path(text.substr(space + 1));
    std::string replication_headers;
    std::optional<uint64_t> length;
    size_t header_bytes = 0;
    for (;;) {
      auto header = co_await input.readline();
      if (!header.ok()) co_return header.status();
      if (header->empty()) {
        co_return Status::invalid_argument("Got no headers for " + sub.method + " " + path);
      }
      header_bytes += header->size();
      if (header_bytes > kMaxUpdateHeaderBytes) {
        co_return Status::invalid_argument("headers too large for " + sub.method + " " + path);
      }
      std::string_view h = strip(*header);
      if (h.empty()) break;
      size_t colon = h.find(':');
      if (colon == std::string_view::npos) {
        co_return Status::invalid_argument("bad header line for " + sub.method + " " + path);
      }
      std::string name = common::http::to_lower(strip(h.substr(0, colon)));
      std::string_view value = strip(h.substr(colon + 1));
      sub.headers.set(name, value);
      // The stored metadata is what the sender names, but "Etag" (the object server stores its
      // own ETag) and EC's X-Backend-No-Commit.
      if (name != "etag" && name != "x-backend-no-commit") {
        if (!replication_headers.empty()) replication_headers += ' ';
        replication_headers += name;
      }
      if (name == "content-length") {
        uint64_t n = 0;
        auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
        if (ec != std::errc() || end != value.data() + value.size()) {
          co_return Status::invalid_argument("bad Content-Length for " + sub.method + " " + path);
        }
        length = n;
      }
    }
    if (sub.method == "DELETE" || sub.method == "POST") {
      if (length.value_or(0) != 0) {
        co_return Status::invalid_argument(sub.method + " subrequest with content-length " +
                                           path);
      }
    } else if (sub.method == "PUT") {
      if (!length) co_return Status::invalid_argument("No content-length sent for PUT " + path);
    } else {
      co_return Status::invalid_argument("Invalid subrequest method " + sub.method);
    }
    sub.target = "/" + loc.device + "/" + loc.partition + path;
    sub.content_length = length.value_or(0);
    sub.remote_addr = ex.request().remote_addr;
    sub.headers.set("X-Backend-Storage-Policy-Index", std::to_string(loc.policy));
    sub.headers.set("X-Backend-Replication", "True");
    if (!replication_headers.empty()) {
      sub.headers.set("X-Backend-Replication-Headers", replication_headers);
    }
    const std::string what = sub.method + " " + path;
    UpdateExchange update(std::move(sub), input, length.value_or(0));
    co_await handle(update);
    const int status = update.response_status();
    if ((status >= 200 && status < 300) || status == 404) {
      ++successes;
    } else {
      APUS_LOG_WARNING("ssync subrequest failed with " + std::to_string(status) + ": " + what +
                       " (" + printable(update.body()) + ")");
      ++failures;
    }
    if (failures >= config_.replication_failure_threshold &&
        (successes == 0 || static_cast<double>(failures) / static_cast<double>(successes) >
                               config_.replication_failure_ratio)) {
      co_return Status::invalid_argument("Too many " + std::to_string(failures) +
                                         " failures to " + std::to_string(successes) +
                                         " successes");
    }
    // What the handler did not read (it refused the update early) is skipped.
    uint64_t left = update.left();
    while (left > 0) {
      auto got = co_await input.read(
          std::span<char>(scratch.data(), std::min<uint64_t>(scratch.size(), left)));
      if (!got.ok()) co_return got.status();
      if (*got == 0) co_return Status::cancelled("early termination of " + what);
      left -= *got;
    }
  }
  if (failures) {
    *code = 500;
    co_return Status::io_error("ERROR: With :UPDATES: " + std::to_string(failures) +
                               " failures to " + std::to_string(successes) + " successes");
  }
  if (!(co_await ex.write_body(":UPDATES: START\r\n:UPDATES: END\r\n")).ok()) {
    co_return Status::cancelled("client gone");
  }
  co_return Status();
}

}  // namespace apus::object
