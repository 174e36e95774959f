// The middlewares Apus provides, by their paste.deploy entry point names (egg:swift#<name>),
// as Swift's proxy-server.conf names them. Each is built from its [filter:...] section.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/config/config.h"
#include "common/status.h"
#include "proxy/pipeline.h"

namespace apus::proxy {

// The middleware for entry point `name` ("catch_errors", "tempauth"...), configured from
// `section`. InvalidArgument naming the middleware when an option is bad, when it is one of
// Swift's that Apus does not implement yet ("... is not implemented by Apus"), or when Swift
// has no such middleware either ("unknown middleware ..."). The middlewares Apus implements
// are one table in middleware.cpp (entry point -> factory).
common::Result<std::unique_ptr<Middleware>> make_middleware(std::string_view name,
                                                            const common::Section& section,
                                                            const MiddlewareContext& context);

// Whether Apus implements the middleware of entry point `name`.
bool has_middleware(std::string_view name);

// Whether `name` is one of the middleware entry points (paste.filter_factory) of Swift 2.35,
// implemented by Apus or not, and the list of them.
bool is_swift_middleware(std::string_view name);
std::span<const std::string_view> swift_middleware_names();

// copy (copy.cpp).
common::Result<std::unique_ptr<Middleware>> make_copy(const MiddlewareContext& context);

// tempauth (tempauth.cpp).
common::Result<std::unique_ptr<Middleware>> make_tempauth(const common::Section& section,
                                                          const MiddlewareContext& context);

// Whether a client may never send the header `name` to the proxy, nor see it in an answer:
// Swift's gatekeeper list (account, container and object sysmeta, object transient sysmeta,
// X-Backend-*, and the update headers older than X-Backend-*), also in its X-Remove- spelling
// (so that no removal reaches them) and with '_' for '-' (a WSGI server folds those together).
bool is_internal_header(std::string_view name);

// Drops from a client's headers `h` every internal header (above) and X-Timestamp, whose
// value it returns: whatever the pipeline, a client never chooses a write's timestamp or
// talks to the storage servers in their own words. Only what middlewares add after this
// reaches the app (copy's subrequests, tempauth's sysmeta).
std::optional<std::string> strip_client_headers(common::http::HeaderMap& h);
// Whether strip_client_headers() would take anything off `h` (a caller copies a request only
// to change it).
bool has_client_forbidden_headers(const common::http::HeaderMap& h);

// One element of [pipeline:main]: its name there and its entry point (egg:swift#<entry>).
struct PipelineEntry {
  std::string name;
  std::string entry_point;
  bool inserted = false;  // added by with_required_filters(), configured from [DEFAULT] only
  bool operator==(const PipelineEntry&) const = default;
};

// Swift's modify_wsgi_pipeline(): the filters of a pipeline (the app left out) with every
// required filter it lacks (catch_errors, gatekeeper, listing_formats, copy, dlo,
// versioned_writes) inserted where Swift inserts it; an inserted filter is named after its
// entry point and marked `inserted`.
std::vector<PipelineEntry> with_required_filters(std::vector<PipelineEntry> filters);

// Swift's generate_trans_id(): "tx" + 21 hex digits + "-" + %010x of the time + suffix.
std::string generate_trans_id(std::string_view suffix);

}  // namespace apus::proxy
