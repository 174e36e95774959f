// apus-object-expirer's configuration (object-server/expirer.h), read as Swift 2.30.1's
// ObjectExpirer reads it: the legacy object-expirer.conf always dequeues; an
// object-server.conf's [object-expirer] section only with dequeue_from_legacy; processes and
// process checked as Swift checks them.
#include "object-server/expirer.h"

#include <fstream>
#include <vector>

#include <doctest/doctest.h>

#include "tests/support/temp_dir.h"

namespace apus::object {
namespace {

struct ConfDir : apus::test::TempDir {
  ConfDir() : TempDir("apus_queue_conf") {
    write("swift.conf",
          "[swift-hash]\nswift_hash_path_prefix = a\nswift_hash_path_suffix = b\n");
  }
  void write(const std::string& name, const std::string& text) {
    std::ofstream(path(name)) << text;
  }
  common::Result<ExpirerConfig> load(const std::string& name, const std::string& text) {
    write(name, text);
    auto conf = common::Config::load(path(name));
    if (!conf.ok()) return conf.status();
    return ExpirerConfig::from_config(*conf, path(name));
  }
};

TEST_CASE_FIXTURE(ConfDir, "a legacy object-expirer.conf dequeues and holds the proxy's settings") {
  auto c = load("object-expirer.conf",
                "[DEFAULT]\nswift_dir = " + root() +
                    "\n[object-expirer]\ninterval = 30\nconcurrency = 4\nprocesses = 3\n"
                    "process = 2\nreclaim_age = 100\n\n[pipeline:main]\npipeline = proxy-server\n"
                    "[app:proxy-server]\nuse = egg:swift#proxy\nnode_timeout = 2\n");
  REQUIRE(c.ok());
  CHECK(c->dequeue_from_legacy);
  CHECK(c->swift_dir == root());
  CHECK(c->interval == 30);
  CHECK(c->concurrency == 4);
  CHECK(c->processes == 3);
  CHECK(c->process == 2);
  CHECK(c->reclaim_age == 100);
  CHECK(c->node_timeout == 2);
  CHECK(c->tasks_per_second == 50);
  CHECK(c->expiring_objects_account == ".expiring_objects");
}

TEST_CASE_FIXTURE(ConfDir, "Swift's defaults, and the queue account's name") {
  auto c = load("object-expirer.conf",
                "[DEFAULT]\nswift_dir = " + root() +
                    "\n[object-expirer]\nexpiring_objects_account_name = queue\n");
  REQUIRE(c.ok());
  CHECK(c->interval == 300);
  CHECK(c->concurrency == 1);
  CHECK(c->processes == 0);
  CHECK(c->reclaim_age == 604800);
  CHECK(c->request_tries == 3);
  CHECK(c->expiring_objects_account == ".queue");
}

TEST_CASE_FIXTURE(ConfDir, "an object-server.conf section dequeues only when told to") {
  const std::string base = "[DEFAULT]\nswift_dir = " + root() +
                           "\n[object-expirer]\ninternal_client_conf_path = " +
                           path("internal-client.conf") + "\n";
  write("internal-client.conf", "[DEFAULT]\nswift_dir = " + root() +
                                    "\n[app:proxy-server]\nuse = egg:swift#proxy\n"
                                    "conn_timeout = 0.25\n");
  auto off = load("object-server.conf", base);
  REQUIRE(off.ok());
  CHECK_FALSE(off->dequeue_from_legacy);
  CHECK(off->conn_timeout == 0.25);
  auto on = load("object-server.conf", base + "dequeue_from_legacy = true\n");
  REQUIRE(on.ok());
  CHECK(on->dequeue_from_legacy);
  // A named internal client config that is missing is an error, as Swift's InternalClient
  // fails to start on it.
  auto missing = load("object-server.conf", "[DEFAULT]\nswift_dir = " + root() +
                                                "\n[object-expirer]\ninternal_client_conf_path"
                                                " = " + path("nope.conf") + "\n");
  CHECK_FALSE(missing.ok());
}

TEST_CASE_FIXTURE(ConfDir, "bad concurrency and process values are refused as Swift refuses them") {
  const std::string head = "[DEFAULT]\nswift_dir = " + root() + "\n[object-expirer]\n";
  CHECK_FALSE(load("object-expirer.conf", head + "concurrency = 0\n").ok());
  CHECK_FALSE(load("object-expirer.conf", head + "processes = 2\nprocess = 2\n").ok());
  CHECK_FALSE(load("object-expirer.conf", head + "process = -1\n").ok());
  CHECK_FALSE(load("object-expirer.conf", head + "processes = -1\n").ok());
  auto c = load("object-expirer.conf", head + "processes = 4\nprocess = 1\n");
  REQUIRE(c.ok());
  // The command line overrides the file, and is checked the same way.
  CHECK(c->set_processes(2, 0).ok());
  CHECK(c->processes == 2);
  CHECK(c->process == 0);
  CHECK_FALSE(c->set_processes(std::nullopt, 5).ok());
  CHECK(c->set_processes(0, 5).ok());  // processes 0: one expirer does all, process unused
}

TEST_CASE("the expirer judges its object DELETEs as Swift's proxy does (best_response, 404 as 204)") {
  // Each vector's answer is what Swift 2.30.1's Controller.best_response() gives for it with
  // overrides={404: 204} and a quorum of 2.
  struct Case {
    std::vector<int> statuses;
    int expected;
  };
  for (const Case& c : std::vector<Case>{{{204, 204, 204}, 204},
                                         {{412, 412, 204}, 412},
                                         {{404, 404, 204}, 404},
                                         {{404, 503, 204}, 204},
                                         {{404, 503, 503}, 503},
                                         {{409, 404, 412}, 412},
                                         {{503, 503, 503}, 503},
                                         {{404, 404, 503}, 404},
                                         {{404, 204, 503}, 204}}) {
    CAPTURE(c.statuses);
    CHECK(best_status(c.statuses, 2, true) == c.expected);
  }
  // Without the override a lone 2xx among failures is no answer.
  CHECK(best_status({404, 503, 204}, 2, false) == 503);
  CHECK(best_status({}, 2, true) == 503);
}

}  // namespace
}  // namespace apus::object
