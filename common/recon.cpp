#include "common/recon.h"

#include <dirent.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>

#include <boost/json.hpp>

#include "common/config/swift_conf.h"
#include "common/crypto/md5.h"
#include "common/http/url.h"
#include "common/io/blocking_pool.h"
#include "common/io/fs.h"
#include "common/log/log.h"

namespace apus::common {

namespace json = boost::json;

Result<std::optional<ReconConfig>> ReconConfig::from_config(const Config& conf,
                                                            std::string version) {
  auto pipeline = conf.pipeline();
  if (!pipeline.ok()) return std::optional<ReconConfig>();
  std::optional<std::string> filter;
  for (size_t i = 0; i + 1 < pipeline->size(); ++i) {
    auto entry = conf.entry_point((*pipeline)[i]);
    if (entry.ok() && *entry == "recon") filter = (*pipeline)[i];
  }
  if (!filter) return std::optional<ReconConfig>();
  Section s = conf.section("filter:" + *filter);
  ReconConfig c;
  c.devices = s.get_string("devices", "/srv/node");
  c.swift_dir = s.get_string("swift_dir", "/etc/swift");
  c.recon_cache_path = s.get_string("recon_cache_path", "/var/cache/swift");
  c.version = std::move(version);
  c.ring_files = {c.swift_dir + "/account.ring.gz", c.swift_dir + "/container.ring.gz"};
  auto swift = load_swift_conf(c.swift_dir + "/swift.conf");
  if (!swift.ok()) return swift.status();
  for (const auto& policy : swift->policies.all()) {
    c.ring_files.push_back(c.swift_dir + "/" + policy.policy_string("object") + ".ring.gz");
  }
  return std::optional<ReconConfig>(std::move(c));
}

namespace {

http::Response json_response(const json::value& v) {
  http::Response r;
  r.headers.set("Content-Type", "application/json");
  r.body = json::serialize(v);
  return r;
}

http::Response text_response(int status, std::string body) {
  http::Response r;
  r.status = status;
  r.headers.set("Content-Type", "text/plain");
  r.body = std::move(body);
  return r;
}

// The lines of a small file (/proc/...); nullopt when it cannot be opened.
std::optional<std::vector<std::string>> read_lines(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(std::move(line));
  return lines;
}

std::vector<std::string> words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(std::move(w));
  return out;
}

// Entries of a directory but . and .., sorted (Python's listdir order is the filesystem's;
// sorted is as good and stable). nullopt when it cannot be read.
std::optional<std::vector<std::string>> list_dir(const std::string& path) {
  DIR* dir = ::opendir(path.c_str());
  if (dir == nullptr) return std::nullopt;
  std::vector<std::string> out;
  while (const dirent* e = ::readdir(dir)) {
    std::string name = e->d_name;
    if (name != "." && name != "..") out.push_back(std::move(name));
  }
  ::closedir(dir);
  std::sort(out.begin(), out.end());
  return out;
}

bool is_dir(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// Swift's check_mount(): the device's name must need no quoting, and it must be a mount point.
// nullopt when it is mounted, else the "mounted" value recon reports (false).
std::optional<json::value> unmounted_reason(const std::string& devices, const std::string& dev) {
  if (http::quote(dev, "") != dev) return json::value(false);
  auto mounted = io::default_fs().is_mount(devices + "/" + dev);
  if (!mounted.ok()) return json::value(mounted.status().message());
  if (!*mounted) return json::value(false);
  return std::nullopt;
}

// The whole file's MD5 in hex, nullopt when it cannot be read.
std::optional<std::string> file_md5(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  crypto::Md5 md5;
  std::vector<char> buf(1 << 16);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    if (in.gcount() > 0) md5.update(std::string_view(buf.data(), static_cast<size_t>(in.gcount())));
  }
  return md5.hex_digest();
}

// Keys of a recon cache file: each key's value, null where the file, or the key, is missing
// (Swift's _from_recon_cache). A file that cannot be read or parsed is logged.
json::value from_recon_cache(const std::string& file, std::initializer_list<const char*> keys,
                             bool ignore_missing = false) {
  json::object out;
  for (const char* k : keys) out[k] = nullptr;
  std::ifstream in(file);
  if (!in) {
    if (!(ignore_missing && errno == ENOENT)) {
      APUS_LOG_ERROR("Error reading recon cache file " + file + ": " + std::strerror(errno));
    }
    return out;
  }
  std::stringstream text;
  text << in.rdbuf();
  boost::system::error_code ec;
  json::value v = json::parse(text.str(), ec);
  if (ec || !v.is_object()) {
    APUS_LOG_ERROR("Error parsing recon cache file " + file);
    return out;
  }
  for (const char* k : keys) {
    if (const json::value* found = v.as_object().if_contains(k)) out[k] = *found;
  }
  return out;
}

}  // namespace

http::Response Recon::answer(std::string_view path) const {
  auto segs = http::split_path(path, 1, 3, true);
  std::string check, type;
  if (segs.ok()) {
    if ((*segs)[1]) check = *(*segs)[1];
    if ((*segs)[2]) type = *(*segs)[2];
  }
  const std::string& cache = config_.recon_cache_path;
  const std::string object_cache = cache + "/object.recon";
  const std::string container_cache = cache + "/container.recon";
  const std::string account_cache = cache + "/account.recon";
  const bool any_type = type == "account" || type == "container" || type == "object";

  if (check == "mem") {
    auto lines = read_lines("/proc/meminfo");
    if (!lines) return text_response(500, "Internal server error.");
    json::object out;
    for (const std::string& line : *lines) {
      const size_t colon = line.find(':');
      if (colon == std::string::npos) continue;
      std::string value = line.substr(colon + 1);
      const size_t first = value.find_first_not_of(" \t");
      value = first == std::string::npos ? "" : value.substr(first);
      out[line.substr(0, colon)] = value;
    }
    return json_response(out);
  }
  if (check == "load") {
    auto lines = read_lines("/proc/loadavg");
    std::vector<std::string> w = lines && !lines->empty() ? words((*lines)[0]) : std::vector<std::string>{};
    if (w.size() != 5) return text_response(500, "Internal server error.");
    json::object out;
    out["1m"] = std::strtod(w[0].c_str(), nullptr);
    out["5m"] = std::strtod(w[1].c_str(), nullptr);
    out["15m"] = std::strtod(w[2].c_str(), nullptr);
    out["tasks"] = w[3];
    out["processes"] = std::strtoll(w[4].c_str(), nullptr, 10);
    return json_response(out);
  }
  if (check == "async") {
    return json_response(from_recon_cache(object_cache, {"async_pending", "async_pending_last"}));
  }
  if (check == "replication" && (any_type || type.empty())) {
    const std::string& t = type.empty() ? "object" : type;
    if (t == "object") {
      return json_response(from_recon_cache(
          object_cache, {"replication_time", "replication_stats", "replication_last",
                         "object_replication_time", "object_replication_last"}));
    }
    return json_response(
        from_recon_cache(t == "account" ? account_cache : container_cache,
                         {"replication_time", "replication_stats", "replication_last"}));
  }
  if (check == "devices") {
    json::object out;
    if (auto entries = list_dir(config_.devices)) {
      json::array a;
      for (auto& e : *entries) a.emplace_back(e);
      out[config_.devices] = std::move(a);
    } else {
      APUS_LOG_ERROR("Error listing devices " + config_.devices);
      out[config_.devices] = nullptr;
    }
    return json_response(out);
  }
  if (check == "updater" && (type == "container" || type == "object")) {
    return json_response(type == "container"
                             ? from_recon_cache(container_cache, {"container_updater_sweep"})
                             : from_recon_cache(object_cache, {"object_updater_sweep"}));
  }
  if (check == "auditor" && any_type) {
    if (type == "object") {
      return json_response(from_recon_cache(
          object_cache, {"object_auditor_stats_ALL", "object_auditor_stats_ZBF"}));
    }
    if (type == "container") {
      return json_response(from_recon_cache(
          container_cache, {"container_audits_passed", "container_auditor_pass_completed",
                            "container_audits_since", "container_audits_failed"}));
    }
    return json_response(from_recon_cache(
        account_cache, {"account_audits_passed", "account_auditor_pass_completed",
                        "account_audits_since", "account_audits_failed"}));
  }
  if (check == "expirer" && type == "object") {
    return json_response(
        from_recon_cache(object_cache, {"object_expiration_pass", "expired_last_pass"}));
  }
  if (check == "reconstruction" && type == "object") {
    return json_response(from_recon_cache(
        object_cache, {"object_reconstruction_last", "object_reconstruction_time"}));
  }
  if (check == "sharding") {
    return json_response(from_recon_cache(
        container_cache, {"sharding_stats", "sharding_time", "sharding_last"}));
  }
  if (check == "driveaudit") {
    return json_response(from_recon_cache(cache + "/drive.recon", {"drive_audit_errors"}));
  }
  if (check == "relinker") {
    return json_response(
        from_recon_cache(cache + "/relinker.recon", {"devices", "workers"}, true));
  }
  if (check == "mounted") {
    auto lines = read_lines("/proc/mounts");
    if (!lines) return text_response(500, "Internal server error.");
    json::array out;
    for (const std::string& line : *lines) {
      std::vector<std::string> w = words(line);
      if (w.size() != 6) continue;
      out.emplace_back(json::object{{"device", w[0]}, {"path", w[1]}});
    }
    return json_response(out);
  }
  if (check == "unmounted" || check == "diskusage") {
    auto entries = list_dir(config_.devices);
    if (!entries) return text_response(500, "Internal server error.");
    json::array out;
    for (const std::string& dev : *entries) {
      const std::string where = config_.devices + "/" + dev;
      if (!is_dir(where)) continue;
      std::optional<json::value> not_mounted = unmounted_reason(config_.devices, dev);
      if (check == "unmounted") {
        if (not_mounted) out.emplace_back(json::object{{"device", dev}, {"mounted", *not_mounted}});
        continue;
      }
      struct statvfs st;
      if (not_mounted || ::statvfs(where.c_str(), &st) != 0) {
        out.emplace_back(json::object{{"device", dev},
                                      {"mounted", not_mounted ? *not_mounted : json::value(false)},
                                      {"size", ""}, {"used", ""}, {"avail", ""}});
        continue;
      }
      const uint64_t bsize = st.f_bsize;
      out.emplace_back(json::object{{"device", dev}, {"mounted", true},
                                    {"size", bsize * st.f_blocks},
                                    {"used", bsize * (st.f_blocks - st.f_bavail)},
                                    {"avail", bsize * st.f_bavail}});
    }
    return json_response(out);
  }
  if (check == "ringmd5") {
    json::object out;
    for (const std::string& ring : config_.ring_files) {
      if (::access(ring.c_str(), F_OK) != 0) continue;
      auto md5 = file_md5(ring);
      out[ring] = md5 ? json::value(*md5) : json::value(nullptr);
    }
    return json_response(out);
  }
  if (check == "swiftconfmd5") {
    // swift-recon looks the answer up under Swift's SWIFT_CONF_FILE, whatever swift_dir the
    // server uses; the sum is of the file this server reads.
    auto md5 = file_md5(config_.swift_dir + "/swift.conf");
    return json_response(json::object{
        {"/etc/swift/swift.conf", md5 ? json::value(*md5) : json::value(nullptr)}});
  }
  if (check == "quarantined") {
    json::object out{{"objects", 0}, {"containers", 0}, {"accounts", 0},
                     {"policies", json::object()}};
    for (const std::string& dev : list_dir(config_.devices).value_or(std::vector<std::string>{})) {
      const std::string qpath = config_.devices + "/" + dev + "/quarantined";
      for (const std::string& kind : list_dir(qpath).value_or(std::vector<std::string>{})) {
        struct stat st;
        if (::lstat((qpath + "/" + kind).c_str(), &st) != 0 || st.st_nlink <= 2) continue;
        const int64_t count = static_cast<int64_t>(st.st_nlink) - 2;  // its subdirectories
        if (kind.starts_with("objects")) {
          const size_t dash = kind.find('-');
          const std::string policy = dash == std::string::npos ? "0" : kind.substr(dash + 1);
          json::object& policies = out["policies"].as_object();
          if (!policies.contains(policy)) policies[policy] = json::object{{"objects", 0}};
          auto& n = policies[policy].as_object()["objects"];
          n = n.to_number<int64_t>() + count;
          out["objects"] = out["objects"].to_number<int64_t>() + count;
        } else if (kind == "containers" || kind == "accounts") {
          out[kind] = out[kind].to_number<int64_t>() + count;
        }
      }
    }
    return json_response(out);
  }
  if (check == "sockstat") {
    json::object out;
    const long page = ::sysconf(_SC_PAGESIZE);
    for (const std::string& line : read_lines("/proc/net/sockstat").value_or(std::vector<std::string>{})) {
      std::vector<std::string> w = words(line);
      if (!line.starts_with("TCP: inuse") || w.size() < 11) continue;
      out["tcp_in_use"] = std::strtoll(w[2].c_str(), nullptr, 10);
      out["orphan"] = std::strtoll(w[4].c_str(), nullptr, 10);
      out["time_wait"] = std::strtoll(w[6].c_str(), nullptr, 10);
      out["tcp_mem_allocated_bytes"] = std::strtoll(w[10].c_str(), nullptr, 10) * page;
    }
    for (const std::string& line : read_lines("/proc/net/sockstat6").value_or(std::vector<std::string>{})) {
      std::vector<std::string> w = words(line);
      if (line.starts_with("TCP6: inuse") && w.size() >= 3) {
        out["tcp6_in_use"] = std::strtoll(w[2].c_str(), nullptr, 10);
      }
    }
    return json_response(out);
  }
  if (check == "time") {
    return json_response(json::value(
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count()));
  }
  if (check == "version") return json_response(json::object{{"version", config_.version}});
  return text_response(404, "Invalid path: " + std::string(path));
}

http::Handler with_recon(std::optional<ReconConfig> recon, http::Handler inner) {
  if (!recon) return inner;
  struct State {
    explicit State(ReconConfig c) : recon(std::move(c)) {}
    Recon recon;
    io::BlockingPool pool{"recon", 1};  // monitoring reads files: off the event loops
  };
  auto state = std::make_shared<State>(std::move(*recon));
  return [state, inner = std::move(inner)](http::Exchange& ex) -> boost::asio::awaitable<void> {
    // Every object and container request passes here: only a path that can decode to
    // /recon/... (it starts so, or escapes a byte early on) is decoded and looked at.
    const std::string_view raw = ex.request().path();
    if (!raw.starts_with("/recon") && raw.substr(0, 16).find('%') == std::string_view::npos) {
      co_return co_await inner(ex);
    }
    std::string path = http::percent_decode(raw);
    if (!Recon::is_recon_path(path)) co_return co_await inner(ex);
    http::Response r =
        co_await state->pool.call([&state, &path] { return state->recon.answer(path); });
    co_await ex.reply(std::move(r));
  };
}

}  // namespace apus::common
