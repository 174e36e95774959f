// Container sync realms: the file as Swift reads it, the signature, and validate_sync_to().
// Expected values were computed by stock Swift 2.30.1 on the same inputs.
#include "common/container_sync_realms.h"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

namespace {

using apus::common::ContainerSyncRealms;
using apus::common::validate_sync_to;

constexpr const char* kRealms = R"([DEFAULT]
mtime_check_interval = 0
[US]
key = 9ff3b71c849749dbaec4ccdd3cbab62b
key2 = 1a0a5a0cbd66448084089304442d6776
cluster_dfw1 = http://dfw1.host/v1/
[uk]
key = e9569809dc8b4951accc1487aa788012
cluster_lon3 = http://lon3.host/v1/
)";

struct TempFile {
  std::string path;
  explicit TempFile(const std::string& text) {
    char name[] = "/tmp/apus-realms-XXXXXX";
    int fd = ::mkstemp(name);
    REQUIRE(fd >= 0);
    ::close(fd);
    path = name;
    write(text);
  }
  void write(const std::string& text) const { std::ofstream(path) << text; }
  ~TempFile() { std::remove(path.c_str()); }
};

}  // namespace

TEST_CASE("realms: sections, keys and clusters as Swift reads them") {
  TempFile file(kRealms);
  ContainerSyncRealms realms(file.path);
  auto all = realms.realms();
  REQUIRE(all->size() == 2);
  CHECK(all->count("US") == 1);
  CHECK(all->count("UK") == 1);
  CHECK(realms.key("us") == "9ff3b71c849749dbaec4ccdd3cbab62b");
  CHECK(realms.key2("US") == "1a0a5a0cbd66448084089304442d6776");
  CHECK(!realms.key2("uk"));
  CHECK(!realms.key("nowhere"));
  CHECK(realms.endpoint("us", "DFW1") == "http://dfw1.host/v1/");
  CHECK(!realms.endpoint("us", "lon3"));
}

TEST_CASE("realms: a changed file is read again, a broken one keeps the old realms") {
  TempFile file(kRealms);
  ContainerSyncRealms realms(file.path);
  CHECK(realms.key("us"));
  // mtime_check_interval = 0: every call looks at the file. The mtime must change for a reread.
  file.write("[DEFAULT]\nmtime_check_interval = 0\n[EU]\nkey = k\ncluster_a = http://a/v1\n");
  struct timespec times[2] = {{.tv_sec = 1000, .tv_nsec = 0}, {.tv_sec = 1000, .tv_nsec = 0}};
  ::utimensat(AT_FDCWD, file.path.c_str(), times, 0);
  CHECK(!realms.key("us"));
  CHECK(realms.key("eu") == "k");
  file.write("[EU\nbroken");
  struct timespec later[2] = {{.tv_sec = 2000, .tv_nsec = 0}, {.tv_sec = 2000, .tv_nsec = 0}};
  ::utimensat(AT_FDCWD, file.path.c_str(), later, 0);
  CHECK(realms.key("eu") == "k");
}

TEST_CASE("realms: a missing file is no realms") {
  ContainerSyncRealms realms("/nonexistent/container-sync-realms.conf");
  CHECK(realms.realms()->empty());
}

TEST_CASE("container_sync_sig matches Swift's get_sig") {
  CHECK(apus::common::container_sync_sig("PUT", "/v1/AUTH_a/c/o%20x", "1402464677.04188", "abcdef",
                                         "realmkey", "userkey") ==
        "5e20ec4acaba84c314b702071b4ad0411d8aa8cb");
}

TEST_CASE("validate_sync_to answers as Swift's") {
  TempFile file(kRealms);
  ContainerSyncRealms realms(file.path);
  const std::vector<std::string> hosts = {"127.0.0.1", "::1"};
  auto ok = [&](const std::string& value, const std::string& endpoint, const std::string& realm) {
    auto c = validate_sync_to(value, hosts, &realms);
    CAPTURE(value);
    REQUIRE(!c.error);
    REQUIRE(c.target);
    CHECK(c.target->endpoint == endpoint);
    CHECK(c.target->realm == realm);
    CHECK(c.target->realm_key == (realm.empty() ? "" : "9ff3b71c849749dbaec4ccdd3cbab62b"));
  };
  auto bad = [&](const std::string& value, const std::string& error) {
    auto c = validate_sync_to(value, hosts, &realms);
    CAPTURE(value);
    CHECK(c.error == error);
    CHECK(!c.target);
  };
  ok("//US/DFW1/AUTH_a/c", "http://dfw1.host/v1/AUTH_a/c", "US");
  ok("//us/dfw1/AUTH_a/c/", "http://dfw1.host/v1/AUTH_a/c", "US");
  ok("http://127.0.0.1/v1/a/c", "http://127.0.0.1/v1/a/c", "");
  ok("http://user@[::1]:80/a", "http://user@[::1]:80/a", "");
  bad("//US/X/a/c", "No cluster endpoint for 'US' 'X'");
  bad("//ZZ/X/a/c", "No realm key for 'ZZ'");
  bad("//US/a/c", "Invalid X-Container-Sync-To format '//US/a/c'");
  bad("http://127.0.0.1/", "Path required in X-Container-Sync-To");
  bad("http://h/x", "Invalid host 'h' in X-Container-Sync-To");
  bad("ftp://127.0.0.1/a",
      "Invalid scheme 'ftp' in X-Container-Sync-To, must be \"//\", \"http\", or \"https\".");
  bad("http://127.0.0.1/a?x=1", "Params, queries, and fragments not allowed in X-Container-Sync-To");
  bad("http://127.0.0.1/a;p", "Params, queries, and fragments not allowed in X-Container-Sync-To");
  auto none = validate_sync_to("", hosts, &realms);
  CHECK(!none.error);
  CHECK(!none.target);
  // Without realms a realm form is let through unresolved, as Swift's validate_sync_to does.
  auto unresolved = validate_sync_to("//US/DFW1/a/c", hosts, nullptr);
  CHECK(!unresolved.error);
  CHECK(!unresolved.target);
}
