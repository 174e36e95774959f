// The `apus-ring-builder` command line: swift-ring-builder's commands, argument forms, output
// and exit codes (0 ok, 1 warning, 2 error) on top of RingBuilder and the builder file format.
//
// Commands: create, add, remove, set_weight, rebalance, (no command: the device listing),
// write_ring, write_builder (start a builder from a .ring.gz), validate, dispersion,
// pretend_min_part_hours_passed, search, list_parts, set_min_part_hours, set_replicas,
// set_overload. Files are saved atomically, with timestamped copies in backups/ next to the
// builder as Swift keeps them; a failed command leaves the builder file untouched.
//
// Thread-compatible: one call at a time (it reads and writes files, and the given streams).
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace apus::ring {

// Runs the tool. argv[0] is the program name, argv[1] the builder (or ring) file, argv[2] the
// command. Output goes to out (warnings to err, as Swift's); confirmation answers ("y") are
// read from in. Returns the process exit code.
int run_ring_builder(const std::vector<std::string>& argv, std::ostream& out, std::ostream& err,
                     std::istream& in);

}  // namespace apus::ring
