// Object replication of one partition (replicator.h).
#include "object-server/replicator.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/json.hpp>

#include "common/http/url.h"
#include "common/log/log.h"
#include "common/pickle.h"
#include "common/process.h"
#include "common/recon_cache.h"
#include "common/status.h"

namespace apus::object {

namespace net = boost::asio;
using common::Result;
using common::Status;

namespace {

// A REPLICATE answer is one short entry per suffix (4096 of them at most).
constexpr size_t kMaxHashesAnswer = 1 << 20;

using SuffixMap = std::map<std::string, std::optional<std::string>>;

SuffixMap to_map(const SuffixHashes& hashes) {
  SuffixMap out;
  for (const auto& [suffix, hash] : hashes.suffixes) out[suffix] = hash;
  return out;
}

// REPLICATE /<dev>/<part>[/<s1>-<s2>...] at `node`: its suffix hashes (the answer to a rehash
// request is None, an empty map). InsufficientStorage for its 507.
net::awaitable<Result<SuffixMap>> replicate_request(common::http::ConnectionPool& pool,
                                                    const ssync::SyncTarget& node,
                                                    const Location& part,
                                                    const std::vector<std::string>& suffixes,
                                                    const ReplicationOptions& options) {
  common::http::ClientRequest req;
  req.method = "REPLICATE";
  req.target = "/" + common::http::quote(node.device) + "/" + part.partition;
  for (size_t i = 0; i < suffixes.size(); ++i) req.target += (i ? "-" : "/") + suffixes[i];
  req.headers.set("X-Backend-Storage-Policy-Index", std::to_string(part.policy));
  common::http::ClientOptions timeouts = options.client;
  timeouts.node_timeout = options.http_timeout;
  auto answer = co_await common::http::simple_request(pool, timeouts, node.ip, node.port,
                                                      std::move(req), {}, kMaxHashesAnswer);
  if (!answer.ok()) co_return answer.status();
  if (answer->head.status == 507) co_return Status::insufficient_storage(node.device);
  if (answer->head.status != 200) {
    co_return Status::io_error("REPLICATE answered " + std::to_string(answer->head.status));
  }
  auto value = common::pickle::loads(answer->body);
  if (!value.ok()) co_return value.status();
  SuffixMap out;
  if (!value->is_dict()) co_return out;
  for (const auto& [k, v] : value->as_dict()) {
    if (!(k.is_str() || k.is_bytes()) || !is_valid_suffix(k.as_string())) continue;
    out[k.as_string()] = (v.is_str() || v.is_bytes()) ? std::optional<std::string>(v.as_string())
                                                       : std::nullopt;
  }
  co_return out;
}

// Suffixes whose hash here differs from the peer's (missing there counts as different).
std::vector<std::string> differing(const SuffixMap& local, const SuffixMap& remote) {
  std::vector<std::string> out;
  for (const auto& [suffix, hash] : local) {
    auto it = remote.find(suffix);
    if (it == remote.end() || it->second != hash) out.push_back(suffix);
  }
  return out;
}

std::string peer_name(const ssync::SyncTarget& node) {
  return node.ip + ":" + std::to_string(node.port) + "/" + node.device;
}

// rsync's file list lines (--itemize-changes) worth logging: a directory made ("cd+...") is
// not, a file sent ("<f+++...") only with log_rsync_transfers.
bool worth_logging(std::string_view line, bool log_transfers) {
  if (line.empty() || line.starts_with("cd+")) return false;
  return log_transfers || !line.starts_with("<");
}

// Sends `suffixes` of the job's partition to `node` with Swift's rsync command. The result's
// in_sync holds the objects as they were before the command ran (all of them were sent, or
// were there already under the same file names, which are timestamps).
ssync::SyncResult rsync_suffixes(DiskFileManager& disk, const PartitionJob& job,
                                 const ssync::SyncTarget& node,
                                 const std::vector<std::string>& suffixes,
                                 const RsyncOptions& rsync) {
  ssync::SyncResult out;
  const std::string part_dir = disk.partition_dir(job.part);
  std::vector<std::string> argv = {
      "rsync", "--recursive", "--whole-file", "--human-readable", "--xattrs",
      "--itemize-changes", "--ignore-existing",
      "--timeout=" + rsync.io_timeout, "--contimeout=" + rsync.io_timeout,
      "--bwlimit=" + rsync.bwlimit,
      // Files being written (Swift's and Apus's temp files: .<name>.<6 random characters>).
      "--exclude=.*.[0-9a-zA-Z][0-9a-zA-Z][0-9a-zA-Z][0-9a-zA-Z][0-9a-zA-Z][0-9a-zA-Z]"};
  if (rsync.compress && job.region != node.region) argv.push_back("--compress");
  std::vector<std::string> present;
  for (const std::string& suffix : suffixes) {
    if (disk.fs().stat(part_dir + "/" + suffix).ok()) present.push_back(suffix);
  }
  if (present.empty()) {
    out.error = "no suffix directory to send";
    return out;
  }
  auto before = ssync::local_offers(disk, job.part, present);
  if (!before.ok()) {
    out.error = before.status().to_string();
    return out;
  }
  for (const std::string& suffix : present) argv.push_back(part_dir + "/" + suffix);
  const std::string dest = node.rsync_module + "/" + node.device + "/" +
                           DiskFileManager::policy_dir("objects", job.part.policy) + "/" +
                           job.part.partition;
  argv.push_back(dest);
  const auto began = std::chrono::steady_clock::now();
  auto ran = common::run_command(argv, rsync.timeout);
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  if (!ran.ok()) {
    out.error = ran.status().to_string();
    APUS_LOG_ERROR("cannot run rsync: " + out.error);
    return out;
  }
  const bool ok = ran->exit_status == 0 && !ran->timed_out;
  auto cut = [&](std::string line) {
    if (rsync.error_line_length > 0 && line.size() > rsync.error_line_length) {
      line.resize(rsync.error_line_length);
    }
    return line;
  };
  std::string_view text = ran->output;
  while (!text.empty()) {
    size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    if (!worth_logging(line, rsync.log_transfers)) continue;
    if (ok) {
      APUS_LOG_DEBUG(std::string(line));
    } else {
      APUS_LOG_ERROR(cut(std::string(line)));
    }
  }
  char timing[32];
  std::snprintf(timing, sizeof timing, " (%.03f)", took);
  if (!ok) {
    out.error = ran->timed_out ? "rsync timed out" : "rsync exit " + std::to_string(ran->exit_status);
    APUS_LOG_ERROR(cut(ran->timed_out ? "Killing long-running rsync after " +
                                            std::to_string(static_cast<int64_t>(rsync.timeout)) +
                                            "s: " + dest
                                      : "Bad rsync return code: " +
                                            std::to_string(ran->exit_status) + " <- " + dest));
    return out;
  }
  // Swift's line: at INFO when rsync listed something (it sent files), else DEBUG.
  std::string done = "Successful rsync of " + part_dir + "/... to " + dest + timing;
  if (ran->output.empty()) {
    APUS_LOG_DEBUG(done);
  } else {
    APUS_LOG_INFO(done);
  }
  out.ok = true;
  out.in_sync = std::move(*before);
  return out;
}

// Sends `suffixes` of the job's partition to `node` (SSYNC or rsync), then has it rehash them
// (the REPLICATE with suffixes Swift's replicator sends after every sync).
net::awaitable<ssync::SyncResult> sync_suffixes(DiskFileManager& disk,
                                                common::http::ConnectionPool& pool,
                                                const PartitionJob& job,
                                                const ssync::SyncTarget& node,
                                                const std::vector<std::string>& suffixes,
                                                const ReplicationOptions& options) {
  ssync::SyncResult sent =
      options.rsync ? rsync_suffixes(disk, job, node, suffixes, *options.rsync)
                    : co_await ssync::send_partition(disk, job.part, suffixes, node, options.client);
  if (sent.ok) (void)co_await replicate_request(pool, node, job.part, suffixes, options);
  co_return sent;
}

net::awaitable<void> replicate_primary(DiskFileManager& disk, const PartitionJob& job,
                                       const ReplicationOptions& options,
                                       common::http::ConnectionPool& pool,
                                       PartitionOutcome& out) {
  auto local = disk.get_hashes(job.part, {});
  if (!local.ok()) {
    APUS_LOG_ERROR("replication of " + job.part.device + "/" + job.part.partition +
                   ": " + local.status().to_string());
    out.failed += static_cast<int>(job.nodes.size());
    co_return;
  }
  SuffixMap here = to_map(*local);
  // The peers in turn; each unmounted one (507) brings in the next handoff.
  std::vector<ssync::SyncTarget> peers = job.nodes;
  size_t next_handoff = 0;
  for (size_t i = 0; i < peers.size(); ++i) {
    const ssync::SyncTarget node = peers[i];
    auto remote = co_await replicate_request(pool, node, job.part, {}, options);
    if (!remote.ok()) {
      APUS_LOG_WARNING("REPLICATE to " + peer_name(node) + " for partition " +
                       job.part.partition + ": " + remote.status().to_string());
      ++out.failed;
      if (remote.status().code() == Status::Code::kInsufficientStorage &&
          next_handoff < job.handoffs.size()) {
        peers.push_back(job.handoffs[next_handoff++]);
      }
      continue;
    }
    std::vector<std::string> suffixes = differing(here, *remote);
    if (suffixes.empty()) {
      ++out.hashmatch;
      ++out.synced;
      continue;
    }
    // What changed since hashes.pkl was written is rehashed before anything is sent.
    auto rehashed = disk.get_hashes(job.part, suffixes);
    if (rehashed.ok()) here = to_map(*rehashed);
    suffixes = differing(here, *remote);
    if (suffixes.empty()) {
      ++out.hashmatch;
      ++out.synced;
      continue;
    }
    ssync::SyncResult sent = co_await sync_suffixes(disk, pool, job, node, suffixes, options);
    if (!sent.ok) {
      ++out.failed;
      continue;
    }
    ++out.synced;
    out.suffixes_synced += static_cast<int>(suffixes.size());
  }
}

// Removes the hash directories whose objects are still exactly as every primary took them,
// then the suffix and partition directories left empty. Returns how many objects went.
size_t remove_taken(DiskFileManager& disk, const Location& part,
                    const std::vector<std::string>& suffixes,
                    const std::vector<ssync::Offer>& taken, bool* partition_removed) {
  auto now = ssync::local_offers(disk, part, suffixes);
  if (!now.ok()) return 0;
  std::map<std::string, const ssync::Offer*> by_hash;
  for (const ssync::Offer& o : taken) by_hash[o.hash] = &o;
  const std::string part_dir = disk.partition_dir(part);
  size_t removed = 0;
  for (const ssync::Offer& o : *now) {
    auto it = by_hash.find(o.hash);
    if (it == by_hash.end() || it->second->ts_data != o.ts_data ||
        it->second->ts_meta != o.ts_meta || it->second->ts_ctype != o.ts_ctype) {
      continue;  // new since the sync: the next pass sends it
    }
    const std::string dir = part_dir + "/" + o.hash.substr(29) + "/" + o.hash;
    auto files = disk.fs().list_dir(dir);
    if (!files.ok()) continue;
    for (const std::string& f : *files) (void)disk.fs().unlink(dir + "/" + f);
    if (disk.fs().rmdir(dir).ok()) ++removed;
  }
  for (const std::string& suffix : suffixes) (void)disk.fs().rmdir(part_dir + "/" + suffix);
  // The partition goes when nothing but its bookkeeping is left.
  auto rest = disk.fs().list_dir(part_dir);
  if (rest.ok() && std::all_of(rest->begin(), rest->end(), [](const std::string& n) {
        return n == "hashes.pkl" || n == "hashes.invalid" || n == ".lock" ||
               n == ".lock-replication";
      })) {
    for (const std::string& n : *rest) (void)disk.fs().unlink(part_dir + "/" + n);
    *partition_removed = disk.fs().rmdir(part_dir).ok();
  }
  return removed;
}

net::awaitable<void> revert_handoff(DiskFileManager& disk, const PartitionJob& job,
                                    const ReplicationOptions& options,
                                    common::http::ConnectionPool& pool, PartitionOutcome& out) {
  std::vector<std::string> suffixes;
  if (auto names = disk.fs().list_dir(disk.partition_dir(job.part)); names.ok()) {
    for (const std::string& n : *names) {
      if (is_valid_suffix(n)) suffixes.push_back(n);
    }
  }
  std::sort(suffixes.begin(), suffixes.end());
  // Every primary must hold an object before it goes from here: keep the offers all took.
  std::optional<std::map<std::string, ssync::Offer>> taken_by_all;
  int successes = 0;
  for (const ssync::SyncTarget& node : job.nodes) {
    if (suffixes.empty()) break;
    ssync::SyncResult sent = co_await sync_suffixes(disk, pool, job, node, suffixes, options);
    if (!sent.ok) {
      ++out.failed;
      continue;
    }
    ++successes;
    ++out.synced;
    std::map<std::string, ssync::Offer> mine;
    for (ssync::Offer& o : sent.in_sync) mine.emplace(o.hash, std::move(o));
    if (!taken_by_all) {
      taken_by_all = std::move(mine);
    } else {
      std::erase_if(*taken_by_all, [&](const auto& kv) {
        auto it = mine.find(kv.first);
        return it == mine.end() || it->second.ts_data != kv.second.ts_data ||
               it->second.ts_meta != kv.second.ts_meta;
      });
    }
  }
  out.suffixes_synced = static_cast<int>(suffixes.size());
  const int needed = options.handoff_delete > 0
                         ? std::min<int>(options.handoff_delete, static_cast<int>(job.nodes.size()))
                         : static_cast<int>(job.nodes.size());
  if (suffixes.empty() || (successes >= needed && taken_by_all)) {
    std::vector<ssync::Offer> taken;
    if (taken_by_all) {
      for (auto& [hash, offer] : *taken_by_all) taken.push_back(offer);
    }
    out.objects_removed = remove_taken(disk, job.part, suffixes, taken, &out.partition_removed);
  }
}

}  // namespace

Result<std::string> rsync_module_interpolation(std::string_view module, const ring::Device& dev) {
  auto bracketed = [](const std::string& ip) {
    return ip.find(':') != std::string::npos ? "[" + ip + "]" : ip;
  };
  const std::map<std::string_view, std::string> values = {
      {"ip", bracketed(dev.ip)},
      {"port", std::to_string(dev.port)},
      {"replication_ip", bracketed(dev.replication_ip)},
      {"replication_port", std::to_string(dev.replication_port)},
      {"region", std::to_string(dev.region)},
      {"zone", std::to_string(dev.zone)},
      {"device", dev.device},
      {"meta", dev.meta}};
  std::string out;
  for (size_t i = 0; i < module.size(); ++i) {
    char c = module[i];
    if ((c == '{' || c == '}') && i + 1 < module.size() && module[i + 1] == c) {
      out += c;  // {{ and }} stand for a brace, as in Python's str.format
      ++i;
    } else if (c == '{') {
      size_t close = module.find('}', i);
      if (close == std::string_view::npos) return Status::invalid_argument("unmatched '{'");
      auto it = values.find(module.substr(i + 1, close - i - 1));
      if (it == values.end()) {
        return Status::invalid_argument("Cannot interpolate rsync_module, invalid variable: " +
                                        std::string(module.substr(i + 1, close - i - 1)));
      }
      out += it->second;
      i = close;
    } else if (c == '}') {
      return Status::invalid_argument("single '}' in rsync_module");
    } else {
      out += c;
    }
  }
  return out;
}

net::awaitable<PartitionOutcome> replicate_partition_impl(DiskFileManager& disk, PartitionJob job,
                                                          ReplicationOptions options) {
  PartitionOutcome out;
  common::http::ConnectionPool pool(options.client);
  if (job.primary) {
    co_await replicate_primary(disk, job, options, pool, out);
  } else {
    co_await revert_handoff(disk, job, options, pool, out);
  }
  co_return out;
}

}  // namespace apus::object

// ---- The daemon -----------------------------------------------------------------------------

namespace apus::object {

Result<ReplicatorConfig> ReplicatorConfig::from_config(const common::Config& conf) {
  ReplicatorConfig c;
  common::Section s = conf.section("object-replicator");
  c.devices = s.get_string("devices", "/srv/node");
  APUS_ASSIGN_OR_RETURN(c.mount_check, s.get_bool("mount_check", true));
  c.swift_dir = s.get_string("swift_dir", "/etc/swift");
  c.bind_ip = s.get_string("bind_ip", "0.0.0.0");
  int64_t n = 0;
  APUS_ASSIGN_OR_RETURN(n, s.get_int("bind_port", 6200));
  c.bind_port = static_cast<int>(n);
  APUS_ASSIGN_OR_RETURN(c.interval, s.get_double("interval", 30));
  APUS_ASSIGN_OR_RETURN(n, s.get_int("concurrency", 1));
  c.concurrency = static_cast<int>(std::clamp<int64_t>(n, 1, 256));
  APUS_ASSIGN_OR_RETURN(c.node_timeout, s.get_double("node_timeout", 10));
  APUS_ASSIGN_OR_RETURN(c.conn_timeout, s.get_double("conn_timeout", 0.5));
  APUS_ASSIGN_OR_RETURN(c.http_timeout, s.get_double("http_timeout", 60));
  APUS_ASSIGN_OR_RETURN(c.reclaim_age, s.get_int("reclaim_age", 604800));
  APUS_ASSIGN_OR_RETURN(c.handoffs_first, s.get_bool("handoffs_first", false));
  APUS_ASSIGN_OR_RETURN(c.ring_check_interval, s.get_double("ring_check_interval", 15));
  if (c.ring_check_interval <= 0) return s.invalid("ring_check_interval", "must be positive");
  std::string handoff_delete = s.get_string("handoff_delete", "auto");
  if (handoff_delete != "auto") {
    APUS_ASSIGN_OR_RETURN(n, s.get_int("handoff_delete", 0));
    c.handoff_delete = static_cast<int>(std::max<int64_t>(0, n));
  }
  std::string method = s.get_string("sync_method", "rsync");
  if (method == "rsync") {
    // Swift: the module without a trailing slash, '{replication_ip}::object' when empty.
    c.rsync_module = s.get_string("rsync_module", "");
    while (!c.rsync_module.empty() && c.rsync_module.back() == '/') c.rsync_module.pop_back();
    if (c.rsync_module.empty()) c.rsync_module = "{replication_ip}::object";
    bool vm_test_mode = false;
    APUS_ASSIGN_OR_RETURN(vm_test_mode, s.get_bool("vm_test_mode", false));
    if (vm_test_mode) c.rsync_module += "{replication_port}";
    if (auto probe = rsync_module_interpolation(c.rsync_module, ring::Device{}); !probe.ok()) {
      return s.invalid("rsync_module", probe.status().message());
    }
    APUS_ASSIGN_OR_RETURN(c.rsync.timeout, s.get_double("rsync_timeout", 900));
    c.rsync.io_timeout = s.get_string("rsync_io_timeout", "30");
    c.rsync.bwlimit = s.get_string("rsync_bwlimit", "0");
    for (const std::string* v : {&c.rsync.io_timeout, &c.rsync.bwlimit}) {
      if (v->empty() || v->find_first_not_of("0123456789.KMGkmgBb") != std::string::npos) {
        return s.invalid(v == &c.rsync.bwlimit ? "rsync_bwlimit" : "rsync_io_timeout",
                         "not a number");
      }
    }
    APUS_ASSIGN_OR_RETURN(c.rsync.compress, s.get_bool("rsync_compress", false));
    APUS_ASSIGN_OR_RETURN(c.rsync.log_transfers, s.get_bool("log_rsync_transfers", true));
    APUS_ASSIGN_OR_RETURN(n, s.get_int("rsync_error_log_line_length", 0));
    c.rsync.error_line_length = static_cast<size_t>(std::max<int64_t>(0, n));
  } else if (method != "ssync") {
    return s.invalid("sync_method", "must be rsync or ssync");
  }
  c.recon_cache_path = s.get_string("recon_cache_path", "/var/cache/swift");
  c.log_name = s.get_string("log_name", "object-replicator");
  auto swift = common::load_swift_conf(c.swift_dir + "/swift.conf");
  if (!swift.ok()) return swift.status();
  c.swift = std::move(*swift);
  return c;
}

struct ObjectReplicator::Impl {
  ReplicatorConfig config;
  common::io::Fs& fs;
  std::map<int, std::unique_ptr<ring::Ring>> rings;
  DiskFileManager disk;
  std::vector<std::string> my_ips;
  // Set by run_forever: a pass stops taking partitions once it is set (those in progress
  // finish), so the process exits promptly at SIGTERM.
  const std::atomic<bool>* stop = nullptr;
  bool stopping() const { return stop && stop->load(); }

  Impl(ReplicatorConfig c, common::io::Fs& f, std::map<int, std::unique_ptr<ring::Ring>> r)
      : config(std::move(c)),
        fs(f),
        rings(std::move(r)),
        disk(f, disk_options(config), {config.swift.hash_path_prefix, config.swift.hash_path_suffix}),
        my_ips(ring::local_ips(config.bind_ip)) {}

  static DiskFileOptions disk_options(const ReplicatorConfig& c) {
    DiskFileOptions o;
    o.devices = c.devices;
    o.mount_check = c.mount_check;
    o.reclaim_age = c.reclaim_age;
    return o;
  }

  std::vector<PartitionJob> collect_jobs(const PassFilter& filter);
  // A peer device as a sync target.
  ssync::SyncTarget target(const ring::Device& dev) const {
    ssync::SyncTarget t{dev.replication_ip, static_cast<uint16_t>(dev.replication_port),
                        dev.device, dev.region, ""};
    if (!config.rsync_module.empty()) {
      // The template was checked at start-up: only the device's values go in.
      auto module = rsync_module_interpolation(config.rsync_module, dev);
      if (module.ok()) t.rsync_module = std::move(*module);
    }
    return t;
  }
  void write_recon(const ReplicationStats& stats);
};

std::vector<PartitionJob> ObjectReplicator::Impl::collect_jobs(const PassFilter& filter) {
  std::vector<PartitionJob> primaries, handoffs;
  for (const auto& [policy, ring] : rings) {
    auto state = ring->state();
    std::set<std::string> local_devices;
    for (const auto& dev : state->devs()) {
      if (dev && ring::is_local_device(my_ips, config.bind_port, *dev)) {
        local_devices.insert(dev->device);
      }
    }
    for (const std::string& device : local_devices) {
      if (!filter.devices.empty() && !filter.devices.contains(device)) continue;
      if (!disk.check_device(device).ok()) {
        APUS_LOG_WARNING("skipping device " + device + ": not mounted or missing");
        continue;
      }
      disk.remove_stale_temps(device, policy);
      Location base;
      base.device = device;
      base.policy = policy;
      auto parts = fs.list_dir(config.devices + "/" + device + "/" +
                               DiskFileManager::policy_dir("objects", policy));
      if (!parts.ok()) continue;
      for (const std::string& part : *parts) {
        auto number = common::parse_python_int(part);
        if (!number || *number < 0 || static_cast<uint64_t>(*number) >= state->partition_count()) {
          continue;
        }
        if (!filter.partitions.empty() && !filter.partitions.contains(part)) continue;
        PartitionJob job;
        job.part = base;
        job.part.partition = part;
        std::vector<ring::Node> nodes;
        state->get_part_nodes(static_cast<uint32_t>(*number), &nodes);
        job.primary = false;
        for (const ring::Node& node : nodes) {
          if (node.device->device == device &&
              ring::is_local_device(my_ips, config.bind_port, *node.device)) {
            job.primary = true;
            job.region = node.device->region;
            continue;
          }
          job.nodes.push_back(target(*node.device));
        }
        if (job.primary) {
          std::vector<ring::Node> more;
          state->get_handoffs(static_cast<uint32_t>(*number), nodes.size(), &more);
          for (const ring::Node& node : more) {
            if (ring::is_local_device(my_ips, config.bind_port, *node.device)) continue;
            job.handoffs.push_back(target(*node.device));
          }
        }
        (job.primary ? primaries : handoffs).push_back(std::move(job));
      }
    }
  }
  std::vector<PartitionJob> jobs;
  auto& first = config.handoffs_first ? handoffs : primaries;
  auto& second = config.handoffs_first ? primaries : handoffs;
  jobs.insert(jobs.end(), std::make_move_iterator(first.begin()),
              std::make_move_iterator(first.end()));
  jobs.insert(jobs.end(), std::make_move_iterator(second.begin()),
              std::make_move_iterator(second.end()));
  return jobs;
}

// Swift's replicator stats in object.recon.
void ObjectReplicator::Impl::write_recon(const ReplicationStats& stats) {
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  boost::json::object s;
  s["attempted"] = stats.attempted;
  s["success"] = stats.success;
  s["failure"] = stats.failure;
  s["hashmatch"] = stats.hashmatch;
  s["suffix_sync"] = stats.suffix_sync;
  s["remove"] = stats.handoffs_removed;
  s["start"] = now - stats.seconds;
  boost::json::object recon;
  recon["replication_stats"] = s;
  recon["replication_time"] = stats.seconds / 60;
  recon["replication_last"] = now;
  recon["object_replication_time"] = stats.seconds / 60;
  recon["object_replication_last"] = now;
  Status written = common::dump_recon_cache(config.recon_cache_path + "/object.recon",
                                            boost::json::serialize(recon));
  if (!written.ok()) APUS_LOG_ERROR("cannot write the recon cache: " + written.to_string());
}

ObjectReplicator::ObjectReplicator(ReplicatorConfig config, common::io::Fs& fs,
                                   std::map<int, std::unique_ptr<ring::Ring>> rings)
    : impl_(std::make_unique<Impl>(std::move(config), fs, std::move(rings))) {}

ObjectReplicator::~ObjectReplicator() = default;

ReplicationStats ObjectReplicator::run_once(const PassFilter& filter) {
  const auto began = std::chrono::steady_clock::now();
  std::vector<PartitionJob> jobs = impl_->collect_jobs(filter);
  ReplicationStats stats;
  std::mutex mu;
  std::atomic<size_t> next{0};
  ReplicationOptions options;
  options.client.conn_timeout = impl_->config.conn_timeout;
  options.client.node_timeout = impl_->config.node_timeout;
  options.http_timeout = impl_->config.http_timeout;
  options.handoff_delete = impl_->config.handoff_delete;
  if (!impl_->config.rsync_module.empty()) options.rsync = impl_->config.rsync;
  // `concurrency` threads, each with an io_context of its own, take the next partition.
  auto worker = [&] {
    const common::StatsdHandle& statsd = impl_->config.statsd;
    for (size_t i = next++; i < jobs.size() && !impl_->stopping(); i = next++) {
      // Swift's names: a primary's partition is an "update", a handoff's a "delete".
      const std::string kind = jobs[i].primary ? "partition.update." : "partition.delete.";
      statsd.increment(kind + "count." + jobs[i].part.device);
      const auto job_began = std::chrono::steady_clock::now();
      net::io_context ioc;
      auto done = net::co_spawn(ioc, replicate_partition(impl_->disk, jobs[i], options),
                                net::use_future);
      ioc.run();
      PartitionOutcome o = done.get();
      if (o.suffixes_synced > 0) statsd.update_stats("suffix.syncs", o.suffixes_synced);
      statsd.timing_since(kind + "timing", job_began);
      std::lock_guard<std::mutex> lock(mu);
      ++stats.attempted;
      stats.success += static_cast<uint64_t>(o.synced);
      stats.failure += static_cast<uint64_t>(o.failed);
      stats.hashmatch += static_cast<uint64_t>(o.hashmatch);
      stats.suffix_sync += static_cast<uint64_t>(o.suffixes_synced);
      stats.removed += o.objects_removed;
      stats.handoffs_removed += o.partition_removed ? 1 : 0;
    }
  };
  std::vector<std::thread> threads;
  const size_t n = std::min<size_t>(static_cast<size_t>(impl_->config.concurrency),
                                    std::max<size_t>(1, jobs.size()));
  for (size_t t = 1; t < n; ++t) threads.emplace_back(worker);
  worker();
  for (auto& t : threads) t.join();
  stats.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  APUS_LOG_INFO(std::to_string(stats.attempted) + " partitions replicated in " +
                std::to_string(stats.seconds) + " s: " + std::to_string(stats.success) +
                " peer syncs, " + std::to_string(stats.failure) + " failures, " +
                std::to_string(stats.hashmatch) + " hash matches, " +
                std::to_string(stats.suffix_sync) + " suffixes sent, " +
                std::to_string(stats.handoffs_removed) + " handoff partitions removed");
  // A pass cut short by a stop is not what recon reports (as the DB replicators skip it).
  if (filter.devices.empty() && filter.partitions.empty() && !impl_->stopping()) {
    impl_->write_recon(stats);
  }
  return stats;
}

void ObjectReplicator::run_forever(const std::atomic<bool>& stop) {
  impl_->stop = &stop;
  common::run_passes(impl_->config.interval, stop, [this] { (void)run_once(); });
}

}  // namespace apus::object
