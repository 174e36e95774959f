#include "ring/builder_cli.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <istream>
#include <map>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <sys/stat.h>

#include "common/io/fs.h"
#include "ring/builder.h"
#include "ring/internal/builder_util.h"
#include "ring/ring_data.h"

namespace apus::ring {

using common::Result;
using common::Status;
using internal::normalize_address;
using internal::normalize_ip;
using internal::py_float_repr;
using internal::strprintf;

namespace {

constexpr int kExitSuccess = 0;
constexpr int kExitWarning = 1;
constexpr int kExitError = 2;
const std::string kRule(79, '-');

// Control flow: like swift-ring-builder's exit() calls, a command stops where it finds its
// answer by throwing Exit (an exit code), OptError (an option error, printed as optparse does)
// or a Status (bad input, printed as the message); Cli::run catches all three. This is a
// one-shot command-line tool, not a request path, and it keeps each command a straight line.
struct Exit {
  int code;
};

// --- Usage texts (argument forms as swift-ring-builder documents them).

const std::map<std::string, std::string>& usage_texts() {
  static const std::map<std::string, std::string> texts = {
      {"default",
       "apus-ring-builder <builder_file>\n"
       "    Shows the ring's parameters and a table of its devices (id, region, zone,\n"
       "    addresses, name, weight, partitions, balance, flags, meta).\n"
       "    flags: DEL marks a device that the next rebalance removes."},
      {"create",
       "apus-ring-builder <builder_file> create <part_power> <replicas>\n"
       "                                        <min_part_hours>\n"
       "    Creates <builder_file> for 2^<part_power> partitions and <replicas> replicas\n"
       "    (fractional allowed). A partition is not moved twice within <min_part_hours>."},
      {"add",
       "apus-ring-builder <builder_file> add\n"
       "    [r<region>]z<zone>-<ip>:<port>[R<r_ip>:<r_port>]/<device_name>_<meta>\n"
       "     <weight>\n"
       "    [[r<region>]z<zone>-<ip>:<port>[R<r_ip>:<r_port>]/<device_name>_<meta>\n"
       "     <weight>] ...\n"
       "\n"
       "    Where <r_ip> and <r_port> are replication ip and port.\n"
       "\n"
       "or\n"
       "\n"
       "apus-ring-builder <builder_file> add\n"
       "    --region <region> --zone <zone> --ip <ip or hostname> --port <port>\n"
       "    [--replication-ip <r_ip or r_hostname>] [--replication-port <r_port>]\n"
       "    --device <device_name> --weight <weight>\n"
       "    [--meta <meta>]\n"
       "\n"
       "    Adds devices. Partitions are assigned to them by the next 'rebalance'."},
      {"remove",
       "apus-ring-builder <builder_file> remove <search-value> [search-value ...]\n"
       "    [--yes]\n"
       "\n"
       "or\n"
       "\n"
       "apus-ring-builder <builder_file> remove\n"
       "    --region <region> --zone <zone> --ip <ip or hostname> --port <port>\n"
       "    --replication-ip <r_ip or r_hostname> --replication-port <r_port>\n"
       "    --device <device_name> --meta <meta> --weight <weight>\n"
       "    [--yes]\n"
       "\n"
       "    Marks the matching devices for removal; the next 'rebalance' moves their\n"
       "    partitions away and drops them. To drain a device gently, set its weight\n"
       "    to 0 first. --yes answers yes to the confirmation question."},
      {"set_weight",
       "apus-ring-builder <builder_file> set_weight <search-value> <new_weight>\n"
       "    [<search-value> <new_weight>] ...\n"
       "    [--yes]\n"
       "\n"
       "or\n"
       "\n"
       "apus-ring-builder <builder_file> set_weight\n"
       "    --region <region> --zone <zone> --ip <ip or hostname> --port <port>\n"
       "    --replication-ip <r_ip or r_hostname> --replication-port <r_port>\n"
       "    --device <device_name> --meta <meta> --weight <weight> <new_weight>\n"
       "    [--yes]\n"
       "\n"
       "    Sets the weight of the matching devices; 'rebalance' applies it."},
      {"rebalance",
       "apus-ring-builder <builder_file> rebalance [<seed>] [--force] [--seed <seed>]\n"
       "    Reassigns partitions that were not moved within min_part_hours, then writes\n"
       "    the ring file. The same seed on the same builder gives the same ring."},
      {"dispersion",
       "apus-ring-builder <builder_file> dispersion <search_filter> [--verbose]\n"
       "    [--recalculate]\n"
       "    Reports how well each tier spreads the replicas of every partition.\n"
       "    <search_filter> is a regular expression matched at the start of tier names\n"
       "    (r1, r1z2, r1z2-10.0.0.1, r1z2-10.0.0.1/sdb1); -v shows each tier's row.\n"
       "    Columns: Tier, Parts (replicas placed in the tier), % (of those over Max),\n"
       "    Max (replicas a partition should have there), 0..N (partitions with that\n"
       "    many replicas in the tier)."},
      {"validate",
       "apus-ring-builder <builder_file> validate\n"
       "    Checks the assignment for consistency."},
      {"write_ring",
       "apus-ring-builder <builder_file> write_ring\n"
       "    Writes the ring file from the builder (rebalance does this itself)."},
      {"write_builder",
       "apus-ring-builder <ring_file> write_builder [min_part_hours]\n"
       "    Recreates a builder from a ring file (lossy: move history, overload and\n"
       "    min_part_hours are not in the ring; min_part_hours defaults to 24)."},
      {"pretend_min_part_hours_passed",
       "apus-ring-builder <builder_file> pretend_min_part_hours_passed\n"
       "    Lets the next rebalance move any partition, whatever min_part_hours says.\n"
       "    Deploying such a ring before replication caught up can make data\n"
       "    unavailable for a while."},
      {"search",
       "apus-ring-builder <builder_file> search <search-value>\n"
       "\n"
       "or\n"
       "\n"
       "apus-ring-builder <builder_file> search\n"
       "    --region <region> --zone <zone> --ip <ip or hostname> --port <port>\n"
       "    --replication-ip <r_ip or r_hostname> --replication-port <r_port>\n"
       "    --device <device_name> --meta <meta> --weight <weight>\n"
       "\n"
       "    Shows the matching devices."},
      {"list_parts",
       "apus-ring-builder <builder_file> list_parts <search-value> [<search-value>] ..\n"
       "\n"
       "or\n"
       "\n"
       "apus-ring-builder <builder_file> list_parts\n"
       "    --region <region> --zone <zone> --ip <ip or hostname> --port <port>\n"
       "    --replication-ip <r_ip or r_hostname> --replication-port <r_port>\n"
       "    --device <device_name> --meta <meta> --weight <weight>\n"
       "\n"
       "    Lists the partitions on the matching devices, most matches first."},
      {"set_min_part_hours",
       "apus-ring-builder <builder_file> set_min_part_hours <hours>\n"
       "    Sets min_part_hours (about one full replication cycle)."},
      {"set_replicas",
       "apus-ring-builder <builder_file> set_replicas <replicas>\n"
       "    Sets the replica count (fractional allowed); 'rebalance' applies it."},
      {"set_overload",
       "apus-ring-builder <builder_file> set_overload <overload>[%]\n"
       "    Sets how much a device may exceed its weight share for dispersion;\n"
       "    'rebalance' applies it."},
  };
  return texts;
}

const char* const kSearchValueHelp =
    "The <search-value> can be of the form:\n"
    "    d<device_id>r<region>z<zone>-<ip>:<port>R<r_ip>:<r_port>/\n"
    "     <device_name>_<meta>\n"
    "\n"
    "    Any part is optional, but at least one must be given. Examples:\n"
    "    d74 (device id 74), r4 (region 4), z1 (zone 1), z1-1.2.3.4 (zone 1 and ip),\n"
    "    1.2.3.4 (ip), :5678 (port), R5.6.7.8 (replication ip), /sdb1 (device\n"
    "    name), _shiny (meta contains \"shiny\"), [::1] (IPv6 ip),\n"
    "    d74r4z1-1.2.3.4:5678/sdb1_\"snet: 5.6.7.8\" (all of them).";

std::string usage(const std::string& cmd) { return usage_texts().at(cmd); }

// --- Python-compatible number parsing (int() and float() of a command-line string).

std::string_view strip(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::string py_quote(std::string_view s) {
  // repr() of a simple str: single quotes unless the text has one and no double quote.
  const bool dq = s.find('\'') != std::string_view::npos && s.find('"') == std::string_view::npos;
  const char q = dq ? '"' : '\'';
  std::string out(1, q);
  for (char c : s) {
    if (c == q || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  out.push_back(q);
  return out;
}

std::optional<int64_t> parse_int(std::string_view text) {
  std::string_view s = strip(text);
  bool neg = false;
  if (!s.empty() && (s.front() == '+' || s.front() == '-')) {
    neg = s.front() == '-';
    s.remove_prefix(1);
  }
  if (s.empty() || s.front() == '_' || s.back() == '_') return std::nullopt;
  int64_t v = 0;
  char prev = 0;
  for (char c : s) {
    if (c == '_') {
      if (prev == '_') return std::nullopt;
    } else if (c >= '0' && c <= '9') {
      if (v > (INT64_MAX - (c - '0')) / 10) return std::nullopt;
      v = v * 10 + (c - '0');
    } else {
      return std::nullopt;
    }
    prev = c;
  }
  return neg ? -v : v;
}

int64_t py_int(std::string_view text) {
  std::optional<int64_t> v = parse_int(text);
  if (!v) {
    throw Status::invalid_argument("invalid literal for int() with base 10: " + py_quote(text));
  }
  return *v;
}

std::optional<double> parse_float(std::string_view text) {
  std::string s(strip(text));
  if (s.empty()) return std::nullopt;
  for (char c : s) {
    if (c == 'x' || c == 'X' || c == 'p' || c == 'P' || c == ',' ||
        std::isspace(static_cast<unsigned char>(c))) {
      return std::nullopt;
    }
  }
  s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size()) return std::nullopt;
  return v;
}

double py_float(std::string_view text) {
  std::optional<double> v = parse_float(text);
  if (!v) throw Status::invalid_argument("could not convert string to float: " + py_quote(text));
  return *v;
}

// --- optparse-like option parsing.

enum class OptType { kInt, kString, kFloat, kFlag };
struct OptSpec {
  char short_name;
  const char* long_name;  // without "--"
  OptType type;
};

struct Options {
  std::map<std::string, std::string> values;  // by long name; flags hold "1"
  std::vector<std::string> args;              // positional arguments in order

  bool has(const std::string& k) const { return values.count(k) != 0; }
  std::optional<std::string> str(const std::string& k) const {
    auto it = values.find(k);
    if (it == values.end()) return std::nullopt;
    return it->second;
  }
  std::optional<int> integer(const std::string& k) const {
    auto v = str(k);
    if (!v) return std::nullopt;
    return static_cast<int>(*parse_int(*v));
  }
  std::optional<double> number(const std::string& k) const {
    auto v = str(k);
    if (!v) return std::nullopt;
    return *parse_float(*v);
  }
};

const std::vector<OptSpec> kDeviceOptions = {
    {'u', "id", OptType::kInt},
    {'r', "region", OptType::kInt},
    {'z', "zone", OptType::kInt},
    {'i', "ip", OptType::kString},
    {'p', "port", OptType::kInt},
    {'j', "replication-ip", OptType::kString},
    {'q', "replication-port", OptType::kInt},
    {'d', "device", OptType::kString},
    {'w', "weight", OptType::kFloat},
    {'m', "meta", OptType::kString},
    {'I', "change-ip", OptType::kString},
    {'P', "change-port", OptType::kInt},
    {'J', "change-replication-ip", OptType::kString},
    {'Q', "change-replication-port", OptType::kInt},
    {'D', "change-device", OptType::kString},
    {'M', "change-meta", OptType::kString},
    {'y', "yes", OptType::kFlag},
};

// Thrown for an option error: printed like optparse's "prog: error: ..." and exit 2.
struct OptError {
  std::string message;
};

Options parse_options(const std::vector<std::string>& argv, const std::vector<OptSpec>& specs) {
  Options o;
  auto set = [&](const OptSpec& spec, const std::string& shown, const std::string& value) {
    if (spec.type == OptType::kInt && !parse_int(value)) {
      throw OptError{"option " + shown + ": invalid integer value: " + py_quote(value)};
    }
    if (spec.type == OptType::kFloat && !parse_float(value)) {
      throw OptError{"option " + shown + ": invalid floating-point value: " + py_quote(value)};
    }
    o.values[spec.long_name] = value;
  };
  for (std::size_t i = 0; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (a == "--") {
      o.args.insert(o.args.end(), argv.begin() + static_cast<std::ptrdiff_t>(i) + 1, argv.end());
      break;
    }
    if (a.size() > 2 && a.compare(0, 2, "--") == 0) {
      const std::size_t eq = a.find('=');
      const std::string name = a.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
      const OptSpec* match = nullptr;
      std::vector<const OptSpec*> prefixed;
      for (const OptSpec& s : specs) {
        if (name == s.long_name) match = &s;
        if (std::string_view(s.long_name).substr(0, name.size()) == name) prefixed.push_back(&s);
      }
      if (!match && prefixed.size() == 1) match = prefixed[0];
      if (!match) {
        if (prefixed.size() > 1) {
          std::string list;
          for (const OptSpec* s : prefixed)
            list += (list.empty() ? "--" : ", --") + std::string(s->long_name);
          throw OptError{"ambiguous option: --" + name + " (" + list + "?)"};
        }
        throw OptError{"no such option: --" + name};
      }
      const std::string shown = std::string("--") + match->long_name;
      if (match->type == OptType::kFlag) {
        if (eq != std::string::npos) throw OptError{shown + " option does not take a value"};
        o.values[match->long_name] = "1";
        continue;
      }
      if (eq != std::string::npos) {
        set(*match, shown, a.substr(eq + 1));
      } else {
        if (i + 1 >= argv.size()) throw OptError{shown + " option requires 1 argument"};
        set(*match, shown, argv[++i]);
      }
      continue;
    }
    if (a.size() > 1 && a[0] == '-') {
      for (std::size_t k = 1; k < a.size(); ++k) {
        const OptSpec* match = nullptr;
        for (const OptSpec& s : specs) {
          if (s.short_name == a[k]) match = &s;
        }
        const std::string shown = std::string("-") + a[k];
        if (!match) throw OptError{"no such option: " + shown};
        if (match->type == OptType::kFlag) {
          o.values[match->long_name] = "1";
          continue;
        }
        if (k + 1 < a.size()) {
          set(*match, shown, a.substr(k + 1));
        } else {
          if (i + 1 >= argv.size()) throw OptError{shown + " option requires 1 argument"};
          set(*match, shown, argv[++i]);
        }
        break;
      }
      continue;
    }
    o.args.push_back(a);
  }
  return o;
}

// Swift's "new command format": any device option given.
bool new_cmd_format(const Options& o) {
  for (const char* k : {"id", "region", "zone", "ip", "port", "replication-ip", "replication-port",
                        "device", "weight"}) {
    if (o.has(k)) return true;
  }
  auto meta = o.str("meta");
  return meta && !meta->empty();
}

// --- Parsing devices and search values.

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Reads [0-9]* after a one-letter prefix; Python int() of it (so "d" alone fails).
int take_prefixed_int(std::string_view& s) {
  std::size_t i = 1;
  while (i < s.size() && is_digit(s[i])) ++i;
  const int64_t v = py_int(s.substr(1, i - 1));
  s.remove_prefix(i);
  return static_cast<int>(v);
}

std::string checked_ip(std::string_view ip) {
  std::optional<std::string> n = normalize_ip(ip);
  if (!n) throw Status::invalid_argument("Invalid ip " + std::string(ip));
  return *n;
}

// Reads "<ipv4>" (digits and dots) or "[<ipv6>]".
std::optional<std::string> take_ip(std::string_view& s) {
  if (!s.empty() && is_digit(s[0])) {
    std::size_t i = 1;
    while (i < s.size() && (is_digit(s[i]) || s[i] == '.')) ++i;
    std::string ip(s.substr(0, i));
    s.remove_prefix(i);
    return checked_ip(ip);
  }
  if (!s.empty() && s[0] == '[') {
    std::size_t i = 1;
    while (i < s.size() && s[i] != ']') ++i;
    ++i;
    std::string_view raw = s.substr(0, std::min(i, s.size()));
    s.remove_prefix(raw.size());
    while (!raw.empty() && raw.front() == '[') raw.remove_prefix(1);
    while (!raw.empty() && raw.back() == ']') raw.remove_suffix(1);
    return checked_ip(raw);
  }
  return std::nullopt;
}

std::optional<int> take_port(std::string_view& s) {
  if (s.empty() || s[0] != ':') return std::nullopt;
  return take_prefixed_int(s);
}

// Swift's parse_search_value: d<id>r<region>z<zone>-<ip>:<port>R<r_ip>:<r_port>/<dev>_<meta>.
DeviceSearch parse_search_value(const std::string& value) {
  DeviceSearch q;
  std::string_view s = value;
  if (!s.empty() && s[0] == 'd') q.id = take_prefixed_int(s);
  if (!s.empty() && s[0] == 'r') q.region = take_prefixed_int(s);
  if (!s.empty() && s[0] == 'z') q.zone = take_prefixed_int(s);
  if (!s.empty() && s[0] == '-') s.remove_prefix(1);
  q.ip = take_ip(s);
  q.port = take_port(s);
  if (!s.empty() && s[0] == 'R') {
    s.remove_prefix(1);
    q.replication_ip = take_ip(s);
    q.replication_port = take_port(s);
  }
  if (!s.empty() && s[0] == '/') {
    std::size_t i = 1;
    while (i < s.size() && s[i] != '_') ++i;
    q.device = std::string(s.substr(1, i - 1));
    s.remove_prefix(i);
  }
  if (!s.empty() && s[0] == '_') {
    q.meta = std::string(s.substr(1));
    s = {};
  }
  if (!s.empty()) throw Status::invalid_argument("Invalid <search-value>: " + py_quote(value));
  return q;
}

DeviceSearch search_from_options(const Options& o) {
  DeviceSearch q;
  auto addr = [&](const char* k) -> std::optional<std::string> {
    auto v = o.str(k);
    if (!v) return std::nullopt;
    if (v->empty()) return v;
    std::optional<std::string> n = normalize_address(*v);
    if (!n) throw Status::invalid_argument("Invalid address " + *v);
    return n;
  };
  q.id = o.integer("id");
  q.region = o.integer("region");
  q.zone = o.integer("zone");
  q.ip = addr("ip");
  q.port = o.integer("port");
  q.replication_ip = addr("replication-ip");
  q.replication_port = o.integer("replication-port");
  q.device = o.str("device");
  q.weight = o.number("weight");
  auto meta = o.str("meta");
  if (meta && !meta->empty()) q.meta = meta;
  return q;
}

// Splits "<ip>:<port>" up to the next 'R' or '/' (Swift's parse_address).
std::tuple<std::string, int, std::string> parse_address(std::string rest) {
  if (!rest.empty() && rest[0] == '[') {
    rest.erase(0, 1);
    const std::size_t close = rest.find(']');
    if (close != std::string::npos) rest.erase(close, 1);
  }
  std::size_t pos = 0;
  while (pos < rest.size() && rest[pos] != 'R' && rest[pos] != '/') ++pos;
  const std::string address = rest.substr(0, pos);
  rest = rest.substr(pos);
  const std::size_t colon = address.rfind(':');
  if (colon == std::string::npos) throw Status::invalid_argument("Invalid port in add value");
  std::optional<int64_t> port = parse_int(address.substr(colon + 1));
  if (!port || *port < 0 || *port > 65535) {
    throw Status::invalid_argument("Invalid port " + address.substr(colon) + " in add value");
  }
  return {checked_ip(address.substr(0, colon)), static_cast<int>(*port), rest};
}

struct NewDevice {
  Device dev;
  bool region_given = true;
};

// Swift's parse_add_value: [r<region>]z<zone>-<ip>:<port>[R<r_ip>:<r_port>]/<device>_<meta>.
NewDevice parse_add_value(const std::string& value) {
  NewDevice nd;
  std::string_view s = value;
  if (!s.empty() && s[0] == 'r') {
    nd.dev.region = take_prefixed_int(s);
  } else {
    nd.region_given = false;
    nd.dev.region = 1;
  }
  if (s.empty() || s[0] != 'z') throw Status::invalid_argument("Invalid add value: " + value);
  nd.dev.zone = take_prefixed_int(s);
  if (s.empty() || s[0] != '-') throw Status::invalid_argument("Invalid add value: " + value);
  auto [ip, port, rest] = parse_address(std::string(s.substr(1)));
  nd.dev.ip = ip;
  nd.dev.port = port;
  nd.dev.replication_ip = ip;
  nd.dev.replication_port = port;
  if (!rest.empty() && rest[0] == 'R') {
    auto [rip, rport, rest2] = parse_address(rest.substr(1));
    nd.dev.replication_ip = rip;
    nd.dev.replication_port = rport;
    rest = rest2;
  }
  if (rest.empty() || rest[0] != '/') throw Status::invalid_argument("Invalid add value: " + value);
  std::size_t i = 1;
  while (i < rest.size() && rest[i] != '_') ++i;
  nd.dev.device = rest.substr(1, i - 1);
  if (nd.dev.device.empty() || nd.dev.device.front() == ' ' || nd.dev.device.back() == ' ') {
    throw Status::invalid_argument("Invalid device name");
  }
  rest = rest.substr(i);
  if (!rest.empty() && rest[0] == '_') nd.dev.meta = rest.substr(1);
  return nd;
}

// --- Output helpers.

std::string bracket(const std::string& ip) {
  return ip.find(':') != std::string::npos ? "[" + ip + "]" : ip;
}

std::string format_device(const Device& d) {
  return strprintf("d%dr%dz%d-%s:%dR%s:%d/%s_\"%s\"", d.id, d.region, d.zone, bracket(d.ip).c_str(),
                   d.port, bracket(d.replication_ip).c_str(), d.replication_port, d.device.c_str(),
                   d.meta.c_str());
}

// Python's str(timedelta(seconds=n)).
std::string format_timedelta(int64_t seconds) {
  const int64_t days = seconds / 86400;
  const int64_t rem = seconds % 86400;
  std::string out =
      strprintf("%lld:%02lld:%02lld", static_cast<long long>(rem / 3600),
                static_cast<long long>(rem % 3600 / 60), static_cast<long long>(rem % 60));
  if (days)
    out = strprintf("%lld day%s, ", static_cast<long long>(days), days == 1 ? "" : "s") + out;
  return out;
}

double now_seconds() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

std::string basename_of(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}
std::string dirname_of(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash == 0 ? 1 : slash);
}
std::string join_path(const std::string& dir, const std::string& name) {
  if (dir.empty()) return name;
  return dir.back() == '/' ? dir + name : dir + "/" + name;
}
bool file_exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

bool same_ring(const RingData& a, const RingData& b) {
  if (a.part_shift != b.part_shift || a.version != b.version ||
      a.next_part_power != b.next_part_power || a.replica2part2dev != b.replica2part2dev ||
      a.devs.size() != b.devs.size()) {
    return false;
  }
  for (std::size_t i = 0; i < a.devs.size(); ++i) {
    const auto& x = a.devs[i];
    const auto& y = b.devs[i];
    if (x.has_value() != y.has_value()) return false;
    if (!x) continue;
    if (x->id != y->id || x->region != y->region || x->zone != y->zone || x->ip != y->ip ||
        x->port != y->port || x->replication_ip != y->replication_ip ||
        x->replication_port != y->replication_port || x->device != y->device ||
        x->weight != y->weight || x->meta != y->meta) {
      return false;
    }
  }
  return true;
}

// --- The command runner.

class Cli {
 public:
  Cli(const std::vector<std::string>& argv, std::ostream& out, std::ostream& err, std::istream& in)
      : argv_(argv), out_(out), err_(err), in_(in) {}

  int run();

 private:
  void cmd_default();
  void cmd_create();
  void cmd_add();
  void cmd_remove();
  void cmd_set_weight();
  void cmd_rebalance();
  void cmd_dispersion();
  void cmd_validate();
  void cmd_write_ring();
  void cmd_write_builder();
  void cmd_pretend();
  void cmd_search();
  void cmd_list_parts();
  void cmd_set_min_part_hours();
  void cmd_set_replicas();
  void cmd_set_overload();

  [[noreturn]] void exit_with(int code) { throw Exit{code}; }
  [[noreturn]] void usage_exit(const std::string& cmd, bool with_search_help = false) {
    out_ << usage(cmd) << "\n";
    if (with_search_help) out_ << "\n" << kSearchValueHelp << "\n";
    exit_with(kExitError);
  }
  void print_error_block(const std::string& message) {
    out_ << kRule << "\n"
         << "An error has occurred during ring validation. Common\n"
            "causes of failure are rings that are empty or do not\n"
            "have enough devices to accommodate the replica count.\n"
            "Original exception message:\n "
         << message << "\n"
         << kRule << "\n";
  }
  // Saves the builder to each path (atomically); a Swift pickle being replaced is kept in
  // backups/ first. Exits 2 on failure.
  void save_builder(const std::vector<std::string>& paths);
  // Writes the ring file image to each path (atomically, 0644). Exits 2 on failure.
  void save_ring(const RingData& ring, const std::vector<std::string>& paths);
  std::string backup_path(double ts, const std::string& file) const {
    return join_path(backup_dir_,
                     strprintf("%lld.", static_cast<long long>(ts)) + basename_of(file));
  }
  std::vector<int> search(const DeviceSearch& q) const { return builder_->search_devs(q); }
  const BuilderDevice& dev(int id) const { return *builder_->devs()[id]; }
  // Swift's check_devs: none matched is an error; several ask for confirmation unless --yes.
  void check_devs(const std::vector<int>& ids, const std::string& question, const Options& opts,
                  const std::string& abort_msg);
  void require_builder() {
    if (!builder_) {
      out_ << "Ring Builder file does not exist: " << builder_file_ << "\n";
      exit_with(kExitError);
    }
  }

  const std::vector<std::string>& argv_;
  std::ostream& out_;
  std::ostream& err_;
  std::istream& in_;
  std::string builder_file_, ring_file_, backup_dir_;
  std::optional<RingBuilder> builder_;
  std::string pickle_bytes_;  // the original file when it was a Swift pickle
};

void Cli::save_builder(const std::vector<std::string>& paths) {
  if (!pickle_bytes_.empty() &&
      std::find(paths.begin(), paths.end(), builder_file_) != paths.end()) {
    const std::string keep = backup_path(now_seconds(), builder_file_) + ".swift-pickle";
    Status s = internal::write_file_0644(common::io::default_fs(), keep, pickle_bytes_);
    if (!s.ok()) {
      out_ << "Could not keep the Swift builder file in " << keep << ": " << s.message() << "\n";
      exit_with(kExitError);
    }
    err_ << "Note: " << builder_file_ << " was a Swift (pickle) builder file; it is now saved in "
         << "the Apus format and the original is kept as " << keep << "\n";
    pickle_bytes_.clear();
  }
  builder_->ensure_id();
  const std::string image = encode_builder(builder_->state());
  for (const std::string& path : paths) {
    Status s = internal::write_file_0644(common::io::default_fs(), path, image);
    if (!s.ok()) {
      out_ << "Unable to save builder file " << path << ": " << s.message() << "\n";
      exit_with(kExitError);
    }
  }
}

void Cli::save_ring(const RingData& ring, const std::vector<std::string>& paths) {
  // Encoded once (gzip level 9 is the slow part); a copy under another name differs only in
  // the gzip header's FNAME, which Swift sets to the file's own name.
  Result<std::string> image = encode_ring(ring, basename_of(ring_file_));
  if (!image.ok()) {
    out_ << "Unable to write ring file " << ring_file_ << ": " << image.status().message() << "\n";
    exit_with(kExitError);
  }
  for (const std::string& path : paths) {
    std::string bytes = *image;
    const std::string base = basename_of(path), own = basename_of(ring_file_);
    if (base != own) {
      const bool plain_fname = bytes.size() > 10 && static_cast<uint8_t>(bytes[3]) == 0x08;
      const bool prefixed =
          base.size() > own.size() && base.compare(base.size() - own.size(), own.size(), own) == 0;
      if (plain_fname && prefixed) {
        bytes.insert(10, base.substr(0, base.size() - own.size()));
      } else {
        Result<std::string> other = encode_ring(ring, base);
        if (!other.ok()) {
          out_ << "Unable to write ring file " << path << ": " << other.status().message() << "\n";
          exit_with(kExitError);
        }
        bytes = std::move(*other);
      }
    }
    Status s = internal::write_file_0644(common::io::default_fs(), path, bytes);
    if (!s.ok()) {
      out_ << "Unable to write ring file " << path << ": " << s.message() << "\n";
      exit_with(kExitError);
    }
  }
}

void Cli::check_devs(const std::vector<int>& ids, const std::string& question, const Options& opts,
                     const std::string& abort_msg) {
  if (ids.empty()) {
    out_ << "Search value matched 0 devices.\nThe on-disk ring builder is unchanged.\n";
    exit_with(kExitError);
  }
  if (ids.size() > 1) {
    out_ << "Matched more than one device:\n";
    for (int id : ids) out_ << "    " << format_device(dev(id)) << "\n";
    if (!opts.has("yes")) {
      out_ << question << std::flush;
      std::string answer;
      if (!std::getline(in_, answer)) out_ << "\n";
      if (answer != "y") {
        out_ << abort_msg << "\n";
        exit_with(kExitError);
      }
    }
  }
}

void Cli::cmd_default() {
  require_builder();
  const RingBuilder& b = *builder_;
  const BuilderState& s = b.state();
  out_ << builder_file_ << ", build version " << s.version << ", id "
       << (s.id.empty() ? "(not assigned)" : s.id) << "\n";
  std::set<int> regions;
  std::set<std::pair<int, int>> zones;
  int dev_count = 0;
  for (const auto& d : b.devs()) {
    if (!d) continue;
    regions.insert(d->region);
    zones.insert({d->region, d->zone});
    ++dev_count;
  }
  Result<std::vector<double>> per_dev = b.balance_per_dev();
  double balance = 0;
  if (per_dev.ok()) {
    for (const auto& d : b.devs()) {
      if (d) balance = std::max(balance, std::abs((*per_dev)[d->id]));
    }
  }
  const std::string dispersion_trailer =
      s.dispersion ? strprintf(", %.02f dispersion", *s.dispersion) : "";
  out_ << strprintf(
      "%lld partitions, %.6f replicas, %zu regions, %zu zones, %d devices, "
      "%.02f balance%s\n",
      static_cast<long long>(b.parts()), s.replicas, regions.size(), zones.size(), dev_count,
      balance, dispersion_trailer.c_str());
  out_ << "The minimum number of hours before a partition can be reassigned is " << s.min_part_hours
       << " (" << format_timedelta(b.min_part_seconds_left(now_seconds())) << " remaining)\n";
  out_ << strprintf("The overload factor is %0.2f%% (%.6f)\n", s.overload * 100, s.overload);

  const RingData mine = b.ring_data();
  std::optional<RingData> on_disk;
  if (!file_exists(ring_file_)) {
    out_ << "Ring file " << ring_file_ << " not found, probably it hasn't been written yet\n";
  } else {
    Result<RingData> loaded = load_ring_file(ring_file_);
    if (!loaded.ok()) {
      out_ << "Ring file " << ring_file_ << " is invalid: " << loaded.status().message() << "\n";
    } else {
      on_disk = std::move(*loaded);
      out_ << "Ring file " << ring_file_
           << (same_ring(mine, *on_disk) ? " is up-to-date\n" : " is obsolete\n");
    }
  }

  // The device table, sized like Swift's.
  std::size_t ip_w = 10, port_w = 4, rip_w = 14, rport_w = 4, weight_w = 6;
  bool ip_v6 = false, rip_v6 = false;
  for (const auto& d : b.devs()) {
    if (!d) continue;
    ip_v6 = ip_v6 || internal::is_valid_ipv6(d->ip);
    rip_v6 = rip_v6 || internal::is_valid_ipv6(d->replication_ip);
    ip_w = std::max(ip_w, d->ip.size());
    rip_w = std::max(rip_w, d->replication_ip.size());
    port_w = std::max(port_w, std::to_string(d->port).size());
    rport_w = std::max(rport_w, std::to_string(d->replication_port).size());
    weight_w = std::max(weight_w, strprintf("%6.02f", d->weight).size());
  }
  if (ip_v6) ip_w += 2;
  if (rip_v6) rip_w += 2;
  const int ipw = static_cast<int>(ip_w), pw = static_cast<int>(port_w);
  const int ripw = static_cast<int>(rip_w), rpw = static_cast<int>(rport_w);
  const int ww = static_cast<int>(weight_w);
  out_ << strprintf("Devices:%5s %6s %4s %*s:%-*s %*s:%-*s %5s %*s %10s %7s %5s %s\n", "id",
                    "region", "zone", ipw, "ip address", pw, "port", ripw, "replication ip", rpw,
                    "port", "name", ww, "weight", "partitions", "balance", "flags", "meta");
  std::vector<const BuilderDevice*> sorted;
  for (const auto& d : b.devs()) {
    if (d) sorted.push_back(&*d);
  }
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const BuilderDevice* x, const BuilderDevice* y) {
                     return std::tie(x->region, x->zone, x->ip, x->device) <
                            std::tie(y->region, y->zone, y->ip, y->device);
                   });
  for (const BuilderDevice* d : sorted) {
    const double bal = per_dev.ok() ? (*per_dev)[d->id] : 0.0;
    out_ << strprintf("%13d %6d %4d %*s:%-*d %*s:%-*d %5s %*.02f %10lld %7.02f %5s %s\n", d->id,
                      d->region, d->zone, ipw, bracket(d->ip).c_str(), pw, d->port, ripw,
                      bracket(d->replication_ip).c_str(), rpw, d->replication_port,
                      d->device.c_str(), ww, d->weight, static_cast<long long>(d->parts), bal,
                      b.marked_for_removal(d->id) ? "DEL" : "", d->meta.c_str());
  }
  if (s.next_part_power && *s.next_part_power == s.part_power + 1) {
    out_ << strprintf("\nPreparing increase of partition power (%d -> %d)\n", s.part_power,
                      *s.next_part_power);
  }
  if (s.next_part_power && *s.next_part_power == s.part_power) {
    out_ << strprintf("\nIncreased partition power (%d -> %d)\n", s.part_power, *s.next_part_power);
  }
  if (!per_dev.ok()) out_ << per_dev.status().message() << "\n";
  exit_with(kExitSuccess);
}

void Cli::cmd_create() {
  if (argv_.size() < 6) usage_exit("create");
  const int64_t part_power = py_int(argv_[3]);
  const double replicas = py_float(argv_[4]);
  const int64_t min_part_hours = py_int(argv_[5]);
  if (part_power > kMaxPartPower || part_power < 0) {
    throw Status::invalid_argument(
        strprintf("part_power must be at most 32 (was %lld)", static_cast<long long>(part_power)));
  }
  if (min_part_hours > INT32_MAX) throw Status::invalid_argument("min_part_hours is too large");
  Result<RingBuilder> b =
      RingBuilder::create(static_cast<int>(part_power), replicas, static_cast<int>(min_part_hours));
  if (!b.ok()) throw b.status();
  builder_ = std::move(*b);
  pickle_bytes_.clear();
  save_builder({backup_path(now_seconds(), builder_file_), builder_file_});
  exit_with(kExitSuccess);
}

void Cli::cmd_add() {
  require_builder();
  if (argv_.size() < 5) usage_exit("add");
  if (builder_->state().next_part_power) {
    out_ << "Partition power increase in progress. You need \n"
            "to finish the increase first before adding devices.\n";
    exit_with(kExitError);
  }
  try {
    const std::vector<std::string> rest(argv_.begin() + 3, argv_.end());
    const Options opts = parse_options(rest, kDeviceOptions);
    std::vector<Device> devs;
    if (!opts.args.empty()) {
      if (new_cmd_format(opts) || opts.args.size() % 2 != 0) usage_exit("add");
      for (std::size_t i = 0; i < opts.args.size(); i += 2) {
        NewDevice nd = parse_add_value(opts.args[i]);
        if (!nd.region_given) {
          err_ << "WARNING: No region specified for " << opts.args[i]
               << ". Defaulting to region 1.\n";
        }
        nd.dev.weight = py_float(opts.args[i + 1]);
        if (!(nd.dev.weight >= 0) || !std::isfinite(nd.dev.weight)) {
          throw Status::invalid_argument("Invalid weight value: " + opts.args[i]);
        }
        devs.push_back(std::move(nd.dev));
      }
    } else {
      static const std::pair<const char*, char> required[] = {{"region", 'r'}, {"zone", 'z'},
                                                              {"ip", 'i'},     {"port", 'p'},
                                                              {"device", 'd'}, {"weight", 'w'}};
      for (const auto& [name, letter] : required) {
        if (!opts.has(name)) {
          throw Status::invalid_argument(
              strprintf("Required argument -%c/--%s not specified.", letter, name));
        }
      }
      Device d;
      d.region = *opts.integer("region");
      d.zone = *opts.integer("zone");
      std::optional<std::string> ip = normalize_address(*opts.str("ip"));
      if (!ip) throw Status::invalid_argument("Invalid address " + *opts.str("ip"));
      d.ip = *ip;
      const std::string rip_raw = opts.str("replication-ip").value_or("");
      std::optional<std::string> rip =
          normalize_address(rip_raw.empty() ? *opts.str("ip") : rip_raw);
      if (!rip) throw Status::invalid_argument("Invalid address " + rip_raw);
      d.replication_ip = *rip;
      d.port = *opts.integer("port");
      d.replication_port = opts.integer("replication-port").value_or(0);
      if (d.replication_port == 0) d.replication_port = d.port;
      d.device = *opts.str("device");
      if (d.device.empty() || d.device.front() == ' ' || d.device.back() == ' ') {
        throw Status::invalid_argument("Invalid device name");
      }
      d.weight = *opts.number("weight");
      if (!(d.weight >= 0) || !std::isfinite(d.weight)) {
        throw Status::invalid_argument("Invalid weight value: " + *opts.str("weight"));
      }
      d.meta = opts.str("meta").value_or("");
      devs.push_back(std::move(d));
    }
    for (Device& d : devs) {
      Result<int> id = builder_->add_dev(d);
      if (!id.ok()) {
        if (id.status().code() == Status::Code::kConflict) {
          out_ << id.status().message() << "\nThe on-disk ring builder is unchanged.\n\n";
          exit_with(kExitError);
        }
        throw id.status();
      }
      out_ << "Device " << format_device(dev(*id)) << " with " << py_float_repr(d.weight)
           << " weight got id " << *id << "\n";
    }
  } catch (const Status& s) {
    out_ << s.message() << "\nThe on-disk ring builder is unchanged.\n";
    exit_with(kExitError);
  }
  save_builder({builder_file_});
  exit_with(kExitSuccess);
}

void Cli::cmd_remove() {
  require_builder();
  if (argv_.size() < 4) usage_exit("remove", true);
  if (builder_->state().next_part_power) {
    out_ << "Partition power increase in progress. You need \n"
            "to finish the increase first before removing devices.\n";
    exit_with(kExitError);
  }
  const Options opts = parse_options({argv_.begin() + 3, argv_.end()}, kDeviceOptions);
  std::vector<int> ids;
  if (!opts.args.empty()) {
    if (new_cmd_format(opts)) usage_exit("remove");
    for (const std::string& a : opts.args) {
      for (int id : search(parse_search_value(a))) ids.push_back(id);
    }
  } else {
    ids = search(search_from_options(opts));
  }
  check_devs(ids,
             strprintf("Are you sure you want to remove these %zu devices? (y/N) ", ids.size()),
             opts, "Aborting device removals");
  for (int id : ids) {
    Status s = builder_->remove_dev(id);
    if (!s.ok()) throw s;
    out_ << format_device(dev(id)) << " marked for removal and will be removed next rebalance.\n";
  }
  save_builder({builder_file_});
  exit_with(kExitSuccess);
}

void Cli::cmd_set_weight() {
  require_builder();
  if (argv_.size() < 5) usage_exit("set_weight", true);
  const Options opts = parse_options({argv_.begin() + 3, argv_.end()}, kDeviceOptions);
  auto apply = [&](const std::vector<int>& ids, double weight) {
    if (!(weight >= 0) || !std::isfinite(weight)) {
      throw Status::invalid_argument("Invalid weight value: " + py_float_repr(weight));
    }
    check_devs(ids,
               strprintf("Are you sure you want to update the weight for these %zu devices? "
                         "(y/N) ",
                         ids.size()),
               opts, "Aborting device modifications");
    for (int id : ids) {
      Status s = builder_->set_weight(id, weight);
      if (!s.ok()) throw s;
      out_ << format_device(dev(id)) << " weight set to " << py_float_repr(dev(id).weight) << "\n";
    }
  };
  if (!new_cmd_format(opts)) {
    if (opts.args.size() % 2 != 0) usage_exit("set_weight");
    for (std::size_t i = 0; i + 1 < opts.args.size(); i += 2) {
      const std::vector<int> ids = search(parse_search_value(opts.args[i]));
      apply(ids, py_float(opts.args[i + 1]));
    }
  } else {
    if (opts.args.size() != 1) usage_exit("set_weight");
    const std::vector<int> ids = search(search_from_options(opts));
    apply(ids, py_float(opts.args[0]));
  }
  save_builder({builder_file_});
  exit_with(kExitSuccess);
}

void Cli::cmd_rebalance() {
  require_builder();
  static const std::vector<OptSpec> specs = {{'f', "force", OptType::kFlag},
                                             {'s', "seed", OptType::kString},
                                             {'d', "debug", OptType::kFlag}};
  const Options opts = parse_options(argv_, specs);
  RebalanceOptions ro;
  if (auto seed = opts.str("seed"); seed && !seed->empty()) {
    ro.seed = *seed;
  } else if (opts.args.size() > 3) {
    ro.seed = opts.args[3];
  }
  RingBuilder& b = *builder_;
  if (b.state().next_part_power) {
    out_ << "Partition power increase in progress.\n"
            "You need to finish the increase first before rebalancing.\n";
    exit_with(kExitError);
  }
  const bool devs_changed = b.state().devs_changed;
  const double now = now_seconds();
  const int64_t seconds_left = b.min_part_seconds_left(now);
  Result<double> last_balance = b.balance();
  if (!last_balance.ok()) {
    print_error_block(last_balance.status().message());
    exit_with(kExitError);
  }
  const std::optional<double> last_dispersion = b.state().dispersion;
  ro.now = now;
  Result<RebalanceResult> r = b.rebalance(ro);
  if (!r.ok()) {
    print_error_block(r.status().message());
    exit_with(kExitError);
  }
  const double dispersion = b.state().dispersion.value_or(0.0);
  if (!(r->changed_parts || opts.has("force") || r->removed_devices)) {
    out_ << "No partitions could be reassigned.\n";
    if (seconds_left > 0) {
      out_ << "The time between rebalances must be at least min_part_hours: "
           << b.state().min_part_hours << " hours ("
           << format_timedelta(b.min_part_seconds_left(now_seconds())) << " remaining)\n";
    } else {
      out_ << "There is no need to do so at this time\n";
    }
    exit_with(kExitWarning);
  }
  bool cowardly = true;
  if (opts.has("force") || devs_changed) {
    cowardly = false;
  } else {
    const bool balance_changed = std::abs(*last_balance - r->balance) >= 1 ||
                                 (*last_balance == kMaxBalance && r->balance == kMaxBalance);
    const bool dispersion_changed =
        !last_dispersion || std::abs(*last_dispersion - dispersion) >= 1;
    if (balance_changed || dispersion_changed) cowardly = false;
  }
  if (cowardly) {
    out_ << "Cowardly refusing to save rebalance as it did not change at least 1%.\n";
    exit_with(kExitWarning);
  }
  if (Status v = b.validate(); !v.ok()) {
    print_error_block(v.message());
    exit_with(kExitError);
  }
  out_ << strprintf(
      "Reassigned %lld (%.02f%%) partitions. Balance is now %.02f.  "
      "Dispersion is now %.02f\n",
      static_cast<long long>(r->changed_parts),
      100.0 * static_cast<double>(r->changed_parts) / static_cast<double>(b.parts()), r->balance,
      dispersion);
  int status = kExitSuccess;
  if (dispersion > 0) {
    out_ << kRule << "\n"
         << strprintf(
                "NOTE: Dispersion of %.06f indicates some parts are not\n"
                "      optimally dispersed.\n\n"
                "      You may want to adjust some device weights, increase\n"
                "      the overload or review the dispersion report.\n",
                dispersion)
         << kRule << "\n";
    status = kExitWarning;
  } else if (r->balance > 5 && r->balance / 100.0 > b.state().overload) {
    out_ << kRule << "\n"
         << strprintf("NOTE: Balance of %.02f indicates you should push this \n", r->balance)
         << strprintf("      ring, wait at least %d hours, and rebalance/repush.\n",
                      b.state().min_part_hours)
         << kRule << "\n";
    status = kExitWarning;
  }
  const double ts = now_seconds();
  // Swift's order: the ring (backup, then live), then the builder (backup, then live).
  save_ring(b.ring_data(), {backup_path(ts, ring_file_), ring_file_});
  save_builder({backup_path(ts, builder_file_), builder_file_});
  exit_with(status);
}

void Cli::cmd_dispersion() {
  require_builder();
  RingBuilder& b = *builder_;
  if (!b.ever_rebalanced()) {
    out_ << "Specified builder file \"" << builder_file_
         << "\" is not rebalanced yet. Please rebalance first.\n";
    exit_with(kExitError);
  }
  static const std::vector<OptSpec> specs = {{'\0', "recalculate", OptType::kFlag},
                                             {'v', "verbose", OptType::kFlag}};
  const Options opts = parse_options(argv_, specs);
  const std::string filter = opts.args.size() > 3 ? opts.args[3] : "";
  if (opts.has("recalculate") || !b.state().dispersion) {
    b.recalculate_dispersion();
    save_builder({builder_file_});
  }
  Result<DispersionReport> report = b.dispersion_report(filter, opts.has("verbose"));
  if (!report.ok()) throw report.status();
  Result<double> balance = b.balance();
  Result<double> required = b.required_overload();
  if (!balance.ok()) throw balance.status();
  if (!required.ok()) throw required.status();
  int status = kExitSuccess;
  out_ << strprintf("Dispersion is %.06f, Balance is %.06f, Overload is %0.2f%%\n",
                    b.state().dispersion.value_or(0.0), *balance, b.state().overload * 100);
  out_ << strprintf("Required overload is %.6f%%\n", *required * 100);
  if (!report->worst_tier.empty()) {
    status = kExitWarning;
    out_ << strprintf("Worst tier is %.06f (%s)\n", report->max_dispersion,
                      report->worst_tier.c_str());
  }
  if (!report->graph.empty()) {
    const int columns = static_cast<int>(std::ceil(b.replicas() + 1));
    const int pcw = static_cast<int>(std::max<std::size_t>(std::to_string(b.parts()).size(), 5));
    std::size_t tier_w = 30;
    for (const auto& row : report->graph) tier_w = std::max(tier_w, row.name.size());
    const int tw = static_cast<int>(tier_w);
    std::string header = strprintf("%-*s %*s %6s %6s", tw, "Tier", pcw, "Parts", "%", "Max");
    for (int i = 0; i < columns; ++i) header += strprintf(" %*d", pcw, i);
    const std::string underline(header.size(), '-');
    out_ << underline << "\n" << header << "\n" << underline << "\n";
    for (const auto& row : report->graph) {
      std::string line =
          strprintf("%-*s %*lld %6.02f %6d ", tw, row.name.c_str(), pcw,
                    static_cast<long long>(row.placed_parts), row.dispersion, row.max_replicas);
      for (int i = 0; i < columns; ++i) {
        const int64_t v = i < static_cast<int>(row.replicas.size()) ? row.replicas[i] : 0;
        line += strprintf(i ? " %*lld" : "%*lld", pcw, static_cast<long long>(v));
      }
      out_ << line << "\n";
    }
  }
  exit_with(status);
}

void Cli::cmd_validate() {
  require_builder();
  Status s = builder_->validate();
  if (!s.ok()) {
    out_ << s.message() << "\n";
    exit_with(kExitError);
  }
  exit_with(kExitSuccess);
}

void Cli::cmd_write_ring() {
  require_builder();
  if (builder_->devs().empty()) {
    out_ << "Unable to write empty ring.\n";
    exit_with(kExitError);
  }
  const RingData ring = builder_->ring_data();
  if (ring.replica2part2dev.empty()) {
    bool any = false;
    for (const auto& d : ring.devs) any = any || d.has_value();
    if (any) {
      out_ << "Warning: Writing a ring with no partition assignments but with devices; did you "
              "forget to run \"rebalance\"?\n";
    }
  }
  save_ring(ring, {backup_path(now_seconds(), ring_file_), ring_file_});
  exit_with(kExitSuccess);
}

void Cli::cmd_write_builder() {
  if (file_exists(builder_file_)) {
    out_ << "Cowardly refusing to overwrite existing Ring Builder file: " << builder_file_ << "\n";
    exit_with(kExitError);
  }
  int64_t min_part_hours = 24;
  if (argv_.size() > 3) {
    min_part_hours = py_int(argv_[3]);
    if (min_part_hours < 0 || min_part_hours > INT32_MAX) {
      throw Status::invalid_argument(strprintf("min_part_hours must be non-negative (was %lld)",
                                               static_cast<long long>(min_part_hours)));
    }
  } else {
    err_ << "WARNING: default min_part_hours may not match the value in the lost builder.\n";
  }
  Result<RingData> ring = load_ring_file(ring_file_);
  if (!ring.ok()) {
    out_ << "Unable to read ring file " << ring_file_ << ": " << ring.status().message() << "\n";
    exit_with(kExitError);
  }
  Result<RingBuilder> b = RingBuilder::from_ring_data(*ring, static_cast<int>(min_part_hours));
  if (!b.ok()) throw b.status();
  builder_ = std::move(*b);
  save_builder({builder_file_});
  exit_with(kExitSuccess);
}

void Cli::cmd_pretend() {
  require_builder();
  builder_->pretend_min_part_hours_passed();
  save_builder({builder_file_});
  exit_with(kExitSuccess);
}

void Cli::cmd_search() {
  require_builder();
  if (argv_.size() < 4) usage_exit("search", true);
  const Options opts = parse_options({argv_.begin() + 3, argv_.end()}, kDeviceOptions);
  DeviceSearch q;
  if (!opts.args.empty()) {
    if (new_cmd_format(opts) || opts.args.size() != 1) usage_exit("search");
    q = parse_search_value(opts.args[0]);
  } else {
    q = search_from_options(opts);
  }
  const std::vector<int> ids = search(q);
  if (ids.empty()) {
    out_ << "No matching devices found\n";
    exit_with(kExitError);
  }
  out_ << "Devices:    id  region  zone      ip address  port  replication ip  replication port"
          "      name weight partitions balance meta\n";
  Result<std::vector<double>> per_dev = builder_->balance_per_dev();
  for (int id : ids) {
    const BuilderDevice& d = dev(id);
    out_ << strprintf("         %5d %7d %5d %15s %5d %15s %17d %9s %6.02f %10lld %7.02f %s\n", d.id,
                      d.region, d.zone, d.ip.c_str(), d.port, d.replication_ip.c_str(),
                      d.replication_port, d.device.c_str(), d.weight,
                      static_cast<long long>(d.parts), per_dev.ok() ? (*per_dev)[id] : 0.0,
                      d.meta.c_str());
  }
  exit_with(kExitSuccess);
}

void Cli::cmd_list_parts() {
  require_builder();
  if (argv_.size() < 4) usage_exit("list_parts", true);
  if (!builder_->ever_rebalanced()) {
    out_ << "Specified builder file \"" << builder_file_
         << "\" is not rebalanced yet. Please rebalance first.\n";
    exit_with(kExitError);
  }
  const Options opts = parse_options({argv_.begin() + 3, argv_.end()}, kDeviceOptions);
  std::vector<int> ids;
  if (!opts.args.empty()) {
    if (new_cmd_format(opts)) usage_exit("list_parts");
    for (const std::string& a : opts.args) {
      for (int id : search(parse_search_value(a))) ids.push_back(id);
    }
  } else {
    ids = search(search_from_options(opts));
  }
  if (ids.empty()) {
    out_ << "No matching devices found\n";
    exit_with(kExitError);
  }
  std::vector<uint8_t> wanted(builder_->devs().size(), 0);
  for (int id : ids) wanted[id] = 1;
  // Partitions in first-seen order (replica rows, then partitions), most matches first.
  std::vector<int64_t> order;
  std::map<int64_t, int> count;
  for (const auto& row : builder_->state().replica2part2dev) {
    for (std::size_t part = 0; part < row.size(); ++part) {
      if (row[part] < wanted.size() && wanted[row[part]]) {
        if (count[static_cast<int64_t>(part)]++ == 0) order.push_back(static_cast<int64_t>(part));
      }
    }
  }
  if (order.empty()) {
    out_ << "No matching devices found\n";
    exit_with(kExitError);
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return count[a] > count[b]; });
  out_ << "Partition   Matches\n";
  for (int64_t part : order) {
    out_ << strprintf("%9lld   %7d\n", static_cast<long long>(part), count[part]);
  }
  exit_with(kExitSuccess);
}

void Cli::cmd_set_min_part_hours() {
  require_builder();
  if (argv_.size() < 4) usage_exit("set_min_part_hours");
  const int64_t hours = py_int(argv_[3]);
  if (hours > INT32_MAX) throw Status::invalid_argument("min_part_hours is too large");
  Status s = builder_->set_min_part_hours(static_cast<int>(hours));
  if (!s.ok()) throw s;
  out_ << "The minimum number of hours before a partition can be reassigned is now set to "
       << argv_[3] << "\n";
  save_builder({builder_file_});
  exit_with(kExitSuccess);
}

void Cli::cmd_set_replicas() {
  require_builder();
  if (argv_.size() < 4) usage_exit("set_replicas");
  std::optional<double> replicas = parse_float(argv_[3]);
  if (!replicas) {
    out_ << usage("set_replicas") << "\n\"" << argv_[3] << "\" is not a valid number.\n";
    exit_with(kExitError);
  }
  if (!(*replicas >= 1)) {
    out_ << "Replica count must be at least 1.\n";
    exit_with(kExitError);
  }
  Status s = builder_->set_replicas(*replicas);
  if (!s.ok()) throw s;
  out_ << strprintf("The replica count is now %.6f.\n", builder_->replicas())
       << "The change will take effect after the next rebalance.\n";
  save_builder({builder_file_});
  exit_with(kExitSuccess);
}

void Cli::cmd_set_overload() {
  require_builder();
  if (argv_.size() < 4) usage_exit("set_overload");
  std::string text = argv_[3];
  const bool percent = !text.empty() && text.back() == '%';
  while (!text.empty() && text.back() == '%') text.pop_back();
  std::optional<double> overload = parse_float(text);
  if (!overload) {
    out_ << usage("set_overload") << "\n" << py_quote(text) << " is not a valid number.\n";
    exit_with(kExitError);
  }
  if (percent) *overload *= 0.01;
  if (*overload < 0) {
    out_ << "Overload must be non-negative.\n";
    exit_with(kExitError);
  }
  int status = kExitSuccess;
  if (*overload > 1 && !percent) {
    out_ << "!?! Warning overload is greater than 100% !?!\n";
    status = kExitWarning;
  }
  Status s = builder_->set_overload(*overload);
  if (!s.ok()) throw s;
  out_ << strprintf("The overload factor is now %0.2f%% (%.6f)\n", builder_->state().overload * 100,
                    builder_->state().overload)
       << "The change will take effect after the next rebalance.\n";
  save_builder({builder_file_});
  exit_with(status);
}

int Cli::run() {
  if (argv_.size() < 2) {
    out_ << "apus-ring-builder 1.3 (the swift-ring-builder command set)\n\n";
    out_ << usage("default") << "\n\n";
    for (const auto& [name, text] : usage_texts()) {
      if (name != "default") out_ << text << "\n\n";
    }
    out_ << kSearchValueHelp << "\n\n";
    out_ << "Exit codes: 0 = operation successful\n"
            "            1 = operation completed with warnings\n"
            "            2 = error\n";
    return kExitSuccess;
  }
  // Builder and ring file names, as Swift derives them from the first argument.
  const std::string& first = argv_[1];
  const std::string ring_ext = ".ring.gz", builder_ext = ".builder";
  auto ends_with = [](const std::string& s, const std::string& e) {
    return s.size() >= e.size() && s.compare(s.size() - e.size(), e.size(), e) == 0;
  };
  if (ends_with(first, ring_ext)) {
    ring_file_ = first;
    builder_file_ = first.substr(0, first.size() - ring_ext.size()) + builder_ext;
  } else {
    builder_file_ = first;
    ring_file_ = (ends_with(first, builder_ext) ? first.substr(0, first.size() - builder_ext.size())
                                                : first) +
                 ring_ext;
  }
  if (builder_file_ != first) {
    out_ << "Note: using " << builder_file_ << " instead of " << first << " as builder file\n";
  }
  const std::string command = argv_.size() > 2 ? argv_[2] : "default";

  Result<std::string> bytes =
      common::io::default_fs().read_file(builder_file_, std::size_t{1} << 31);
  if (bytes.ok()) {
    Result<RingBuilder> b = decode_builder(*bytes);
    if (!b.ok()) {
      out_ << "Ring Builder file is invalid: " << builder_file_ << " (" << b.status().message()
           << ")\n";
      return kExitError;
    }
    builder_ = std::move(*b);
    if (is_swift_pickle_builder(*bytes)) pickle_bytes_ = std::move(*bytes);
  } else if (bytes.status().is_not_found()) {
    if (command != "create" && command != "write_builder") {
      out_ << "Ring Builder file does not exist: " << builder_file_ << "\n";
      return kExitError;
    }
  } else {
    out_ << "Problem occurred while reading builder file: " << builder_file_ << ". "
         << bytes.status().message() << "\n";
    return kExitError;
  }

  backup_dir_ = join_path(dirname_of(builder_file_), "backups");
  if (::mkdir(backup_dir_.c_str(), 0777) != 0 && errno != EEXIST) {
    out_ << "Unable to create " << backup_dir_ << ": " << std::strerror(errno) << "\n";
    return kExitError;
  }

  static const std::map<std::string, void (Cli::*)()> commands = {
      {"default", &Cli::cmd_default},
      {"create", &Cli::cmd_create},
      {"add", &Cli::cmd_add},
      {"remove", &Cli::cmd_remove},
      {"set_weight", &Cli::cmd_set_weight},
      {"rebalance", &Cli::cmd_rebalance},
      {"dispersion", &Cli::cmd_dispersion},
      {"validate", &Cli::cmd_validate},
      {"write_ring", &Cli::cmd_write_ring},
      {"write_builder", &Cli::cmd_write_builder},
      {"pretend_min_part_hours_passed", &Cli::cmd_pretend},
      {"search", &Cli::cmd_search},
      {"list_parts", &Cli::cmd_list_parts},
      {"set_min_part_hours", &Cli::cmd_set_min_part_hours},
      {"set_replicas", &Cli::cmd_set_replicas},
      {"set_overload", &Cli::cmd_set_overload},
  };
  auto it = commands.find(command);
  if (it == commands.end()) {
    out_ << "Unknown command: " << command << "\n";
    return kExitError;
  }
  try {
    (this->*(it->second))();
  } catch (const Exit& e) {
    return e.code;
  } catch (const OptError& e) {
    err_ << "Usage: apus-ring-builder [options]\n\napus-ring-builder: error: " << e.message << "\n";
    return kExitError;
  } catch (const Status& s) {
    out_ << s.message() << "\n";
    return kExitError;
  }
  return kExitSuccess;
}

}  // namespace

int run_ring_builder(const std::vector<std::string>& argv, std::ostream& out, std::ostream& err,
                     std::istream& in) {
  Cli cli(argv, out, err, in);
  const int code = cli.run();
  out.flush();
  return code;
}

}  // namespace apus::ring
