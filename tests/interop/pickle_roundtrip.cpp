// pickle_roundtrip: a line-oriented front end to common/pickle.h for
// tests/interop/pickle_roundtrip.py, which checks with real Python what Apus writes and reads.
//
// Each input line is "<command>\t<argument>"; each output line is "ok\t<result>" or
// "err\t<message>", in input order:
//   loads <pickle hex>      -> canonical form of the value (tests/unit/common/pickle_canonical.h)
//   dumps<P> <pickle hex>   -> hex of dumps(loads(pickle), P), P in 0..2
//   encmeta <pairs>         -> hex of encode_object_metadata(pairs); pairs are "khex:vhex,..."
//   decmeta <pickle hex>    -> decode_object_metadata(pickle) as pairs
#include <iostream>
#include <string>

#include "common/pickle.h"
#include "tests/unit/common/pickle_canonical.h"

namespace {

namespace pickle = apus::common::pickle;
using apus::testing::from_hex;
using apus::testing::hex;

std::string error_line(const std::string& message) {
  std::string out = "err\t";
  for (char c : message) out += (c == '\t' || c == '\n') ? ' ' : c;
  return out;
}

std::string run(const std::string& line) {
  const size_t tab = line.find('\t');
  if (tab == std::string::npos) return error_line("no tab");
  const std::string command = line.substr(0, tab);
  const std::string arg = line.substr(tab + 1);
  if (command == "encmeta") {
    auto pairs = apus::testing::pairs_from_hex(arg);
    if (!pairs) return error_line("bad pairs");
    return "ok\t" + hex(pickle::encode_object_metadata(*pairs));
  }
  auto data = from_hex(arg);
  if (!data) return error_line("bad hex");
  if (command == "decmeta") {
    auto pairs = pickle::decode_object_metadata(*data);
    if (!pairs.ok()) return error_line(pairs.status().to_string());
    return "ok\t" + apus::testing::pairs_to_hex(*pairs);
  }
  auto value = pickle::loads(*data);
  if (!value.ok()) return error_line(value.status().to_string());
  if (command == "loads") return "ok\t" + apus::testing::canonical(*value);
  if (command == "dumps0" || command == "dumps1" || command == "dumps2") {
    return "ok\t" + hex(pickle::dumps(*value, command.back() - '0'));
  }
  return error_line("unknown command " + command);
}

}  // namespace

int main() {
  std::ios::sync_with_stdio(false);
  std::string line;
  while (std::getline(std::cin, line)) std::cout << run(line) << '\n';
  std::cout.flush();
  return std::cout ? 0 : 1;
}
