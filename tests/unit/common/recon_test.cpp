// The recon filter (common/recon.h): when a storage server's pipeline has it, and what its
// file-backed checks answer, against Swift 2.30.1's recon middleware.
#include "common/recon.h"

#include <chrono>
#include <filesystem>
#include <fstream>

#include <boost/json.hpp>
#include <doctest/doctest.h>

namespace apus::common {
namespace {

namespace fs = std::filesystem;

struct Dir {
  Dir() {
    path = fs::temp_directory_path() /
           ("apus_recon_test_" +
            std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()));
    fs::create_directories(path);
  }
  ~Dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  void write(const std::string& rel, const std::string& text) const {
    fs::create_directories((path / rel).parent_path());
    std::ofstream(path / rel) << text;
  }
  fs::path path;
};

Config parse(const std::string& text) {
  auto c = Config::parse(text);
  REQUIRE(c.ok());
  return std::move(c).value();
}

boost::json::value body_json(const http::Response& r) {
  CHECK(r.status == 200);
  CHECK(r.headers.get_or("Content-Type", "") == "application/json");
  return boost::json::parse(r.body);
}

TEST_CASE("recon is on only when the pipeline has egg:swift#recon, with that filter's options") {
  Dir d;
  d.write("swift.conf", "[swift-hash]\nswift_hash_path_suffix = x\n[storage-policy:0]\nname = "
                        "gold\ndefault = yes\n[storage-policy:2]\nname = silver\n");
  const std::string dir = d.path.string();
  auto none = ReconConfig::from_config(
      parse("[pipeline:main]\npipeline = object-server\n[app:object-server]\nuse = "
            "egg:swift#object\n"),
      "2.30.1");
  REQUIRE(none.ok());
  CHECK_FALSE(none->has_value());
  auto on = ReconConfig::from_config(
      parse("[DEFAULT]\nswift_dir = " + dir + "\ndevices = /srv/x\n[pipeline:main]\npipeline = "
            "healthcheck watch object-server\n[filter:healthcheck]\nuse = egg:swift#healthcheck\n"
            "[filter:watch]\nuse = egg:swift#recon\nrecon_cache_path = /var/cache/x\n"
            "[app:object-server]\nuse = egg:swift#object\n"),
      "2.30.1");
  REQUIRE(on.ok());
  REQUIRE(on->has_value());
  const ReconConfig& c = **on;
  CHECK(c.recon_cache_path == "/var/cache/x");
  CHECK(c.devices == "/srv/x");
  CHECK(c.ring_files == std::vector<std::string>{dir + "/account.ring.gz",
                                                 dir + "/container.ring.gz",
                                                 dir + "/object.ring.gz",
                                                 dir + "/object-2.ring.gz"});
}

TEST_CASE("recon answers from the recon cache, the devices and its paths as Swift's does") {
  Dir d;
  ReconConfig c;
  c.devices = (d.path / "srv").string();
  c.recon_cache_path = (d.path / "cache").string();
  c.swift_dir = d.path.string();
  c.version = "2.30.1";
  d.write("cache/object.recon",
          "{\"object_updater_sweep\": 1.5, \"replication_time\": 2, \"other\": 3}");
  d.write("cache/container.recon", "not json");
  d.write("srv/sdb1/quarantined/objects/h1/x", "");
  d.write("srv/sdb1/quarantined/objects-3/h2/x", "");
  d.write("srv/sdb1/quarantined/accounts/h3/x", "");
  d.write("srv/sdb1/quarantined/strange/h4/x", "");  // Swift answers 500; left out here
  d.write("srv/not-a-dir", "");
  Recon recon(c);

  CHECK(body_json(recon.answer("/recon/updater/object")) ==
        boost::json::parse("{\"object_updater_sweep\": 1.5}"));
  CHECK(body_json(recon.answer("/recon/replication")) ==
        boost::json::parse("{\"replication_time\": 2, \"replication_stats\": null, "
                           "\"replication_last\": null, \"object_replication_time\": null, "
                           "\"object_replication_last\": null}"));
  // An unreadable cache file gives nulls, not an error.
  CHECK(body_json(recon.answer("/recon/updater/container")) ==
        boost::json::parse("{\"container_updater_sweep\": null}"));
  CHECK(body_json(recon.answer("/recon/quarantined")) ==
        boost::json::parse("{\"objects\": 2, \"containers\": 0, \"accounts\": 1, \"policies\": "
                           "{\"0\": {\"objects\": 1}, \"3\": {\"objects\": 1}}}"));
  // sdb1 is no mount point and has no .ismount stub: unmounted.
  CHECK(body_json(recon.answer("/recon/unmounted")) ==
        boost::json::parse("[{\"device\": \"sdb1\", \"mounted\": false}]"));
  d.write("srv/sdb1/.ismount", "");
  CHECK(body_json(recon.answer("/recon/unmounted")) == boost::json::parse("[]"));
  CHECK(body_json(recon.answer("/recon/version")) ==
        boost::json::parse("{\"version\": \"2.30.1\"}"));
  CHECK(body_json(recon.answer("/recon/swiftconfmd5")) ==
        boost::json::parse("{\"/etc/swift/swift.conf\": null}"));
  for (const char* bad : {"/recon/", "/recon/nope", "/recon/updater/account",
                          "/recon/replication/object/x", "/recon/expirer/container"}) {
    CAPTURE(bad);
    http::Response r = recon.answer(bad);
    CHECK(r.status == 404);
    CHECK(r.body == std::string("Invalid path: ") + bad);
  }
}

}  // namespace
}  // namespace apus::common
