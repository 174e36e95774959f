// apus-container-server CONFIG: Swift's container server, started like swift-container-server.
#include "container-server/container_server.h"

int main(int argc, char** argv) {
  using namespace apus::container;
  return run_db_server(argc, argv, DbType::kContainer,
                       [](const apus::common::Config& conf, const DbServerConfig& config,
                          DbDevices& devices) { return make_container_server(conf, config, devices); });
}
