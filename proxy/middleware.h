// The middlewares Apus provides, by their paste.deploy entry point names (egg:swift#<name>),
// as Swift's proxy-server.conf names them. Each is built from its [filter:...] section.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "common/config/config.h"
#include "common/status.h"
#include "proxy/pipeline.h"

namespace apus::proxy {

class ProxyApp;

// The middleware for entry point `name` ("catch_errors", "tempauth"...), configured from
// `section`. InvalidArgument naming the middleware when Apus has no such middleware, or an
// option is bad.
common::Result<std::unique_ptr<Middleware>> make_middleware(std::string_view name,
                                                            const common::Section& section,
                                                            ProxyApp& app);

// copy (copy.cpp).
common::Result<std::unique_ptr<Middleware>> make_copy(ProxyApp& app);

// tempauth (tempauth.cpp).
common::Result<std::unique_ptr<Middleware>> make_tempauth(const common::Section& section,
                                                          ProxyApp& app);

// Swift's generate_trans_id(): "tx" + 21 hex digits + "-" + %010x of the time + suffix.
std::string generate_trans_id(std::string_view suffix);

}  // namespace apus::proxy
