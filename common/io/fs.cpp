#include "common/io/fs.h"

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <memory>
#include <system_error>
#include <thread>

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <unistd.h>

namespace apus::common::io {

namespace {

// get_xattr's first read: Swift's metadata of an object (a few hundred bytes) and its checksum.
constexpr std::size_t kSmallXattrBytes = 2048;

// Retries a system call that a signal interrupted before it did anything.
template <class F>
auto retry_eintr(F f) {
  auto r = f();
  while (r == -1 && errno == EINTR) r = f();
  return r;
}

std::string what(std::string_view call, std::string_view path) {
  std::string out(call);
  out += ' ';
  out += path;
  return out;
}

// The Status for the errno a failed call just left. Takes views so nothing allocates (and may
// clobber errno) before it is read.
Status sys_error(std::string_view call, std::string_view path) {
  const int err = errno;
  return from_errno(err, what(call, path));
}

std::string errno_message(int err, std::string_view what) {
  std::string out(what);
  out += ": ";
  // std::system_category().message() is thread-safe, unlike strerror().
  out += std::system_category().message(err);
  out += " (errno ";
  out += std::to_string(err);
  out += ')';
  return out;
}

// Xattr failures Swift answers 507 for: the device cannot hold the metadata (DiskFileNoSpace,
// DiskFileXattrNotSupported). ext4 without ea_inode gives ENOSPC or E2BIG for a value over its
// block size.
Status xattr_status(int err, std::string_view what) {
  if (err == ENOTSUP || err == EOPNOTSUPP || err == E2BIG || err == ENOSPC || err == EDQUOT) {
    return Status::insufficient_storage(errno_message(err, what));
  }
  return from_errno(err, what);
}

// Like sys_error, for an xattr call: "<call> <name> <path>: <strerror>".
Status xattr_error(std::string_view call, std::string_view name, std::string_view path) {
  const int err = errno;
  std::string subject(call);
  if (!name.empty()) {
    subject += ' ';
    subject += name;
  }
  return xattr_status(err, what(subject, path));
}

std::string_view strip_trailing_slashes(std::string_view path) {
  while (path.size() > 1 && path.back() == '/') path.remove_suffix(1);
  return path;
}

// "a/b" -> "a", "b" -> ".", "/b" -> "/", "a/b/" -> "a".
std::string parent_dir(std::string_view path) {
  path = strip_trailing_slashes(path);
  const std::size_t pos = path.rfind('/');
  if (pos == std::string_view::npos) return ".";
  if (pos == 0) return "/";
  return std::string(strip_trailing_slashes(path.substr(0, pos)));
}

FileStat to_file_stat(const struct ::stat& st) {
  FileStat out;
  out.exists = true;
  out.is_dir = S_ISDIR(st.st_mode);
  out.size = static_cast<std::uint64_t>(st.st_size);
  out.mtime_ns = static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
  out.device = static_cast<std::uint64_t>(st.st_dev);
  out.inode = static_cast<std::uint64_t>(st.st_ino);
  return out;
}

// Swift's ".ismount" stub: an operator's marker that a directory is a device although
// st_dev/st_ino cannot tell (containers, symlinked devices in SAIO).
bool has_ismount_stub(std::string_view path) {
  std::string stub(strip_trailing_slashes(path));
  stub += "/.ismount";
  struct ::stat st;
  return ::stat(stub.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// Errors of open(O_TMPFILE) that mean "not here" rather than a failure: a filesystem without
// it (EOPNOTSUPP), a kernel before 3.11 (EISDIR, or EINVAL for the unknown flag), as Swift.
bool cannot_make_unnamed(int err) { return err == EOPNOTSUPP || err == EISDIR || err == EINVAL; }

class PosixFs final : public Fs {
 public:
  Result<File> open_read(const std::string& path) override {
    const int fd = retry_eintr([&] { return ::open(path.c_str(), O_RDONLY | O_CLOEXEC); });
    if (fd < 0) return sys_error("open", path);
    return File(fd, path);
  }

  Result<File> open_append(const std::string& path) override {
    const int fd = retry_eintr(
        [&] { return ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0666); });
    if (fd < 0) return sys_error("open", path);
    return File(fd, path);
  }

  Result<File> create_temp(const std::string& dir) override {
    // Python's mkstemp names start with "tmp"; the rest is random.
    std::string path(strip_trailing_slashes(dir));
    path += "/tmpXXXXXX";
    const int fd = ::mkostemp(path.data(), O_CLOEXEC);
    if (fd < 0) return sys_error("mkstemp in", dir);
    return File(fd, std::move(path));
  }

  Result<File> create_unnamed(const std::string& dir) override {
    const int fd =
        retry_eintr([&] { return ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600); });
    if (fd < 0 && cannot_make_unnamed(errno)) return File();
    if (fd < 0) return sys_error("open O_TMPFILE in", dir);
    return File(fd, std::string(strip_trailing_slashes(dir)), /*unnamed=*/true);
  }

  Status write(File& f, std::string_view data) override {
    while (!data.empty()) {
      const ssize_t n = retry_eintr([&] { return ::write(f.fd(), data.data(), data.size()); });
      if (n < 0) return sys_error("write", f.path());
      // A regular file never accepts 0 bytes without an error; do not spin if one does.
      if (n == 0) return Status::io_error(what("write", f.path()) + ": no progress");
      data.remove_prefix(static_cast<std::size_t>(n));
    }
    return Status();
  }

  Status pwrite(File& f, std::string_view data, std::uint64_t offset) override {
    while (!data.empty()) {
      const ssize_t n = retry_eintr(
          [&] { return ::pwrite(f.fd(), data.data(), data.size(), static_cast<off_t>(offset)); });
      if (n < 0) return sys_error("pwrite", f.path());
      if (n == 0) return Status::io_error(what("pwrite", f.path()) + ": no progress");
      data.remove_prefix(static_cast<std::size_t>(n));
      offset += static_cast<std::uint64_t>(n);
    }
    return Status();
  }

  Result<std::size_t> pread(const File& f, std::uint64_t offset, std::span<char> buf) override {
    std::size_t done = 0;
    while (done < buf.size()) {
      const ssize_t n = retry_eintr([&] {
        return ::pread(f.fd(), buf.data() + done, buf.size() - done,
                       static_cast<off_t>(offset + done));
      });
      if (n < 0) return sys_error("pread", f.path());
      if (n == 0) break;  // end of file
      done += static_cast<std::size_t>(n);
    }
    return done;
  }

  Status fsync(File& f) override {
    if (::fsync(f.fd()) != 0) return sys_error("fsync", f.path());
    return Status();
  }

  Status fdatasync(File& f) override {
    if (::fdatasync(f.fd()) != 0) return sys_error("fdatasync", f.path());
    return Status();
  }

  Status fallocate(File& f, std::uint64_t offset, std::uint64_t len) override {
    if (len == 0) return Status();
    const int r = retry_eintr([&] {
      return ::fallocate(f.fd(), FALLOC_FL_KEEP_SIZE, static_cast<off_t>(offset),
                         static_cast<off_t>(len));
    });
    if (r == 0) return Status();
    const int err = errno;
    // Like Swift, carry on without the reservation where the filesystem cannot make one (some
    // answer EINVAL for FALLOC_FL_KEEP_SIZE); the writes themselves still report ENOSPC.
    if (err == ENOSYS || err == EOPNOTSUPP || err == EINVAL) return Status();
    return from_errno(err, what("fallocate", f.path()));
  }

  Status ftruncate(File& f, std::uint64_t size) override {
    const int r = retry_eintr([&] { return ::ftruncate(f.fd(), static_cast<off_t>(size)); });
    if (r != 0) return sys_error("ftruncate", f.path());
    return Status();
  }

  Status drop_cache(const File& f, std::uint64_t offset, std::uint64_t len) override {
    // posix_fadvise returns the error instead of setting errno.
    const int err = ::posix_fadvise(f.fd(), static_cast<off_t>(offset), static_cast<off_t>(len),
                                    POSIX_FADV_DONTNEED);
    if (err != 0) return from_errno(err, what("posix_fadvise", f.path()));
    return Status();
  }

  Status start_writeback(const File& f, std::uint64_t offset, std::uint64_t len) override {
    if (::sync_file_range(f.fd(), static_cast<off_t>(offset), static_cast<off_t>(len),
                          SYNC_FILE_RANGE_WRITE) != 0) {
      return sys_error("sync_file_range", f.path());
    }
    return Status();
  }

  Result<FileStat> fstat(const File& f) override {
    struct ::stat st;
    if (::fstat(f.fd(), &st) != 0) return sys_error("fstat", f.path());
    return to_file_stat(st);
  }

  Status set_xattr(File& f, const std::string& name, std::string_view value) override {
    if (::fsetxattr(f.fd(), name.c_str(), value.data(), value.size(), 0) != 0) {
      return xattr_error("setxattr", name, f.path());
    }
    return Status();
  }

  Result<std::string> get_xattr(const File& f, const std::string& name) override {
    // Most values (an object's metadata, its checksum) fit a small buffer: one call reads them,
    // instead of one for the size and one for the value.
    char small[kSmallXattrBytes];
    const ssize_t got = ::fgetxattr(f.fd(), name.c_str(), small, sizeof small);
    if (got >= 0) return std::string(small, static_cast<std::size_t>(got));
    if (errno != ERANGE) return xattr_error("getxattr", name, f.path());
    std::string value;
    // The value can change between asking its size and reading it (ERANGE); ask again.
    for (;;) {
      const ssize_t size = ::fgetxattr(f.fd(), name.c_str(), nullptr, 0);
      if (size < 0) return xattr_error("getxattr", name, f.path());
      value.resize(static_cast<std::size_t>(size));
      const ssize_t n = ::fgetxattr(f.fd(), name.c_str(), value.data(), value.size());
      if (n >= 0) {
        value.resize(static_cast<std::size_t>(n));
        return value;
      }
      if (errno != ERANGE) return xattr_error("getxattr", name, f.path());
    }
  }

  Status remove_xattr(File& f, const std::string& name) override {
    if (::fremovexattr(f.fd(), name.c_str()) != 0) {
      return xattr_error("removexattr", name, f.path());
    }
    return Status();
  }

  Result<std::vector<std::string>> list_xattrs(const File& f) override {
    std::string buf;
    for (;;) {
      const ssize_t size = ::flistxattr(f.fd(), nullptr, 0);
      if (size < 0) return xattr_error("listxattr", "", f.path());
      buf.resize(static_cast<std::size_t>(size));
      const ssize_t n = ::flistxattr(f.fd(), buf.data(), buf.size());
      if (n >= 0) {
        buf.resize(static_cast<std::size_t>(n));
        break;
      }
      if (errno != ERANGE) return xattr_error("listxattr", "", f.path());
    }
    // The kernel answers NUL-terminated names; keep the user namespace only (security.selinux
    // and friends are not ours).
    std::vector<std::string> names;
    std::string_view rest(buf);
    while (!rest.empty()) {
      const std::size_t end = std::min(rest.find('\0'), rest.size());
      const std::string_view name = rest.substr(0, end);
      if (name.starts_with("user.")) names.emplace_back(name);
      rest.remove_prefix(std::min(end + 1, rest.size()));
    }
    return names;
  }

  Status rename(const std::string& from, const std::string& to) override {
    if (::rename(from.c_str(), to.c_str()) != 0) {
      const int err = errno;
      return from_errno(err, "rename " + from + " to " + to);
    }
    return Status();
  }

  Status link(const std::string& from, const std::string& to) override {
    if (::link(from.c_str(), to.c_str()) != 0) {
      const int err = errno;
      return from_errno(err, "link " + from + " to " + to);
    }
    return Status();
  }

  Status link_file(File& f, const std::string& to) override {
    // AT_EMPTY_PATH names the descriptor itself, but only with CAP_DAC_READ_SEARCH (ENOENT
    // without it); the /proc/self/fd path works for anyone, at the cost of a lookup in procfs.
    // The first success through /proc after AT_EMPTY_PATH's ENOENT settles which one to use.
    const bool try_empty_path = empty_path_links_.load(std::memory_order_relaxed);
    if (try_empty_path) {
      if (::linkat(f.fd(), "", AT_FDCWD, to.c_str(), AT_EMPTY_PATH) == 0) return Status();
      if (errno != ENOENT) return sys_error("linkat", to);
    }
    char proc_path[32];
    std::snprintf(proc_path, sizeof proc_path, "/proc/self/fd/%d", f.fd());
    if (::linkat(AT_FDCWD, proc_path, AT_FDCWD, to.c_str(), AT_SYMLINK_FOLLOW) != 0) {
      return sys_error("linkat", to);
    }
    if (try_empty_path) empty_path_links_.store(false, std::memory_order_relaxed);
    return Status();
  }

  Status unlink(const std::string& path) override {
    if (::unlink(path.c_str()) != 0) return sys_error("unlink", path);
    return Status();
  }

  Status rmdir(const std::string& path) override {
    if (::rmdir(path.c_str()) != 0) return sys_error("rmdir", path);
    return Status();
  }

  Result<int> mkdirs(const std::string& path) override {
    if (path.empty()) return Status::invalid_argument("mkdirs: empty path");
    // Walk up to the deepest directory that exists, then create the missing ones top down.
    std::vector<std::string> missing;  // deepest first
    std::string p(strip_trailing_slashes(path));
    for (;;) {
      struct ::stat st;
      if (::stat(p.c_str(), &st) == 0) {
        if (!S_ISDIR(st.st_mode)) return Status::conflict(what("mkdirs", p) + ": not a directory");
        break;
      }
      const int err = errno;
      if (err == ENOTDIR) return Status::conflict(what("mkdirs", p) + ": a parent is a file");
      if (err != ENOENT) return from_errno(err, what("mkdirs", p));
      missing.push_back(p);
      std::string parent = parent_dir(p);
      if (parent == p) break;
      p = std::move(parent);
    }
    int created = 0;
    for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
      if (::mkdir(it->c_str(), 0777) == 0) {
        ++created;
        continue;
      }
      const int err = errno;
      if (err != EEXIST) return from_errno(err, what("mkdir", *it));
      // Another creator won the race; fine if what it made is a directory.
      struct ::stat st;
      if (::stat(it->c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
        return Status::conflict(what("mkdirs", *it) + ": not a directory");
      }
    }
    return created;
  }

  Status fsync_dir(const std::string& path) override {
    const int fd =
        retry_eintr([&] { return ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); });
    if (fd < 0) return sys_error("open dir", path);
    File dir(fd, path);
    if (::fsync(dir.fd()) != 0) return sys_error("fsync dir", path);
    return dir.close();
  }

  Result<std::vector<std::string>> list_dir(const std::string& path) override {
    // open(2) and getdents64(2) rather than opendir(3), which also fstat()s the directory to
    // size a 32 KiB heap buffer: this runs on every object's open.
    const int fd =
        retry_eintr([&] { return ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); });
    if (fd < 0) return sys_error("opendir", path);
    File dir(fd, path);
    std::vector<std::string> names;
    alignas(struct dirent64) char buf[8192];
    for (;;) {
      const ssize_t n = retry_eintr([&] { return ::getdents64(dir.fd(), buf, sizeof buf); });
      if (n < 0) return sys_error("readdir", path);
      if (n == 0) break;
      for (ssize_t at = 0; at < n;) {
        const auto* entry = reinterpret_cast<const struct dirent64*>(buf + at);
        const std::string_view name(entry->d_name);
        if (name != "." && name != "..") names.emplace_back(name);
        at += entry->d_reclen;
      }
    }
    return names;
  }

  Result<FileStat> stat(const std::string& path) override {
    struct ::stat st;
    if (::stat(path.c_str(), &st) != 0) {
      const int err = errno;
      if (err == ENOENT || err == ENOTDIR) return FileStat{};
      return from_errno(err, what("stat", path));
    }
    return to_file_stat(st);
  }

  Result<DiskSpace> statvfs(const std::string& path) override {
    struct ::statvfs sv;
    if (::statvfs(path.c_str(), &sv) != 0) return sys_error("statvfs", path);
    DiskSpace out;
    out.free_bytes = static_cast<std::uint64_t>(sv.f_bavail) * sv.f_frsize;
    out.total_bytes = static_cast<std::uint64_t>(sv.f_blocks) * sv.f_frsize;
    return out;
  }

  Result<bool> is_mount(const std::string& path) override {
    struct ::stat self;
    if (::lstat(path.c_str(), &self) != 0) {
      const int err = errno;
      if (err == ENOENT) return false;
      return from_errno(err, what("lstat", path));
    }
    if (S_ISLNK(self.st_mode)) return has_ismount_stub(path);
    const std::string parent_path = std::string(strip_trailing_slashes(path)) + "/..";
    struct ::stat parent;
    if (::lstat(parent_path.c_str(), &parent) != 0) {
      return sys_error("lstat", parent_path);
    }
    if (self.st_dev != parent.st_dev) return true;
    if (self.st_ino == parent.st_ino) return true;  // "/"
    return has_ismount_stub(path);
  }

 private:
  std::atomic<bool> empty_path_links_{true};  // see link_file
};

// Renames from -> to, creating to's directory first; returns how many directories it created.
Result<int> rename_making_dirs(Fs& fs, const std::string& from, const std::string& to) {
  const std::string dir = parent_dir(to);
  Result<int> created = fs.mkdirs(dir);
  if (!created.ok()) return created.status();
  Status s = fs.rename(from, to);
  if (s.is_not_found()) {
    // Swift's renamer tries twice: a concurrent cleanup may have removed the (empty) directory
    // between mkdirs and rename.
    created = fs.mkdirs(dir);
    if (!created.ok()) return created.status();
    s = fs.rename(from, to);
  }
  if (!s.ok()) return s;
  return created;
}

// Fsyncs dir, then the parents of the `created` directories made on the way to it.
Status fsync_dirs_up(Fs& fs, std::string dir, int created) {
  for (int i = 0; i <= created; ++i) {
    APUS_RETURN_IF_ERROR(fs.fsync_dir(dir));
    dir = parent_dir(dir);
  }
  return Status();
}

// Indexed by FaultInjectingFs::Op, for messages.
constexpr const char* kOpNames[] = {
    "open",      "create_temp", "create_unnamed",  "write",
    "read",      "fsync",       "fdatasync",       "fallocate",
    "ftruncate", "drop_cache",  "start_writeback", "fstat",
    "setxattr",  "getxattr",    "removexattr",     "listxattr",
    "rename",    "link",        "link_file",       "unlink",
    "rmdir",     "mkdirs",      "fsync_dir",       "list_dir",
    "stat",      "statvfs",     "is_mount",
};

static_assert(std::size(kOpNames) == FaultInjectingFs::kNumOps, "one name per Op");

constexpr std::size_t index_of(FaultInjectingFs::Op op) { return static_cast<std::size_t>(op); }

bool is_xattr_op(FaultInjectingFs::Op op) {
  using Op = FaultInjectingFs::Op;
  return op == Op::kSetXattr || op == Op::kGetXattr || op == Op::kRemoveXattr ||
         op == Op::kListXattrs;
}

bool is_sync_op(FaultInjectingFs::Op op) {
  using Op = FaultInjectingFs::Op;
  return op == Op::kFsync || op == Op::kFdatasync || op == Op::kFsyncDir;
}

}  // namespace

Status from_errno(int err, std::string_view what) {
  std::string msg = errno_message(err, what);
  switch (err) {
    case ENOENT:
    case ENODATA:  // a missing xattr
      return Status::not_found(std::move(msg));
    case ENOSPC:
    case EDQUOT:
      return Status::insufficient_storage(std::move(msg));
    case EEXIST:
    case ENOTEMPTY:
      return Status::conflict(std::move(msg));
    default:
      return Status::io_error(std::move(msg));
  }
}

// --- File

File::~File() {
  if (fd_ >= 0) ::close(fd_);
}

File::File(File&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), path_(std::move(other.path_)), unnamed_(other.unnamed_) {}

File& File::operator=(File&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    path_ = std::move(other.path_);
    unnamed_ = other.unnamed_;
  }
  return *this;
}

Status File::close() {
  if (fd_ < 0) return Status();
  const int fd = std::exchange(fd_, -1);
  // On Linux the descriptor is gone even when close() fails, so never retry; EINTR loses nothing
  // that an earlier fsync did not already make durable.
  if (::close(fd) != 0 && errno != EINTR) return sys_error("close", path_);
  return Status();
}

// --- Fs helpers

Result<std::string> Fs::read_file(const std::string& path, std::size_t max_bytes) {
  Result<File> file = open_read(path);
  if (!file.ok()) return file.status();
  constexpr std::size_t kChunk = 64 << 10;
  std::string out;
  // Read until a short read (end of file), asking for one byte past max_bytes so an oversized
  // file is caught without trusting a size that may change under us.
  for (;;) {
    const std::size_t have = out.size();
    const std::size_t room = max_bytes - have;
    const std::size_t want = room >= kChunk ? kChunk : room + 1;
    out.resize(have + want);
    Result<std::size_t> n = pread(*file, have, std::span<char>(out.data() + have, want));
    if (!n.ok()) return n.status();
    out.resize(have + *n);
    if (*n < want) return out;
    if (out.size() > max_bytes) {
      return Status::corruption(what("read_file", path) + ": larger than " +
                                std::to_string(max_bytes) + " bytes");
    }
  }
}

Status Fs::durable_rename(const std::string& from, const std::string& to) {
  Result<int> created = rename_making_dirs(*this, from, to);
  if (!created.ok()) return created.status();
  return fsync_dirs_up(*this, parent_dir(to), *created);
}

Status Fs::write_file_atomic(const std::string& path, std::string_view data,
                             const std::string& tmp_dir) {
  Result<File> tmp = create_temp(tmp_dir.empty() ? parent_dir(path) : tmp_dir);
  if (!tmp.ok()) return tmp.status();
  const std::string tmp_path = tmp->path();
  Status s = write(*tmp, data);
  if (s.ok()) s = fsync(*tmp);
  if (s.ok()) s = tmp->close();
  Result<int> created = s.ok() ? rename_making_dirs(*this, tmp_path, path) : Result<int>(s);
  if (!created.ok()) {
    // Only before the rename is the temp name still ours to remove.
    unlink(tmp_path).ignore();
    return created.status();
  }
  return fsync_dirs_up(*this, parent_dir(path), *created);
}

std::size_t Fs::remove_older_than(const std::string& dir, std::chrono::seconds age) {
  Result<std::vector<std::string>> names = list_dir(dir);
  if (!names.ok()) return 0;  // none made yet, or the device is failing: the next pass again
  const auto cutoff = std::chrono::system_clock::now() - age;
  const std::int64_t cutoff_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(cutoff.time_since_epoch()).count();
  std::size_t removed = 0;
  for (const std::string& name : *names) {
    const std::string path = std::string(strip_trailing_slashes(dir)) + "/" + name;
    Result<FileStat> st = stat(path);
    if (!st.ok() || !st->exists || st->is_dir || st->mtime_ns >= cutoff_ns) continue;
    if (unlink(path).ok()) ++removed;
  }
  return removed;
}

Fs& default_fs() {
  // Leaked on purpose: disk pool threads may still use it while statics are destroyed.
  static Fs* const fs = new PosixFs();
  return *fs;
}

// --- FaultInjectingFs

void FaultInjectingFs::fail_next(Op op, int err, int count) {
  MutexLock lock(&mu_);
  fail_errno_[index_of(op)] = err;
  fail_remaining_[index_of(op)] = count;
}

void FaultInjectingFs::fail_writes_after_bytes(std::uint64_t n, int err) {
  MutexLock lock(&mu_);
  write_limited_ = true;
  write_budget_ = n;
  write_errno_ = err;
}

void FaultInjectingFs::set_fsync_delay(std::chrono::milliseconds delay) {
  fsync_delay_ms_.store(delay.count());
}

void FaultInjectingFs::clear_faults() {
  MutexLock lock(&mu_);
  fail_errno_.fill(0);
  fail_remaining_.fill(0);
  write_limited_ = false;
  write_budget_ = 0;
  fsync_delay_ms_.store(0);
}

std::uint64_t FaultInjectingFs::count(Op op) const { return counts_[index_of(op)].load(); }

std::uint64_t FaultInjectingFs::bytes_written() const { return bytes_written_.load(); }

void FaultInjectingFs::reset_counts() {
  for (auto& c : counts_) c.store(0);
  bytes_written_.store(0);
}

int FaultInjectingFs::take_fault(Op op) {
  const std::size_t i = index_of(op);
  counts_[i].fetch_add(1, std::memory_order_relaxed);
  if (is_sync_op(op)) {
    const std::int64_t delay_ms = fsync_delay_ms_.load();
    if (delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
  }
  MutexLock lock(&mu_);
  if (fail_remaining_[i] == 0) return 0;
  --fail_remaining_[i];
  return fail_errno_[i];
}

Status FaultInjectingFs::enter(Op op, std::string_view subject) {
  const int err = take_fault(op);
  if (err == 0) return Status();
  const std::string msg = what(kOpNames[index_of(op)], subject) + " (injected)";
  return is_xattr_op(op) ? xattr_status(err, msg) : from_errno(err, msg);
}

std::size_t FaultInjectingFs::reserve_write(std::size_t want, int* err) {
  MutexLock lock(&mu_);
  if (!write_limited_) return want;
  const std::size_t allowed =
      static_cast<std::size_t>(std::min<std::uint64_t>(want, write_budget_));
  write_budget_ -= allowed;
  if (allowed < want) *err = write_errno_;
  return allowed;
}

template <class WriteFn>
Status FaultInjectingFs::limited_write(File& f, std::string_view data, WriteFn do_write) {
  APUS_RETURN_IF_ERROR(enter(Op::kWrite, f.path()));
  int err = 0;
  const std::size_t allowed = reserve_write(data.size(), &err);
  if (allowed > 0) {
    APUS_RETURN_IF_ERROR(do_write(data.substr(0, allowed)));
    bytes_written_.fetch_add(allowed);
  }
  if (err != 0) return from_errno(err, what("write", f.path()) + " (injected: write limit)");
  return Status();
}

Result<File> FaultInjectingFs::open_read(const std::string& path) {
  APUS_RETURN_IF_ERROR(enter(Op::kOpen, path));
  return base_.open_read(path);
}

Result<File> FaultInjectingFs::open_append(const std::string& path) {
  APUS_RETURN_IF_ERROR(enter(Op::kOpen, path));
  return base_.open_append(path);
}

Result<File> FaultInjectingFs::create_temp(const std::string& dir) {
  APUS_RETURN_IF_ERROR(enter(Op::kCreateTemp, dir));
  return base_.create_temp(dir);
}

Result<File> FaultInjectingFs::create_unnamed(const std::string& dir) {
  // An injected EOPNOTSUPP (EISDIR, EINVAL) is a filesystem without O_TMPFILE, as a real one.
  const int err = take_fault(Op::kCreateUnnamed);
  if (err != 0 && cannot_make_unnamed(err)) return File();
  if (err != 0) return from_errno(err, what("create_unnamed", dir) + " (injected)");
  return base_.create_unnamed(dir);
}

Status FaultInjectingFs::write(File& f, std::string_view data) {
  return limited_write(f, data, [&](std::string_view part) { return base_.write(f, part); });
}

Status FaultInjectingFs::pwrite(File& f, std::string_view data, std::uint64_t offset) {
  return limited_write(f, data,
                       [&](std::string_view part) { return base_.pwrite(f, part, offset); });
}

Result<std::size_t> FaultInjectingFs::pread(const File& f, std::uint64_t offset,
                                            std::span<char> buf) {
  APUS_RETURN_IF_ERROR(enter(Op::kRead, f.path()));
  return base_.pread(f, offset, buf);
}

Status FaultInjectingFs::fsync(File& f) {
  APUS_RETURN_IF_ERROR(enter(Op::kFsync, f.path()));
  return base_.fsync(f);
}

Status FaultInjectingFs::fdatasync(File& f) {
  APUS_RETURN_IF_ERROR(enter(Op::kFdatasync, f.path()));
  return base_.fdatasync(f);
}

Status FaultInjectingFs::fallocate(File& f, std::uint64_t offset, std::uint64_t len) {
  APUS_RETURN_IF_ERROR(enter(Op::kFallocate, f.path()));
  return base_.fallocate(f, offset, len);
}

Status FaultInjectingFs::ftruncate(File& f, std::uint64_t size) {
  APUS_RETURN_IF_ERROR(enter(Op::kTruncate, f.path()));
  return base_.ftruncate(f, size);
}

Status FaultInjectingFs::drop_cache(const File& f, std::uint64_t offset, std::uint64_t len) {
  APUS_RETURN_IF_ERROR(enter(Op::kDropCache, f.path()));
  return base_.drop_cache(f, offset, len);
}

Status FaultInjectingFs::start_writeback(const File& f, std::uint64_t offset, std::uint64_t len) {
  APUS_RETURN_IF_ERROR(enter(Op::kStartWriteback, f.path()));
  return base_.start_writeback(f, offset, len);
}

Result<FileStat> FaultInjectingFs::fstat(const File& f) {
  APUS_RETURN_IF_ERROR(enter(Op::kFstat, f.path()));
  return base_.fstat(f);
}

Status FaultInjectingFs::set_xattr(File& f, const std::string& name, std::string_view value) {
  APUS_RETURN_IF_ERROR(enter(Op::kSetXattr, f.path()));
  return base_.set_xattr(f, name, value);
}

Result<std::string> FaultInjectingFs::get_xattr(const File& f, const std::string& name) {
  APUS_RETURN_IF_ERROR(enter(Op::kGetXattr, f.path()));
  return base_.get_xattr(f, name);
}

Status FaultInjectingFs::remove_xattr(File& f, const std::string& name) {
  APUS_RETURN_IF_ERROR(enter(Op::kRemoveXattr, f.path()));
  return base_.remove_xattr(f, name);
}

Result<std::vector<std::string>> FaultInjectingFs::list_xattrs(const File& f) {
  APUS_RETURN_IF_ERROR(enter(Op::kListXattrs, f.path()));
  return base_.list_xattrs(f);
}

Status FaultInjectingFs::rename(const std::string& from, const std::string& to) {
  APUS_RETURN_IF_ERROR(enter(Op::kRename, from));
  return base_.rename(from, to);
}

Status FaultInjectingFs::link(const std::string& from, const std::string& to) {
  APUS_RETURN_IF_ERROR(enter(Op::kLink, from));
  return base_.link(from, to);
}

Status FaultInjectingFs::link_file(File& f, const std::string& to) {
  APUS_RETURN_IF_ERROR(enter(Op::kLinkFile, to));
  return base_.link_file(f, to);
}

Status FaultInjectingFs::unlink(const std::string& path) {
  APUS_RETURN_IF_ERROR(enter(Op::kUnlink, path));
  return base_.unlink(path);
}

Status FaultInjectingFs::rmdir(const std::string& path) {
  APUS_RETURN_IF_ERROR(enter(Op::kRmdir, path));
  return base_.rmdir(path);
}

Result<int> FaultInjectingFs::mkdirs(const std::string& path) {
  APUS_RETURN_IF_ERROR(enter(Op::kMkdir, path));
  return base_.mkdirs(path);
}

Status FaultInjectingFs::fsync_dir(const std::string& path) {
  APUS_RETURN_IF_ERROR(enter(Op::kFsyncDir, path));
  return base_.fsync_dir(path);
}

Result<std::vector<std::string>> FaultInjectingFs::list_dir(const std::string& path) {
  APUS_RETURN_IF_ERROR(enter(Op::kListDir, path));
  return base_.list_dir(path);
}

Result<FileStat> FaultInjectingFs::stat(const std::string& path) {
  APUS_RETURN_IF_ERROR(enter(Op::kStat, path));
  return base_.stat(path);
}

Result<DiskSpace> FaultInjectingFs::statvfs(const std::string& path) {
  APUS_RETURN_IF_ERROR(enter(Op::kStatvfs, path));
  return base_.statvfs(path);
}

Result<bool> FaultInjectingFs::is_mount(const std::string& path) {
  APUS_RETURN_IF_ERROR(enter(Op::kIsMount, path));
  return base_.is_mount(path);
}

}  // namespace apus::common::io
