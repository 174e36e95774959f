#include "common/io/fs.h"
#include "tests/support/temp_dir.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include <doctest/doctest.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/xattr.h>
#include <unistd.h>

// Test-only: checks a Status is OK and prints it when it is not.
#define APUS_CHECK_OK(expr)                           \
  do {                                                \
    const ::apus::common::Status apus_s_ = (expr);    \
    CHECK_MESSAGE(apus_s_.ok(), apus_s_.to_string()); \
  } while (0)
#define APUS_REQUIRE_OK(expr)                           \
  do {                                                  \
    const ::apus::common::Status apus_s_ = (expr);      \
    REQUIRE_MESSAGE(apus_s_.ok(), apus_s_.to_string()); \
  } while (0)

namespace apus::common::io {
namespace {

using Code = Status::Code;
using Op = FaultInjectingFs::Op;
using namespace std::chrono_literals;

// The shared temp dir fixture, with the Fs under test at hand.
class TempDir : public apus::test::TempDir {
 public:
  TempDir() : apus::test::TempDir("apus_fs_test") {}

 protected:
  Fs& fs_ = default_fs();
};

// Reads and writes files without going through Fs, to check it independently.
std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void spit(const std::string& path, std::string_view data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
}

std::vector<std::string> sorted(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  return v;
}

bool contains(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos;
}

File make_temp(Fs& fs, const std::string& dir) {
  Result<File> f = fs.create_temp(dir);
  REQUIRE_MESSAGE(f.ok(), f.status().to_string());
  return std::move(f).value();
}

// True unless the filesystem of dir rejects user xattrs outright (ENOTSUP), e.g. some tmpfs.
bool user_xattrs_supported(const std::string& dir) {
  const std::string probe = dir + "/xattr_probe";
  const int fd = ::open(probe.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
  REQUIRE(fd >= 0);
  const int r = ::fsetxattr(fd, "user.apus.probe", "1", 1, 0);
  const int err = errno;
  ::close(fd);
  ::unlink(probe.c_str());
  return r == 0 || (err != ENOTSUP && err != EOPNOTSUPP);
}

TEST_CASE("Fs: from_errno maps errno to Swift-semantic codes") {
  CHECK(from_errno(ENOENT, "open /x").code() == Code::kNotFound);
  CHECK(from_errno(ENODATA, "getxattr user.a /x").code() == Code::kNotFound);
  CHECK(from_errno(ENOSPC, "write /x").code() == Code::kInsufficientStorage);
  CHECK(from_errno(EDQUOT, "write /x").code() == Code::kInsufficientStorage);
  CHECK(from_errno(EEXIST, "mkdir /x").code() == Code::kConflict);
  CHECK(from_errno(ENOTEMPTY, "rmdir /x").code() == Code::kConflict);
  CHECK(from_errno(EIO, "read /x").code() == Code::kIOError);
  CHECK(from_errno(EACCES, "open /x").code() == Code::kIOError);
  CHECK(from_errno(0, "odd").code() == Code::kIOError);

  const Status s = from_errno(EIO, "fsync /srv/node/sda/objects/1/abc/f.data");
  CHECK(contains(s.message(), "fsync /srv/node/sda/objects/1/abc/f.data"));
  CHECK(contains(s.message(), std::system_category().message(EIO)));
}

TEST_CASE_FIXTURE(TempDir, "Fs: write_file_atomic and read_file roundtrip") {
  const std::string p = path("hashes.pkl");
  APUS_REQUIRE_OK(fs_.write_file_atomic(p, "hello"));
  Result<std::string> r = fs_.read_file(p);
  REQUIRE(r.ok());
  CHECK(*r == "hello");

  // Replaces the old content (larger than one read chunk), and leaves no temp file behind.
  std::string big(200'000, 'x');
  big[123'456] = '\0';
  APUS_REQUIRE_OK(fs_.write_file_atomic(p, big));
  CHECK(slurp(p) == big);
  r = fs_.read_file(p);
  REQUIRE(r.ok());
  CHECK(*r == big);
  Result<std::vector<std::string>> names = fs_.list_dir(root_);
  REQUIRE(names.ok());
  CHECK(*names == std::vector<std::string>{"hashes.pkl"});

  // The size cap: exactly max_bytes is fine, one more is Corruption.
  CHECK(fs_.read_file(p, big.size()).ok());
  CHECK(fs_.read_file(p, big.size() - 1).status().code() == Code::kCorruption);

  APUS_REQUIRE_OK(fs_.write_file_atomic(p, ""));
  r = fs_.read_file(p, 0);
  REQUIRE(r.ok());
  CHECK(r->empty());

  CHECK(fs_.read_file(path("missing")).status().code() == Code::kNotFound);
}

TEST_CASE_FIXTURE(TempDir, "Fs: write_file_atomic through a tmp dir creates the target dirs") {
  REQUIRE(fs_.mkdirs(path("tmp")).ok());
  const std::string p = path("async_pending/abc/0123abc-1700000000.00000");
  APUS_REQUIRE_OK(fs_.write_file_atomic(p, "pending", path("tmp")));
  CHECK(slurp(p) == "pending");
  Result<std::vector<std::string>> tmp_names = fs_.list_dir(path("tmp"));
  REQUIRE(tmp_names.ok());
  CHECK(tmp_names->empty());

  // The temp dir must exist: the caller owns it, as Swift's <dev>/tmp.
  CHECK(fs_.write_file_atomic(p, "x", path("no_tmp")).code() == Code::kNotFound);
  CHECK(slurp(p) == "pending");
}

TEST_CASE_FIXTURE(TempDir, "Fs: create_temp, write, pread, truncate and rename") {
  File f = make_temp(fs_, root_);
  CHECK(f.is_open());
  const std::filesystem::path tmp_path(f.path());
  CHECK(tmp_path.parent_path() == std::filesystem::path(root_));
  CHECK(tmp_path.filename().string().starts_with("tmp"));

  APUS_REQUIRE_OK(fs_.write(f, "hello "));
  APUS_REQUIRE_OK(fs_.write(f, "world"));
  APUS_REQUIRE_OK(fs_.pwrite(f, "W", 6));
  APUS_CHECK_OK(fs_.fdatasync(f));
  APUS_CHECK_OK(fs_.start_writeback(f, 0, 11));
  // Reserving does not change the size (FALLOC_FL_KEEP_SIZE).
  APUS_CHECK_OK(fs_.fallocate(f, 0, 1 << 20));
  APUS_CHECK_OK(fs_.fallocate(f, 0, 0));
  Result<FileStat> st = fs_.fstat(f);
  REQUIRE(st.ok());
  CHECK(st->exists);
  CHECK_FALSE(st->is_dir);
  CHECK(st->size == 11);

  char buf[32];
  Result<std::size_t> n = fs_.pread(f, 0, buf);
  REQUIRE(n.ok());
  CHECK(std::string(buf, *n) == "hello World");
  n = fs_.pread(f, 6, std::span<char>(buf, 3));
  REQUIRE(n.ok());
  CHECK(std::string(buf, *n) == "Wor");
  n = fs_.pread(f, 100, buf);
  REQUIRE(n.ok());
  CHECK(*n == 0);

  APUS_CHECK_OK(fs_.fsync(f));
  APUS_CHECK_OK(fs_.ftruncate(f, 5));
  APUS_CHECK_OK(fs_.drop_cache(f, 0, 0));
  st = fs_.fstat(f);
  REQUIRE(st.ok());
  CHECK(st->size == 5);

  const std::string dst = path("1700000000.00000.data");
  APUS_REQUIRE_OK(fs_.rename(f.path(), dst));
  APUS_CHECK_OK(fs_.fsync_dir(root_));
  Result<FileStat> old = fs_.stat(f.path());
  REQUIRE(old.ok());
  CHECK_FALSE(old->exists);
  CHECK(slurp(dst) == "hello");

  APUS_CHECK_OK(f.close());
  CHECK_FALSE(f.is_open());
  APUS_CHECK_OK(f.close());  // closing twice is harmless

  CHECK(fs_.create_temp(path("missing")).status().code() == Code::kNotFound);
  CHECK(fs_.open_read(path("missing")).status().code() == Code::kNotFound);
  CHECK(fs_.rename(path("missing"), dst).code() == Code::kNotFound);
  CHECK(fs_.fsync_dir(path("missing")).code() == Code::kNotFound);
  APUS_CHECK_OK(fs_.unlink(dst));
  const Status again = fs_.unlink(dst);
  CHECK(again.code() == Code::kNotFound);
  CHECK(contains(again.message(), dst));
}

TEST_CASE_FIXTURE(TempDir, "Fs: an unnamed file leaves nothing until link_file names it") {
  Result<File> made = fs_.create_unnamed(root_);
  REQUIRE(made.ok());
  REQUIRE(made->is_open());  // the test directory's filesystem has O_TMPFILE (ext4, tmpfs)
  File f = std::move(*made);
  CHECK(f.unnamed());
  CHECK(f.path() == root_);
  APUS_REQUIRE_OK(fs_.write(f, "hello"));
  APUS_REQUIRE_OK(fs_.set_xattr(f, "user.swift.metadata", "m"));
  APUS_CHECK_OK(fs_.fsync(f));
  CHECK(std::filesystem::is_empty(root_));  // written, xattrs set, still no name anywhere

  const std::string dst = path("1700000000.00000.data");
  APUS_REQUIRE_OK(fs_.link_file(f, dst));
  CHECK(slurp(dst) == "hello");
  // linkat never replaces, unlike rename; a missing directory is NotFound, as for rename.
  CHECK(fs_.link_file(f, dst).code() == Code::kConflict);
  CHECK(fs_.link_file(f, path("missing/x.data")).code() == Code::kNotFound);
  APUS_CHECK_OK(f.close());
  CHECK(slurp(dst) == "hello");  // the name outlives the descriptor

  // One closed before it was named is gone without a trace.
  made = fs_.create_unnamed(root_);
  REQUIRE(made.ok());
  APUS_REQUIRE_OK(fs_.write(*made, "lost"));
  APUS_CHECK_OK(made->close());
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(root_)) {
    names.push_back(e.path().filename().string());
  }
  CHECK(names == std::vector<std::string>{"1700000000.00000.data"});
  CHECK(fs_.create_unnamed(path("missing")).status().code() == Code::kNotFound);

  // A file moved keeps its kind.
  File moved = std::move(f);
  CHECK(moved.unnamed());
}

TEST_CASE_FIXTURE(TempDir,
                  "FaultInjectingFs: an injected EOPNOTSUPP is a filesystem without O_TMPFILE") {
  FaultInjectingFs ffs(fs_);
  ffs.fail_next(FaultInjectingFs::Op::kCreateUnnamed, EOPNOTSUPP);
  Result<File> none = ffs.create_unnamed(root_);
  REQUIRE(none.ok());
  CHECK_FALSE(none->is_open());  // "not here": the caller makes a named temp file instead
  ffs.fail_next(FaultInjectingFs::Op::kCreateUnnamed, ENOSPC);
  CHECK(ffs.create_unnamed(root_).status().code() == Code::kInsufficientStorage);
  Result<File> made = ffs.create_unnamed(root_);
  REQUIRE(made.ok());
  CHECK(made->is_open());
  ffs.fail_next(FaultInjectingFs::Op::kLinkFile, EIO);
  CHECK(ffs.link_file(*made, path("a.data")).code() == Code::kIOError);
  APUS_CHECK_OK(ffs.link_file(*made, path("a.data")));
  CHECK(ffs.count(FaultInjectingFs::Op::kCreateUnnamed) == 3);
  CHECK(ffs.count(FaultInjectingFs::Op::kLinkFile) == 2);
}

TEST_CASE_FIXTURE(TempDir, "Fs: remove_older_than removes old files only, not directories") {
  CHECK(fs_.remove_older_than(path("missing"), std::chrono::seconds(60)) == 0);
  std::filesystem::create_directories(path("dir"));
  for (const char* name : {"old", "new"}) std::ofstream(path(name)) << "x";
  const auto long_ago = std::filesystem::file_time_type::clock::now() - std::chrono::hours(2);
  std::filesystem::last_write_time(path("old"), long_ago);
  std::filesystem::last_write_time(path("dir"), long_ago);
  CHECK(fs_.remove_older_than(root_, std::chrono::hours(1)) == 1);
  CHECK_FALSE(std::filesystem::exists(path("old")));
  CHECK(std::filesystem::exists(path("new")));
  CHECK(std::filesystem::exists(path("dir")));
}

TEST_CASE_FIXTURE(TempDir, "Fs: open_read and open_append") {
  const std::string p = path("hashes.invalid");
  {
    Result<File> f = fs_.open_append(p);
    REQUIRE(f.ok());
    APUS_CHECK_OK(fs_.write(*f, "abc\n"));
  }
  {
    Result<File> f = fs_.open_append(p);
    REQUIRE(f.ok());
    APUS_CHECK_OK(fs_.write(*f, "def\n"));
  }
  Result<File> f = fs_.open_read(p);
  REQUIRE(f.ok());
  char buf[16];
  Result<std::size_t> n = fs_.pread(*f, 0, buf);
  REQUIRE(n.ok());
  CHECK(std::string(buf, *n) == "abc\ndef\n");
  // Read-only: writing fails with an IOError (EBADF) rather than crashing.
  CHECK(fs_.write(*f, "x").code() == Code::kIOError);
}

TEST_CASE_FIXTURE(TempDir, "Fs: File is move-only and closes its descriptor") {
  File f = make_temp(fs_, root_);
  const int fd = f.fd();
  File g(std::move(f));
  CHECK_FALSE(f.is_open());  // NOLINT(bugprone-use-after-move): checking the moved-from state
  CHECK(g.fd() == fd);
  File h;
  CHECK_FALSE(h.is_open());
  h = std::move(g);
  CHECK(h.fd() == fd);
  CHECK(::fcntl(fd, F_GETFD) != -1);
  h = File();
  CHECK(::fcntl(fd, F_GETFD) == -1);
}

TEST_CASE_FIXTURE(TempDir, "Fs: mkdirs counts what it creates; rmdir and unlink") {
  Result<int> n = fs_.mkdirs(path("objects/1/abc"));
  REQUIRE(n.ok());
  CHECK(*n == 3);
  n = fs_.mkdirs(path("objects/1/abc"));
  REQUIRE(n.ok());
  CHECK(*n == 0);
  n = fs_.mkdirs(path("objects/1/def/"));
  REQUIRE(n.ok());
  CHECK(*n == 1);
  Result<FileStat> st = fs_.stat(path("objects/1/def"));
  REQUIRE(st.ok());
  CHECK(st->is_dir);

  spit(path("file"), "x");
  CHECK(fs_.mkdirs(path("file")).status().code() == Code::kConflict);
  CHECK(fs_.mkdirs(path("file/sub")).status().code() == Code::kConflict);

  CHECK(fs_.rmdir(path("objects/1")).code() == Code::kConflict);  // not empty
  APUS_CHECK_OK(fs_.rmdir(path("objects/1/def")));
  CHECK(fs_.rmdir(path("objects/1/def")).code() == Code::kNotFound);
}

TEST_CASE_FIXTURE(TempDir, "Fs: durable_rename creates the directories on the way") {
  spit(path("src"), "data");
  APUS_REQUIRE_OK(fs_.durable_rename(path("src"), path("objects/7/abc/hash/1.data")));
  CHECK(slurp(path("objects/7/abc/hash/1.data")) == "data");
  CHECK(fs_.durable_rename(path("src"), path("x")).code() == Code::kNotFound);
}

TEST_CASE_FIXTURE(TempDir, "Fs: list_dir names entries without . and ..") {
  REQUIRE(fs_.mkdirs(path("d/sub")).ok());
  spit(path("d/one"), "1");
  spit(path("d/.hidden"), "");
  Result<std::vector<std::string>> names = fs_.list_dir(path("d"));
  REQUIRE(names.ok());
  CHECK(sorted(*names) == std::vector<std::string>{".hidden", "one", "sub"});

  names = fs_.list_dir(path("d/sub"));
  REQUIRE(names.ok());
  CHECK(names->empty());

  CHECK(fs_.list_dir(path("missing")).status().code() == Code::kNotFound);
  CHECK(fs_.list_dir(path("d/one")).status().code() == Code::kIOError);  // ENOTDIR

  // More names than one read of the directory holds (a partition's suffix directory).
  REQUIRE(fs_.mkdirs(path("many")).ok());
  std::vector<std::string> want;
  for (int i = 0; i < 1500; ++i) {
    want.push_back("a-rather-long-file-name-to-fill-the-buffer-" + std::to_string(i) + ".data");
    spit(path("many/" + want.back()), "");
  }
  names = fs_.list_dir(path("many"));
  REQUIRE(names.ok());
  CHECK(sorted(*names) == sorted(want));
}

TEST_CASE_FIXTURE(TempDir, "Fs: stat and statvfs") {
  spit(path("f"), "12345");
  Result<FileStat> st = fs_.stat(path("f"));
  REQUIRE(st.ok());
  CHECK(st->exists);
  CHECK_FALSE(st->is_dir);
  CHECK(st->size == 5);
  const std::int64_t now_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                  std::chrono::system_clock::now().time_since_epoch())
                                  .count();
  CHECK(std::abs(now_ns - st->mtime_ns) < std::int64_t{60} * 1'000'000'000);

  st = fs_.stat(root_);
  REQUIRE(st.ok());
  CHECK(st->exists);
  CHECK(st->is_dir);

  for (const char* missing : {"missing", "missing/deeper", "f/deeper"}) {
    CAPTURE(missing);
    st = fs_.stat(path(missing));
    REQUIRE(st.ok());
    CHECK_FALSE(st->exists);
  }

  Result<DiskSpace> space = fs_.statvfs(root_);
  REQUIRE(space.ok());
  CHECK(space->total_bytes > 0);
  CHECK(space->free_bytes <= space->total_bytes);
  CHECK(fs_.statvfs(path("missing")).status().code() == Code::kNotFound);
}

TEST_CASE_FIXTURE(TempDir, "Fs: is_mount follows Swift's ismount") {
  Result<bool> m = fs_.is_mount("/");
  REQUIRE(m.ok());
  CHECK(*m);
  m = fs_.is_mount(root_);
  REQUIRE(m.ok());
  CHECK_FALSE(*m);
  m = fs_.is_mount(path("missing"));
  REQUIRE(m.ok());
  CHECK_FALSE(*m);

  // The operator's stub file marks a plain directory as a device.
  REQUIRE(fs_.mkdirs(path("sda")).ok());
  spit(path("sda/.ismount"), "");
  m = fs_.is_mount(path("sda"));
  REQUIRE(m.ok());
  CHECK(*m);
  m = fs_.is_mount(path("sda/"));
  REQUIRE(m.ok());
  CHECK(*m);

  // A symlink is a mount point only with the stub.
  REQUIRE(fs_.mkdirs(path("plain")).ok());
  std::filesystem::create_directory_symlink(path("plain"), path("link_plain"));
  std::filesystem::create_directory_symlink(path("sda"), path("link_sda"));
  m = fs_.is_mount(path("link_plain"));
  REQUIRE(m.ok());
  CHECK_FALSE(*m);
  m = fs_.is_mount(path("link_sda"));
  REQUIRE(m.ok());
  CHECK(*m);
}

TEST_CASE_FIXTURE(TempDir, "Fs: xattrs set, get, list and remove") {
  if (!user_xattrs_supported(root_)) {
    MESSAGE("skipped: the filesystem of " << root_ << " does not support user xattrs");
    return;
  }
  File f = make_temp(fs_, root_);
  const std::string pickle("\x80\x02}q\x00(U\x04name", 13);  // binary, with a NUL
  APUS_REQUIRE_OK(fs_.set_xattr(f, "user.swift.metadata", pickle));
  APUS_REQUIRE_OK(fs_.set_xattr(f, "user.swift.metadata_checksum", "0123abcd"));
  Result<std::string> v = fs_.get_xattr(f, "user.swift.metadata");
  REQUIRE(v.ok());
  CHECK(*v == pickle);

  Result<std::vector<std::string>> names = fs_.list_xattrs(f);
  REQUIRE(names.ok());
  CHECK(sorted(*names) ==
        std::vector<std::string>{"user.swift.metadata", "user.swift.metadata_checksum"});

  // Overwrite with a shorter value, and an empty one.
  APUS_REQUIRE_OK(fs_.set_xattr(f, "user.swift.metadata", "short"));
  v = fs_.get_xattr(f, "user.swift.metadata");
  REQUIRE(v.ok());
  CHECK(*v == "short");
  APUS_REQUIRE_OK(fs_.set_xattr(f, "user.swift.metadata1", ""));
  v = fs_.get_xattr(f, "user.swift.metadata1");
  REQUIRE(v.ok());
  CHECK(v->empty());
  // Longer than the first read's buffer: asked for its size, then read.
  std::string long_value(3000, 'm');
  long_value[1234] = '\0';
  APUS_REQUIRE_OK(fs_.set_xattr(f, "user.swift.metadata2", long_value));
  v = fs_.get_xattr(f, "user.swift.metadata2");
  REQUIRE(v.ok());
  CHECK(*v == long_value);
  APUS_REQUIRE_OK(fs_.remove_xattr(f, "user.swift.metadata2"));

  // Seen through another descriptor of the same file.
  Result<File> reader = fs_.open_read(f.path());
  REQUIRE(reader.ok());
  v = fs_.get_xattr(*reader, "user.swift.metadata_checksum");
  REQUIRE(v.ok());
  CHECK(*v == "0123abcd");

  const Status missing = fs_.get_xattr(f, "user.swift.metadata2").status();
  CHECK(missing.code() == Code::kNotFound);
  CHECK(contains(missing.message(), "user.swift.metadata2"));
  CHECK(contains(missing.message(), f.path()));

  APUS_CHECK_OK(fs_.remove_xattr(f, "user.swift.metadata1"));
  CHECK(fs_.get_xattr(f, "user.swift.metadata1").status().code() == Code::kNotFound);
  CHECK(fs_.remove_xattr(f, "user.swift.metadata1").code() == Code::kNotFound);
  names = fs_.list_xattrs(f);
  REQUIRE(names.ok());
  CHECK(names->size() == 2);

  // Over the VFS limit (XATTR_SIZE_MAX, 64 KiB) is E2BIG: the device cannot hold it, 507.
  const Status too_big = fs_.set_xattr(f, "user.swift.metadata", std::string(65537, 'x'));
  CHECK(too_big.code() == Code::kInsufficientStorage);
  CHECK(contains(too_big.message(), f.path()));
  // 64 KiB exactly (Swift's chunk size) fits where the filesystem allows large values (ext4 with
  // ea_inode, xfs); elsewhere it is the same 507.
  const Status chunk = fs_.set_xattr(f, "user.swift.metadata", std::string(65536, 'y'));
  CHECK((chunk.ok() || chunk.code() == Code::kInsufficientStorage));
}

TEST_CASE_FIXTURE(TempDir, "FaultInjectingFs: ENOSPC after N bytes writes exactly N") {
  FaultInjectingFs ffs(fs_);
  ffs.fail_writes_after_bytes(100);
  File f = make_temp(ffs, root_);
  APUS_CHECK_OK(ffs.write(f, std::string(64, 'a')));
  const Status full = ffs.write(f, std::string(64, 'b'));
  CHECK(full.code() == Code::kInsufficientStorage);
  CHECK(contains(full.message(), f.path()));
  CHECK(contains(full.message(), "injected"));
  CHECK(ffs.pwrite(f, "z", 0).code() == Code::kInsufficientStorage);
  CHECK(ffs.bytes_written() == 100);
  Result<FileStat> st = ffs.fstat(f);
  REQUIRE(st.ok());
  CHECK(st->size == 100);
  CHECK(slurp(f.path()) == std::string(64, 'a') + std::string(36, 'b'));
  CHECK(ffs.count(Op::kWrite) == 3);

  ffs.clear_faults();
  APUS_CHECK_OK(ffs.write(f, "c"));
  CHECK(ffs.bytes_written() == 101);
}

TEST_CASE_FIXTURE(TempDir, "FaultInjectingFs: a full disk fails write_file_atomic cleanly") {
  FaultInjectingFs ffs(fs_);
  const std::string p = path("hashes.pkl");
  APUS_REQUIRE_OK(ffs.write_file_atomic(p, "old"));
  ffs.fail_writes_after_bytes(10);
  CHECK(ffs.write_file_atomic(p, std::string(100, 'n')).code() == Code::kInsufficientStorage);
  CHECK(slurp(p) == "old");
  Result<std::vector<std::string>> names = ffs.list_dir(root_);
  REQUIRE(names.ok());
  CHECK(*names == std::vector<std::string>{"hashes.pkl"});  // the temp file is gone
}

TEST_CASE_FIXTURE(TempDir, "FaultInjectingFs: fail_next fails the next calls, then passes") {
  FaultInjectingFs ffs(fs_);
  File f = make_temp(ffs, root_);

  ffs.fail_next(Op::kFsync, EIO);
  const Status eio = ffs.fsync(f);
  CHECK(eio.code() == Code::kIOError);
  CHECK(contains(eio.message(), "injected"));
  APUS_CHECK_OK(ffs.fsync(f));
  CHECK(ffs.count(Op::kFsync) == 2);

  ffs.fail_next(Op::kRename, ENOENT, 2);
  const std::string dst = path("dst");
  CHECK(ffs.rename(f.path(), dst).code() == Code::kNotFound);
  CHECK(ffs.rename(f.path(), dst).code() == Code::kNotFound);
  APUS_CHECK_OK(ffs.rename(f.path(), dst));

  // Injected errno values map as real ones do, xattr rules included; nothing reaches the disk.
  ffs.fail_next(Op::kSetXattr, ENOSPC);
  CHECK(ffs.set_xattr(f, "user.a", "1").code() == Code::kInsufficientStorage);
  ffs.fail_next(Op::kSetXattr, ENOTSUP);
  CHECK(ffs.set_xattr(f, "user.a", "1").code() == Code::kInsufficientStorage);
  ffs.fail_next(Op::kGetXattr, ENODATA);
  CHECK(ffs.get_xattr(f, "user.a").status().code() == Code::kNotFound);
  ffs.fail_next(Op::kFallocate, ENOSPC);
  CHECK(ffs.fallocate(f, 0, 4096).code() == Code::kInsufficientStorage);
  ffs.fail_next(Op::kOpen, EIO);
  CHECK(ffs.open_read(dst).status().code() == Code::kIOError);
  APUS_CHECK_OK(ffs.open_read(dst).status());
}

TEST_CASE_FIXTURE(TempDir,
                  "FaultInjectingFs: a failed fsync stops write_file_atomic before rename") {
  FaultInjectingFs ffs(fs_);
  const std::string p = path("state");
  ffs.fail_next(Op::kFsync, EIO);
  CHECK(ffs.write_file_atomic(p, "new").code() == Code::kIOError);
  CHECK(ffs.count(Op::kRename) == 0);
  CHECK(ffs.count(Op::kUnlink) == 1);
  Result<std::vector<std::string>> names = ffs.list_dir(root_);
  REQUIRE(names.ok());
  CHECK(names->empty());
}

TEST_CASE_FIXTURE(TempDir, "FaultInjectingFs: fsync delay is observable") {
  FaultInjectingFs ffs(fs_);
  File f = make_temp(ffs, root_);
  ffs.set_fsync_delay(50ms);
  auto start = std::chrono::steady_clock::now();
  APUS_CHECK_OK(ffs.fsync(f));
  CHECK(std::chrono::steady_clock::now() - start >= 50ms);
  start = std::chrono::steady_clock::now();
  APUS_CHECK_OK(ffs.fsync_dir(root_));
  CHECK(std::chrono::steady_clock::now() - start >= 50ms);
  start = std::chrono::steady_clock::now();
  APUS_CHECK_OK(ffs.fdatasync(f));
  CHECK(std::chrono::steady_clock::now() - start >= 50ms);
}

TEST_CASE_FIXTURE(TempDir, "FaultInjectingFs: counters show each step of a durable write") {
  FaultInjectingFs ffs(fs_);
  const std::string p = path("async_pending/abc/hash-1");
  APUS_REQUIRE_OK(ffs.write_file_atomic(p, "data", root_));
  CHECK(ffs.count(Op::kCreateTemp) == 1);
  CHECK(ffs.count(Op::kWrite) == 1);
  CHECK(ffs.count(Op::kFsync) == 1);
  CHECK(ffs.count(Op::kMkdir) == 1);
  CHECK(ffs.count(Op::kRename) == 1);
  // The leaf dir, then the parents of the two directories created (abc, async_pending).
  CHECK(ffs.count(Op::kFsyncDir) == 3);
  CHECK(ffs.count(Op::kUnlink) == 0);
  CHECK(ffs.bytes_written() == 4);

  ffs.reset_counts();
  CHECK(ffs.count(Op::kWrite) == 0);
  CHECK(ffs.bytes_written() == 0);
  Result<std::string> r = ffs.read_file(p);
  REQUIRE(r.ok());
  CHECK(*r == "data");
  CHECK(ffs.count(Op::kOpen) == 1);
  CHECK(ffs.count(Op::kRead) >= 1);
  CHECK(ffs.count(Op::kFsync) == 0);
}

TEST_CASE_FIXTURE(TempDir, "FaultInjectingFs: the write budget holds across threads") {
  FaultInjectingFs ffs(fs_);
  constexpr int kThreads = 4;
  constexpr int kWritesPerThread = 50;
  constexpr std::size_t kChunk = 10;
  ffs.fail_writes_after_bytes(1000);
  std::vector<File> files;
  for (int i = 0; i < kThreads; ++i) files.push_back(make_temp(ffs, root_));
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      for (int w = 0; w < kWritesPerThread; ++w) {
        if (!ffs.write(files[i], std::string(kChunk, 'x')).ok()) ++failures;
      }
    });
  }
  for (auto& t : threads) t.join();
  std::uint64_t total = 0;
  for (const File& f : files) total += std::filesystem::file_size(f.path());
  CHECK(total == 1000);
  CHECK(ffs.bytes_written() == 1000);
  CHECK(failures.load() == kThreads * kWritesPerThread - 100);
  CHECK(ffs.count(Op::kWrite) == kThreads * kWritesPerThread);
}

}  // namespace
}  // namespace apus::common::io
