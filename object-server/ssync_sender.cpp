// The SSYNC sender (ssync.h): what Swift's ssync_sender.Sender does, over the backend client.
#include <algorithm>
#include <map>

#include "common/http/client.h"
#include "common/http/url.h"
#include "common/log/log.h"
#include "object-server/ssync.h"

namespace apus::object::ssync {

namespace net = boost::asio;
using common::Result;
using common::Status;
using common::Timestamp;
using common::http::ClientConnection;

namespace {

// The receiver's answer lines are short; a longer one is not from a receiver.
constexpr size_t kMaxAnswerLine = 65536;

// The receiver's answer, read as lines.
class AnswerLines {
 public:
  explicit AnswerLines(ClientConnection& conn) : conn_(conn) {}

  // The next line without its line end; Unavailable when the answer ended first.
  net::awaitable<Result<std::string>> next() {
    for (;;) {
      size_t nl = buffer_.find('\n');
      if (nl != std::string::npos) {
        std::string line = buffer_.substr(0, nl);
        buffer_.erase(0, nl + 1);
        while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
        co_return line;
      }
      if (buffer_.size() > kMaxAnswerLine) co_return Status::invalid_argument("answer line too long");
      char chunk[4096];
      auto got = co_await conn_.read_body(std::span<char>(chunk, sizeof chunk));
      if (!got.ok()) co_return got.status();
      if (*got == 0) co_return Status::unavailable("Early disconnect");
      buffer_.append(chunk, *got);
    }
  }

  // Skips blank lines up to `marker`; anything else is the receiver's error.
  net::awaitable<Status> expect(std::string_view marker) {
    for (;;) {
      auto line = co_await next();
      if (!line.ok()) co_return line.status();
      if (*line == marker) co_return Status();
      if (!line->empty()) co_return Status::io_error("Unexpected response: " + line->substr(0, 1024));
    }
  }

 private:
  ClientConnection& conn_;
  std::string buffer_;
};

// One line as a chunk of the request body.
net::awaitable<Status> send_line(ClientConnection& conn, std::string line) {
  line += "\r\n";
  co_return co_await conn.write_body(line);
}

// An update: "<METHOD> <path>", sorted "Name: value" lines, a blank line, as one chunk.
net::awaitable<Status> send_update(ClientConnection& conn, const std::string& method,
                                   const std::string& path, std::vector<std::pair<std::string, std::string>> headers) {
  std::sort(headers.begin(), headers.end());
  std::string msg = method + " " + path + "\r\n";
  for (const auto& [k, v] : headers) msg += k + ": " + v + "\r\n";
  msg += "\r\n";
  co_return co_await conn.write_body(msg);
}

}  // namespace

// The offers of the objects in `suffixes` of the partition (Swift's yield_hashes), by the names
// of their files, in hash order.
Result<std::vector<Offer>> local_offers(DiskFileManager& disk, const Location& part,
                                        const std::vector<std::string>& suffixes) {
  std::vector<Offer> offers;
  const std::string part_dir = disk.partition_dir(part);
  const Timestamp now = Timestamp::now();
  for (const std::string& suffix : suffixes) {
    if (!is_valid_suffix(suffix)) continue;
    auto hashes = disk.fs().list_dir(part_dir + "/" + suffix);
    if (!hashes.ok()) {
      if (hashes.status().is_not_found()) continue;
      return hashes.status();
    }
    std::sort(hashes->begin(), hashes->end());
    for (const std::string& hash : *hashes) {
      if (hash.size() != 32 || !hash.ends_with(suffix)) continue;
      auto files = disk.fs().list_dir(part_dir + "/" + suffix + "/" + hash);
      if (!files.ok()) continue;  // gone since, or not a directory
      ChosenFiles chosen = choose_files(*files, now, disk.options().reclaim_age);
      const std::optional<OnDiskFile>& base = chosen.tombstone ? chosen.tombstone : chosen.data;
      if (!base) continue;
      Offer o;
      o.hash = hash;
      o.ts_data = o.ts_meta = o.ts_ctype = base->timestamp;
      if (chosen.data && chosen.meta) o.ts_meta = chosen.meta->timestamp;
      if (chosen.data && chosen.ctype_meta && chosen.ctype_meta->ctype_timestamp) {
        o.ts_ctype = *chosen.ctype_meta->ctype_timestamp;
      }
      offers.push_back(std::move(o));
    }
  }
  return offers;
}

net::awaitable<SyncResult> send_partition_impl(DiskFileManager& disk, const Location& part,
                                               std::vector<std::string> suffixes,
                                               SyncTarget target,
                                               common::http::ClientOptions options) {
  SyncResult result;
  if (suffixes.empty()) {
    result.ok = true;
    co_return result;
  }
  const std::string where = target.ip + ":" + std::to_string(target.port) + "/" + target.device +
                            "/" + part.partition;
  auto fail = [&](const Status& s) {
    result.ok = false;
    result.error = s.to_string();
    APUS_LOG_ERROR(where + " ssync: " + result.error);
    return result;
  };
  common::http::ConnectionPool pool(options);
  auto conn_or = co_await pool.connect(target.ip, target.port);
  if (!conn_or.ok()) co_return fail(conn_or.status());
  ClientConnection& conn = **conn_or;
  common::http::ClientRequest req;
  req.method = "SSYNC";
  req.target = "/" + common::http::quote(target.device) + "/" + part.partition;
  req.chunked = true;
  req.headers.set("X-Backend-Storage-Policy-Index", std::to_string(part.policy));
  if (auto s = co_await conn.send_head(req); !s.ok()) co_return fail(s.status());
  auto head = co_await conn.read_response_head();
  if (!head.ok()) co_return fail(head.status());
  if (head->status != 200) {
    auto body = co_await conn.read_body_all(1024);
    co_return fail(Status::io_error("Expected status 200; got " + std::to_string(head->status) +
                                    " (" + (body.ok() ? *body : std::string()) + ")"));
  }
  AnswerLines answer(conn);

  // Missing check: everything here in the suffixes; the receiver says what it wants.
  auto offers = local_offers(disk, part, suffixes);
  if (!offers.ok()) co_return fail(offers.status());
  if (auto s = co_await send_line(conn, ":MISSING_CHECK: START"); !s.ok()) co_return fail(s);
  for (const Offer& o : *offers) {
    if (auto s = co_await send_line(conn, encode_missing(o)); !s.ok()) co_return fail(s);
  }
  if (auto s = co_await send_line(conn, ":MISSING_CHECK: END"); !s.ok()) co_return fail(s);
  if (auto s = co_await answer.expect(":MISSING_CHECK: START"); !s.ok()) co_return fail(s);
  std::map<std::string, Wanted> wanted;
  for (;;) {
    auto line = co_await answer.next();
    if (!line.ok()) co_return fail(line.status());
    if (*line == ":MISSING_CHECK: END") break;
    size_t space = line->find(' ');
    std::string hash = line->substr(0, space);
    if (hash.empty()) continue;
    wanted[hash] = decode_wanted(space == std::string::npos ? "" : line->substr(space + 1));
  }

  // Updates: each wanted object as it is here now.
  if (auto s = co_await send_line(conn, ":UPDATES: START"); !s.ok()) co_return fail(s);
  std::vector<char> buf(65536);
  for (const auto& [hash, want] : wanted) {
    if (hash.size() != 32 || hash.find_first_not_of("0123456789abcdef") != std::string::npos) {
      continue;  // not an offer of ours
    }
    auto obj = disk.open_hash(part, hash, std::nullopt);
    if (!obj.ok()) co_return fail(obj.status());
    const std::string* name = find_meta(obj->state == DiskObject::State::kExists
                                            ? obj->data_metadata
                                            : obj->metadata,
                                        "name");
    if (obj->state == DiskObject::State::kMissing || !name) continue;
    const std::string path = common::http::quote(*name);
    if (obj->state == DiskObject::State::kDeleted) {
      if (!want.data) continue;
      Status s = co_await send_update(conn, "DELETE", path,
                                      {{"X-Timestamp", obj->data_timestamp.internal()}});
      if (!s.ok()) co_return fail(s);
      ++result.deletes;
      continue;
    }
    if (want.data) {
      std::vector<std::pair<std::string, std::string>> h{
          {"Content-Length", std::to_string(obj->size)}};
      for (const auto& [k, v] : obj->data_metadata) {
        if (k != "name" && k != "Content-Length") h.emplace_back(k, v);
      }
      if (auto s = co_await send_update(conn, "PUT", path, std::move(h)); !s.ok()) co_return fail(s);
      uint64_t sent = 0;
      while (sent < obj->size) {
        auto got = disk.read(*obj, sent, std::span<char>(buf.data(), buf.size()));
        if (!got.ok()) co_return fail(got.status());
        if (*got == 0) break;
        if (auto s = co_await conn.write_body(std::string_view(buf.data(), *got)); !s.ok()) {
          co_return fail(s);
        }
        sent += *got;
      }
      if (sent != obj->size) {
        co_return fail(Status::io_error("Sent data length does not match content-length"));
      }
      ++result.puts;
    }
    if (want.meta && obj->data_timestamp != obj->timestamp && !obj->meta_metadata.empty()) {
      Metadata meta = obj->meta_metadata;
      std::erase_if(meta, [](const auto& kv) { return kv.first == "name"; });
      if (auto s = co_await send_update(conn, "POST", path, std::move(meta)); !s.ok()) {
        co_return fail(s);
      }
      ++result.posts;
    }
  }
  if (auto s = co_await send_line(conn, ":UPDATES: END"); !s.ok()) co_return fail(s);
  if (auto s = co_await answer.expect(":UPDATES: START"); !s.ok()) co_return fail(s);
  if (auto s = co_await answer.expect(":UPDATES: END"); !s.ok()) co_return fail(s);
  (void)co_await conn.finish_body();
  // In sync now: every object offered (Swift's can_delete_obj for a handoff partition).
  result.in_sync = std::move(*offers);
  result.ok = true;
  APUS_LOG_DEBUG(where + " ssync completed: " + std::to_string(result.in_sync.size()) + " offered, " +
                 std::to_string(wanted.size()) + " wanted");
  co_return result;
}

}  // namespace apus::object::ssync
