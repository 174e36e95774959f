// bulk: Swift's bulk middleware (egg:swift#bulk).
// - PUT ?extract-archive=tar|tar.gz|tar.bz2 expands an archive into the account: each regular
//   file becomes an object PUT (a subrequest, swift.source "EA") at <path of the request>/<name
//   in the archive>, creating missing containers first (HEAD, then PUT).
// - POST or DELETE ?bulk-delete deletes the newline-separated, percent-encoded
//   "/container/object" and "/container" names of the body (objects first, then containers),
//   `delete_concurrency` DELETE subrequests at a time (swift.source "BD").
// Both always answer 200 with a report (bulk_response.h) in the format Accept asks for,
// keeping the connection alive with whitespace every `yield_frequency` seconds. Options and
// defaults are Swift's: max_containers_per_extraction (10000), max_failed_extractions (1000),
// max_deletes_per_request (10000), max_failed_deletes (1000), yield_frequency (10),
// delete_concurrency (2, clamped to 1..1000), delete_container_retry_count (0: a 409 on a
// container is not retried; else retried after 1.5^n seconds). /info gets "bulk_upload" and
// "bulk_delete".
//
// The delete engine is shared with SLO's ?multipart-manifest=delete (Swift's slo calls bulk's
// handle_delete_iter with its own list of names): answer_bulk_delete() below.
//
// The Bulk middleware is thread-safe (it keeps only its options); a request's work runs on its
// coroutine.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/awaitable.hpp>

#include "common/config/config.h"
#include "common/http/server.h"
#include "common/status.h"
#include "proxy/pipeline.h"

namespace apus::proxy {

// The options of bulk-delete, as the [filter:bulk] section sets them.
struct BulkDeleteOptions {
  int64_t max_deletes_per_request = 10000;
  int64_t max_failed_deletes = 1000;
  double yield_frequency = 10;  // seconds
  int delete_concurrency = 2;
  int retry_count = 0;          // delete_container_retry_count
  double retry_interval = 1.5;  // seconds, raised to the retry's number
};

// One name to delete, when the caller has the list (SLO): "/container/object" or
// "/container", decoded. A name with `error_status` set is not deleted but reported: 404
// counts as not found, anything else is an error with `error_message` as its status text.
struct BulkDeleteItem {
  std::string name;
  int error_status = 0;
  std::string error_message;
  std::string version_id;  // object versioning: DELETE ?version-id=<this>; empty: none
};

// Where the names to delete come from when the caller has its own (Swift's objs_to_delete
// iterator): SLO hands out a manifest's segments, expanding nested manifests as the deletes go.
class BulkDeleteSource {
 public:
  virtual ~BulkDeleteSource() = default;
  // The next name; nullopt at the end. A refusal ends the delete (the DELETEs under way are
  // waited for) and the report takes its status and body, as when Swift's iterator raises an
  // HTTPException.
  virtual boost::asio::awaitable<common::http::OrRefusal<std::optional<BulkDeleteItem>>> next() = 0;
};

// Who is deleting: the User-Agent suffix of the subrequests and their swift.source.
struct BulkDeleteCaller {
  std::string user_agent = "BulkDelete";  // appended to the client's User-Agent
  std::string source = "BD";
};

// Swift's Bulk.handle_delete_iter(): deletes the names `names` gives (nullptr: the names in the
// request body, which it reads; the request's own Content-Type must then be absent or
// text/plain, 406 otherwise, as in Swift) in the account of the request `ex` carries, through
// `next`, `delete_concurrency` DELETEs at a time, objects before containers, and answers with
// the report: 200, then whitespace while it works, then the report in `content_type` (as
// bulk_content_type() chose it from Accept; nullopt reports 406).
// `max_path_length` is Swift's max object name + max container name + 2.
boost::asio::awaitable<void> answer_bulk_delete(common::http::Exchange& ex, ProxyEnv& env,
                                                const Next& next, const BulkDeleteOptions& options,
                                                size_t max_path_length,
                                                BulkDeleteSource* names,
                                                std::optional<std::string> content_type,
                                                BulkDeleteCaller caller = {});

// bulk, built from its [filter:...] section. InvalidArgument for an option that is not an
// integer.
common::Result<std::unique_ptr<Middleware>> make_bulk(const common::Section& section,
                                                      const MiddlewareContext& context);

}  // namespace apus::proxy
