// ArchiveStream without sockets: archives written with libarchive in memory (plain, gzip,
// bzip2) are fed through a BodySource in small pieces, and the tests check the entries and
// their bytes, Python tarfile's error messages for bad input, names with ".." and huge names,
// many entries, the memory bound (what the stream holds at once), input failures, and teardown
// in the middle of an entry (close() and plain destruction).
#include "proxy/archive_stream.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include <archive.h>
#include <archive_entry.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <doctest/doctest.h>

namespace apus::proxy {
namespace {

namespace net = boost::asio;
using common::Result;
using common::Status;

template <class F>
void run(F f) {
  net::io_context ioc;
  auto done = net::co_spawn(ioc, f(), net::use_future);
  ioc.run();
  done.get();
}

// Bytes that do not compress.
std::string noise(size_t n, uint32_t seed) {
  std::string s(n, '\0');
  for (auto& c : s) {
    seed = seed * 1664525u + 1013904223u;
    c = static_cast<char>(seed >> 24);
  }
  return s;
}

using Attrs = std::vector<std::pair<std::string, std::string>>;

struct TestEntry {
  TestEntry(std::string n, std::string d, unsigned t = AE_IFREG, Attrs x = {},
            std::string link = {})
      : name(std::move(n)), data(std::move(d)), type(t), xattrs(std::move(x)),
        hardlink(std::move(link)) {}
  std::string name;
  std::string data;
  unsigned type;
  Attrs xattrs;
  std::string hardlink;
};

la_ssize_t append_out(struct archive*, void* out, const void* buf, size_t n) {
  static_cast<std::string*>(out)->append(static_cast<const char*>(buf), n);
  return static_cast<la_ssize_t>(n);
}

std::string make_archive(const std::vector<TestEntry>& entries,
                         ArchiveCompression c = ArchiveCompression::kNone,
                         int format = ARCHIVE_FORMAT_TAR_PAX_RESTRICTED) {
  std::string out;
  struct archive* a = archive_write_new();
  archive_write_set_format(a, format);
  if (c == ArchiveCompression::kGzip) archive_write_add_filter_gzip(a);
  if (c == ArchiveCompression::kBzip2) archive_write_add_filter_bzip2(a);
  REQUIRE(archive_write_open(a, &out, nullptr, append_out, nullptr) == ARCHIVE_OK);
  for (const auto& t : entries) {
    struct archive_entry* e = archive_entry_new();
    archive_entry_copy_pathname(e, t.name.c_str());
    archive_entry_set_filetype(e, t.type);
    archive_entry_set_perm(e, 0644);
    if (!t.hardlink.empty()) archive_entry_copy_hardlink(e, t.hardlink.c_str());
    if (t.type == AE_IFLNK) archive_entry_copy_symlink(e, "target");
    archive_entry_set_size(e, t.type == AE_IFREG ? static_cast<la_int64_t>(t.data.size()) : 0);
    for (const auto& [k, v] : t.xattrs)
      archive_entry_xattr_add_entry(e, k.c_str(), v.data(), v.size());
    REQUIRE(archive_write_header(a, e) >= ARCHIVE_WARN);
    if (t.type == AE_IFREG && !t.data.empty()) {
      REQUIRE(archive_write_data(a, t.data.data(), t.data.size()) ==
              static_cast<la_ssize_t>(t.data.size()));
    }
    archive_entry_free(e);
  }
  archive_write_close(a);
  archive_write_free(a);
  return out;
}

// Gives `data` in pieces of `piece` bytes, yielding to the loop between reads; fails with
// `fail` once `fail_after` bytes are given.
class MemorySource final : public BodySource {
 public:
  MemorySource(std::string data, size_t piece) : data_(std::move(data)), piece_(piece) {}
  std::optional<size_t> fail_after;
  Status fail = Status::timeout("client too slow");
  size_t given() const { return pos_; }

  net::awaitable<Result<size_t>> read(std::span<char> buf) override {
    co_await net::post(co_await net::this_coro::executor, net::use_awaitable);
    if (fail_after && pos_ >= *fail_after) co_return fail;
    size_t n = std::min({buf.size(), piece_, data_.size() - pos_});
    if (fail_after) n = std::min(n, *fail_after - pos_);
    std::memcpy(buf.data(), data_.data() + pos_, n);
    pos_ += n;
    co_return n;
  }

 private:
  std::string data_;
  size_t piece_;
  size_t pos_ = 0;
};

struct Read {
  ArchiveEntry entry;
  std::string data;
};

// Reads every entry and its data (all of it when `read_data`); the failure, if any.
net::awaitable<Status> read_all(ArchiveStream& s, std::vector<Read>& out, bool read_data = true) {
  while (true) {
    auto e = co_await s.next_entry();
    if (!e.ok()) co_return e.status();
    if (!e->has_value()) co_return Status();
    Read r{std::move(**e), {}};
    if (read_data && r.entry.regular) {
      char buf[3000];
      while (true) {
        auto n = co_await s.read(buf);
        if (!n.ok()) {
          out.push_back(std::move(r));
          co_return n.status();
        }
        if (*n == 0) break;
        r.data.append(buf, *n);
      }
    }
    out.push_back(std::move(r));
  }
}

std::vector<TestEntry> sample() {
  return {
      {"c/", "", AE_IFDIR},
      {"c/big", noise(300 * 1024, 1)},
      {"c/empty", ""},
      {"c/link", "", AE_IFLNK},
      {"c/hard", "", AE_IFREG, {}, "c/big"},
      {"d/small",
       "hello",
       AE_IFREG,
       {{"user.mime_type", "text/x-hello"}, {"user.meta.lunch", "burger"}}},
  };
}

void check_sample(const std::vector<Read>& got) {
  REQUIRE(got.size() == 6);
  CHECK(got[0].entry.path == "c/");
  CHECK_FALSE(got[0].entry.regular);
  CHECK(got[1].entry.path == "c/big");
  CHECK(got[1].entry.regular);
  CHECK(got[1].entry.size == 300 * 1024);
  CHECK(got[1].data == noise(300 * 1024, 1));
  CHECK(got[2].entry.regular);
  CHECK(got[2].data.empty());
  CHECK_FALSE(got[3].entry.regular);  // symlink
  CHECK_FALSE(got[4].entry.regular);  // hard link
  CHECK(got[5].data == "hello");
  // (libarchive's writer stores them last first; the order read is the archive's.)
  Attrs xattrs = got[5].entry.xattrs;
  std::sort(xattrs.begin(), xattrs.end());
  // (libarchive writes each as LIBARCHIVE.xattr and as SCHILY.xattr: both are read.)
  xattrs.erase(std::unique(xattrs.begin(), xattrs.end()), xattrs.end());
  CHECK(xattrs == Attrs{{"user.meta.lunch", "burger"}, {"user.mime_type", "text/x-hello"}});
}

TEST_CASE("archive stream reads tar, tar.gz and tar.bz2") {
  for (auto c :
       {ArchiveCompression::kNone, ArchiveCompression::kGzip, ArchiveCompression::kBzip2}) {
    CAPTURE(static_cast<int>(c));
    MemorySource src(make_archive(sample(), c), 777);
    std::vector<Read> got;
    run([&]() -> net::awaitable<void> {
      ArchiveStream s(c, src, {.chunk = 4096, .input_chunks = 2, .output_chunks = 2});
      CHECK((co_await read_all(s, got)).ok());
      auto again = co_await s.next_entry();  // the end stays the end
      CHECK((again.ok() && !again->has_value()));
      co_await s.close();
    });
    check_sample(got);
  }
}

TEST_CASE("archive stream skips data that is not read") {
  MemorySource src(make_archive(sample(), ArchiveCompression::kGzip), 65536);
  std::vector<Read> got;
  run([&]() -> net::awaitable<void> {
    ArchiveStream s(ArchiveCompression::kGzip, src);
    CHECK((co_await read_all(s, got, false)).ok());
    co_await s.close();
  });
  REQUIRE(got.size() == 6);
  CHECK(got[5].entry.path == "d/small");
}

TEST_CASE("archive stream reads gnu and ustar names, raw bytes kept") {
  std::string raw_name =
      "c/sub2\xde"
      "file1";
  std::string utf8_name = "c/\xe2\x98\x83";
  for (int format :
       {ARCHIVE_FORMAT_TAR_GNUTAR, ARCHIVE_FORMAT_TAR_USTAR, ARCHIVE_FORMAT_TAR_PAX_RESTRICTED}) {
    CAPTURE(format);
    MemorySource src(
        make_archive({{raw_name, "x"}, {utf8_name, "y"}}, ArchiveCompression::kNone, format), 512);
    std::vector<Read> got;
    run([&]() -> net::awaitable<void> {
      ArchiveStream s(ArchiveCompression::kNone, src);
      CHECK((co_await read_all(s, got)).ok());
      co_await s.close();
    });
    REQUIRE(got.size() == 2);
    CHECK(got[0].entry.path == raw_name);
    CHECK(got[1].entry.path == utf8_name);
  }
}

TEST_CASE("archive stream gives names with .. as they are (the caller decides)") {
  MemorySource src(make_archive({{"../../etc/passwd", "x"}, {"./c/../o", "y"}}), 10000);
  std::vector<Read> got;
  run([&]() -> net::awaitable<void> {
    ArchiveStream s(ArchiveCompression::kNone, src);
    CHECK((co_await read_all(s, got)).ok());
    co_await s.close();
  });
  REQUIRE(got.size() == 2);
  CHECK(got[0].entry.path == "../../etc/passwd");
  CHECK(got[1].entry.path == "./c/../o");
}

TEST_CASE("archive stream reads long names, and refuses a name beyond libarchive's cap") {
  std::string long_name = "c/" + std::string(100 * 1024, 'n');
  {
    MemorySource src(make_archive({{long_name, "x"}, {"c/after", "z"}}), 65536);
    std::vector<Read> got;
    run([&]() -> net::awaitable<void> {
      ArchiveStream s(ArchiveCompression::kNone, src);
      CHECK((co_await read_all(s, got)).ok());
      co_await s.close();
    });
    REQUIRE(got.size() == 2);
    CHECK(got[0].entry.path == long_name);
    CHECK(got[1].data == "z");
  }
  {
    // 3 MiB of name: libarchive caps a pax header; the stream fails or ends, and never holds
    // more than its bound of input while it tries.
    std::string huge = "c/" + std::string(3 * 1024 * 1024, 'h');
    MemorySource src(make_archive({{"c/first", "1"}, {huge, "x"}}), 65536);
    std::vector<Read> got;
    size_t peak = 0;
    run([&]() -> net::awaitable<void> {
      ArchiveStream s(ArchiveCompression::kNone, src);
      (void)co_await read_all(s, got);
      peak = s.peak_buffered();
      co_await s.close();
    });
    REQUIRE_FALSE(got.empty());
    CHECK(got[0].entry.path == "c/first");
    for (const auto& r : got) CHECK((r.entry.path != huge));  // (not printed: 3 MiB)
    CHECK(peak <= 5 * 64 * 1024);  // input 2 + the chunk being read + data 2
  }
}

TEST_CASE("archive stream: Python tarfile's messages for bad archives") {
  std::string tar = make_archive({{"c/a", std::string(1000, 'x')}, {"c/b", "y"}});
  struct Case {
    std::string name;
    std::string body;
    ArchiveCompression c;
    std::string message;
  };
  std::vector<Case> cases = {
      {"empty tar", "", ArchiveCompression::kNone, "empty file"},
      {"empty gz", "", ArchiveCompression::kGzip, "not a gzip file"},
      {"empty bz2", "", ArchiveCompression::kBzip2, "empty file"},
      {"garbage", std::string(1100, 'g'), ArchiveCompression::kNone, "invalid header"},
      {"short", "hello", ArchiveCompression::kNone, "truncated header"},
      {"tar as gz", tar, ArchiveCompression::kGzip, "not a gzip file"},
      {"tar as bz2", tar, ArchiveCompression::kBzip2, "invalid compressed data"},
  };
  for (const auto& k : cases) {
    CAPTURE(k.name);
    MemorySource src(k.body, 1000);
    Status got;
    run([&]() -> net::awaitable<void> {
      ArchiveStream s(k.c, src);
      auto e = co_await s.next_entry();
      got = e.status();
      auto again = co_await s.next_entry();
      CHECK(again.status().message() == got.message());
      co_await s.close();
    });
    CHECK(got.code() == Status::Code::kInvalidArgument);
    CHECK(got.message() == k.message);
  }
}

TEST_CASE("archive stream: truncated data is an error, a truncated later header the end") {
  std::string tar = make_archive({{"c/a", std::string(1000, 'x')}, {"c/b", "y"}});
  SUBCASE("cut in the data of the entry read") {
    MemorySource src(tar.substr(0, 700), 100);
    std::vector<Read> got;
    Status st;
    run([&]() -> net::awaitable<void> {
      ArchiveStream s(ArchiveCompression::kNone, src);
      st = co_await read_all(s, got);
      co_await s.close();
    });
    CHECK(st.message() == "unexpected end of data");
    REQUIRE(got.size() == 1);
    CHECK(got[0].data.size() < 1000);
  }
  SUBCASE("cut in the data of an entry skipped") {
    MemorySource src(tar.substr(0, 700), 100);
    std::vector<Read> got;
    Status st;
    run([&]() -> net::awaitable<void> {
      ArchiveStream s(ArchiveCompression::kNone, src);
      st = co_await read_all(s, got, false);
      co_await s.close();
    });
    CHECK(st.message() == "unexpected end of data");
  }
  SUBCASE("cut in the second header") {
    MemorySource src(tar.substr(0, 1536 + 100), 100);
    std::vector<Read> got;
    Status st;
    run([&]() -> net::awaitable<void> {
      ArchiveStream s(ArchiveCompression::kNone, src);
      st = co_await read_all(s, got);
      co_await s.close();
    });
    CHECK(st.ok());
    REQUIRE(got.size() == 1);
    CHECK(got[0].data == std::string(1000, 'x'));
  }
  SUBCASE("gzip stream cut short") {
    std::string gz = make_archive({{"c/a", noise(200000, 3)}}, ArchiveCompression::kGzip);
    MemorySource src(gz.substr(0, gz.size() / 2), 1000);
    std::vector<Read> got;
    Status st;
    run([&]() -> net::awaitable<void> {
      ArchiveStream s(ArchiveCompression::kGzip, src);
      st = co_await read_all(s, got);
      co_await s.close();
    });
    CHECK(st.message() == "unexpected end of data");
  }
}

TEST_CASE("archive stream: an archive bomb of many entries streams in bounded memory") {
  std::vector<TestEntry> many;
  for (int i = 0; i < 20000; ++i) many.push_back({"c/" + std::to_string(i), ""});
  std::string gz = make_archive(many, ArchiveCompression::kGzip);
  MemorySource src(gz, 65536);
  size_t count = 0, peak = 0;
  run([&]() -> net::awaitable<void> {
    ArchiveStream s(ArchiveCompression::kGzip, src, {.chunk = 16384});
    while (true) {
      auto e = co_await s.next_entry();
      REQUIRE(e.ok());
      if (!e->has_value()) break;
      ++count;
    }
    peak = s.peak_buffered();
    co_await s.close();
  });
  CHECK(count == 20000);
  CHECK(peak <= 3 * 16384);
}

TEST_CASE("archive stream holds at most input_chunks + output_chunks + 1 chunks") {
  std::string data = noise(8 * 1024 * 1024, 7);
  std::string tar = make_archive({{"c/big", data}});
  MemorySource src(tar, 65536);
  size_t peak = 0;
  std::string got;
  run([&]() -> net::awaitable<void> {
    ArchiveStream s(ArchiveCompression::kNone, src,
                    {.chunk = 65536, .input_chunks = 2, .output_chunks = 2});
    auto e = co_await s.next_entry();
    REQUIRE(e.ok());
    REQUIRE(e->has_value());
    char buf[10000];
    while (true) {
      // A slow reader: the reader thread must wait, not buffer.
      co_await net::post(co_await net::this_coro::executor, net::use_awaitable);
      auto n = co_await s.read(buf);
      REQUIRE(n.ok());
      if (*n == 0) break;
      got.append(buf, *n);
    }
    peak = s.peak_buffered();
    co_await s.close();
  });
  CHECK(got == data);
  CHECK(peak > 0);
  CHECK(peak <= 5 * 65536);
  MESSAGE("peak buffered for an 8 MiB entry: " << peak << " bytes");
}

TEST_CASE("archive stream: a failing input fails the stream with its status") {
  std::string tar = make_archive({{"c/a", noise(100000, 2)}, {"c/b", "y"}});
  MemorySource src(tar, 1000);
  src.fail_after = 50000;
  std::vector<Read> got;
  Status st;
  run([&]() -> net::awaitable<void> {
    ArchiveStream s(ArchiveCompression::kNone, src);
    st = co_await read_all(s, got);
    auto again = co_await s.next_entry();
    CHECK(again.status().code() == Status::Code::kTimeout);
    co_await s.close();
  });
  CHECK(st.code() == Status::Code::kTimeout);
}

TEST_CASE("archive stream: close and destruction mid-entry end the thread") {
  std::string tar = make_archive({{"c/a", noise(2 * 1024 * 1024, 5)}, {"c/b", "y"}});
  for (bool use_close : {true, false}) {
    CAPTURE(use_close);
    MemorySource src(tar, 4096);
    run([&]() -> net::awaitable<void> {
      auto s = std::make_unique<ArchiveStream>(ArchiveCompression::kNone, src);
      auto e = co_await s->next_entry();
      REQUIRE(e.ok());
      char buf[1000];
      auto n = co_await s->read(buf);
      CHECK(n.ok());
      if (use_close) {
        co_await s->close();
        auto after = co_await s->read(buf);
        CHECK(after.status().code() == Status::Code::kCancelled);
      }
      s.reset();
    });
    CHECK(src.given() < tar.size());  // nothing read after the end
  }
  // Closed before it started, and closed twice.
  MemorySource src(tar, 4096);
  run([&]() -> net::awaitable<void> {
    ArchiveStream s(ArchiveCompression::kNone, src);
    co_await s.close();
    co_await s.close();
  });
}

}  // namespace
}  // namespace apus::proxy
