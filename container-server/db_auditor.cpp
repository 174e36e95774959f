#include "container-server/db_auditor.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>

#include <boost/json.hpp>

#include "common/http/url.h"
#include "common/io/device.h"
#include "common/log/log.h"
#include "common/pacer.h"
#include "common/process.h"
#include "common/recon_cache.h"

namespace apus::container {

using common::Result;
using common::Status;

namespace {

constexpr size_t kInfoPage = 1000;

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string differs(const char* what, int64_t kept, int64_t counted) {
  return std::string(what) + " " + std::to_string(kept) + " where the rows add up to " +
         std::to_string(counted);
}

}  // namespace

std::string DbAuditorConfig::kind() const {
  return type == DbType::kContainer ? "container" : "account";
}

Result<DbAuditorConfig> DbAuditorConfig::from_config(const common::Config& conf, DbType type) {
  DbAuditorConfig c;
  c.type = type;
  common::Section s = conf.section(c.kind() + "-auditor");
  c.devices = s.get_string("devices", "/srv/node");
  APUS_ASSIGN_OR_RETURN(c.mount_check, s.get_bool("mount_check", true));
  APUS_ASSIGN_OR_RETURN(c.interval, s.get_double("interval", 1800));
  if (c.interval <= 0) return s.invalid("interval", "must be positive");
  const std::string rate_key = c.kind() + "s_per_second";
  APUS_ASSIGN_OR_RETURN(c.dbs_per_second, s.get_double(rate_key, 200));
  APUS_ASSIGN_OR_RETURN(c.rows_per_second, s.get_double("rows_per_second", 50000));
  APUS_ASSIGN_OR_RETURN(c.checksum_interval, s.get_double("checksum_interval", 86400));
  c.recon_cache_path = s.get_string("recon_cache_path", "/var/cache/swift");
  c.log_name = s.get_string("log_name", c.kind() + "-auditor");
  return c;
}

std::string audit_problem(const RowAudit& audit, DbType type) {
  if (!audit.info) return "";
  const DbInfo& info = *audit.info;
  std::map<int, PolicyStat> kept = info.policy_stats;
  for (const auto& [policy, st] : audit.stats) kept[policy];  // policies only the rows name
  for (const auto& [policy, st] : kept) {
    auto it = audit.stats.find(policy);
    const PolicyStat counted = it == audit.stats.end() ? PolicyStat() : it->second;
    const std::string in = " of policy " + std::to_string(policy);
    if (type == DbType::kAccount && st.container_count != counted.container_count) {
      return differs(("container count" + in).c_str(), st.container_count,
                     counted.container_count);
    }
    if (st.object_count != counted.object_count) {
      return differs(("object count" + in).c_str(), st.object_count, counted.object_count);
    }
    if (st.bytes_used != counted.bytes_used) {
      return differs(("bytes used" + in).c_str(), st.bytes_used, counted.bytes_used);
    }
  }
  if (type == DbType::kAccount) {
    // Swift's account auditor: the totals are the sums over policies.
    // Summed wrapping, as the stores keep them (listing_db.cpp): no overflow to trip on.
    PolicyStat sum;
    auto add = [](int64_t& to, int64_t v) {
      to = static_cast<int64_t>(static_cast<uint64_t>(to) + static_cast<uint64_t>(v));
    };
    for (const auto& [policy, st] : info.policy_stats) {
      add(sum.container_count, st.container_count);
      add(sum.object_count, st.object_count);
      add(sum.bytes_used, st.bytes_used);
    }
    if (info.container_count != sum.container_count) {
      return "The total container_count for the account (" +
             std::to_string(info.container_count) +
             ") does not match the sum of container_count across policies (" +
             std::to_string(sum.container_count) + ")";
    }
    if (info.object_count != sum.object_count) {
      return "The total object_count for the account (" + std::to_string(info.object_count) +
             ") does not match the sum of object_count across policies (" +
             std::to_string(sum.object_count) + ")";
    }
    if (info.bytes_used != sum.bytes_used) {
      return "The total bytes_used for the account (" + std::to_string(info.bytes_used) +
             ") does not match the sum of bytes_used across policies (" +
             std::to_string(sum.bytes_used) + ")";
    }
  }
  if (info.tombstones != audit.tombstones) {
    return differs("deleted rows", info.tombstones, audit.tombstones);
  }
  if (info.hash != audit.hash) return "hash " + info.hash + " where the rows hash to " + audit.hash;
  if (audit.sequence_entries != audit.rows) {
    return differs("replication sequence entries", audit.sequence_entries, audit.rows);
  }
  return "";
}

struct DbAuditor::Impl {
  DbAuditorConfig config;
  common::io::Fs& fs;
  FollowedStores stores;
  std::map<std::string, double> verified_at;  // device -> when its checksums last passed
  const std::atomic<bool>* stop = nullptr;
  bool stopping() const { return stop && stop->load(); }

  Impl(DbAuditorConfig c, common::io::Fs& f)
      : config(std::move(c)), fs(f), stores(config.devices, config.type, f) {}

  void audit_device(const std::string& device, DbAuditStats& stats, common::Pacer& dbs,
                    common::Pacer& rows);
  void write_recon(const DbAuditStats& stats, double began);
};

void DbAuditor::Impl::audit_device(const std::string& device, DbAuditStats& stats,
                                   common::Pacer& dbs, common::Pacer& rows) {
  ListingStore* store = stores.follow(device);
  if (!store) return;
  const double now = now_seconds();
  auto last = verified_at.find(device);
  if (config.checksum_interval > 0 &&
      (last == verified_at.end() || now - last->second >= config.checksum_interval)) {
    Status checked = store->verify_checksums();
    ++stats.stores_verified;
    // A failed check waits its interval too: the error is logged and counted once per
    // interval, not a whole-store read every pass.
    verified_at[device] = now;
    if (!checked.ok()) {
      ++stats.checksum_failures;
      config.statsd.increment("errors");  // Swift's name for a pass's own trouble
      APUS_LOG_ERROR("ERROR " + config.kind() + " store of " + device +
                     " fails its checksums: " + checked.to_string());
    }
  }
  std::string after;
  for (;;) {
    auto page = store->list_infos(after, kInfoPage);
    if (!page.ok()) {
      APUS_LOG_ERROR("ERROR walking the " + config.kind() + " store of " + device + ": " +
                     page.status().to_string());
      ++stats.failed;
      return;
    }
    if (page->empty()) return;
    after = page->back().first;
    for (const auto& [db, info] : *page) {
      if (stopping()) return;
      if (info.is_deleted(config.type)) continue;  // as Swift's: deleted databases are not audited
      const auto began = std::chrono::steady_clock::now();
      auto audit = store->audit_rows(db);
      if (!audit.ok()) {
        ++stats.failed;
        config.statsd.increment("failures");
        config.statsd.timing_since("timing", began);
        APUS_LOG_ERROR("ERROR Could not get " + config.kind() + " info " + device + "/" + db +
                       ": " + audit.status().to_string());
        continue;
      }
      if (!audit->info) continue;  // gone since the page was read
      stats.rows += static_cast<uint64_t>(audit->rows);
      std::string problem = audit_problem(*audit, config.type);
      if (problem.empty()) {
        ++stats.passed;
        config.statsd.increment("passes");
        APUS_LOG_DEBUG("Audit passed for " + device + "/" + db);
      } else {
        ++stats.failed;
        config.statsd.increment("failures");
        APUS_LOG_ERROR("Audit Failed for " + device + "/" + db + " (/" +
                       common::http::quote(info.account) +
                       (config.type == DbType::kContainer
                            ? "/" + common::http::quote(info.container)
                            : "") +
                       "): " + problem);
      }
      config.statsd.timing_since("timing", began);
      rows.take(static_cast<double>(audit->rows));
      dbs.take(1);
    }
  }
}

void DbAuditor::Impl::write_recon(const DbAuditStats& stats, double began) {
  const std::string k = config.kind();
  boost::json::object recon;
  recon[k + "_audits_since"] = began;
  recon[k + "_audits_passed"] = stats.passed;
  recon[k + "_audits_failed"] = stats.failed;
  recon[k + "_auditor_pass_completed"] = stats.seconds;
  Status written = common::dump_recon_cache(config.recon_cache_path + "/" + k + ".recon",
                                            boost::json::serialize(recon));
  if (!written.ok()) APUS_LOG_ERROR("cannot write the recon cache: " + written.to_string());
}

DbAuditor::DbAuditor(DbAuditorConfig config, common::io::Fs& fs)
    : impl_(std::make_unique<Impl>(std::move(config), fs)) {}

DbAuditor::~DbAuditor() = default;

DbAuditStats DbAuditor::run_once(const std::set<std::string>& devices) {
  Impl& m = *impl_;
  const auto began = std::chrono::steady_clock::now();
  const double began_wall = now_seconds();
  APUS_LOG_INFO("Begin " + m.config.kind() + " audit pass.");
  DbAuditStats stats;
  common::Pacer dbs(m.config.dbs_per_second);
  common::Pacer rows(m.config.rows_per_second);
  auto names = m.fs.list_dir(m.config.devices);
  if (names.ok()) {
    std::sort(names->begin(), names->end());
    for (const std::string& device : *names) {
      if (m.stopping()) break;
      if (!devices.empty() && !devices.contains(device)) continue;
      Status mounted = common::io::check_device(m.fs, m.config.devices, device,
                                                m.config.mount_check);
      if (!mounted.ok()) {
        APUS_LOG_DEBUG("Skipping: " + mounted.to_string());
        continue;
      }
      m.audit_device(device, stats, dbs, rows);
    }
  }
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  char line[256];
  std::snprintf(line, sizeof line,
                "%s audit pass completed: %.02fs (%llu passed, %llu failed, %llu rows, %llu "
                "stores checksummed, %llu checksum failures)",
                m.config.type == DbType::kContainer ? "Container" : "Account", stats.seconds,
                static_cast<unsigned long long>(stats.passed),
                static_cast<unsigned long long>(stats.failed),
                static_cast<unsigned long long>(stats.rows),
                static_cast<unsigned long long>(stats.stores_verified),
                static_cast<unsigned long long>(stats.checksum_failures));
  APUS_LOG_INFO(line);
  if (devices.empty() && !m.stopping()) m.write_recon(stats, began_wall);
  return stats;
}

void DbAuditor::run_forever(const std::atomic<bool>& stop) {
  impl_->stop = &stop;
  common::run_passes(impl_->config.interval, stop, [this] { (void)run_once(); });
}

}  // namespace apus::container
