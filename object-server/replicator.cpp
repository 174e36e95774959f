// Object replication of one partition (replicator.h).
#include "object-server/replicator.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "common/http/url.h"
#include "common/log/log.h"
#include "common/pickle.h"

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
  for (const ssync::SyncTarget& node : job.nodes) {
    auto remote = co_await replicate_request(pool, node, job.part, {}, options);
    if (!remote.ok()) {
      APUS_LOG_WARNING("REPLICATE to " + peer_name(node) + " for partition " +
                       job.part.partition + ": " + remote.status().to_string());
      ++out.failed;
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
    ssync::SyncResult sent =
        co_await ssync::send_partition(disk, job.part, suffixes, node, options.client);
    if (!sent.ok) {
      ++out.failed;
      continue;
    }
    (void)co_await replicate_request(pool, node, job.part, suffixes, options);
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
    ssync::SyncResult sent =
        co_await ssync::send_partition(disk, job.part, suffixes, node, options.client);
    if (!sent.ok) {
      ++out.failed;
      continue;
    }
    (void)co_await replicate_request(pool, node, job.part, suffixes, options);
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
