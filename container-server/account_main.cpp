// apus-account-server CONFIG: Swift's account server, started like swift-account-server.
#include "container-server/account_server.h"

int main(int argc, char** argv) {
  using namespace apus::container;
  return run_db_server(argc, argv, DbType::kAccount,
                       [](const apus::common::Config& conf, const DbServerConfig& config,
                          DbDevices& devices) { return make_account_server(conf, config, devices); });
}
