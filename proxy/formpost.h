// formpost: Swift's form POST middleware (egg:swift#formpost). A POST with a
// multipart/form-data body (a browser form) becomes one object PUT per file field, below the
// POSTed path, when the form's signature (an HMAC, with one of the account's or container's
// Temp-URL keys, of the path, redirect, max_file_size, max_file_count and expires fields) is
// valid. Fields before the files configure the upload (x_delete_at, x_delete_after,
// content-type, content-encoding); the answer is the last PUT's status as text, or a 303 to the
// form's redirect URL with status and message in its query.
//
// The body is read as it arrives (proxy/multipart.h) and each file streams into its PUT, so
// memory stays bounded whatever the form's size. The answers, and what stays stored after a
// failure, are Swift 2.30.1's (a failed PUT's status line is the body, not the PUT's own body as
// 2.35 sends).
//
// The middleware keeps only its config (thread-safe).
#pragma once

#include <memory>

#include "common/config/config.h"
#include "common/status.h"
#include "proxy/pipeline.h"

namespace apus::proxy {

// The formpost middleware from its [filter:...] section (allowed_digests). InvalidArgument when
// no allowed digest is left.
common::Result<std::unique_ptr<Middleware>> make_formpost(const common::Section& section,
                                                          const MiddlewareContext& context);

namespace formpost {

// Most bytes of a non-file field kept (the rest is read and dropped), as Swift's
// MAX_VALUE_LENGTH.
inline constexpr size_t kMaxValueLength = 4096;

}  // namespace formpost

}  // namespace apus::proxy
