// Regression tests for issue 12 (hardening) in the object server's disk layer:
// - an upload of unknown size keeps the free-space reserve checked as it grows;
// - a hash directory removed by a concurrent cleanup between commit's mkdir and rename does not
//   fail the write.
#include <doctest/doctest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <functional>
#include <string>

#include "common/io/fs.h"
#include "object-server/diskfile.h"

namespace fs = std::filesystem;
using apus::common::Result;
using apus::common::Status;
using apus::common::Timestamp;
using apus::common::io::DiskSpace;
using apus::common::io::FaultInjectingFs;
using apus::common::io::File;
using apus::common::io::FileStat;
using apus::object::DiskFileManager;
using apus::object::DiskFileOptions;
using apus::object::DiskObject;
using apus::object::Location;
using apus::object::Metadata;

namespace {

// Forwards to the real filesystem, with two seams the FaultInjectingFs does not have: the free
// space statvfs reports, and a hook run before each rename (to race a cleanup in).
class SeamFs final : public apus::common::io::Fs {
 public:
  std::atomic<uint64_t> free_bytes{uint64_t{1} << 40};
  std::function<void(const std::string& from, const std::string& to)> before_rename;

  Result<File> open_read(const std::string& p) override { return base_.open_read(p); }
  Result<File> open_append(const std::string& p) override { return base_.open_append(p); }
  Result<File> create_temp(const std::string& d) override { return base_.create_temp(d); }
  Result<File> create_unnamed(const std::string& d) override { return base_.create_unnamed(d); }
  Status write(File& f, std::string_view d) override { return base_.write(f, d); }
  Status pwrite(File& f, std::string_view d, uint64_t o) override { return base_.pwrite(f, d, o); }
  Result<size_t> pread(const File& f, uint64_t o, std::span<char> b) override {
    return base_.pread(f, o, b);
  }
  Status fsync(File& f) override { return base_.fsync(f); }
  Status fdatasync(File& f) override { return base_.fdatasync(f); }
  Status fallocate(File& f, uint64_t o, uint64_t n) override { return base_.fallocate(f, o, n); }
  Status ftruncate(File& f, uint64_t n) override { return base_.ftruncate(f, n); }
  Status drop_cache(const File& f, uint64_t o, uint64_t n) override {
    return base_.drop_cache(f, o, n);
  }
  Status start_writeback(const File& f, uint64_t o, uint64_t n) override {
    return base_.start_writeback(f, o, n);
  }
  Result<FileStat> fstat(const File& f) override { return base_.fstat(f); }
  Status set_xattr(File& f, const std::string& n, std::string_view v) override {
    return base_.set_xattr(f, n, v);
  }
  Result<std::string> get_xattr(const File& f, const std::string& n) override {
    return base_.get_xattr(f, n);
  }
  Status remove_xattr(File& f, const std::string& n) override { return base_.remove_xattr(f, n); }
  Result<std::vector<std::string>> list_xattrs(const File& f) override {
    return base_.list_xattrs(f);
  }
  Status rename(const std::string& from, const std::string& to) override {
    if (before_rename) before_rename(from, to);
    return base_.rename(from, to);
  }
  Status link(const std::string& a, const std::string& b) override { return base_.link(a, b); }
  Status link_file(File& f, const std::string& to) override {
    if (before_rename) before_rename(f.path(), to);  // the name an unnamed temp file gets
    return base_.link_file(f, to);
  }
  Status unlink(const std::string& p) override { return base_.unlink(p); }
  Status rmdir(const std::string& p) override { return base_.rmdir(p); }
  Result<int> mkdirs(const std::string& p) override { return base_.mkdirs(p); }
  Status fsync_dir(const std::string& p) override { return base_.fsync_dir(p); }
  Result<std::vector<std::string>> list_dir(const std::string& p) override {
    return base_.list_dir(p);
  }
  Result<FileStat> stat(const std::string& p) override { return base_.stat(p); }
  Result<DiskSpace> statvfs(const std::string&) override {
    return DiskSpace{.free_bytes = free_bytes.load(), .total_bytes = uint64_t{1} << 40};
  }
  Result<bool> is_mount(const std::string& p) override { return base_.is_mount(p); }

 private:
  apus::common::io::Fs& base_ = apus::common::io::default_fs();
};

struct TempDevices {
  fs::path root;
  TempDevices() {
    root = fs::temp_directory_path() /
           ("apus-issue12-" + std::to_string(::getpid()) + "-" + std::to_string(rand()));
    fs::create_directories(root / "sda1");
  }
  ~TempDevices() { fs::remove_all(root); }
  DiskFileOptions options(double reserve_bytes = 0) const {
    DiskFileOptions o;
    o.devices = root.string();
    o.mount_check = false;
    o.fsync_on_close = false;  // faster; durability is not what these tests are about
    o.fallocate_reserve.amount = reserve_bytes;
    o.fallocate_reserve.is_percent = false;
    return o;
  }
};

Location loc(std::string object = "o") {
  Location l;
  l.device = "sda1";
  l.partition = "7";
  l.account = "AUTH_test";
  l.container = "c";
  l.object = std::move(object);
  return l;
}

Metadata metadata_for(const Location& l, const Timestamp& t, uint64_t size) {
  return {{"X-Timestamp", t.internal()}, {"Content-Type", "a/b"},
          {"Content-Length", std::to_string(size)}, {"ETag", "e"}, {"name", l.name()}};
}

Timestamp recent(int seconds_ago) {
  return *Timestamp::from_seconds(static_cast<double>(Timestamp::now().ceil() - seconds_ago));
}

}  // namespace

TEST_CASE("issue 12: an upload of unknown size stops when it would eat the free-space reserve") {
  TempDevices dev;
  SeamFs seam;
  constexpr uint64_t kReserve = 100 << 20;
  DiskFileManager mgr(seam, dev.options(static_cast<double>(kReserve)), {"prefix", "suffix"});
  const std::string mib(1 << 20, 'x');
  seam.free_bytes = kReserve + (64 << 20);

  SUBCASE("chunked: refused within one check interval of the disk filling") {
    auto writer = mgr.create_writer(loc(), std::nullopt);
    REQUIRE(writer.ok());
    for (int i = 0; i < 3; ++i) REQUIRE((*writer)->write(mib).ok());
    // Meanwhile other writers filled the disk up to the reserve.
    seam.free_bytes = kReserve;
    Status s;
    uint64_t more = 0;
    while (s.ok() && more < (16 << 20)) {
      s = (*writer)->write(mib);
      if (s.ok()) more += mib.size();
    }
    CHECK(s.code() == Status::Code::kInsufficientStorage);
    CHECK(more <= 4 << 20);  // the cadence: every 4 MiB written
    writer->reset();
    CHECK(fs::is_empty(dev.root / "sda1" / "tmp"));
  }

  SUBCASE("a known size was checked and fallocated up front: no re-check") {
    auto writer = mgr.create_writer(loc(), 8 << 20);
    REQUIRE(writer.ok());
    seam.free_bytes = 0;
    for (int i = 0; i < 8; ++i) REQUIRE((*writer)->write(mib).ok());
  }

  SUBCASE("a chunked upload with room to spare is not refused") {
    auto writer = mgr.create_writer(loc(), std::nullopt);
    REQUIRE(writer.ok());
    for (int i = 0; i < 16; ++i) REQUIRE((*writer)->write(mib).ok());
    Timestamp t = recent(5);
    CHECK((*writer)->commit(metadata_for(loc(), t, 16 << 20), t).ok());
  }
}

TEST_CASE("issue 12: a cleanup removing the hash directory before the rename does not fail it") {
  TempDevices dev;
  SeamFs seam;
  DiskFileManager mgr(seam, dev.options(), {"prefix", "suffix"});
  Location l = loc();
  std::string dir = mgr.hash_dir(l, *mgr.object_hash(l));
  // Another request's cleanup() finds the fresh, empty hash directory and removes it, exactly
  // between this commit's mkdirs and its rename.
  int raced = 0;
  seam.before_rename = [&](const std::string&, const std::string& to) {
    if (to.rfind(dir + "/", 0) == 0 && raced < 2) {
      ++raced;
      fs::remove(dir);
    }
  };

  SUBCASE(".data") {
    Timestamp t = recent(10);
    auto writer = mgr.create_writer(l, 3);
    REQUIRE(writer.ok());
    REQUIRE((*writer)->write("abc").ok());
    Status s = (*writer)->commit(metadata_for(l, t, 3), t);
    CHECK_MESSAGE(s.ok(), s.to_string());
    CHECK(raced == 2);
    auto obj = mgr.open(l);
    REQUIRE(obj.ok());
    CHECK(obj->state == DiskObject::State::kExists);
  }
  SUBCASE(".ts") {
    Status s = mgr.write_tombstone(l, recent(10));
    CHECK_MESSAGE(s.ok(), s.to_string());
    auto obj = mgr.open(l);
    REQUIRE(obj.ok());
    CHECK(obj->state == DiskObject::State::kDeleted);
  }
}

TEST_CASE("issue 12: a rename that keeps finding no directory gives up after a few tries") {
  TempDevices dev;
  FaultInjectingFs faulty(apus::common::io::default_fs());
  DiskFileManager mgr(faulty, dev.options(), {"prefix", "suffix"});
  auto naming = FaultInjectingFs::Op::kLinkFile;  // an unnamed temp file gets its name
  SUBCASE("unnamed temp file") {}
  SUBCASE("named temp file (no O_TMPFILE)") {
    faulty.fail_next(FaultInjectingFs::Op::kCreateUnnamed, EOPNOTSUPP);
    naming = FaultInjectingFs::Op::kRename;
  }
  faulty.fail_next(naming, ENOENT, 1000);
  faulty.reset_counts();
  Status s = mgr.write_tombstone(loc(), recent(10));
  CHECK(s.is_not_found());
  CHECK(faulty.count(naming) > 1);
  CHECK(faulty.count(naming) <= 10);
  CHECK(fs::is_empty(dev.root / "sda1" / "tmp"));
}
