// slo: Swift's static large objects (swift-protocol.md, swift/common/middleware/slo.py).
//
// - PUT ?multipart-manifest=put: the JSON manifest is validated (proxy/slo_manifest.h), every
//   segment is HEADed through the pipeline (so nested SLOs answer with their own size and
//   etag), sizes, etags and ranges are checked, and the manifest is stored in Swift's format
//   with X-Static-Large-Object, the SLO etag and size sysmeta, the container-update etag
//   override and ";swift_bytes=<size>" on its content type. ?heartbeat=on answers 202 at once,
//   keeps the connection alive with spaces, then writes the result in the bulk format.
// - GET/HEAD of a manifest: the large object, its segments streamed in order by SegmentedBody
//   (segmented_body.h; with ranges and multiple ranges across segment boundaries, nested SLOs),
//   Etag the SLO etag and X-Manifest-Etag the manifest's;
//   conditional requests are answered against the SLO etag. A segment that fails or no longer
//   matches before the answer starts gives 409; after, the body ends short and the log says why.
// - ?multipart-manifest=get returns the manifest (format=raw: as the client wrote it);
//   DELETE ?multipart-manifest=delete removes the segments and then the manifest through bulk's
//   delete engine (bulk.h), answering in its format.
// - Container listings (JSON) get slo_etag from the etag override's parameter.
//
// Options (Swift's names and defaults): max_manifest_segments, max_manifest_size,
// yield_frequency, allow_async_delete (reported in /info; async delete itself is not
// implemented and is ignored), rate_limit_under_size, rate_limit_after_segment,
// rate_limit_segments_per_sec, max_get_time, concurrency (segment HEADs of a PUT at a time),
// delete_concurrency (segment DELETEs at a time; default: concurrency).
//
// Thread-compatible per request; the middleware object keeps only its options.
#pragma once

#include <memory>

#include "common/config/config.h"
#include "common/status.h"
#include "proxy/pipeline.h"

namespace apus::proxy {

// The slo filter built from its [filter:slo] section. InvalidArgument for a bad option.
common::Result<std::unique_ptr<Middleware>> make_slo(const common::Section& section,
                                                     const MiddlewareContext& context);

}  // namespace apus::proxy
