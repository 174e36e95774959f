// apus-container-server CONFIG: Swift's container server, started like swift-container-server.
#include "container-server/container_server.h"

int main(int argc, char** argv) {
  using namespace apus::container;
  return run_db_server(argc, argv, DbType::kContainer,
                       [](const DbServerConfig& config, DbDevices& devices) {
                         return std::make_unique<ContainerServer>(config, devices);
                       });
}
