// apus-get-nodes: where an account, container or object lives, like swift-get-nodes.
//
//   apus-get-nodes [-a] [-Q] <ring.gz> <account> [<container> [<object>]]
//   apus-get-nodes [-a] <ring.gz> -p <partition>
//   apus-get-nodes [-a] -P <policy name> <account> [<container> [<object>]]
//   apus-get-nodes --batch [--handoffs N] <ring.gz>  < paths
//
// The interactive form prints what swift-get-nodes prints (cli/info.py print_item_locations).
// --batch reads one account[/container[/object]] path per line from stdin (the object is
// everything after the second '/') and writes one JSON object per line:
//   {"partition": P, "primaries": [device ids], "handoffs": [first N handoff device ids]}
// or {"error": "..."} for a line that names nothing. The hash prefix and suffix come from
// swift.conf: --swift-conf PATH, else $APUS_SWIFT_CONF, else <swift-dir>/swift.conf with
// --swift-dir (-d) defaulting to /etc/swift.
//
// Exit status: 0 on success, 1 on bad usage or an unreadable ring or swift.conf (as
// swift-get-nodes exits via sys.exit with a message).

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <arpa/inet.h>
#include <unistd.h>

#include "common/config/swift_conf.h"
#include "common/hash_path.h"
#include "common/http/url.h"
#include "ring/locations.h"
#include "ring/ring.h"

namespace {

using apus::common::HashPathConfig;
using apus::common::Result;
using apus::common::Status;
using apus::ring::HandoffIterator;
using apus::ring::Node;
using apus::ring::RingState;

// swift-get-nodes' default handoff count in batch mode: enough for any proxy's
// request_node_count on rings of up to 10 replicas.
constexpr size_t kDefaultBatchHandoffs = 20;
// stdin and stdout move in pieces of this size in batch mode.
constexpr size_t kIoChunk = 1 << 20;

constexpr const char* kUsage =
    "Usage: apus-get-nodes [-a] <ring.gz> <account> [<container> [<object>]]\n"
    "   Or: apus-get-nodes [-a] <ring.gz> -p partition\n"
    "   Or: apus-get-nodes [-a] -P policy_name <account> [<container> [<object>]]\n"
    "   Or: apus-get-nodes --batch [--handoffs N] <ring.gz> < paths\n"
    "Note: account, container, object can also be a single arg separated by /\n"
    "\n"
    "Options:\n"
    "  -a, --all             show all handoff nodes\n"
    "  -p, --partition=P     show nodes for a given partition\n"
    "  -P, --policy-name=N   use the object ring of storage policy N\n"
    "  -d, --swift-dir=DIR   where swift.conf and the rings are (default /etc/swift)\n"
    "  --swift-conf=PATH     swift.conf to read (default $APUS_SWIFT_CONF, else DIR/swift.conf)\n"
    "  -Q, --quoted          the names are URL-quoted\n"
    "  --batch               read account/container/object paths from stdin, print JSON lines\n"
    "  --handoffs=N          handoffs per line in batch mode (default 20)\n"
    "  -h, --help            show this help\n";

struct Options {
  bool all = false;
  bool quoted = false;
  bool batch = false;
  size_t batch_handoffs = kDefaultBatchHandoffs;
  std::optional<std::string> partition;
  std::optional<std::string> policy_name;
  std::string swift_dir = "/etc/swift";
  std::string swift_conf;
  std::vector<std::string> args;
};

[[noreturn]] void usage_error(const std::string& msg) {
  std::fputs(kUsage, stdout);
  std::fprintf(stderr, "ERROR: %s\n", msg.c_str());
  std::exit(1);
}

[[noreturn]] void fail(const std::string& msg) {
  std::fprintf(stderr, "ERROR: %s\n", msg.c_str());
  std::exit(1);
}

bool parse_size(std::string_view s, size_t* out) {
  const auto r = std::from_chars(s.data(), s.data() + s.size(), *out);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

Options parse_args(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    // --name=value, --name value, -x value.
    auto value = [&](std::string_view name) -> std::optional<std::string> {
      if (a == name) {
        if (i + 1 >= argc) usage_error(std::string(name) + " option requires an argument");
        return std::string(argv[++i]);
      }
      if (name.size() > 2 && a.size() > name.size() && a.substr(0, name.size()) == name &&
          a[name.size()] == '=') {
        return std::string(a.substr(name.size() + 1));
      }
      if (name.size() == 2 && a.size() > 2 && a.substr(0, 2) == name) {
        return std::string(a.substr(2));
      }
      return std::nullopt;
    };
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else if (a == "-a" || a == "--all") {
      o.all = true;
    } else if (a == "-Q" || a == "--quoted") {
      o.quoted = true;
    } else if (a == "--batch") {
      o.batch = true;
    } else if (auto v = value("--handoffs")) {
      if (!parse_size(*v, &o.batch_handoffs)) usage_error("bad --handoffs value: " + *v);
    } else if (auto v1 = value("-p")) {
      o.partition = *v1;
    } else if (auto v2 = value("--partition")) {
      o.partition = *v2;
    } else if (auto v3 = value("-P")) {
      o.policy_name = *v3;
    } else if (auto v4 = value("--policy-name")) {
      o.policy_name = *v4;
    } else if (auto v5 = value("-d")) {
      o.swift_dir = *v5;
    } else if (auto v6 = value("--swift-dir")) {
      o.swift_dir = *v6;
    } else if (auto v7 = value("--swift-conf")) {
      o.swift_conf = *v7;
    } else if (a.size() > 1 && a[0] == '-' && a != "-") {
      usage_error("no such option: " + std::string(a));
    } else {
      o.args.emplace_back(a);
    }
  }
  return o;
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::string base_name(std::string_view path) {
  const size_t slash = path.rfind('/');
  return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

// --- batch mode

void append_uint(std::string& out, uint64_t v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof(buf), v);
  out.append(buf, r.ptr);
}

void append_json_error(std::string& out, std::string_view msg) {
  out += "{\"error\": \"";
  for (const char c : msg) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += ' ';
    } else {
      out += c;
    }
  }
  out += "\"}\n";
}

// The lookup for one input line, appended to out as one JSON line.
void batch_line(const RingState& ring, const HashPathConfig& hash, std::string_view line,
                size_t handoffs, std::vector<Node>* nodes, std::string& out) {
  std::string_view account = line, container, object;
  if (const size_t s1 = line.find('/'); s1 != std::string_view::npos) {
    account = line.substr(0, s1);
    container = line.substr(s1 + 1);
    if (const size_t s2 = container.find('/'); s2 != std::string_view::npos) {
      object = container.substr(s2 + 1);
      container = container.substr(0, s2);
    }
  }
  if (account.empty()) {
    append_json_error(out, "no account in line");
    return;
  }
  Result<uint32_t> part = ring.get_part(hash, account, container, object);
  if (!part.ok()) {
    append_json_error(out, part.status().message());
    return;
  }
  out += "{\"partition\": ";
  append_uint(out, *part);
  out += ", \"primaries\": [";
  ring.get_part_nodes(*part, nodes);
  for (size_t i = 0; i < nodes->size(); ++i) {
    if (i > 0) out += ", ";
    append_uint(out, static_cast<uint64_t>((*nodes)[i].id()));
  }
  out += "], \"handoffs\": [";
  HandoffIterator it = ring.get_more_nodes(*part);
  Node n;
  for (size_t i = 0; i < handoffs && it.next(&n); ++i) {
    if (i > 0) out += ", ";
    append_uint(out, static_cast<uint64_t>(n.id()));
  }
  out += "]}\n";
}

int run_batch(const RingState& ring, const HashPathConfig& hash, size_t handoffs) {
  std::vector<char> in(kIoChunk);
  std::string pending;  // an incomplete line carried to the next read
  std::string out;
  out.reserve(kIoChunk + 4096);
  std::vector<Node> nodes;
  auto flush = [&out] {
    if (!out.empty() && std::fwrite(out.data(), 1, out.size(), stdout) != out.size()) {
      fail("cannot write to stdout");
    }
    out.clear();
  };
  for (;;) {
    const size_t n = std::fread(in.data(), 1, in.size(), stdin);
    std::string_view chunk(in.data(), n);
    while (!chunk.empty()) {
      const size_t nl = chunk.find('\n');
      if (nl == std::string_view::npos) {
        pending.append(chunk);
        break;
      }
      if (pending.empty()) {
        batch_line(ring, hash, chunk.substr(0, nl), handoffs, &nodes, out);
      } else {
        pending.append(chunk.substr(0, nl));
        batch_line(ring, hash, pending, handoffs, &nodes, out);
        pending.clear();
      }
      chunk.remove_prefix(nl + 1);
      if (out.size() >= kIoChunk) flush();
    }
    if (n < in.size()) {
      if (std::ferror(stdin)) fail("cannot read stdin");
      if (std::feof(stdin)) break;
    }
  }
  if (!pending.empty()) batch_line(ring, hash, pending, handoffs, &nodes, out);
  flush();
  return std::fflush(stdout) == 0 ? 0 : 1;
}

// --- the swift-get-nodes report

std::shared_ptr<const RingState> load_ring(const std::string& path) {
  Result<apus::ring::RingData> data = apus::ring::load_ring_file(path);
  if (!data.ok()) fail(data.status().to_string());
  Result<std::shared_ptr<const RingState>> state = RingState::create(std::move(*data));
  if (!state.ok()) fail(state.status().to_string());
  return *state;
}

}  // namespace

int main(int argc, char** argv) {
  Options o = parse_args(argc, argv);

  std::string conf_path = o.swift_conf;
  if (conf_path.empty()) {
    const char* env = std::getenv("APUS_SWIFT_CONF");
    conf_path = env != nullptr && *env != '\0' ? env : o.swift_dir + "/swift.conf";
  }
  Result<apus::common::SwiftConf> conf = apus::common::load_swift_conf(conf_path);
  if (!conf.ok()) fail(conf.status().to_string());
  const HashPathConfig hash{conf->hash_path_prefix, conf->hash_path_suffix};

  // Which ring, as swift-get-nodes' parse_get_node_args decides.
  std::string ring_path;
  const apus::common::StoragePolicy* policy = nullptr;
  if (o.policy_name) {
    policy = conf->policies.by_name(*o.policy_name);
    if (policy == nullptr) usage_error("No policy named '" + *o.policy_name + "'");
  } else if (!o.args.empty() && ends_with(o.args.front(), ".ring.gz")) {
    if (::access(o.args.front().c_str(), F_OK) != 0) usage_error("Ring file does not exist");
    ring_path = o.args.front();
    o.args.erase(o.args.begin());
  }

  if (o.batch) {
    if (ring_path.empty()) usage_error("--batch needs <ring.gz>");
    if (!o.args.empty()) usage_error("--batch takes the paths on stdin");
    return run_batch(*load_ring(ring_path), hash, o.batch_handoffs);
  }

  if (o.quoted) {
    for (std::string& a : o.args) a = apus::common::http::percent_decode(a);
  }
  if (o.args.size() == 1) {
    // One argument: a/c/o with the slashes stripped at both ends, split at most twice.
    std::string_view s = o.args.front();
    while (!s.empty() && s.front() == '/') s.remove_prefix(1);
    while (!s.empty() && s.back() == '/') s.remove_suffix(1);
    std::vector<std::string> parts;
    for (int i = 0; i < 2; ++i) {
      const size_t slash = s.find('/');
      if (slash == std::string_view::npos) break;
      parts.emplace_back(s.substr(0, slash));
      s.remove_prefix(slash + 1);
    }
    parts.emplace_back(s);
    o.args = std::move(parts);
  }
  if (ring_path.empty() && !o.policy_name) usage_error("Need to specify policy_name or <ring.gz>");
  if (o.args.empty() && !o.partition) usage_error("No target specified");
  if (o.args.size() > 3) usage_error("Invalid arguments");

  apus::ring::RingTarget t;
  if (!o.args.empty()) t.account = o.args[0];
  if (o.args.size() > 1) t.container = o.args[1];
  if (o.args.size() > 2) t.object = o.args[2];
  const bool part_given = o.partition && !o.partition->empty();

  // print_item_locations: pick the ring and the data directory.
  std::string ring_name = ring_path.empty() ? "" : base_name(ring_path);
  if (!ring_name.empty()) ring_name.resize(ring_name.size() - std::strlen(".ring.gz"));
  std::optional<int> policy_index;
  if (!ring_path.empty() && policy != nullptr) {
    if (ring_name != policy->policy_string("object")) {
      std::printf("Warning: mismatch between ring and policy name!\n");
    }
  }
  if (ring_path.empty() && (!t.object.empty() || part_given)) {
    policy_index = policy->index;
    ring_name = policy->policy_string("object");
    ring_path = o.swift_dir + "/" + ring_name + ".ring.gz";
  }
  if ((!t.container.empty() || !t.object.empty()) && t.account.empty()) {
    std::printf("No account specified\n");
    return 1;
  }
  if (!t.object.empty() && t.container.empty()) {
    std::printf("No container specified\n");
    return 1;
  }
  if (t.account.empty() && !part_given) {
    std::printf("No target specified\n");
    return 1;
  }
  const bool object_ring_name =
      ring_name.rfind("object", 0) == 0 && ring_name.find('-') != std::string::npos;
  std::string loc = "<type>";
  if (part_given && !ring_name.empty()) {
    loc =
        object_ring_name ? "objects-" + ring_name.substr(ring_name.find('-') + 1) : ring_name + "s";
  }
  if (!t.account.empty() && !t.container.empty() && !t.object.empty()) {
    loc = "objects";
    if (object_ring_name) {
      const std::string idx = ring_name.substr(ring_name.rfind('-') + 1);
      size_t v = 0;
      if (!parse_size(idx, &v)) fail("cannot tell the policy index of ring " + ring_name);
      policy_index = static_cast<int>(v);
      loc = "objects-" + std::to_string(v);
    }
  }
  if (!t.account.empty() && !t.container.empty() && t.object.empty()) {
    loc = "containers";
    if (ring_path.empty()) {
      ring_path = o.swift_dir + "/container.ring.gz";
    } else if (ring_name != "container") {
      std::printf("Warning: account/container specified but ring not named \"container\"\n");
    }
  }
  if (!t.account.empty() && t.container.empty() && t.object.empty()) {
    loc = "accounts";
    if (ring_path.empty()) {
      ring_path = o.swift_dir + "/account.ring.gz";
    } else if (ring_name != "account") {
      std::printf("Warning: account specified but ring not named \"account\"\n");
    }
  }
  if (ring_path.empty()) fail("no ring to look in");
  const std::shared_ptr<const RingState> ring = load_ring(ring_path);

  using apus::common::http::quote;
  if (!t.account.empty()) std::printf("\nAccount  \t%s\n", quote(t.account).c_str());
  if (!t.container.empty()) std::printf("Container\t%s\n", quote(t.container).c_str());
  if (!t.object.empty()) std::printf("Object   \t%s\n\n\n", quote(t.object).c_str());
  std::optional<uint32_t> part;
  if (part_given) {
    size_t p = 0;
    if (!parse_size(*o.partition, &p) || p > UINT32_MAX) fail("invalid partition: " + *o.partition);
    part = static_cast<uint32_t>(p);
  }
  apus::common::Status printed =
      apus::ring::print_ring_locations(stdout, *ring, hash, loc, t, part, o.all, policy_index);
  if (!printed.ok()) fail(printed.message());
  return std::fflush(stdout) == 0 ? 0 : 1;
}
