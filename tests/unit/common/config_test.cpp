#include "common/config/config.h"

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <doctest/doctest.h>

namespace apus::common {
namespace {

namespace fs = std::filesystem;

Config parse_ok(std::string_view text, std::string name = "test.conf") {
  Result<Config> c = Config::parse(text, std::move(name));
  REQUIRE_MESSAGE(c.ok(), c.status().to_string());
  return std::move(c).value();
}

// A fresh directory under the system temp dir, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    auto stamp = std::chrono::steady_clock::now().time_since_epoch().count();
    path_ = fs::temp_directory_path() /
            ("apus_config_test_" + std::to_string(stamp) + "_" + std::to_string(counter++));
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }
  void write(const fs::path& rel, std::string_view text) const {
    fs::create_directories((path_ / rel).parent_path());
    std::ofstream out(path_ / rel, std::ios::binary);
    out << text;
  }

 private:
  fs::path path_;
};

TEST_CASE("config: basic syntax, comments, both delimiters, case of keys") {
  Config c = parse_ok(
      "# leading comment\n"
      "; another comment\n"
      "[app:object-server]\n"
      "Bind_IP = 127.0.0.1  \n"
      "workers: 4\n"
      "   # an indented comment is still a comment\n"
      "log_name = obj # not an inline comment\n"
      "empty =\n"
      "url = http://x:8080/a=b\n");
  CHECK(c.has_section("app:object-server"));
  CHECK_FALSE(c.has_section("app:proxy-server"));
  CHECK_FALSE(c.has_section("DEFAULT"));
  CHECK(c.sections() == std::vector<std::string>{"app:object-server"});
  Section s = c.section("app:object-server");
  CHECK(s.name() == "app:object-server");
  CHECK(s.get_string("bind_ip") == "127.0.0.1");
  CHECK(s.get_string("BIND_IP") == "127.0.0.1");
  CHECK(s.get_string("workers") == "4");
  CHECK(s.get_string("log_name") == "obj # not an inline comment");
  CHECK(s.has("empty"));
  CHECK(s.get_string("empty", "dflt") == "");
  CHECK(s.get_string("url") == "http://x:8080/a=b");
  CHECK(s.get_string("missing", "dflt") == "dflt");
  CHECK_FALSE(s.get("missing").has_value());
}

TEST_CASE("config: the first '=' or ':' ends the key") {
  Config c = parse_ok("[s]\na:b = c\nx = y: z\n");
  Section s = c.section("s");
  CHECK(s.get_string("a") == "b = c");
  CHECK(s.get_string("x") == "y: z");
  CHECK_FALSE(s.has("a:b"));
}

TEST_CASE("config: continuation lines") {
  Config c = parse_ok(
      "[s]\n"
      "allowed = one,\n"
      "    two,\n"
      "  # comment inside the value is skipped\n"
      "\tthree\n"
      "\n"
      "next = 1\n"
      "tail = a\n"
      "   b\n"
      "\n"
      "\n");
  Section s = c.section("s");
  CHECK(s.get_string("allowed") == "one,\ntwo,\nthree");
  CHECK(s.get_list("allowed") == std::vector<std::string>{"one", "two", "three"});
  CHECK(s.get_string("next") == "1");
  CHECK(s.get_string("tail") == "a\nb");  // trailing blank lines are dropped
}

TEST_CASE("config: a blank line inside a value is kept when an indented line follows") {
  // ConfigParser's empty_lines_in_values: an indented line after a blank line still continues.
  Config c = parse_ok("[s]\na = 1\n\n  b = 2\n");
  CHECK(c.section("s").get_string("a") == "1\n\nb = 2");
  CHECK_FALSE(c.section("s").has("b"));
}

TEST_CASE("config: CRLF and CR line endings") {
  Config c = parse_ok("[s]\r\na = 1\r\nb = 2\rc = 3");
  Section s = c.section("s");
  CHECK(s.get_string("a") == "1");
  CHECK(s.get_string("b") == "2");
  CHECK(s.get_string("c") == "3");
}

TEST_CASE("config: syntax errors name the file and line") {
  SUBCASE("no section header") {
    Result<Config> c = Config::parse("a = 1\n", "x.conf");
    REQUIRE_FALSE(c.ok());
    CHECK(c.status().code() == Status::Code::kInvalidArgument);
    CHECK(c.status().message().find("x.conf:1") != std::string::npos);
  }
  SUBCASE("line without delimiter") {
    Result<Config> c = Config::parse("[s]\na = 1\njunk\n", "x.conf");
    REQUIRE_FALSE(c.ok());
    CHECK(c.status().message().find("x.conf:3") != std::string::npos);
    CHECK(c.status().message().find("junk") != std::string::npos);
  }
  SUBCASE("empty key") {
    Result<Config> c = Config::parse("[s]\n= 1\n", "x.conf");
    REQUIRE_FALSE(c.ok());
    CHECK(c.status().message().find("x.conf:2") != std::string::npos);
  }
  SUBCASE("duplicate option in one section of one file") {
    Result<Config> c = Config::parse("[s]\na = 1\nA = 2\n", "x.conf");
    REQUIRE_FALSE(c.ok());
    CHECK(c.status().message().find("x.conf:3") != std::string::npos);
    CHECK(c.status().message().find("duplicate option") != std::string::npos);
  }
  SUBCASE("duplicate section in one file") {
    Result<Config> c = Config::parse("[s]\na = 1\n[t]\n[s]\nb = 2\n", "x.conf");
    REQUIRE_FALSE(c.ok());
    CHECK(c.status().message().find("x.conf:4") != std::string::npos);
  }
}

TEST_CASE("config: DEFAULT is inherited by every section") {
  Config c = parse_ok(
      "[DEFAULT]\n"
      "devices = /srv/node\n"
      "mount_check = false\n"
      "[object-replicator]\n"
      "concurrency = 2\n");
  Section s = c.section("object-replicator");
  CHECK(s.get_string("devices") == "/srv/node");
  CHECK(s.get_string("concurrency") == "2");
  CHECK(s.items() == std::vector<std::pair<std::string, std::string>>{
                         {"concurrency", "2"}, {"devices", "/srv/node"}, {"mount_check", "false"}});
  // A missing section, and DEFAULT itself, give just the defaults.
  CHECK(c.section("nope").get_string("devices") == "/srv/node");
  CHECK_FALSE(c.section("DEFAULT").has("concurrency"));
  CHECK(c.section("DEFAULT").get_string("mount_check") == "false");
}

TEST_CASE("config: paste sections ignore a plain key that DEFAULT sets, `set` overrides") {
  Config c = parse_ok(
      "[DEFAULT]\n"
      "log_level = INFO\n"
      "workers = 1\n"
      "[app:object-server]\n"
      "log_level = DEBUG\n"
      "set workers = 8\n"
      "node_timeout = 5\n"
      "[filter:catch_errors]\n"
      "log_level = DEBUG\n"
      "[pipeline:main]\n"
      "workers = 3\n"
      "[object-replicator]\n"
      "log_level = DEBUG\n"
      "set node_timeout = 9\n"
      "[proxy-server:policy:1]\n"
      "log_level = WARNING\n");
  Section app = c.section("app:object-server");
  CHECK(app.get_string("log_level") == "INFO");  // the quirk
  CHECK(app.get_string("workers") == "8");       // set wins
  CHECK(app.get_string("node_timeout") == "5");  // not in DEFAULT: plain value counts
  CHECK(app.entry("log_level")->section == "DEFAULT");
  CHECK(c.section("filter:catch_errors").get_string("log_level") == "INFO");
  CHECK(c.section("pipeline:main").get_string("workers") == "1");
  // Non-paste sections: their own value wins; `set` works there too.
  Section repl = c.section("object-replicator");
  CHECK(repl.get_string("log_level") == "DEBUG");
  CHECK(repl.get_string("node_timeout") == "9");
  CHECK(c.section("proxy-server:policy:1").get_string("log_level") == "WARNING");
}

TEST_CASE("config: in a paste section a plain key beats `set` when DEFAULT lacks the key") {
  Config c = parse_ok("[app:x]\nset a = 1\na = 2\n[app:y]\nset b = 1\n");
  CHECK(c.section("app:x").get_string("a") == "2");
  CHECK(c.section("app:y").get_string("b") == "1");
  CHECK_FALSE(c.section("app:y").has("set b"));
}

TEST_CASE("config: config_true_value and strict get_bool") {
  for (const char* t : {"true", "TRUE", "1", "yes", "Yes", "on", "t", "y", "Y"}) {
    CAPTURE(t);
    CHECK(config_true_value(t));
    Config c = parse_ok(std::string("[s]\nflag = ") + t + "\n");
    Result<bool> b = c.section("s").get_bool("flag", false);
    REQUIRE(b.ok());
    CHECK(*b);
  }
  for (const char* f : {"false", "False", "0", "no", "NO", "off", "f", "n"}) {
    CAPTURE(f);
    CHECK_FALSE(config_true_value(f));
    Config c = parse_ok(std::string("[s]\nflag = ") + f + "\n");
    Result<bool> b = c.section("s").get_bool("flag", true);
    REQUIRE(b.ok());
    CHECK_FALSE(*b);
  }
  CHECK_FALSE(config_true_value("maybe"));
  CHECK_FALSE(config_true_value(""));
  CHECK_FALSE(config_true_value("2"));

  Config c = parse_ok("[app:object-server]\nmount_check = maybe\n", "object-server.conf");
  Section s = c.section("app:object-server");
  Result<bool> bad = s.get_bool("mount_check", true);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().code() == Status::Code::kInvalidArgument);
  CHECK(bad.status().message().starts_with(
      "object-server.conf [app:object-server] mount_check: \"maybe\" is not a boolean"));
  Result<bool> unset = s.get_bool("other", true);
  REQUIRE(unset.ok());
  CHECK(*unset);
}

TEST_CASE("config: get_int and get_double") {
  Config c = parse_ok(
      "[DEFAULT]\n"
      "workers = abc\n"
      "[app:object-server]\n"
      "a = 42\n"
      "b = -7\n"
      "c = +5\n"
      "big = 99999999999999999999\n"
      "f = 0.5\n"
      "g = 3\n"
      "h = 1e3\n"
      "bad = 1.5x\n"
      "half = 12 monkeys\n",
      "object-server.conf");
  Section s = c.section("app:object-server");
  CHECK(*s.get_int("a", 0) == 42);
  CHECK(*s.get_int("b", 0) == -7);
  CHECK(*s.get_int("c", 0) == 5);
  CHECK(*s.get_int("unset", 17) == 17);
  CHECK(*s.get_double("f", 0) == doctest::Approx(0.5));
  CHECK(*s.get_double("g", 0) == doctest::Approx(3.0));
  CHECK(*s.get_double("h", 0) == doctest::Approx(1000.0));
  CHECK(*s.get_double("unset", 2.5) == doctest::Approx(2.5));

  Result<int64_t> half = s.get_int("half", 0);
  REQUIRE_FALSE(half.ok());
  CHECK(half.status().message() ==
        "object-server.conf [app:object-server] half: \"12 monkeys\" is not an integer");
  CHECK_FALSE(s.get_int("f", 0).ok());
  Result<int64_t> big = s.get_int("big", 0);
  REQUIRE_FALSE(big.ok());
  CHECK(big.status().message().find("out of range") != std::string::npos);
  Result<double> bad = s.get_double("bad", 0);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message() ==
        "object-server.conf [app:object-server] bad: \"1.5x\" is not a number");
  // An inherited bad value names the section it was written in.
  Result<int64_t> workers = s.get_int("workers", 0);
  REQUIRE_FALSE(workers.ok());
  CHECK(workers.status().message() ==
        "object-server.conf [DEFAULT] workers: \"abc\" is not an integer");
  // Callers reuse the format for their own range checks.
  CHECK(s.invalid("b", "must not be negative").message() ==
        "object-server.conf [app:object-server] b: \"-7\" must not be negative");
}

TEST_CASE("config: list helpers") {
  Config c = parse_ok("[s]\nl = a, b ,,c,\nw =  x  y\tz \n");
  Section s = c.section("s");
  CHECK(s.get_list("l") == std::vector<std::string>{"a", "b", "c"});
  CHECK(s.get_words("w") == std::vector<std::string>{"x", "y", "z"});
  CHECK(s.get_list("unset", "p, q") == std::vector<std::string>{"p", "q"});
  CHECK(s.get_list("unset").empty());
  CHECK(list_from_csv(" , ").empty());
  CHECK(list_from_csv("\ta\v, b c ,\f") == std::vector<std::string>{"a", "b c"});
  CHECK(split_words("  ").empty());
  // any_csv_item: the same items, in place, until one is wanted.
  std::vector<std::string_view> seen;
  auto until = [&](std::string_view want) {
    seen.clear();
    return [&seen, want](std::string_view item) {
      seen.push_back(item);
      return item == want;
    };
  };
  CHECK(any_csv_item(" x-a , ,x-b,x-c ", until("x-b")));
  CHECK(seen == std::vector<std::string_view>{"x-a", "x-b"});
  CHECK_FALSE(any_csv_item(" x-a , ,x-b,x-c ", until("none")));
  CHECK(seen == std::vector<std::string_view>{"x-a", "x-b", "x-c"});
  CHECK_FALSE(any_csv_item(", ,", until("")));
  CHECK(seen.empty());
}

TEST_CASE("config: pipeline and entry points") {
  Config c = parse_ok(
      "[pipeline:main]\n"
      "pipeline = catch_errors  proxy-logging\n"
      "    proxy-server\n"
      "[filter:catch_errors]\n"
      "use = egg:swift#catch_errors\n"
      "[filter:proxy-logging]\n"
      "use = egg:swift#proxy_logging\n"
      "[app:proxy-server]\n"
      "use = egg:swift#proxy\n"
      "[filter:weird]\n"
      "use = egg:other#thing\n"
      "[filter:nouse]\n"
      "x = 1\n"
      "[pipeline:empty]\n"
      "pipeline =\n",
      "proxy-server.conf");
  Result<std::vector<std::string>> p = c.pipeline();
  REQUIRE(p.ok());
  CHECK(*p == std::vector<std::string>{"catch_errors", "proxy-logging", "proxy-server"});
  CHECK(*c.entry_point("catch_errors") == "catch_errors");
  CHECK(*c.entry_point("proxy-logging") == "proxy_logging");
  CHECK(*c.entry_point("proxy-server") == "proxy");

  Result<std::string> missing = c.entry_point("tempauth");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().code() == Status::Code::kInvalidArgument);
  CHECK(missing.status().message().find("proxy-server.conf") != std::string::npos);
  CHECK(missing.status().message().find("[filter:tempauth]") != std::string::npos);

  Result<std::string> weird = c.entry_point("weird");
  REQUIRE_FALSE(weird.ok());
  CHECK(weird.status().message().find("[filter:weird] use: \"egg:other#thing\"") !=
        std::string::npos);
  Result<std::string> nouse = c.entry_point("nouse");
  REQUIRE_FALSE(nouse.ok());
  CHECK(nouse.status().message().find("use") != std::string::npos);

  CHECK_FALSE(c.pipeline("other").ok());
  Result<std::vector<std::string>> empty = c.pipeline("empty");
  REQUIRE_FALSE(empty.ok());
  CHECK(empty.status().message().find("[pipeline:empty]") != std::string::npos);
}

TEST_CASE("config: load a file and a conf.d directory") {
  TempDir dir;
  dir.write("object-server.conf", "[DEFAULT]\nbind_port = 6200\n[app:object-server]\n");
  Result<Config> file = Config::load((dir.path() / "object-server.conf").string());
  REQUIRE_MESSAGE(file.ok(), file.status().to_string());
  CHECK(file->section("app:object-server").get_string("bind_port") == "6200");

  dir.write("proxy.conf.d/20_b.conf", "[s]\nb = from-20\nc = from-20\n");
  dir.write("proxy.conf.d/10_a.conf", "[DEFAULT]\nd = 1\n[s]\na = from-10\nb = from-10\n");
  dir.write("proxy.conf.d/30_c.conf", "[s]\nc = from-30\n[t]\nx = 1\n");
  dir.write("proxy.conf.d/.99_hidden.conf", "[s]\na = hidden\n");
  dir.write("proxy.conf.d/40_d.conf-disabled", "[s]\na = disabled\n");
  const std::string confd = (dir.path() / "proxy.conf.d").string();
  Result<Config> c = Config::load(confd);
  REQUIRE_MESSAGE(c.ok(), c.status().to_string());
  CHECK(c->source() == confd);
  Section s = c->section("s");
  CHECK(s.get_string("a") == "from-10");  // dot-file and non-.conf ignored
  CHECK(s.get_string("b") == "from-20");  // later file wins
  CHECK(s.get_string("c") == "from-30");
  CHECK(s.get_string("d") == "1");
  CHECK(s.entry("c")->file == (dir.path() / "proxy.conf.d" / "30_c.conf").string());
  CHECK(c->sections() == std::vector<std::string>{"s", "t"});

  // Errors in a conf.d name the file in it.
  dir.write("proxy.conf.d/50_bad.conf", "[s]\nnonsense\n");
  Result<Config> bad = Config::load(confd);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().find("50_bad.conf:2") != std::string::npos);
  // A key repeated in two files is fine; only duplicates within one file are errors.
  fs::remove(dir.path() / "proxy.conf.d" / "50_bad.conf");
  CHECK(Config::load(confd).ok());
}

TEST_CASE("config: unreadable paths") {
  TempDir dir;
  Result<Config> missing = Config::load((dir.path() / "nope.conf").string());
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().is_not_found());
  CHECK(missing.status().message().find("nope.conf") != std::string::npos);

  fs::create_directories(dir.path() / "empty.conf.d");
  dir.write("empty.conf.d/.hidden.conf", "[s]\n");
  Result<Config> empty = Config::load((dir.path() / "empty.conf.d").string());
  REQUIRE_FALSE(empty.ok());
  CHECK(empty.status().is_not_found());
}

}  // namespace
}  // namespace apus::common
