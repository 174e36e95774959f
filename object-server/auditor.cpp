#include "object-server/auditor.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <boost/json.hpp>

#include "common/crypto/md5.h"
#include "common/log/log.h"
#include "common/pacer.h"
#include "common/recon_cache.h"
#include "common/process.h"
#include "object-server/diskfile.h"

namespace apus::object {

using common::Result;
using common::Status;

Result<AuditorConfig> AuditorConfig::from_config(const common::Config& conf) {
  AuditorConfig c;
  common::Section s = conf.section("object-auditor");
  c.devices = s.get_string("devices", "/srv/node");
  APUS_ASSIGN_OR_RETURN(c.mount_check, s.get_bool("mount_check", true));
  c.swift_dir = s.get_string("swift_dir", "/etc/swift");
  APUS_ASSIGN_OR_RETURN(c.interval, s.get_double("interval", 30));
  APUS_ASSIGN_OR_RETURN(c.files_per_second, s.get_double("files_per_second", 20));
  APUS_ASSIGN_OR_RETURN(c.zero_byte_files_per_second,
                        s.get_double("zero_byte_files_per_second", 50));
  APUS_ASSIGN_OR_RETURN(c.bytes_per_second, s.get_double("bytes_per_second", 10000000));
  APUS_ASSIGN_OR_RETURN(c.reclaim_age, s.get_int("reclaim_age", 604800));
  c.recon_cache_path = s.get_string("recon_cache_path", "/var/cache/swift");
  c.log_name = s.get_string("log_name", "object-auditor");
  auto swift = common::load_swift_conf(c.swift_dir + "/swift.conf");
  if (!swift.ok()) return swift.status();
  c.swift = std::move(*swift);
  return c;
}

namespace {

// Swift's auditor_status_<ALL|ZBF>.json in a device's objects directory: the partitions a pass
// has still to audit there, so a restarted auditor resumes where it was ({"partitions": [...]},
// Swift's format: Swift's and Apus's auditors resume from each other's files). Written before
// each partition (at most once a minute, as Swift), emptied when the device is done, removed
// when the pass ends.
constexpr double kMinStatusUpdateSeconds = 60;

std::string status_path(const std::string& objects, AuditMode mode) {
  return objects + "/auditor_status_" + (mode == AuditMode::kAll ? "ALL" : "ZBF") + ".json";
}

// The partitions left by an interrupted pass, or nullopt (no file, or one that is not Swift's
// format: then the pass starts over; Swift would fail on a list of non-strings).
std::optional<std::vector<std::string>> load_status(common::io::Fs& fs, const std::string& path) {
  auto text = fs.read_file(path);
  if (!text.ok()) return std::nullopt;
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(*text, ec);
  const boost::json::object* o = ec ? nullptr : v.if_object();
  const boost::json::value* parts = o ? o->if_contains("partitions") : nullptr;
  if (!parts || !parts->is_array()) {
    APUS_LOG_WARNING("Loading JSON from " + path + " failed: starting the device over");
    return std::nullopt;
  }
  std::vector<std::string> out;
  for (const auto& p : parts->as_array()) {
    if (!p.is_string() || !common::parse_python_int(std::string_view(p.as_string()))) {
      APUS_LOG_WARNING(path + " lists something other than partitions: starting the device over");
      return std::nullopt;
    }
    out.emplace_back(p.as_string());
  }
  return out;
}

void save_status(common::io::Fs& fs, const std::string& path,
                 std::span<const std::string> partitions) {
  if (!partitions.empty()) {
    auto st = fs.stat(path);
    const double now =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    if (st.ok() && st->exists &&
        static_cast<double>(st->mtime_ns) / 1e9 + kMinStatusUpdateSeconds > now) {
      return;  // written less than a minute ago
    }
  }
  boost::json::array list;
  for (const std::string& p : partitions) list.emplace_back(p);
  boost::json::object o;
  o["partitions"] = std::move(list);
  Status s = fs.write_file_atomic(path, boost::json::serialize(o));
  if (!s.ok()) APUS_LOG_WARNING("Cannot write " + path + " (" + s.to_string() + ")");
}

}  // namespace

struct ObjectAuditor::Impl {
  AuditorConfig config;
  common::io::Fs& fs;
  DiskFileManager disk;
  // Set by run_forever: a pass stops between two objects once it is set (the status file
  // keeps its place for the next process), so the process exits promptly at SIGTERM.
  const std::atomic<bool>* stop = nullptr;
  bool stopping() const { return stop && stop->load(); }

  Impl(AuditorConfig c, common::io::Fs& f)
      : config(std::move(c)),
        fs(f),
        disk(f, disk_options(config), {config.swift.hash_path_prefix, config.swift.hash_path_suffix}) {
    // Quarantines go to StatsD as the auditor's, as Swift's diskfile counts them on the
    // auditor's logger.
    disk.set_event_counter([statsd = config.statsd](std::string_view name) {
      statsd.increment(name);
    });
  }

  void count_error(AuditStats& stats) {
    ++stats.errors;
    config.statsd.increment("errors");
  }

  static DiskFileOptions disk_options(const AuditorConfig& c) {
    DiskFileOptions o;
    o.devices = c.devices;
    o.mount_check = c.mount_check;
    o.reclaim_age = c.reclaim_age;
    return o;
  }

  void audit_object(const Location& part, const std::string& hash, AuditMode mode,
                    AuditStats& stats, common::Pacer& bytes);
  std::vector<std::string> sorted_dir(const std::string& path) {
    auto names = fs.list_dir(path);
    if (!names.ok()) return {};
    std::sort(names->begin(), names->end());
    return std::move(*names);
  }
};

void ObjectAuditor::Impl::audit_object(const Location& part, const std::string& hash,
                                       AuditMode mode, AuditStats& stats, common::Pacer& bytes) {
  // Opening checks the metadata and the size, and quarantines what fails.
  const std::string dir = disk.hash_dir(part, hash);
  auto obj = disk.open_hash(part, hash, std::nullopt);
  if (!obj.ok()) {
    count_error(stats);
    APUS_LOG_ERROR("auditing " + dir + ": " + obj.status().to_string());
    return;
  }
  if (obj->state != DiskObject::State::kExists) {
    // Gone: a tombstone, or quarantined just now by the open.
    auto st = fs.stat(dir);
    if (obj->state == DiskObject::State::kMissing && !(st.ok() && st->exists)) ++stats.quarantined;
    return;
  }
  if (mode == AuditMode::kZeroByte) {
    if (obj->size == 0) ++stats.passes;
    return;
  }
  common::crypto::Md5 md5;
  std::vector<char> buf(65536);
  uint64_t offset = 0;
  while (offset < obj->size) {
    auto got = disk.read(*obj, offset, std::span<char>(buf.data(), buf.size()));
    if (!got.ok()) {
      // EIO and the like: Swift quarantines an object it cannot read.
      count_error(stats);
      if (disk.quarantine(part, hash, "read failed: " + got.status().to_string()).ok()) {
        ++stats.quarantined;
      }
      return;
    }
    if (*got == 0) break;
    md5.update(std::string_view(buf.data(), *got));
    offset += *got;
    stats.bytes += *got;
    bytes.take(static_cast<double>(*got));
  }
  disk.drop_cache(*obj, 0, obj->size);  // an audit should not push the working set out
  const std::string* etag = find_meta(obj->data_metadata, "ETag");
  const std::string actual = md5.hex_digest();
  if (offset != obj->size || !etag || *etag != actual) {
    Status q = disk.quarantine(part, hash,
                               "ETag " + (etag ? *etag : std::string("(none)")) +
                                   " and file's MD5 " + actual + " do not match");
    if (q.ok()) {
      ++stats.quarantined;
    } else {
      count_error(stats);
    }
    return;
  }
  ++stats.passes;
}

ObjectAuditor::ObjectAuditor(AuditorConfig config, common::io::Fs& fs)
    : impl_(std::make_unique<Impl>(std::move(config), fs)) {}

ObjectAuditor::~ObjectAuditor() = default;

AuditStats ObjectAuditor::run_once(AuditMode mode, const std::set<std::string>& devices) {
  Impl& m = *impl_;
  const auto began = std::chrono::steady_clock::now();
  AuditStats stats;
  common::Pacer files(mode == AuditMode::kAll ? m.config.files_per_second
                                      : m.config.zero_byte_files_per_second);
  common::Pacer bytes(m.config.bytes_per_second);
  std::vector<std::string> audited_dirs;  // objects directories whose status file goes at the end
  for (const std::string& device : m.sorted_dir(m.config.devices)) {
    if (!devices.empty() && !devices.contains(device)) continue;
    if (!m.disk.check_device(device).ok()) continue;
    for (const auto& policy : m.config.swift.policies.all()) {
      Location part;
      part.device = device;
      part.policy = policy.index;
      const std::string objects = m.config.devices + "/" + device + "/" +
                                  DiskFileManager::policy_dir("objects", policy.index);
      if (auto st = m.fs.stat(objects); !st.ok() || !st->exists) continue;
      const std::string status = status_path(objects, mode);
      std::vector<std::string> partitions =
          load_status(m.fs, status).value_or(m.sorted_dir(objects));
      audited_dirs.push_back(objects);
      for (size_t pos = 0; pos < partitions.size(); ++pos) {
        const std::string& partition = partitions[pos];
        if (!common::parse_python_int(partition)) continue;
        save_status(m.fs, status, std::span(partitions).subspan(pos));
        part.partition = partition;
        for (const std::string& suffix : m.sorted_dir(objects + "/" + partition)) {
          if (!is_valid_suffix(suffix)) continue;
          for (const std::string& hash : m.sorted_dir(objects + "/" + partition + "/" + suffix)) {
            if (m.stopping()) return stats;  // resumes at this partition next time
            if (hash.size() != 32 || !hash.ends_with(suffix)) continue;
            const auto audit_began = std::chrono::steady_clock::now();
            m.audit_object(part, hash, mode, stats, bytes);
            m.config.statsd.timing_since("timing", audit_began);
            files.take(1);
          }
        }
      }
      save_status(m.fs, status, {});
    }
  }
  // The pass is over: the next one starts from a full listing.
  for (const std::string& objects : audited_dirs) (void)m.fs.unlink(status_path(objects, mode));
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  const char* type = mode == AuditMode::kAll ? "ALL" : "ZBF";
  APUS_LOG_INFO(std::string("Object audit (") + type + ") pass completed: " +
                std::to_string(stats.seconds) + " s, " + std::to_string(stats.passes) +
                " passed, " + std::to_string(stats.quarantined) + " quarantined, " +
                std::to_string(stats.errors) + " errors, " + std::to_string(stats.bytes) +
                " bytes read");
  boost::json::object s;
  s["audit_time"] = stats.seconds;
  s["bytes_processed"] = stats.bytes;
  s["errors"] = stats.errors;
  s["passes"] = stats.passes;
  s["quarantined"] = stats.quarantined;
  s["start_time"] =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count() -
      stats.seconds;
  boost::json::object recon;
  recon[std::string("object_auditor_stats_") + type] = s;
  Status written = common::dump_recon_cache(m.config.recon_cache_path + "/object.recon",
                                            boost::json::serialize(recon));
  if (!written.ok()) APUS_LOG_ERROR("cannot write the recon cache: " + written.to_string());
  return stats;
}

void ObjectAuditor::run_forever(const std::atomic<bool>& stop) {
  impl_->stop = &stop;
  auto passes = [&](AuditMode mode) {
    common::run_passes(impl_->config.interval, stop, [&] { (void)run_once(mode); });
  };
  std::thread zero_byte([&] { passes(AuditMode::kZeroByte); });
  passes(AuditMode::kAll);
  zero_byte.join();
}

}  // namespace apus::object
