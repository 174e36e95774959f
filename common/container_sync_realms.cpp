#include "common/container_sync_realms.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>

#include "common/config/config.h"
#include "common/crypto/hmac.h"
#include "common/http/headers.h"
#include "common/log/log.h"

namespace apus::common {

namespace {

using Clock = std::chrono::steady_clock;

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

// The realms of a parsed file: every section is a realm; its `key`, `key2` and `cluster_*`
// options (with [DEFAULT]'s, as ConfigParser's items() gives them) count.
ContainerSyncRealms::Realms realms_of(const Config& conf) {
  ContainerSyncRealms::Realms out;
  for (const std::string& name : conf.sections()) {
    ContainerSyncRealms::Realm realm;
    for (const auto& [option, value] : conf.section(name).items()) {
      if (option == "key") {
        realm.key = value;
      } else if (option == "key2") {
        realm.key2 = value;
      } else if (option.starts_with("cluster_")) {
        realm.clusters[upper(std::string_view(option).substr(8))] = value;
      }
    }
    out[upper(name)] = std::move(realm);
  }
  return out;
}

}  // namespace

ContainerSyncRealms::ContainerSyncRealms(std::string conf_path)
    : path_(std::move(conf_path)), realms_(std::make_shared<Realms>()) {
  MutexLock lock(&mutex_);
  reload_if_due();
}

void ContainerSyncRealms::reload_if_due() {
  auto now = Clock::now();
  if (now < next_check_) return;
  next_check_ = now + std::chrono::duration_cast<Clock::duration>(
                          std::chrono::duration<double>(check_interval_));
  struct stat st {};
  if (::stat(path_.c_str(), &st) != 0) {
    if (errno == ENOENT) {
      APUS_LOG_DEBUG("Could not load " + py_repr(path_) + ": no such file");
    } else {
      APUS_LOG_ERROR("Could not load " + py_repr(path_) + ": " + std::strerror(errno));
    }
    return;
  }
  int64_t mtime_ns = int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec;
  if (mtime_ns == mtime_ns_) return;
  mtime_ns_ = mtime_ns;
  auto conf = Config::load(path_);
  if (!conf.ok()) {
    APUS_LOG_ERROR("Could not load " + py_repr(path_) + ": " + conf.status().to_string());
    return;
  }
  auto interval = conf->section("DEFAULT").get_double("mtime_check_interval", 300);
  if (interval.ok()) {
    check_interval_ = *interval;
    next_check_ = now + std::chrono::duration_cast<Clock::duration>(
                            std::chrono::duration<double>(check_interval_));
  } else {
    APUS_LOG_ERROR("Error in " + py_repr(path_) +
                   " with mtime_check_interval: " + interval.status().to_string());
  }
  realms_ = std::make_shared<Realms>(realms_of(*conf));
}

std::shared_ptr<const ContainerSyncRealms::Realms> ContainerSyncRealms::realms() {
  MutexLock lock(&mutex_);
  reload_if_due();
  return realms_;
}

std::optional<std::string> ContainerSyncRealms::key(std::string_view realm) {
  auto all = realms();
  auto it = all->find(upper(realm));
  if (it == all->end() || it->second.key.empty()) return std::nullopt;
  return it->second.key;
}

std::optional<std::string> ContainerSyncRealms::key2(std::string_view realm) {
  auto all = realms();
  auto it = all->find(upper(realm));
  if (it == all->end() || it->second.key2.empty()) return std::nullopt;
  return it->second.key2;
}

std::optional<std::string> ContainerSyncRealms::endpoint(std::string_view realm,
                                                         std::string_view cluster) {
  auto all = realms();
  auto it = all->find(upper(realm));
  if (it == all->end()) return std::nullopt;
  auto c = it->second.clusters.find(upper(cluster));
  if (c == it->second.clusters.end() || c->second.empty()) return std::nullopt;
  return c->second;
}

std::string container_sync_sig(std::string_view method, std::string_view path,
                               std::string_view x_timestamp, std::string_view nonce,
                               std::string_view realm_key, std::string_view user_key) {
  std::string message;
  message.append(method).push_back('\n');
  message.append(path).push_back('\n');
  message.append(x_timestamp).push_back('\n');
  message.append(nonce).push_back('\n');
  message.append(user_key);
  return crypto::hmac_hex("sha1", realm_key, message);
}

std::string py_repr(std::string_view s) {
  bool has_single = s.find('\'') != std::string_view::npos;
  bool has_double = s.find('"') != std::string_view::npos;
  char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (char c : s) {
    if (c == quote || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  out.push_back(quote);
  return out;
}

namespace {

SyncToCheck refuse(std::string message) { return {.error = std::move(message), .target = {}}; }

// A realm form, "//realm/cluster/account/container" (trailing slashes gone).
SyncToCheck realm_target(std::string_view orig, std::string_view value,
                         ContainerSyncRealms& realms) {
  std::vector<std::string_view> parts;
  std::string_view rest = value.substr(2);
  for (;;) {
    size_t slash = rest.find('/');
    parts.push_back(rest.substr(0, slash));
    if (slash == std::string_view::npos) break;
    rest.remove_prefix(slash + 1);
  }
  if (parts.size() != 4) return refuse("Invalid X-Container-Sync-To format " + py_repr(orig));
  auto key = realms.key(parts[0]);
  if (!key) return refuse("No realm key for " + py_repr(parts[0]));
  auto endpoint = realms.endpoint(parts[0], parts[1]);
  if (!endpoint) {
    return refuse("No cluster endpoint for " + py_repr(parts[0]) + " " + py_repr(parts[1]));
  }
  std::string_view base = *endpoint;
  while (!base.empty() && base.back() == '/') base.remove_suffix(1);
  SyncTarget t;
  t.endpoint = std::string(base) + "/" + std::string(parts[2]) + "/" + std::string(parts[3]);
  t.realm = upper(parts[0]);
  t.realm_key = *key;
  return {.error = std::nullopt, .target = std::move(t)};
}

}  // namespace

SyncToCheck validate_sync_to(std::string_view orig, const std::vector<std::string>& allowed_hosts,
                             ContainerSyncRealms* realms) {
  std::string_view value = orig;
  while (!value.empty() && value.back() == '/') value.remove_suffix(1);
  if (value.empty()) return {};
  if (value.starts_with("//")) {
    if (realms == nullptr) return {};
    return realm_target(orig, value, *realms);
  }
  // urllib.parse.urlparse(), as far as these checks need it.
  std::string scheme;
  std::string_view rest = value;
  size_t colon = value.find(':');
  if (colon != std::string_view::npos && colon > 0 &&
      std::isalpha(static_cast<unsigned char>(value[0]))) {
    bool valid = true;
    for (char c : value.substr(0, colon)) {
      valid = valid && (std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '-' ||
                        c == '.');
    }
    if (valid) {
      scheme = http::to_lower(value.substr(0, colon));
      rest = value.substr(colon + 1);
    }
  }
  std::string_view netloc;
  if (rest.starts_with("//")) {
    size_t end = rest.find_first_of("/?#", 2);
    netloc = rest.substr(2, end == std::string_view::npos ? rest.npos : end - 2);
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end);
  }
  bool fragment = false, query = false, params = false;
  if (size_t hash = rest.find('#'); hash != std::string_view::npos) {
    fragment = hash + 1 < rest.size();
    rest = rest.substr(0, hash);
  }
  if (size_t q = rest.find('?'); q != std::string_view::npos) {
    query = q + 1 < rest.size();
    rest = rest.substr(0, q);
  }
  size_t last_slash = rest.rfind('/');
  if (rest.find(';', last_slash == std::string_view::npos ? 0 : last_slash) !=
      std::string_view::npos) {
    size_t semi = rest.find(';');
    params = semi + 1 < rest.size();
    rest = rest.substr(0, semi);
  }
  if (scheme != "http" && scheme != "https") {
    return refuse("Invalid scheme " + py_repr(scheme) +
                  " in X-Container-Sync-To, must be \"//\", \"http\", or \"https\".");
  }
  if (rest.empty()) return refuse("Path required in X-Container-Sync-To");
  if (params || query || fragment) {
    return refuse("Params, queries, and fragments not allowed in X-Container-Sync-To");
  }
  size_t at = netloc.rfind('@');
  std::string_view host = netloc.substr(at == std::string_view::npos ? 0 : at + 1);
  if (host.starts_with("[")) {
    host = host.substr(1, host.find(']') - 1);
  } else {
    host = host.substr(0, host.find(':'));
  }
  std::string hostname = http::to_lower(host);
  if (std::find(allowed_hosts.begin(), allowed_hosts.end(), hostname) == allowed_hosts.end()) {
    return refuse("Invalid host " + (hostname.empty() ? std::string("None") : py_repr(hostname)) +
                  " in X-Container-Sync-To");
  }
  SyncTarget t;
  t.endpoint = std::string(value);
  return {.error = std::nullopt, .target = std::move(t)};
}

}  // namespace apus::common
