// Fuzzes container and account listing requests as the listing servers take them: the query
// string (prefix, marker, end_marker, limit, delimiter, path, reverse, format, ...) and the
// Accept header, through listing_params() and listing_content_type() (container-server/
// db_server.h), and then the listing itself on a small RocksDB store made once at start
// (names with delimiters, multi-byte UTF-8 and reserved names).
//
// Input (text): line 1 is the query string (what follows '?'), line 2 the Accept header (none
// when absent), line 3 the X-Backend-Allow-Reserved-Names header.
//
// Besides the sanitizers, it checks what clients rely on: at most `limit` entries, in strictly
// ascending order (descending with reverse), every entry under the prefix, and object rows
// between marker and end_marker.
#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/http/server.h"
#include "container-server/db_server.h"
#include "container-server/listing_db.h"

namespace container = apus::container;
using apus::common::Result;
using apus::common::http::Request;

namespace {

constexpr std::string_view kDb = "c";

// Object and container names in the store: nested paths for delimiters and prefixes,
// multi-byte UTF-8 (where increment_last_char has to step a code point), a reserved name.
const std::vector<std::string>& names() {
  static const std::vector<std::string> kNames = {
      "a",        "a/",       "a/b",       "a/b/c",      "a/b/d",    "a//x",     "a-b",
      "a0",       "b",        "b/",        "b/\xc3\xa9", "b/z",      "c.d/e",    "d%2Fe",
      "\xc3\xa9", "\xc3\xa9/x", "\xe2\x82\xac/y", "\xf0\x9f\x90\xa6", "z/",  "zz/z/z",
      std::string("\x00reserved", 9), std::string("\x00v\x00x", 4)};
  return kNames;
}

struct Stores {
  std::string dir;
  std::unique_ptr<container::ListingStore> objects;     // container databases
  std::unique_ptr<container::ListingStore> containers;  // account databases
};

void die(const std::string& what) {
  std::fprintf(stderr, "listing_params_fuzz: %s\n", what.c_str());
  std::abort();
}

std::unique_ptr<container::ListingStore> open_store(const std::string& path,
                                                   container::DbType type) {
  container::StoreOptions o;
  o.type = type;
  o.sync_writes = false;
  auto store = container::ListingStore::open(path, o);
  if (!store.ok()) die("cannot open " + path + ": " + store.status().to_string());
  auto created = (*store)->update_info(kDb, [](std::optional<container::DbInfo>& info)
                                                -> Result<bool> {
    info.emplace();
    info->account = "a";
    info->container = std::string(kDb);
    info->put_timestamp = "1700000000.00000";
    info->policy_stats[0];
    return true;
  });
  if (!created.ok()) die("cannot create the database: " + created.to_string());
  return std::move(*store);
}

Stores& stores() {
  static Stores* s = [] {
    auto* out = new Stores;
    char tmpl[] = "/tmp/apus_listing_fuzz.XXXXXX";
    if (!mkdtemp(tmpl)) die("mkdtemp failed");
    out->dir = tmpl;
    out->objects = open_store(out->dir + "/objects", container::DbType::kContainer);
    out->containers = open_store(out->dir + "/containers", container::DbType::kAccount);
    std::vector<container::ObjectRecord> objects;
    std::vector<container::ContainerRecord> conts;
    for (const std::string& name : names()) {
      container::ObjectRecord r;
      r.name = name;
      r.created_at = "1700000001.00000";
      r.size = 1;
      r.content_type = "text/plain";
      r.etag = "d41d8cd98f00b204e9800998ecf8427e";
      objects.push_back(r);
      container::ContainerRecord c;
      c.name = name;
      c.put_timestamp = "1700000001.00000";
      c.object_count = 1;
      c.bytes_used = 1;
      conts.push_back(c);
    }
    if (!out->objects->merge_objects(kDb, objects).ok()) die("cannot add objects");
    if (!out->containers->merge_containers(kDb, conts).ok()) die("cannot add containers");
    // The store lives as long as the process; its files go when the run ends.
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(stores().dir, ec);
    });
    return out;
  }();
  return *s;
}

std::string_view next_line(std::string_view& rest) {
  size_t eol = rest.find('\n');
  std::string_view line = rest.substr(0, eol);
  rest = eol == std::string_view::npos ? std::string_view() : rest.substr(eol + 1);
  return line;
}

// The invariants of one listing, whatever the query.
template <class Entry>
void check_listing(const std::vector<Entry>& entries, const container::ListingQuery& q) {
  if (static_cast<int64_t>(entries.size()) > q.limit) die("more entries than limit");
  const std::string* prev = nullptr;
  for (const Entry& e : entries) {
    const std::string& name = e.row.name;
    if (prev && (q.reverse ? !(name < *prev) : !(*prev < name))) {
      die("listing out of order: '" + *prev + "' then '" + name + "'");
    }
    prev = &name;
    if (!q.path && q.prefix && !name.starts_with(*q.prefix)) {
      die("'" + name + "' listed outside prefix '" + *q.prefix + "'");
    }
    if (e.subdir) continue;
    const std::string& lower = q.reverse ? q.end_marker.value_or("") : q.marker;
    std::optional<std::string> upper = q.reverse ? std::optional(q.marker) : q.end_marker;
    if (!lower.empty() && !(lower < name)) die("'" + name + "' listed at or before marker");
    if (upper && !upper->empty() && !(name < *upper)) {
      die("'" + name + "' listed at or after end_marker");
    }
  }
}

void list(const Request& req, bool container) {
  auto params = container::listing_params(req, 10000, container);
  if (!params) return;
  auto type = container::listing_content_type(req, params->format);
  if (!type) return;
  const container::ListingQuery& q = params->query;
  Stores& s = stores();
  if (container) {
    auto listed = s.objects->list_objects(kDb, q);
    if (!listed.ok()) die("list_objects failed: " + listed.status().to_string());
    check_listing(*listed, q);
  } else {
    auto listed = s.containers->list_containers(kDb, q);
    if (!listed.ok()) die("list_containers failed: " + listed.status().to_string());
    check_listing(*listed, q);
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)stores();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  Request req;
  req.method = "GET";
  req.target = "/sda1/0/a/c?" + std::string(next_line(rest));
  if (!rest.empty()) req.headers.add("Accept", next_line(rest));
  if (!rest.empty()) req.headers.add("X-Backend-Allow-Reserved-Names", next_line(rest));
  list(req, true);
  list(req, false);
  return 0;
}
