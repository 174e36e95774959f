#include "container-server/account_server.h"

#include "common/hash_path.h"
#include "common/http/headers.h"
#include "common/http/swob.h"
#include "common/http/url.h"
#include "common/listing_format.h"
#include "container-server/db_replication.h"

namespace apus::container {

namespace net = boost::asio;
using common::Result;
using common::Status;
using common::Timestamp;
using common::http::Exchange;
using common::http::OrRefusal;
using common::http::Request;
using common::http::Response;
using common::http::swob_response;

namespace {

constexpr DbType kType = DbType::kAccount;

// Swift's _deleted_response(): an empty body, and X-Account-Status: Deleted when the account
// exists and is marked deleted.
Response deleted_response(int status, const std::optional<DbInfo>& info, std::string body = {}) {
  Response r;
  r.status = status;
  r.headers.set("Content-Type", "text/html; charset=utf-8");
  if (info && info->is_status_deleted()) r.headers.set("X-Account-Status", "Deleted");
  r.body = std::move(body);
  return r;
}


DbInfo new_account_info(const std::string& account, const std::string& partition,
                        const std::string& device, const std::string& put_timestamp) {
  DbInfo info;
  info.account = account;
  info.partition = partition;
  info.created_at = Timestamp::now().internal();
  info.id = new_db_id(device);
  info.put_timestamp = put_timestamp;
  info.status_changed_at = put_timestamp;
  return info;
}

// Swift's get_response_headers() for an account.
void account_headers(Response& r, const DbInfo& info, const common::StoragePolicies& policies) {
  auto& h = r.headers;
  h.set("X-Account-Container-Count", std::to_string(info.container_count));
  h.set("X-Account-Object-Count", std::to_string(info.object_count));
  h.set("X-Account-Bytes-Used", std::to_string(info.bytes_used));
  h.set("X-Timestamp", timestamp_or_zero(info.created_at).normal());
  h.set("X-PUT-Timestamp", timestamp_or_zero(info.put_timestamp).normal());
  for (const auto& [index, st] : info.policy_stats) {
    const common::StoragePolicy* policy = policies.by_index(index);
    if (!policy) continue;
    std::string prefix = "X-Account-Storage-Policy-" + policy->name() + "-";
    h.set(prefix + "container-count", std::to_string(st.container_count));
    h.set(prefix + "object-count", std::to_string(st.object_count));
    h.set(prefix + "bytes-used", std::to_string(st.bytes_used));
  }
  for (const auto& [key, item] : info.metadata) {
    if (!item.value.empty()) h.set(key, item.value);
  }
}

}  // namespace

struct AccountServer::Target {
  std::string device, partition, account;
  std::optional<std::string> container;
  std::string db;  // hash_path hex of the account
};

AccountServer::AccountServer(const DbServerConfig& config, DbDevices& devices)
    : config_(config), devices_(devices) {}

net::awaitable<void> AccountServer::handle(Exchange& ex) {
  const Request& req = ex.request();
  const std::string& method = req.method;
  // Every answer to HEAD goes out as swob makes it (no body, its length declared).
  auto reply = [&](Response r) {
    return ex.reply(method == "HEAD" ? no_body(std::move(r)) : std::move(r));
  };
  if (method == "OPTIONS") {
    Response r;
    r.headers.set("Content-Type", "text/html; charset=UTF-8");
    r.headers.set("Allow", "DELETE, GET, HEAD, OPTIONS, POST, PUT, REPLICATE");
    r.headers.set("Server", "account-server/" APUS_SWIFT_VERSION);
    co_return co_await reply(std::move(r));
  }
  if (method == "REPLICATE") co_return co_await serve_replicate(ex, config_, devices_);
  bool known = method == "PUT" || method == "GET" || method == "HEAD" || method == "POST" ||
               method == "DELETE";
  if (!known) co_return co_await reply(swob_response(405));
  std::string path = common::http::percent_decode(req.path());
  if (!common::check_utf8(path, /*internal=*/true)) {
    Response r = swob_response(412);
    r.body = "Invalid UTF8";
    co_return co_await reply(std::move(r));
  }
  OrRefusal<PathSegments> split = split_storage_path(path, 3, method == "PUT" ? 4 : 3, false);
  if (!split) co_return co_await reply(std::move(split).refusal());
  const PathSegments& segments = *split;
  Target t;
  t.device = *segments[0];
  t.partition = *segments[1];
  t.account = *segments[2];
  if (segments.size() > 3) t.container = segments[3];
  auto db = common::hash_path_hex(
      common::HashPathConfig{config_.swift.hash_path_prefix, config_.swift.hash_path_suffix},
      t.account);
  if (!db.ok()) co_return co_await reply(plain_error(400, db.status().message()));
  t.db = t.partition + "/" + *db;  // Swift finds a database under its path's partition

  // Checks Swift makes before it touches the device, in its order.
  if (method == "POST") {
    if (OrRefusal<Timestamp> ts = request_timestamp(req); !ts) {
      co_return co_await reply(std::move(ts).refusal());
    }
  }
  Listing listing;
  if (method == "GET" || method == "HEAD") {
    ListingParams& params = listing.params;
    if (method == "GET") {
      OrRefusal<ListingParams> checked =
          listing_params(req, config_.swift.constraints.account_listing_limit, false);
      if (!checked) co_return co_await reply(std::move(checked).refusal());
      params = std::move(*checked);
    } else {
      params.format = common::http::query_param(req.query(), "format");
      // Swift decodes the format parameter for HEAD too (get_listing_content_type).
      const std::optional<std::string>& format = params.format;
      if (format && !format->empty() && !common::check_utf8(*format, /*internal=*/true)) {
        co_return co_await reply(plain_error(400, "\"format\" parameter not valid UTF-8"));
      }
    }
    OrRefusal<std::string> ctype = listing_content_type(req, params.format);
    if (!ctype) co_return co_await reply(std::move(ctype).refusal());
    listing.content_type = std::move(*ctype);
  }

  common::io::BlockingPool* pool = co_await devices_.pool_for(t.device);
  if (!pool) co_return co_await reply(insufficient_storage(t.device));
  Response r = co_await pool->call([&]() -> Response {
    if (!devices_.check_device(t.device).ok()) return insufficient_storage(t.device);
    if ((method == "PUT" || method == "POST") && !devices_.check_free_space(t.device).ok()) {
      return insufficient_storage(t.device);
    }
    if (method == "PUT") return t.container ? put_container_row(req, t) : put_account(req, t);
    if (method == "DELETE") return delete_account(req, t);
    if (method == "POST") return post_account(req, t);
    return head_or_get(req, t, listing);
  });
  co_return co_await reply(std::move(r));
}

Response AccountServer::put_container_row(const Request& req, const Target& t) {
  Timestamp ts = Timestamp::now();
  if (req.headers.contains("X-Timestamp")) {
    OrRefusal<Timestamp> parsed = request_timestamp(req);
    if (!parsed) return std::move(parsed).refusal();
    ts = *parsed;
  }
  auto store = devices_.store(t.device);
  if (!store.ok()) return swob_response(500);
  if (t.account.rfind(config_.auto_create_account_prefix, 0) == 0) {
    Status s = (*store)->update_info(t.db, [&](std::optional<DbInfo>& info) -> Result<bool> {
      if (info) return false;
      info = new_account_info(t.account, t.partition, t.device, ts.internal());
      return true;
    });
    if (!s.ok()) return store_failure(s);
  }
  auto info = (*store)->get_info(t.db);
  if (!info.ok()) return swob_response(500);
  bool override_deleted =
      common::http::iequals(req.headers.get_or("X-Account-Override-Deleted", "no"), "yes");
  if (!*info || (!override_deleted && (*info)->is_deleted(kType))) return swob_response(404);

  auto put = req.headers.get("X-Put-Timestamp");
  auto del = req.headers.get("X-Delete-Timestamp");
  auto count = parse_int(req.headers.get_or("X-Object-Count", ""));
  auto bytes = parse_int(req.headers.get_or("X-Bytes-Used", ""));
  if (!put || !del || !count || !bytes) {
    return plain_error(400, "Missing or invalid X-Put-Timestamp, X-Delete-Timestamp, "
                            "X-Object-Count or X-Bytes-Used header");
  }
  ContainerRecord rec;
  rec.name = *t.container;
  rec.put_timestamp.assign(*put);
  rec.delete_timestamp.assign(*del);
  rec.object_count = *count;
  rec.bytes_used = *bytes;
  std::string_view count_text = req.headers.get_or("X-Object-Count", "");
  rec.deleted = timestamp_or_zero(*del) > timestamp_or_zero(*put) && (count_text == "0");
  rec.storage_policy_index =
      static_cast<int>(parse_int(req.headers.get_or("X-Backend-Storage-Policy-Index", "0"))
                           .value_or(0));
  std::vector<ContainerRecord> records;
  records.push_back(std::move(rec));
  Status s = (*store)->merge_containers(t.db, std::move(records));
  if (!s.ok()) return store_failure(s);
  // Swift compares the two header values as strings here.
  return swob_response(std::string_view(*del) > std::string_view(*put) ? 204 : 201);
}

Response AccountServer::put_account(const Request& req, const Target& t) {
  OrRefusal<Timestamp> ts = request_timestamp(req);
  if (!ts) return std::move(ts).refusal();
  auto store = devices_.store(t.device);
  if (!store.ok()) return swob_response(500);
  std::string stamp = ts->internal();
  std::optional<Response> answer;
  bool created = false;
  Status s = (*store)->update_info(t.db, [&](std::optional<DbInfo>& info) -> Result<bool> {
    if (!info) {
      info = new_account_info(t.account, t.partition, t.device, stamp);
      created = true;
      return true;
    }
    if (info->is_status_deleted()) {
      answer = deleted_response(403, info, "Recently deleted");
      return false;
    }
    created = info->is_deleted(kType);
    bool changed = false;
    if (info->put_timestamp < stamp) {
      info->put_timestamp = stamp;
      changed = true;
    }
    if (info->is_deleted(kType)) answer = swob_response(409);
    return changed;
  });
  if (!s.ok()) return store_failure(s);
  if (answer) return std::move(*answer);
  DbMetadata md = request_metadata(req, kType, false, *ts);
  s = (*store)->update_info(t.db, [&](std::optional<DbInfo>& info) -> Result<bool> {
    if (!info) return false;
    OrRefusal<bool> merged = merge_metadata(*info, md, true, config_.swift.constraints);
    if (!merged) {
      answer = std::move(merged).refusal();
      return false;
    }
    return *merged;
  });
  if (!s.ok()) return store_failure(s);
  if (answer) return std::move(*answer);
  return swob_response(created ? 201 : 202);
}

Response AccountServer::delete_account(const Request& req, const Target& t) {
  OrRefusal<Timestamp> ts = request_timestamp(req);
  if (!ts) return std::move(ts).refusal();
  auto store = devices_.store(t.device);
  if (!store.ok()) return swob_response(500);
  std::string stamp = ts->internal();
  std::optional<Response> answer;
  Status s = (*store)->update_info(t.db, [&](std::optional<DbInfo>& info) -> Result<bool> {
    if (!info || info->is_deleted(kType)) {
      answer = deleted_response(404, info);
      return false;
    }
    DbMetadata cleared;
    for (const auto& [key, item] : info->metadata) cleared[key] = MetaItem{"", stamp};
    (void)merge_metadata(*info, cleared, false, config_.swift.constraints);
    if (info->delete_timestamp < stamp) {
      info->delete_timestamp = stamp;
      info->status = "DELETED";
      info->status_changed_at = stamp;
    }
    answer = deleted_response(204, info);
    return true;
  });
  if (!s.ok()) return store_failure(s);
  return std::move(*answer);
}

Response AccountServer::post_account(const Request& req, const Target& t) {
  OrRefusal<Timestamp> ts = request_timestamp(req);
  if (!ts) return std::move(ts).refusal();
  auto store = devices_.store(t.device);
  if (!store.ok()) return swob_response(500);
  DbMetadata md = request_metadata(req, kType, false, *ts);
  std::optional<Response> answer;
  Status s = (*store)->update_info(t.db, [&](std::optional<DbInfo>& info) -> Result<bool> {
    if (!info || info->is_deleted(kType)) {
      answer = deleted_response(404, info);
      return false;
    }
    OrRefusal<bool> merged = merge_metadata(*info, md, true, config_.swift.constraints);
    if (!merged) {
      answer = std::move(merged).refusal();
      return false;
    }
    return *merged;
  });
  if (!s.ok()) return store_failure(s);
  return answer ? std::move(*answer) : swob_response(204);
}

Response AccountServer::head_or_get(const Request& req, const Target& t,
                                    const Listing& listing) {
  auto store = devices_.store(t.device);
  if (!store.ok()) return swob_response(500);
  auto info = (*store)->get_info(t.db);
  if (!info.ok()) return swob_response(500);
  if (!*info || (*info)->is_deleted(kType)) return deleted_response(404, *info);
  const DbInfo& i = **info;
  const std::string& type = listing.content_type;
  Response r;
  account_headers(r, i, config_.swift.policies);
  r.headers.set("Content-Type", type + "; charset=utf-8");
  if (req.method == "HEAD") {
    r.status = 204;
    return r;
  }
  auto entries = (*store)->list_containers(t.db, listing.params.query);
  if (!entries.ok()) return swob_response(500);
  std::vector<common::listing::ContainerItem> items;
  items.reserve(entries->size());
  for (const ContainerEntry& e : *entries) {
    common::listing::ContainerItem item;
    item.name = e.row.name;
    item.subdir = e.subdir;
    if (!e.subdir) {
      item.count = e.row.object_count;
      item.bytes = e.row.bytes_used;
      item.last_modified = timestamp_or_zero(e.row.put_timestamp).isoformat();
    }
    items.push_back(std::move(item));
  }
  r.status = 200;
  if (type.ends_with("/xml")) {
    r.body = common::listing::to_xml(items, t.account);
  } else if (type.ends_with("/json")) {
    r.body = common::listing::to_json(items);
  } else {
    r.body = common::listing::to_plain(items);
    if (r.body.empty()) r.status = 204;
  }
  return r;
}

Result<std::unique_ptr<DbServer>> make_account_server(const common::Config&,
                                                      const DbServerConfig& config,
                                                      DbDevices& devices) {
  return std::unique_ptr<DbServer>(std::make_unique<AccountServer>(config, devices));
}

}  // namespace apus::container
