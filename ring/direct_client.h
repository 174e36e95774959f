// Swift's direct_client: one request straight to one device of a ring, as a daemon makes it (the
// object expirer, the container reconciler), on the device's replication address: Swift's
// daemons send X-Backend-Use-Replication-Network: true, which a storage server reaches that
// way. The target is "/<device>/<partition><path><query>", `path` ("/a/c/o") percent-encoded
// here and `query` ("?..." or empty) already encoded.
//
// Thread-compatible: as common::http::simple_request (the pool is the calling thread's).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include <boost/asio/awaitable.hpp>

#include "common/http/client.h"
#include "common/http/headers.h"
#include "common/status.h"
#include "ring/ring_data.h"

namespace apus::ring {

boost::asio::awaitable<common::Result<common::http::SimpleResponse>> direct_request(
    common::http::ConnectionPool& pool, const common::http::ClientOptions& options,
    const Device& device, std::string method, uint32_t partition, const std::string& path,
    const std::string& query, common::http::HeaderMap headers, size_t max_body);

}  // namespace apus::ring
