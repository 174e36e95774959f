// AccountController: requests to /v1/<account> (Swift's proxy/controllers/account.py): GET and
// HEAD from one account replica at a time (a fake empty account under account_autocreate),
// POST (creating the account first under account_autocreate), and PUT and DELETE when
// allow_account_management is on, each to every replica by quorum. Private to proxy/.
//
// Thread-compatible: one per request, on its worker thread.
#pragma once

#include <boost/asio/awaitable.hpp>

#include "proxy/controllers/base.h"

namespace apus::proxy {

class AccountController final : public Controller {
 public:
  using Controller::Controller;

  boost::asio::awaitable<void> handle(common::http::Exchange& ex, ProxyEnv& env) override;

 private:
  // GET and HEAD, once allowed and authorized.
  boost::asio::awaitable<void> get_or_head_account(common::http::Exchange& ex,
                                                   const ProxyEnv& env, uint32_t part);
  // PUT, POST and DELETE, once allowed and authorized.
  boost::asio::awaitable<void> write_account(common::http::Exchange& ex, const ProxyEnv& env,
                                             uint32_t part);
};

}  // namespace apus::proxy
