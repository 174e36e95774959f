// ObjectServer's handlers driven without sockets: a recording Exchange, a temp device tree and
// Swift's answers, seen side by side with Debian's swift-object-server 2.30.1, where a disk
// meets something other than a healthy object:
// - a name collision (another name's data under the object's hash) is 403 with swob's page on
//   every method (no body for HEAD), and nothing is written over it;
// - a file where the layout needs a directory is a 500, as Swift's OSError is (issue 12: it
//   was a 403, because the filesystem's Conflict and the collision shared one code).
#include "object-server/object_server.h"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>

#include "common/config/config.h"
#include "common/http/swob.h"
#include "common/io/fs.h"
#include "tests/support/temp_dir.h"

namespace fs = std::filesystem;
namespace net = boost::asio;
using apus::common::Result;
using apus::common::Status;
using apus::common::http::HeaderMap;
using apus::common::http::Request;
using apus::common::http::Response;
using apus::object::Location;
using apus::object::ObjectServer;
using apus::object::ObjectServerConfig;

namespace {

// Hands the handler a request and its body; keeps the one response it sends (a streamed one
// with its body gathered).
class RecordingExchange final : public apus::common::http::Exchange {
 public:
  RecordingExchange(Request req, std::string body) : req_(std::move(req)), body_(std::move(body)) {}
  const Request& request() const override { return req_; }
  net::awaitable<Result<size_t>> read_body(std::span<char> buf) override {
    size_t n = std::min(buf.size(), body_.size() - read_);
    std::copy_n(body_.data() + read_, n, buf.data());
    read_ += n;
    co_return n;
  }
  net::awaitable<Status> send_continue() override { co_return Status(); }
  net::awaitable<Status> write_body(std::string_view chunk) override {
    response_->body += chunk;
    co_return Status();
  }
  net::awaitable<Status> finish_response() override { co_return Status(); }
  bool response_started() const override { return response_.has_value(); }
  int response_status() const override { return response_ ? response_->status : 0; }

  std::optional<Response> response_;

 protected:
  net::awaitable<Status> do_respond(Response response) override {
    response_ = std::move(response);
    co_return Status();
  }
  net::awaitable<Status> do_start_response(int status, HeaderMap headers,
                                           std::optional<uint64_t>) override {
    response_ = Response{status, "", std::move(headers), ""};
    co_return Status();
  }

 private:
  Request req_;
  std::string body_;
  size_t read_ = 0;
};

// A server on devices sda1 and sdb1 in a temp dir, with a one-policy swift.conf.
struct Fixture {
  apus::test::TempDir dir{"apus_object_server_test"};
  std::unique_ptr<ObjectServer> server;

  Fixture() {
    fs::create_directories(dir.path("devices/sda1"));
    fs::create_directories(dir.path("devices/sdb1"));
    std::ofstream(dir.path("swift.conf"))
        << "[swift-hash]\nswift_hash_path_prefix = apus-test\nswift_hash_path_suffix = unit\n\n"
           "[storage-policy:0]\nname = gold\ndefault = yes\n";
    auto conf = apus::common::Config::parse(
        "[pipeline:main]\npipeline = object-server\n\n[app:object-server]\ndevices = " +
        dir.path("devices") + "\nmount_check = false\nfallocate_reserve = 0\n" +
        "fsync_on_close = false\nswift_dir = " + dir.root() + "\n");
    REQUIRE(conf.ok());
    auto config = ObjectServerConfig::from_config(*conf);
    REQUIRE(config.ok());
    server = std::make_unique<ObjectServer>(std::move(*config), apus::common::io::default_fs(),
                                            nullptr);
  }

  Response run(std::string method, std::string target, HeaderMap headers = {},
               std::string body = {}) {
    Request req;
    req.method = std::move(method);
    req.target = std::move(target);
    req.headers = std::move(headers);
    if (req.method == "PUT") {
      req.content_length = body.size();
      req.headers.set("Content-Length", std::to_string(body.size()));
    }
    RecordingExchange ex(std::move(req), std::move(body));
    net::io_context ioc;
    auto done = net::co_spawn(ioc, server->handle(ex), net::use_future);
    ioc.run();
    done.get();
    REQUIRE(ex.response_);
    return std::move(*ex.response_);
  }

  std::string hash_dir(const std::string& object) {
    Location loc{.device = "sda1", .partition = "3", .account = "a", .container = "c",
                 .object = object};
    auto hash = server->disk().object_hash(loc);
    REQUIRE(hash.ok());
    return server->disk().hash_dir(loc, *hash);
  }

  std::vector<std::string> files_in(const std::string& path) {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(path)) names.push_back(e.path().filename());
    std::sort(names.begin(), names.end());
    return names;
  }
};

HeaderMap headers(std::initializer_list<std::pair<const char*, const char*>> kv) {
  HeaderMap h;
  for (const auto& [k, v] : kv) h.set(k, v);
  return h;
}

}  // namespace

TEST_CASE_FIXTURE(Fixture, "object server: a name collision is refused with 403 on every method") {
  REQUIRE(run("PUT", "/sda1/3/a/c/o",
              headers({{"X-Timestamp", "1700000001.00000"}, {"Content-Type", "text/plain"}}),
              "body")
              .status == 201);
  // o2's hash directory gets o's data: what two names hashing the same would leave.
  std::string o2 = hash_dir("o2");
  fs::create_directories(fs::path(o2).parent_path());
  fs::rename(hash_dir("o"), o2);

  const std::string page = apus::common::http::swob_response(403).body;
  CHECK(page == "<html><h1>Forbidden</h1><p>Access was denied to this resource.</p></html>");
  struct Step {
    const char* method;
    HeaderMap headers;
    std::string body;
  };
  for (const Step& step : {
           Step{"GET", {}, ""},
           Step{"HEAD", {}, ""},
           Step{"POST", headers({{"X-Timestamp", "1700000002.00000"}}), ""},
           Step{"DELETE", headers({{"X-Timestamp", "1700000003.00000"}}), ""},
           Step{"PUT", headers({{"X-Timestamp", "1700000004.00000"}, {"Content-Type", "a/b"}}),
                "new"},
       }) {
    CAPTURE(step.method);
    Response r = run(step.method, "/sda1/3/a/c/o2", step.headers, step.body);
    CHECK(r.status == 403);
    CHECK(r.body == (std::string_view(step.method) == "HEAD" ? "" : page));
  }
  // Nothing was written over the other name's data (no .meta, .ts or new .data).
  CHECK(files_in(o2) == std::vector<std::string>{"1700000001.00000.data"});
}

TEST_CASE_FIXTURE(Fixture, "issue 12: a file where the layout needs a directory is a 500, not 403") {
  // sdb1/objects is a file: marking a suffix dirty cannot make the partition directory. Swift's
  // OSError there ends in its catch-all 500; the filesystem's Conflict (EEXIST, not a
  // directory) once shared a code with the name collision and became Swift's 403 for it.
  std::ofstream(dir.path("devices/sdb1/objects")) << "x";
  Response r = run("REPLICATE", "/sdb1/3/abc");
  CHECK(r.status == 500);
  CHECK(r.body == apus::common::http::swob_response(500).body);
  // The same file makes every object request a 500 as well (as in Swift).
  CHECK(run("GET", "/sdb1/3/a/c/o").status == 500);
  CHECK(run("DELETE", "/sdb1/3/a/c/o", headers({{"X-Timestamp", "1700000001.00000"}})).status ==
        500);
}
