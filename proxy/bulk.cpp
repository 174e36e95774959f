// bulk (bulk.h): extract-archive and bulk-delete. Both answer through BulkAnswer; every object
// and container they touch is a subrequest through the rest of the pipeline, so auth, quotas
// and the rest apply to each as if the client had sent it.
#include "proxy/bulk.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "common/constraints.h"
#include "common/http/swob.h"
#include "common/http/url.h"
#include "common/log/log.h"
#include "proxy/archive_stream.h"
#include "proxy/bulk_delete_list.h"
#include "proxy/bulk_response.h"
#include "proxy/middleware.h"
#include "proxy/subrequest.h"

namespace apus::proxy {

namespace net = boost::asio;
using common::Result;
using common::Status;
using common::http::Exchange;
using common::http::HeaderMap;
using common::http::Request;
using common::http::Response;

namespace {

constexpr auto kTuple = net::as_tuple(net::use_awaitable);
// The answer of an object or container subrequest is small; more is not read.
constexpr size_t kMaxAnswer = 64 * 1024;
// After the archive ends, what is left of the body (tar padding, a compressor's trailer) is
// read and dropped up to this much, so the connection closes cleanly; beyond it, it closes.
constexpr size_t kMaxDrain = 1024 * 1024;

// "<status> <reason>" of a subrequest's answer, as swob's resp.status reads.
std::string answer_status(const Response& r) {
  if (r.reason.empty()) return status_line(r.status);
  return std::to_string(r.status) + " " + r.reason;
}


// Swift's str.rstrip('/') and lstrip('/').
std::string_view rstrip_slash(std::string_view s) {
  size_t e = s.find_last_not_of('/');
  return e == std::string_view::npos ? std::string_view() : s.substr(0, e + 1);
}
std::string_view lstrip_slash(std::string_view s) {
  size_t b = s.find_first_not_of('/');
  return b == std::string_view::npos ? std::string_view() : s.substr(b);
}

// The name as Swift lists it among the errors: its first `max` bytes, quoted.
std::string error_name(std::string_view name, size_t max) {
  return common::http::quote(name.substr(0, max));
}

// The client's request body as a BodySource.
class ClientBody final : public BodySource {
 public:
  explicit ClientBody(Exchange& ex) : ex_(ex) {}
  net::awaitable<Result<size_t>> read(std::span<char> buf) override { return ex_.read_body(buf); }

 private:
  Exchange& ex_;
};

// Reads and drops up to `limit` bytes of what is left of the client's body.
net::awaitable<void> drain_body(Exchange& ex, size_t limit) {
  std::string buf(64 * 1024, '\0');
  for (size_t total = 0; total < limit;) {
    auto n = co_await ex.read_body(std::span<char>(buf.data(), buf.size()));
    if (!n.ok() || *n == 0) co_return;
    total += *n;
  }
}

// ---- bulk-delete -----------------------------------------------------------------------------

// What one DELETE gave.
struct DeleteDone {
  std::string name;  // as the client wrote it (decoded)
  std::string path;  // what was deleted
  int retry = 0;
  int status = 0;
  std::string status_text;
  std::string version_id;  // sent as ?version-id=
};

// The names of a bulk-delete request's body, handed out one at a time.
class NameList final : public BulkDeleteSource {
 public:
  explicit NameList(std::vector<BulkDeleteItem> items) : items_(std::move(items)) {}
  net::awaitable<common::http::OrRefusal<std::optional<BulkDeleteItem>>> next() override {
    if (pos_ == items_.size()) co_return std::optional<BulkDeleteItem>();
    co_return std::optional<BulkDeleteItem>(std::move(items_[pos_++]));
  }

 private:
  std::vector<BulkDeleteItem> items_;
  size_t pos_ = 0;
};

class BulkDelete {
 public:
  BulkDelete(Exchange& ex, ProxyEnv& env, const Next& next, const BulkDeleteOptions& o,
             size_t max_path_length, BulkDeleteCaller caller, BulkAnswer& answer,
             const net::any_io_executor& executor)
      : ex_(ex),
        env_(env),
        next_(next),
        o_(o),
        max_path_(max_path_length),
        caller_(std::move(caller)),
        answer_(answer),
        report_(BulkReport::for_delete()),
        pile_(executor) {}

  // `source` nullptr: the names of the request body.
  net::awaitable<void> run(BulkDeleteSource* source) {
    Status refused = co_await work(source);
    (void)refused;
    if (!errors_.empty() && !refusal_) {
      report_.set("Response Status", status_line(failed_status_));
    } else if (!refusal_ && deleted() == 0 && not_found() == 0) {
      report_.set_status(400, "Invalid bulk delete.");
    }
    report_.errors = std::move(errors_);
    (void)co_await answer_.finish(report_, "delete");
    co_await drain_body(ex_, kMaxDrain);  // a body left unread after a refusal
  }

 private:
  int64_t deleted() const { return std::get<int64_t>(*report_.get("Number Deleted")); }
  int64_t not_found() const { return std::get<int64_t>(*report_.get("Number Not Found")); }

  // Swift's HTTPException inside the generator: the report takes its status and body.
  Status refuse(int status, std::string body) {
    report_.set_status(status, std::move(body));
    refusal_ = true;
    return Status::invalid_argument("refused");
  }

  net::awaitable<Status> work(BulkDeleteSource* source) {
    const Request& req = ex_.request();
    if (answer_.content_type().empty()) co_return refuse(406, "");
    auto segs = common::http::split_path(common::http::percent_decode(req.path()), 2, 3, true);
    if (!segs.ok()) co_return refuse(404, "");
    version_ = *(*segs)[0];
    account_ = *(*segs)[1];
    std::optional<NameList> body_names;
    if (source == nullptr) {
      // Swift: an empty Content-Type is as good as none. (A caller with its own names, SLO,
      // drops the client's Content-Type first in Swift: no check then.)
      auto incoming = req.headers.get("Content-Type");
      if (incoming && !incoming->empty() && !incoming->starts_with("text/plain")) {
        co_return refuse(406, "");
      }
      auto parsed = co_await read_names();
      if (!parsed.ok()) co_return parsed.status();
      source = &body_names.emplace(std::move(*parsed));
    }
    // Swift finishes the objects before it starts on the containers: containers wait here.
    std::vector<BulkDeleteItem> containers;
    for (;;) {
      auto item = co_await source->next();
      if (!item) {
        while (pile_.in_flight() > 0) (void)co_await take_one_final();
        const Response& r = item.refusal();
        co_return refuse(r.status, r.body);
      }
      if (!*item) break;
      if ((*item)->name.empty()) continue;
      if (!names_object((*item)->name)) {
        containers.push_back(std::move(**item));
        continue;
      }
      APUS_CO_RETURN_IF_ERROR(co_await delete_one(**item));
    }
    while (pile_.in_flight() > 0) APUS_CO_RETURN_IF_ERROR(co_await take_one(true));
    for (const BulkDeleteItem& c : containers) APUS_CO_RETURN_IF_ERROR(co_await delete_one(c));
    while (pile_.in_flight() > 0) APUS_CO_RETURN_IF_ERROR(co_await take_one(true));
    co_return Status();
  }

  // Reports an item that came with its error, or starts its DELETE once fewer than
  // delete_concurrency are under way.
  net::awaitable<Status> delete_one(const BulkDeleteItem& item) {
    if (item.error_status != 0) {
      if (item.error_status == 404) {
        report_.add("Number Not Found");
      } else {
        errors_.emplace_back(common::http::quote(item.name), item.error_message);
      }
      co_return Status();
    }
    std::string path = "/" + version_ + "/" + account_ + "/" + std::string(lstrip_slash(item.name));
    if (!common::check_utf8(path)) {
      errors_.emplace_back(common::http::quote(item.name), status_line(412));
      co_return Status();
    }
    while (pile_.in_flight() >= static_cast<size_t>(o_.delete_concurrency)) {
      APUS_CO_RETURN_IF_ERROR(co_await take_one(true));
    }
    start(DeleteDone{item.name, path, 0, 0, {}, item.version_id});
    co_return Status();
  }

  // The names of the request body (Swift's get_objs_to_delete()).
  net::awaitable<Result<std::vector<BulkDeleteItem>>> read_names() {
    const Request& req = ex_.request();
    if (!req.content_length && !req.chunked) co_return refuse(411, "");
    DeleteListParser parser(static_cast<size_t>(std::max<int64_t>(o_.max_deletes_per_request, 0)),
                            max_path_);
    std::string buf(64 * 1024, '\0');
    std::optional<DeleteListError> error;
    while (!error) {
      auto n = co_await ex_.read_body(std::span<char>(buf.data(), buf.size()));
      if (!n.ok()) {
        // The client is gone or too slow: Swift's generator fails with a 500 report.
        report_.set_status(500);
        refusal_ = true;
        co_return n.status();
      }
      if (*n == 0) {
        error = parser.finish();
        break;
      }
      error = parser.feed(std::string_view(buf.data(), *n));
    }
    if (error) co_return refuse(error->status, error->body);
    std::vector<BulkDeleteItem> items;
    for (auto& name : parser.take_names()) items.push_back(BulkDeleteItem{std::move(name), 0, {}, {}});
    co_return items;
  }

  void start(DeleteDone item) {
    const std::string query =
        item.version_id.empty() ? "" : "version-id=" + common::http::quote(item.version_id, "");
    Request del = make_subrequest("DELETE", item.path, query,
                                  subrequest_headers(ex_.request(), caller_.user_agent));
    const size_t tag = next_tag_++;
    pile_.spawn(next_, std::move(del), subrequest_env(env_, caller_.source), kMaxAnswer, tag);
    started_.emplace(tag, std::move(item));
  }

  // The next DELETE to finish, with its answer's status.
  net::awaitable<DeleteDone> next_done() {
    SubrequestPile::Done done = co_await pile_.next_done();
    auto it = started_.find(done.tag);
    DeleteDone d = std::move(it->second);
    started_.erase(it);
    d.status = done.answer.ok() ? done.answer->status : 500;
    d.status_text = done.answer.ok() ? answer_status(*done.answer) : status_line(500);
    co_return d;
  }

  // Takes one answer (heartbeat first, as Swift yields before processing each); `may_retry`:
  // a 409 may be tried again. A failed Status ends the work (the report says why).
  net::awaitable<Status> take_one(bool may_retry) {
    DeleteDone d = co_await next_done();
    if (!(co_await answer_.heartbeat()).ok()) client_gone_ = true;
    if (d.status / 100 == 2) {
      report_.add("Number Deleted");
    } else if (d.status == 404) {
      report_.add("Number Not Found");
    } else if (d.status == 401) {
      errors_.emplace_back(common::http::quote(d.name), status_line(401));
    } else if (d.status == 409 && may_retry && o_.retry_count > d.retry) {
      ++d.retry;
      net::steady_timer t(co_await net::this_coro::executor);
      t.expires_after(std::chrono::duration_cast<net::steady_timer::duration>(
          std::chrono::duration<double>(std::pow(o_.retry_interval, d.retry))));
      auto [ec] = co_await t.async_wait(kTuple);
      (void)ec;
      start(std::move(d));
    } else {
      if (d.status / 100 == 5) failed_status_ = 502;
      errors_.emplace_back(common::http::quote(d.name), d.status_text);
    }
    if (static_cast<int64_t>(errors_.size()) >= o_.max_failed_deletes) {
      // Swift stops here, after the deletes already under way, which are not retried.
      while (pile_.in_flight() > 0) (void)co_await take_one_final();
      co_return refuse(400, "Max delete failures exceeded");
    }
    if (client_gone_) {
      while (pile_.in_flight() > 0) (void)co_await take_one_final();
      co_return Status::cancelled("client gone");
    }
    co_return Status();
  }

  // An answer taken while draining: counted, never retried, no further stop.
  net::awaitable<Status> take_one_final() {
    DeleteDone d = co_await next_done();
    if (d.status / 100 == 2) {
      report_.add("Number Deleted");
    } else if (d.status == 404) {
      report_.add("Number Not Found");
    } else if (d.status == 401) {
      errors_.emplace_back(common::http::quote(d.name), status_line(401));
    } else {
      if (d.status / 100 == 5) failed_status_ = 502;
      errors_.emplace_back(common::http::quote(d.name), d.status_text);
    }
    co_return Status();
  }

  Exchange& ex_;
  ProxyEnv& env_;
  const Next& next_;
  const BulkDeleteOptions& o_;
  size_t max_path_;
  BulkDeleteCaller caller_;
  BulkAnswer& answer_;
  BulkReport report_;
  std::vector<std::pair<std::string, std::string>> errors_;
  int failed_status_ = 400;
  bool refusal_ = false;
  bool client_gone_ = false;
  std::string version_, account_;
  SubrequestPile pile_;
  std::map<size_t, DeleteDone> started_;  // by pile tag: the DELETEs under way
  size_t next_tag_ = 0;
};

// ---- extract-archive -------------------------------------------------------------------------

struct ExtractOptions {
  int64_t max_containers = 10000;
  int64_t max_failed_extractions = 1000;
  double yield_frequency = 10;
};

// The header a pax extended attribute becomes on the object, if any (Swift's
// pax_key_to_swift_header, on libarchive's decoded names).
std::optional<std::string> xattr_header(std::string_view name) {
  if (name == "user.mime_type") return "Content-Type";
  constexpr std::string_view kMeta = "user.meta.";
  if (name.starts_with(kMeta)) return "X-Object-Meta-" + std::string(name.substr(kMeta.size()));
  return std::nullopt;
}

class Extract {
 public:
  Extract(Exchange& ex, ProxyEnv& env, const Next& next, const ExtractOptions& o,
          const common::Constraints& c, BulkAnswer& answer)
      : ex_(ex),
        env_(env),
        next_(next),
        o_(o),
        c_(c),
        answer_(answer),
        max_path_(static_cast<size_t>(c.max_object_name_length + c.max_container_name_length + 2)),
        report_(BulkReport::for_extract()) {}

  net::awaitable<void> run(ArchiveCompression compression) {
    Status s = co_await work(compression);
    if (s.ok()) {
      if (!errors_.empty()) {
        report_.set("Response Status", status_line(failed_status_));
      } else if (std::get<int64_t>(*report_.get("Number Files Created")) == 0) {
        report_.set_status(400, "Invalid Tar File: No Valid Files");
      }
    }
    report_.errors = std::move(errors_);
    (void)co_await answer_.finish(report_, "extract");
    co_await drain_body(ex_, kMaxDrain);
  }

 private:
  Status refuse(int status, std::string body) {
    report_.set_status(status, std::move(body));
    return Status::invalid_argument("refused");
  }

  net::awaitable<Status> work(ArchiveCompression compression) {
    const Request& req = ex_.request();
    if (answer_.content_type().empty()) co_return refuse(406, "");
    if (!req.content_length && !req.chunked) co_return refuse(411, "");
    auto segs = common::http::split_path(common::http::percent_decode(req.path()), 2, 3, true);
    if (!segs.ok()) co_return refuse(404, "");
    version_ = *(*segs)[0];
    account_ = *(*segs)[1];
    base_ = std::string(rstrip_slash((*segs)[2].value_or("")));
    ClientBody body(ex_);
    ArchiveStream stream(compression, body);
    Status s = co_await entries(stream);
    co_await stream.close();
    co_return s;
  }

  net::awaitable<Status> entries(ArchiveStream& stream) {
    while (true) {
      Status alive = co_await answer_.heartbeat();
      if (!alive.ok()) co_return alive;  // the client is gone
      auto entry = co_await stream.next_entry();
      if (!entry.ok()) {
        if (entry.status().code() == Status::Code::kInvalidArgument) {
          co_return refuse(400, "Invalid Tar File: " + entry.status().message());
        }
        // The client's body failed (gone, too slow): Swift's generator ends with a 500.
        report_.set_status(500);
        co_return entry.status();
      }
      if (!entry->has_value() ||
          static_cast<int64_t>(errors_.size()) >= o_.max_failed_extractions) {
        co_return Status();
      }
      const ArchiveEntry& e = **entry;
      if (!e.regular) continue;
      APUS_CO_RETURN_IF_ERROR(co_await extract_one(stream, e));
    }
  }

  // One regular file. A failed Status ends the extraction (the report says why).
  net::awaitable<Status> extract_one(ArchiveStream& stream, const ArchiveEntry& e) {
    std::string_view name = e.path;
    if (name.starts_with("./")) name.remove_prefix(2);
    name = lstrip_slash(name);
    std::string obj_path = base_.empty() ? std::string(name) : base_ + "/" + std::string(name);
    size_t slash = obj_path.find('/');
    if (slash == std::string::npos) co_return Status();  // a file at the top: Swift ignores it
    std::string destination = "/" + version_ + "/" + account_ + "/" + obj_path;
    std::string container = obj_path.substr(0, slash);
    if (!common::check_utf8(destination)) {
      errors_.emplace_back(error_name(obj_path, max_path_), status_line(412));
      co_return Status();
    }
    if (e.size > static_cast<uint64_t>(c_.max_file_size)) {
      errors_.emplace_back(error_name(obj_path, max_path_), status_line(413));
      co_return Status();
    }
    std::optional<std::pair<std::string, std::string>> container_failure;
    if (!accessed_.contains(container)) {
      std::string cont_path = "/" + version_ + "/" + account_ + "/" + container;
      auto created = co_await create_container(cont_path);
      if (created.ok()) {
        if (*created && ++containers_created_ > o_.max_containers) {
          co_return refuse(400, "More than " + std::to_string(o_.max_containers) +
                                    " containers to create from tar.");
        }
      } else {
        // The object PUT may still succeed (ACLs): remember, report only if it fails too.
        container_failure.emplace(error_name(cont_path, max_path_), created.status().message());
        if (created.status().message() == status_line(401)) co_return refuse(401, "");
      }
    }
    Response put = co_await put_object(stream, e, destination);
    // Names longer than a container may be are not kept: they fail every time anyway, and a
    // hostile archive could otherwise grow this set by a megabyte per entry.
    if (container.size() <= static_cast<size_t>(c_.max_container_name_length)) {
      accessed_.insert(container);
    }
    if (put.status / 100 == 2) {
      report_.add("Number Files Created");
      co_return Status();
    }
    if (container_failure) errors_.push_back(std::move(*container_failure));
    if (put.status == 401) {
      errors_.emplace_back(error_name(obj_path, max_path_), status_line(401));
      co_return refuse(401, "");
    }
    if (put.status / 100 == 5) failed_status_ = 502;
    errors_.emplace_back(error_name(obj_path, max_path_), answer_status(put));
    co_return Status();
  }

  // Swift's create_container(): true when it made the container, false when it was there; a
  // failure's message is the status line of the answer that failed.
  net::awaitable<Result<bool>> create_container(const std::string& path) {
    HeaderMap h = subrequest_headers(ex_.request(), "Swift", false);  // Swift's default agent
    auto head = co_await run_subrequest(next_, make_subrequest("HEAD", path, "", h),
                                        subrequest_env(env_, "EA"), kMaxAnswer);
    if (!head.ok()) co_return Status::unavailable(status_line(500));
    if (head->status / 100 == 2) co_return false;
    if (head->status != 404) co_return Status::unavailable(answer_status(*head));
    auto put = co_await run_subrequest(next_, make_subrequest("PUT", path, "", h),
                                       subrequest_env(env_, "EA"), kMaxAnswer);
    if (!put.ok()) co_return Status::unavailable(status_line(500));
    if (put->status / 100 == 2) co_return true;
    co_return Status::unavailable(answer_status(*put));
  }

  net::awaitable<Response> put_object(ArchiveStream& stream, const ArchiveEntry& e,
                                      const std::string& destination) {
    const Request& req = ex_.request();
    HeaderMap h = subrequest_headers(req, "BulkExpand");
    h.set("Content-Length", std::to_string(e.size));
    for (const auto& [k, v] : req.headers) {
      if (common::http::iequals(k, "X-Delete-At") || common::http::iequals(k, "X-Delete-After") ||
          (common::http::istarts_with(k, "x-object-meta-") && k.size() > 14)) {
        h.set(k, v);
      }
    }
    for (const auto& [k, v] : e.xattrs) {
      if (auto header = xattr_header(k)) h.set(*header, v);
    }
    Request put = make_subrequest("PUT", destination, "", std::move(h));
    put.content_length = e.size;
    ArchiveEntryBody body(stream);
    auto r = co_await run_subrequest_with_body(next_, std::move(put), subrequest_env(env_, "EA"),
                                               body, kMaxAnswer);
    if (!r.ok()) co_return common::http::swob_response(500);
    co_return std::move(*r);
  }

  Exchange& ex_;
  ProxyEnv& env_;
  const Next& next_;
  const ExtractOptions& o_;
  const common::Constraints& c_;
  BulkAnswer& answer_;
  size_t max_path_;
  BulkReport report_;
  std::vector<std::pair<std::string, std::string>> errors_;
  int failed_status_ = 400;
  int64_t containers_created_ = 0;
  std::set<std::string> accessed_;
  std::string version_, account_, base_;
};

// ---- the middleware --------------------------------------------------------------------------

class Bulk final : public Middleware {
 public:
  Bulk(ExtractOptions extract, BulkDeleteOptions del, const common::Constraints& constraints)
      : extract_(extract), delete_(del), constraints_(constraints) {}

  net::awaitable<void> call(Exchange& ex, ProxyEnv& env, const Next& next) override {
    const Request& req = ex.request();
    auto extract_type = common::http::query_param(req.query(), "extract-archive");
    if (extract_type && req.method == "PUT") {
      auto compression = archive_type(*extract_type);
      if (!compression) {
        co_return co_await ex.reply(
            common::http::swob_response_with_body(400, "Unsupported archive format"));
      }
      BulkAnswer answer(ex, content_type(req), extract_.yield_frequency);
      Extract job(ex, env, next, extract_, constraints_, answer);
      co_return co_await job.run(*compression);
    }
    if (common::http::query_param(req.query(), "bulk-delete") &&
        (req.method == "POST" || req.method == "DELETE")) {
      co_return co_await answer_bulk_delete(
          ex, env, next, delete_,
          static_cast<size_t>(constraints_.max_object_name_length +
                              constraints_.max_container_name_length + 2),
          nullptr, content_type(req));
    }
    co_await next(ex, env);
  }

  std::vector<std::pair<std::string, std::string>> info_sections() const override {
    return {{"bulk_upload",
             "{\"max_containers_per_extraction\": " + std::to_string(extract_.max_containers) +
                 ", \"max_failed_extractions\": " +
                 std::to_string(extract_.max_failed_extractions) + "}"},
            {"bulk_delete",
             "{\"max_deletes_per_request\": " + std::to_string(delete_.max_deletes_per_request) +
                 ", \"max_failed_deletes\": " + std::to_string(delete_.max_failed_deletes) + "}"}};
  }

 private:
  static std::optional<std::string> content_type(const Request& req) {
    return bulk_content_type(req.headers.get("Accept"));
  }

  // Swift: the value lower-cased with dots stripped from both ends.
  static std::optional<ArchiveCompression> archive_type(std::string_view value) {
    std::string v = common::http::to_lower(value);
    size_t b = v.find_first_not_of('.');
    v = b == std::string::npos ? "" : v.substr(b, v.find_last_not_of('.') - b + 1);
    if (v == "tar") return ArchiveCompression::kNone;
    if (v == "tar.gz") return ArchiveCompression::kGzip;
    if (v == "tar.bz2") return ArchiveCompression::kBzip2;
    return std::nullopt;
  }

  ExtractOptions extract_;
  BulkDeleteOptions delete_;
  const common::Constraints& constraints_;
};

}  // namespace

net::awaitable<void> answer_bulk_delete(Exchange& ex, ProxyEnv& env, const Next& next,
                                        const BulkDeleteOptions& options, size_t max_path_length,
                                        BulkDeleteSource* names,
                                        std::optional<std::string> content_type,
                                        BulkDeleteCaller caller) {
  BulkAnswer answer(ex, std::move(content_type), options.yield_frequency);
  BulkDelete job(ex, env, next, options, max_path_length, std::move(caller), answer,
                 co_await net::this_coro::executor);
  co_await job.run(names);
}

Result<std::unique_ptr<Middleware>> make_bulk(const common::Section& section,
                                              const MiddlewareContext& context) {
  ExtractOptions e;
  BulkDeleteOptions d;
  int64_t yield = 10, concurrency = 2, retries = 0;
  APUS_ASSIGN_OR_RETURN(e.max_containers, section.get_int("max_containers_per_extraction", 10000));
  APUS_ASSIGN_OR_RETURN(e.max_failed_extractions, section.get_int("max_failed_extractions", 1000));
  APUS_ASSIGN_OR_RETURN(d.max_deletes_per_request,
                        section.get_int("max_deletes_per_request", 10000));
  APUS_ASSIGN_OR_RETURN(d.max_failed_deletes, section.get_int("max_failed_deletes", 1000));
  APUS_ASSIGN_OR_RETURN(yield, section.get_int("yield_frequency", 10));
  APUS_ASSIGN_OR_RETURN(concurrency, section.get_int("delete_concurrency", 2));
  APUS_ASSIGN_OR_RETURN(retries, section.get_int("delete_container_retry_count", 0));
  e.yield_frequency = d.yield_frequency = static_cast<double>(yield);
  d.delete_concurrency = static_cast<int>(std::clamp<int64_t>(concurrency, 1, 1000));
  d.retry_count = static_cast<int>(std::clamp<int64_t>(retries, -1, 1000000));
  return std::unique_ptr<Middleware>(std::make_unique<Bulk>(e, d, context.swift.constraints));
}

}  // namespace apus::proxy
