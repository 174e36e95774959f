#include "proxy/info_cache.h"

#include <boost/json.hpp>

#include "common/config/config.h"
#include "common/http/headers.h"
#include "proxy/memcache.h"

namespace apus::proxy {

namespace json = boost::json;
using common::http::HeaderMap;

namespace {

// Header names of the info dict fields that are plain header copies, as Swift names both.
struct Field {
  const char* key;
  const char* header;
};
constexpr Field kContainerFields[] = {
    {"read_acl", "X-Container-Read"},
    {"write_acl", "X-Container-Write"},
    {"sync_to", "X-Container-Sync-To"},
    {"sync_key", "X-Container-Sync-Key"},
    {"object_count", "X-Container-Object-Count"},
    {"bytes", "X-Container-Bytes-Used"},
    {"versions", "X-Versions-Location"},
};
constexpr Field kContainerTimestamps[] = {
    {"created_at", "X-Backend-Timestamp"},
    {"put_timestamp", "X-Backend-Put-Timestamp"},
    {"delete_timestamp", "X-Backend-Delete-Timestamp"},
    {"status_changed_at", "X-Backend-Status-Changed-At"},
};
constexpr Field kAccountFields[] = {
    {"container_count", "X-Account-Container-Count"},
    {"total_object_count", "X-Account-Object-Count"},
    {"bytes", "X-Account-Bytes-Used"},
};

json::value header_or_null(const HeaderMap& h, const char* name) {
  if (auto v = h.get(name)) return json::string(*v);
  return nullptr;
}

// Swift's _prep_headers_to_info(): user metadata and sysmeta by lower-case name, without the
// X-<Type>-Meta- / X-<Type>-Sysmeta- prefix.
void split_metadata(const HeaderMap& h, std::string_view type, json::object& meta,
                    json::object& sysmeta) {
  const std::string meta_prefix = "x-" + std::string(type) + "-meta-";
  const std::string sysmeta_prefix = "x-" + std::string(type) + "-sysmeta-";
  for (const auto& [name, value] : h) {
    std::string lower = common::http::to_lower(name);
    if (lower.starts_with(meta_prefix) && lower.size() > meta_prefix.size()) {
      meta[lower.substr(meta_prefix.size())] = value;
    } else if (lower.starts_with(sysmeta_prefix) && lower.size() > sysmeta_prefix.size()) {
      sysmeta[lower.substr(sysmeta_prefix.size())] = value;
    }
  }
}

// A field's value as header text: strings as they are, numbers in decimal; nullopt for null
// (Swift's None) or anything else.
std::optional<std::string> as_text(const json::value* v) {
  if (!v) return std::nullopt;
  if (v->is_string()) return std::string(v->get_string());
  if (v->is_int64()) return std::to_string(v->get_int64());
  if (v->is_uint64()) return std::to_string(v->get_uint64());
  return std::nullopt;
}

void restore_metadata(const json::object& o, std::string_view type, HeaderMap& h) {
  for (auto [key, prefix] : {std::pair{"meta", "-Meta-"}, std::pair{"sysmeta", "-Sysmeta-"}}) {
    const json::value* section = o.if_contains(key);
    if (!section || !section->is_object()) continue;
    for (const auto& [name, value] : section->get_object()) {
      if (auto text = as_text(&value)) {
        h.set("X-" + std::string(type) + prefix + std::string(name), *text);
      }
    }
  }
}

std::string policy_header(const common::StoragePolicy& p, std::string_view what) {
  return "X-Account-Storage-Policy-" + p.names.front() + "-" + std::string(what);
}

}  // namespace

std::string info_to_json(const CachedInfo& info, InfoKind kind,
                         const common::StoragePolicies& policies) {
  const HeaderMap& h = info.headers.map();
  json::object o;
  o["status"] = info.status;
  json::object meta, sysmeta;
  if (kind == InfoKind::kContainer) {
    split_metadata(h, "container", meta, sysmeta);
    for (const Field& f : kContainerFields) o[f.key] = header_or_null(h, f.header);
    o["storage_policy"] = std::string(h.get_or("X-Backend-Storage-Policy-Index", "0"));
    json::object cors;
    for (auto [key, name] : {std::pair{"allow_origin", "access-control-allow-origin"},
                             std::pair{"expose_headers", "access-control-expose-headers"},
                             std::pair{"max_age", "access-control-max-age"}}) {
      const json::value* v = meta.if_contains(name);
      cors[key] = v ? *v : json::value(nullptr);
    }
    o["cors"] = std::move(cors);
    o["meta"] = std::move(meta);
    o["sysmeta"] = std::move(sysmeta);
    o["sharding_state"] = std::string(h.get_or("X-Backend-Sharding-State", "unsharded"));
    for (const Field& f : kContainerTimestamps) o[f.key] = header_or_null(h, f.header);
  } else {
    split_metadata(h, "account", meta, sysmeta);
    for (const Field& f : kAccountFields) o[f.key] = header_or_null(h, f.header);
    json::object by_policy;
    for (const auto& p : policies.all()) {
      auto count = [&](std::string_view what) {
        return common::parse_python_int(h.get_or(policy_header(p, what), "0")).value_or(0);
      };
      by_policy[std::to_string(p.index)] = json::object{{"container_count", count("Container-Count")},
                                                        {"object_count", count("Object-Count")},
                                                        {"bytes", count("Bytes-Used")}};
    }
    o["storage_policies"] = std::move(by_policy);
    o["meta"] = std::move(meta);
    o["sysmeta"] = std::move(sysmeta);
    if (info.status >= 200 && info.status < 300) {
      o["account_really_exists"] =
          !common::config_true_value(h.get_or("X-Backend-Fake-Account-Listing", ""));
    }
  }
  return json::serialize(o);
}

std::optional<CachedInfo> info_from_json(std::string_view text, InfoKind kind,
                                         const common::StoragePolicies& policies) {
  boost::system::error_code ec;
  json::value v = json::parse(text, ec);
  if (ec || !v.is_object()) return std::nullopt;
  const json::object& o = v.get_object();
  const json::value* status = o.if_contains("status");
  if (!status || !status->is_int64()) return std::nullopt;
  CachedInfo info;
  info.status = static_cast<int>(status->get_int64());
  HeaderMap h;
  if (kind == InfoKind::kContainer) {
    for (const Field& f : kContainerFields) {
      if (auto t = as_text(o.if_contains(f.key))) h.set(f.header, *t);
    }
    for (const Field& f : kContainerTimestamps) {
      if (auto t = as_text(o.if_contains(f.key))) h.set(f.header, *t);
    }
    if (auto t = as_text(o.if_contains("storage_policy"))) {
      h.set("X-Backend-Storage-Policy-Index", *t);
    }
    if (auto t = as_text(o.if_contains("sharding_state"))) h.set("X-Backend-Sharding-State", *t);
    restore_metadata(o, "Container", h);
  } else {
    for (const Field& f : kAccountFields) {
      if (auto t = as_text(o.if_contains(f.key))) h.set(f.header, *t);
    }
    const json::value* by_policy = o.if_contains("storage_policies");
    if (by_policy && by_policy->is_object()) {
      for (const auto& p : policies.all()) {
        const json::value* entry = by_policy->get_object().if_contains(std::to_string(p.index));
        if (!entry || !entry->is_object()) continue;
        for (auto [key, what] : {std::pair{"container_count", "Container-Count"},
                                 std::pair{"object_count", "Object-Count"},
                                 std::pair{"bytes", "Bytes-Used"}}) {
          if (auto t = as_text(entry->get_object().if_contains(key))) {
            h.set(policy_header(p, what), *t);
          }
        }
      }
    }
    const json::value* exists = o.if_contains("account_really_exists");
    if (exists && exists->is_bool() && !exists->get_bool()) {
      h.set("X-Backend-Fake-Account-Listing", "yes");
    }
    restore_metadata(o, "Account", h);
  }
  info.headers = std::move(h);
  return info;
}

std::optional<CachedInfo> InfoCache::local_get(const std::string& key) {
  common::MutexLock lock(&mutex_);
  auto it = local_.find(key);
  if (it == local_.end()) return std::nullopt;
  if (it->second->second.expires <= std::chrono::steady_clock::now()) {
    lru_.erase(it->second);
    local_.erase(it);
    return std::nullopt;
  }
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->second;
}

void InfoCache::local_set(std::string key, CachedInfo info, double ttl,
                          std::optional<uint64_t> unless_forgotten_since) {
  info.expires = std::chrono::steady_clock::now() +
                 std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                     std::chrono::duration<double>(ttl));
  common::MutexLock lock(&mutex_);
  if (unless_forgotten_since && *unless_forgotten_since != forgets_) return;
  if (auto it = local_.find(key); it != local_.end()) {
    it->second->second = std::move(info);
    lru_.splice(lru_.begin(), lru_, it->second);
    return;
  }
  while (local_.size() >= max_entries_ && !lru_.empty()) {
    local_.erase(lru_.back().first);
    lru_.pop_back();
  }
  lru_.emplace_front(key, std::move(info));
  local_.emplace(std::move(key), lru_.begin());
}

uint64_t InfoCache::forgets() {
  common::MutexLock lock(&mutex_);
  return forgets_;
}

void InfoCache::local_forget(const std::string& key) {
  common::MutexLock lock(&mutex_);
  ++forgets_;
  auto it = local_.find(key);
  if (it == local_.end()) return;
  lru_.erase(it->second);
  local_.erase(it);
}

size_t InfoCache::local_size() {
  common::MutexLock lock(&mutex_);
  return local_.size();
}

boost::asio::awaitable<std::optional<CachedInfo>> InfoCache::get(std::string key, InfoKind kind,
                                                                 Memcache* mc) {
  if (auto hit = local_get(key); hit || !mc) co_return hit;
  const uint64_t forgets_before = forgets();
  auto text = co_await mc->get(key);
  if (!text) co_return std::nullopt;
  auto info = info_from_json(*text, kind, policies_);
  if (info && local_ttl_ > 0) local_set(std::move(key), *info, local_ttl_, forgets_before);
  co_return info;
}

boost::asio::awaitable<void> InfoCache::set(std::string key, InfoKind kind, CachedInfo info,
                                            double ttl, Memcache* mc) {
  if (info.status == 404 || info.status == 410) {
    ttl *= 0.1;
  } else if (info.status < 200 || info.status >= 300) {
    co_return;  // not an authoritative answer
  }
  if (mc) {
    if (local_ttl_ > 0) local_set(key, info, std::min(ttl, local_ttl_));
    // Whole seconds, as Swift caches, and at least one (memcached takes 0 as "never expires").
    co_await mc->set(std::move(key), info_to_json(info, kind, policies_),
                     std::max(1.0, static_cast<double>(static_cast<int64_t>(ttl))));
    co_return;
  }
  local_set(std::move(key), std::move(info), ttl);
}

std::optional<CachedInfo> RequestInfoMemo::find(std::string_view key) const {
  common::MutexLock lock(&mutex_);
  for (const auto& [k, info] : entries_) {
    if (k == key) return info;
  }
  return std::nullopt;
}

void RequestInfoMemo::put(std::string_view key, const CachedInfo& info) {
  if (info.status != 404 && info.status != 410 && (info.status < 200 || info.status >= 300)) {
    return;  // not an authoritative answer: the next lookup asks again
  }
  common::MutexLock lock(&mutex_);
  std::erase_if(entries_, [&](const auto& e) { return e.first == key; });
  if (entries_.size() >= kMaxEntries) entries_.erase(entries_.begin());
  entries_.emplace_back(std::string(key), info);
}

void RequestInfoMemo::forget(std::string_view key) {
  common::MutexLock lock(&mutex_);
  std::erase_if(entries_, [&](const auto& e) { return e.first == key; });
}

boost::asio::awaitable<void> InfoCache::forget(std::string key, Memcache* mc) {
  local_forget(key);
  if (mc) co_await mc->del(std::move(key));
}

}  // namespace apus::proxy
