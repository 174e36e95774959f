// The request rules the container and account servers share (db_server.h): each check gives a
// value or the ready refusal Swift would send, and the Reclaimer's thread stops when told.
#include "container-server/db_server.h"

#include <doctest/doctest.h>

#include <chrono>
#include <string>

#include "common/config/config.h"
#include "common/constraints.h"
#include "common/http/swob.h"
#include "tests/support/temp_dir.h"

namespace apus::container {
namespace {

using common::Status;
using common::http::Request;
using common::http::Response;

Request get(std::string target) {
  Request req;
  req.method = "GET";
  req.target = std::move(target);
  return req;
}

TEST_CASE("request_timestamp gives the timestamp or Swift's 400") {
  Request req = get("/sda1/0/a/c");
  auto missing = request_timestamp(req);
  REQUIRE_FALSE(missing);
  CHECK(missing.refusal().status == 400);
  CHECK(missing.refusal().body == "Missing X-Timestamp header");

  req.headers.set("X-Timestamp", "yesterday");
  auto bad = request_timestamp(req);
  REQUIRE_FALSE(bad);
  CHECK(bad.refusal().status == 400);
  CHECK(bad.refusal().body == "Invalid X-Timestamp header");

  req.headers.set("X-Timestamp", "1700000000.12345");
  auto good = request_timestamp(req);
  REQUIRE(good);
  CHECK(good->internal() == "1700000000.12345");
}

TEST_CASE("request_policy_index: absent, known, or refused as Swift words it") {
  common::StoragePolicies policies;  // policy 0 only
  Request req = get("/sda1/0/a/c");
  auto absent = request_policy_index(req, policies);
  REQUIRE(absent);
  CHECK_FALSE(absent->has_value());

  req.headers.set("X-Backend-Storage-Policy-Index", " 0 ");
  auto known = request_policy_index(req, policies);
  REQUIRE(known);
  CHECK(**known == 0);

  req.headers.set("X-Backend-Storage-Policy-Index", "7");
  auto unknown = request_policy_index(req, policies);
  REQUIRE_FALSE(unknown);
  CHECK(unknown.refusal().status == 400);
  CHECK(unknown.refusal().body == "Invalid X-Backend-Storage-Policy-Index 7");

  req.headers.set("X-Backend-Storage-Policy-Index", "zero");
  auto text = request_policy_index(req, policies);
  REQUIRE_FALSE(text);
  CHECK(text.refusal().body == "Invalid X-Backend-Storage-Policy-Index 'zero'");
}

TEST_CASE("merge_metadata says whether anything changed, or refuses and leaves info alone") {
  common::Constraints constraints;
  DbInfo info;
  DbMetadata one = {{"X-Container-Meta-A", MetaItem{"1", "0000000001.00000"}}};
  auto first = merge_metadata(info, one, true, constraints);
  REQUIRE(first);
  CHECK(*first);
  CHECK(info.metadata.at("X-Container-Meta-A").value == "1");
  auto again = merge_metadata(info, one, true, constraints);  // not newer: nothing changes
  REQUIRE(again);
  CHECK_FALSE(*again);

  constraints.max_meta_count = 1;
  DbMetadata two = {{"X-Container-Meta-B", MetaItem{"2", "0000000002.00000"}}};
  auto too_many = merge_metadata(info, two, true, constraints);
  REQUIRE_FALSE(too_many);
  CHECK(too_many.refusal().status == 400);
  CHECK(too_many.refusal().body == "Too many metadata items; max 1");
  CHECK(info.metadata.count("X-Container-Meta-B") == 0);
  // Without validation nothing is refused (the DELETE paths clear metadata this way).
  auto unchecked = merge_metadata(info, two, false, constraints);
  REQUIRE(unchecked);
  CHECK(*unchecked);
  CHECK(info.metadata.count("X-Container-Meta-B") == 1);
}

TEST_CASE("listing_params gives the query or Swift's 400 and 412") {
  auto ok = listing_params(get("/sda1/0/a/c?limit=5&prefix=p&format=json&reverse=on"), 100, true);
  REQUIRE(ok);
  CHECK(ok->query.limit == 5);
  CHECK(ok->query.prefix == "p");
  CHECK(ok->query.reverse);
  CHECK(ok->format == "json");

  auto too_big = listing_params(get("/sda1/0/a/c?limit=101"), 100, true);
  REQUIRE_FALSE(too_big);
  CHECK(too_big.refusal().status == 412);
  CHECK(too_big.refusal().body == "Maximum limit is 100");

  auto not_utf8 = listing_params(get("/sda1/0/a/c?marker=%FF"), 100, true);
  REQUIRE_FALSE(not_utf8);
  CHECK(not_utf8.refusal().status == 400);
  CHECK(not_utf8.refusal().body == "\"marker\" parameter not valid UTF-8");
}

TEST_CASE("listing_content_type gives the type or Swift's 406") {
  Request req = get("/sda1/0/a/c");
  auto plain = listing_content_type(req, std::nullopt);
  REQUIRE(plain);
  CHECK(*plain == "text/plain");
  auto json = listing_content_type(req, std::string("json"));
  REQUIRE(json);
  CHECK(*json == "application/json");
  req.headers.set("Accept", "image/png");
  auto unacceptable = listing_content_type(req, std::nullopt);
  REQUIRE_FALSE(unacceptable);
  CHECK(unacceptable.refusal().status == 406);
}

TEST_CASE("split_storage_path gives the segments or Swift's 400") {
  auto ok = split_storage_path("/sda1/3/a/c/o/x", 4, 5, true);
  REQUIRE(ok);
  REQUIRE(ok->size() == 5);
  CHECK(*(*ok)[0] == "sda1");
  CHECK(*(*ok)[4] == "o/x");

  auto short_path = split_storage_path("/sda1/3", 4, 5, true);
  REQUIRE_FALSE(short_path);
  CHECK(short_path.refusal().status == 400);

  auto reserved = split_storage_path(std::string("/sda1/3/a/c\0x", 13), 4, 4, false);
  REQUIRE_FALSE(reserved);
  CHECK(reserved.refusal().status == 400);
  CHECK(reserved.refusal().body == "Invalid reserved-namespace container");
}

TEST_CASE("store_failure answers with the one Status mapping") {
  CHECK(store_failure(Status::not_found()).status == 404);
  CHECK(store_failure(Status::insufficient_storage()).status == 507);
  CHECK(store_failure(Status::io_error()).status == 500);
  CHECK(store_failure(Status::conflict()).status == 409);
}

TEST_CASE("a started Reclaimer stops at once, without waiting out its interval") {
  test::TempDir dir{"apus_reclaimer"};
  DbServerConfig config;
  config.devices = dir.root();
  config.mount_check = false;
  DbDevices devices(config, common::io::default_fs(), nullptr);
  auto conf = common::Config::parse("[container-replicator]\ninterval = 3600\n");
  REQUIRE(conf.ok());
  auto reclaimer = Reclaimer::create(*conf, config, devices);
  REQUIRE(reclaimer.ok());
  (*reclaimer)->start();
  auto begin = std::chrono::steady_clock::now();
  (*reclaimer)->stop();
  CHECK(std::chrono::steady_clock::now() - begin < std::chrono::seconds(10));
  CHECK((*reclaimer)->run_once() == 0);  // an empty devices directory
}

}  // namespace
}  // namespace apus::container
