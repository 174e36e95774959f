// apus-ring-builder: swift-ring-builder's commands on Apus builder files (ring/builder_cli.h).
#include <iostream>
#include <string>
#include <vector>

#include "ring/builder_cli.h"

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv, argv + argc);
  return apus::ring::run_ring_builder(args, std::cout, std::cerr, std::cin);
}
