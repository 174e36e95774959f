#include "ring/locations.h"

#include <arpa/inet.h>

#include <vector>

#include "common/http/url.h"

namespace apus::ring {

namespace {

bool is_ipv6(const std::string& ip) {
  in6_addr addr;
  return ::inet_pton(AF_INET6, ip.c_str(), &addr) == 1;
}

}  // namespace

common::Status print_ring_locations(std::FILE* out, const RingState& ring,
                                    const common::HashPathConfig& hash,
                                    const std::string& datadir, const RingTarget& t,
                                    std::optional<uint32_t> tpart, bool all_nodes,
                                    std::optional<int> policy_index) {
  std::string target = t.account;
  if (!t.object.empty()) {
    target += "/" + t.container + "/" + t.object;
  } else if (!t.container.empty()) {
    target += "/" + t.container;
  }
  if (t.account.empty()) target = "None";  // Swift formats a missing account as None

  uint32_t part = 0;
  if (tpart) {
    part = *tpart;
  } else {
    common::Result<uint32_t> r = ring.get_part(hash, t.account, t.container, t.object);
    if (!r.ok()) return r.status();
    part = *r;
  }
  std::vector<Node> primaries;
  ring.get_part_nodes(part, &primaries);
  std::vector<Node> handoffs;
  HandoffIterator it = ring.get_more_nodes(part);
  it.take(all_nodes ? SIZE_MAX : primaries.size(), &handoffs);

  std::string path_hash;
  if (!t.account.empty() && !tpart) {
    common::Result<std::string> h = common::hash_path_hex(hash, t.account, t.container, t.object);
    if (!h.ok()) return h.status();
    path_hash = *h;
  }
  std::fprintf(out, "Partition\t%u\n", part);
  std::fprintf(out, "Hash     \t%s\n\n", path_hash.empty() ? "None" : path_hash.c_str());
  for (const Node& n : primaries) {
    std::fprintf(out, "Server:Port Device\t%s:%d %s\n", n.device->ip.c_str(), n.device->port,
                n.device->device.c_str());
  }
  for (const Node& n : handoffs) {
    std::fprintf(out, "Server:Port Device\t%s:%d %s\t [Handoff]\n", n.device->ip.c_str(), n.device->port,
                n.device->device.c_str());
  }
  std::fprintf(out, "\n\n");

  const std::string quoted_target = common::http::quote(target);
  auto curl = [&](const Node& n) {
    const std::string& ip = n.device->ip;
    std::string cmd = "curl -g -I -XHEAD \"http://" + (is_ipv6(ip) ? "[" + ip + "]" : ip) + ":" +
                      std::to_string(n.device->port) + "/" + n.device->device + "/" +
                      std::to_string(part) + "/" + quoted_target + "\"";
    if (policy_index) {
      cmd += " -H \"X-Backend-Storage-Policy-Index: " + std::to_string(*policy_index) + "\"";
    }
    return cmd + " --path-as-is";
  };
  for (const Node& n : primaries) std::fprintf(out, "%s\n", curl(n).c_str());
  for (const Node& n : handoffs) std::fprintf(out, "%s # [Handoff]\n", curl(n).c_str());

  std::fprintf(out, "\n\nUse your own device location of servers:\n");
  std::fprintf(out, "such as \"export DEVICE=/srv/node\"\n");
  std::string where;
  if (!path_hash.empty()) {
    where = datadir + "/" + std::to_string(part) + "/" + path_hash.substr(path_hash.size() - 3) +
            "/" + path_hash;
  } else {
    where = datadir + "/" + std::to_string(part);
  }
  for (const Node& n : primaries) {
    std::fprintf(out, "ssh %s \"ls -lah ${DEVICE:-/srv/node*}/%s/%s\"\n", n.device->ip.c_str(),
                n.device->device.c_str(), where.c_str());
  }
  for (const Node& n : handoffs) {
    std::fprintf(out, "ssh %s \"ls -lah ${DEVICE:-/srv/node*}/%s/%s\" # [Handoff]\n",
                n.device->ip.c_str(), n.device->device.c_str(), where.c_str());
  }
  std::fprintf(out, 
      "\nnote: `/srv/node*` is used as default value of `devices`, the real value is set in "
      "the config file on each storage node.\n");
  return common::Status();
}

}  // namespace apus::ring
