// InfoController: GET /info (Swift's proxy/controllers/info.py): the cluster's capabilities as
// JSON, "swift" (version, constraints, policies) and a section per middleware that has one;
// 403 with expose_info = false. Private to proxy/.
//
// Thread-compatible: one per request, on its worker thread.
#pragma once

#include <string>

#include <boost/asio/awaitable.hpp>

#include "proxy/controllers/base.h"

namespace apus::proxy {

class InfoController final : public Controller {
 public:
  explicit InfoController(ProxyApp& app) : Controller(app, ApiPath{}) {}

  boost::asio::awaitable<void> handle(common::http::Exchange& ex, ProxyEnv& env) override;

 private:
  // The answer's body: the app's "swift" section, then the middlewares'.
  std::string info_json();
};

}  // namespace apus::proxy
