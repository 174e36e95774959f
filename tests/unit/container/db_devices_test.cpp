// DbDevices (issue 12): no pool for a device name that is not a device, and a store open that
// holds up only its own device.
#include "container-server/db_server.h"

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>

#include "tests/support/temp_dir.h"

namespace apus::container {
namespace {

namespace net = boost::asio;
using namespace std::chrono_literals;

// Runs one coroutine to completion on a private io_context.
template <class Awaitable>
auto run(Awaitable a) {
  net::io_context ioc;
  auto f = net::co_spawn(ioc, std::move(a), net::use_future);
  ioc.run();
  return f.get();
}

struct DevicesFixture {
  DevicesFixture() {
    config.devices = dir.root();
    config.mount_check = false;
    config.threads_per_disk = 1;
    for (const char* d : {"sda", "slow", "fast"}) std::filesystem::create_directory(dir.path(d));
  }
  test::TempDir dir{"apus_db_devices"};
  DbServerConfig config;
  DbDevices devices{config, common::io::default_fs(), nullptr};
};

TEST_CASE_FIXTURE(DevicesFixture, "requests for devices that do not exist make no pools") {
  for (int i = 0; i < 200; ++i) {
    std::string name = "nodev" + std::to_string(i);
    CHECK(run(devices.pool_for(name)) == nullptr);
  }
  CHECK(devices.pool_count_for_test() == 0);
  common::io::BlockingPool* sda = run(devices.pool_for("sda"));
  REQUIRE(sda != nullptr);
  CHECK(devices.pool_count_for_test() == 1);
  CHECK(run(devices.pool_for("sda")) == sda);  // known now: no probe, the same pool
  CHECK(devices.pool_count_for_test() == 1);
}

TEST_CASE_FIXTURE(DevicesFixture,
                  "checked_store: an open store whose device check passed within a second") {
  CHECK(devices.checked_store("sda", false) == nullptr);
  CHECK(!devices.check_device("nodev").ok());
  CHECK(devices.checked_store("nodev", false) == nullptr);
  REQUIRE(devices.check_device("sda").ok());
  CHECK(devices.checked_store("sda", false) == nullptr);  // checked, but not opened yet
  auto store = devices.store("sda");
  REQUIRE(store.ok());
  CHECK(devices.checked_store("sda", false) == *store);
  CHECK(devices.checked_store("sda", true) == nullptr);  // free space not checked yet
  REQUIRE(devices.check_free_space("sda").ok());
  CHECK(devices.checked_store("sda", true) == *store);
  CHECK(devices.checked_store("fast", false) == nullptr);  // per device
  std::this_thread::sleep_for(DbDevices::kCheckedFor + 100ms);
  CHECK(devices.checked_store("sda", false) == nullptr);
}

TEST_CASE_FIXTURE(DevicesFixture, "a slow store open on one device does not hold up another") {
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<int> slow_opens{0};
  devices.set_store_opener_for_test([&](const std::string& path, StoreOptions options) {
    if (path.find("/slow/") != std::string::npos) {
      ++slow_opens;
      released.wait();  // a RocksDB recovery that takes its time
    }
    return ListingStore::open(path, options);
  });
  auto slow = std::async(std::launch::async, [&] { return devices.store("slow"); });
  while (slow_opens.load() == 0) std::this_thread::sleep_for(1ms);
  // Another device's store opens meanwhile (it waited for the slow one before issue 12).
  auto fast = std::async(std::launch::async, [&] { return devices.store("fast"); });
  bool fast_done = fast.wait_for(10s) == std::future_status::ready;
  CHECK(fast_done);
  // A second caller for the slow device waits for the same open instead of starting its own.
  auto slow2 = std::async(std::launch::async, [&] { return devices.store("slow"); });
  CHECK(slow2.wait_for(50ms) == std::future_status::timeout);
  release.set_value();
  auto a = slow.get();
  auto b = slow2.get();
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(*a == *b);
  CHECK(slow_opens.load() == 1);
  if (!fast_done) fast.wait();
  CHECK(fast.get().ok());
}

TEST_CASE_FIXTURE(DevicesFixture, "concurrent first calls open a device's store once") {
  std::atomic<int> opens{0};
  std::atomic<bool> fail_next{true};
  devices.set_store_opener_for_test([&](const std::string& path, StoreOptions options)
                                        -> common::Result<std::unique_ptr<ListingStore>> {
    ++opens;
    std::this_thread::sleep_for(20ms);
    if (fail_next.exchange(false)) return common::Status::io_error("injected open failure");
    return ListingStore::open(path, options);
  });
  // A failed open is not remembered: the next call tries again.
  CHECK_FALSE(devices.store("sda").ok());
  opens = 0;
  std::vector<std::future<common::Result<ListingStore*>>> callers;
  for (int i = 0; i < 8; ++i) {
    callers.push_back(std::async(std::launch::async, [&] { return devices.store("sda"); }));
  }
  std::vector<ListingStore*> got;
  for (auto& f : callers) {
    auto r = f.get();
    REQUIRE(r.ok());
    got.push_back(*r);
  }
  CHECK(opens.load() == 1);
  for (ListingStore* s : got) CHECK(s == got[0]);
}

}  // namespace
}  // namespace apus::container
