#include "ring/direct_client.h"

#include "common/http/url.h"

namespace apus::ring {

boost::asio::awaitable<common::Result<common::http::SimpleResponse>> direct_request(
    common::http::ConnectionPool& pool, const common::http::ClientOptions& options,
    const Device& device, std::string method, uint32_t partition, const std::string& path,
    const std::string& query, common::http::HeaderMap headers, size_t max_body) {
  common::http::ClientRequest request;
  request.method = std::move(method);
  request.target = "/" + common::http::quote(device.device) + "/" + std::to_string(partition) +
                   common::http::quote(path) + query;
  request.headers = std::move(headers);
  co_return co_await common::http::simple_request(pool, options, device.replication_ip,
                                                  static_cast<uint16_t>(device.replication_port),
                                                  std::move(request), {}, max_body);
}

}  // namespace apus::ring
