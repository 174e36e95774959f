// Fs: the one door to the disk (LevelDB's Env idea).
//
// Every disk access of the storage servers goes through an Fs, so tests can swap in a
// FaultInjectingFs that fails with ENOSPC after N bytes, fails the next fsync with EIO, or makes
// fsync slow. Errors come back as Status (nothing throws), mapped from errno by from_errno():
// ENOENT/ENODATA -> NotFound, ENOSPC/EDQUOT -> InsufficientStorage (507, as Swift answers),
// EEXIST/ENOTEMPTY -> Conflict, EIO and the rest -> IOError; messages name the call, the path
// and strerror.
//
// Blocking: every call may block on the disk for a long time (seconds on a failing drive). Call
// them only on disk pool threads (BlockingPool), never on network (io_context) threads; moving
// the work there is the caller's job.
//
// Ownership: a File owns its descriptor and closes it when destroyed; Fs calls borrow it. The
// Fs returned by default_fs() lives for the whole process. A FaultInjectingFs borrows the Fs it
// wraps, which must outlive it.
//
// Thread-safety: every Fs (PosixFs, FaultInjectingFs) is thread-safe. A File is
// thread-compatible: concurrent pread/fstat/get_xattr on one File are fine (the kernel
// serialises them), anything that moves or closes it needs external synchronisation.
#pragma once

#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"
#include "common/thread_annotations.h"

namespace apus::common::io {

// Files read whole by Fs::read_file are small state files (hashes.pkl of a partition with 4096
// suffixes is ~200 KiB, an async pending a few KiB); the cap bounds memory if a wrong path is
// passed.
inline constexpr std::size_t kMaxSmallFileBytes = 16 << 20;

// Maps an errno value to a Status whose message is "<what>: <strerror> (errno <err>)".
// `what` should name the call and the path, e.g. "open /srv/node/sda/x". err 0 gives IOError.
Status from_errno(int err, std::string_view what);

// An open file descriptor. Move-only; closes the descriptor when destroyed (errors ignored, use
// close() to see them). path() is the path the file was opened or created at, for messages; it
// does not follow renames. An unnamed file (Fs::create_unnamed) has no path: path() is the
// directory it was made in.
class File {
 public:
  File() = default;
  // Takes ownership of fd (which may be -1 for "not open").
  File(int fd, std::string path, bool unnamed = false) noexcept
      : fd_(fd), path_(std::move(path)), unnamed_(unnamed) {}
  ~File();
  File(File&& other) noexcept;
  File& operator=(File&& other) noexcept;
  File(const File&) = delete;
  File& operator=(const File&) = delete;

  bool is_open() const { return fd_ >= 0; }
  // The raw descriptor, for calls Fs does not wrap (flock); -1 when not open. Still owned here.
  int fd() const { return fd_; }
  const std::string& path() const { return path_; }
  // Made by Fs::create_unnamed: no name until Fs::link_file gives it one.
  bool unnamed() const { return unnamed_; }

  // Closes now and reports the error close(2) gives (IOError). OK if already closed.
  Status close();

 private:
  int fd_ = -1;
  std::string path_;
  bool unnamed_ = false;
};

// What stat() reports. A missing path is exists == false, not an error.
struct FileStat {
  bool exists = false;
  bool is_dir = false;
  std::uint64_t size = 0;     // bytes
  std::int64_t mtime_ns = 0;  // nanoseconds since the Unix epoch
  std::uint64_t device = 0;   // st_dev and st_ino: equal for two names of one file
  std::uint64_t inode = 0;
};

// Space on the filesystem holding a path, as statvfs(3) reports it.
struct DiskSpace {
  std::uint64_t free_bytes = 0;   // available to unprivileged users (f_bavail), what Swift uses
  std::uint64_t total_bytes = 0;  // f_blocks
};

// The filesystem interface. Implementations are thread-safe; all calls block (see above).
class Fs {
 public:
  virtual ~Fs() = default;

  // --- Opening files.
  // Opens an existing file read-only. NotFound if missing.
  virtual Result<File> open_read(const std::string& path) = 0;
  // Opens for appending, creating the file (mode 0666 & ~umask) if missing; for hashes.invalid.
  virtual Result<File> open_append(const std::string& path) = 0;
  // Creates a new empty file with a unique name (mode 0600) in the existing directory dir, open
  // for reading and writing, as Swift's mkstemp in <dev>/tmp. The File's path() is the new
  // file's path. NotFound if dir is missing, InsufficientStorage if the disk is full.
  virtual Result<File> create_temp(const std::string& dir) = 0;
  // Creates a new empty file without a name (O_TMPFILE, mode 0600) on dir's filesystem, open for
  // reading and writing, as Swift does where the filesystem can: until link_file names it,
  // closing it (or a crash) leaves nothing behind. A File that is not open when the filesystem
  // or kernel cannot make one (EOPNOTSUPP, EISDIR, EINVAL): callers fall back to create_temp.
  // NotFound if dir is missing, InsufficientStorage if the disk is full.
  virtual Result<File> create_unnamed(const std::string& dir) = 0;

  // --- Data.
  // Writes all of data at the current offset, retrying short writes. On failure some prefix of
  // data may have been written.
  virtual Status write(File& f, std::string_view data) = 0;
  // Writes all of data at offset, leaving the file offset unchanged.
  virtual Status pwrite(File& f, std::string_view data, std::uint64_t offset) = 0;
  // Reads up to buf.size() bytes at offset; returns how many were read, fewer only at end of file
  // (0 at or past it).
  virtual Result<std::size_t> pread(const File& f, std::uint64_t offset, std::span<char> buf) = 0;
  virtual Status fsync(File& f) = 0;
  virtual Status fdatasync(File& f) = 0;
  // Reserves len bytes at offset without changing the file size (FALLOC_FL_KEEP_SIZE, as Swift
  // does). InsufficientStorage if the disk is full; OK where the filesystem cannot reserve.
  virtual Status fallocate(File& f, std::uint64_t offset, std::uint64_t len) = 0;
  virtual Status ftruncate(File& f, std::uint64_t size) = 0;
  // Advises the kernel to drop cached pages of [offset, offset+len) (len 0: to the end), as
  // Swift's drop_buffer_cache. Advisory: callers usually ignore() the result.
  virtual Status drop_cache(const File& f, std::uint64_t offset, std::uint64_t len) = 0;
  // Starts writing the dirty pages of [offset, offset+len) to the disk without waiting for them
  // (sync_file_range's SYNC_FILE_RANGE_WRITE): a later fsync then waits for less. Makes nothing
  // durable by itself (no metadata, no disk cache flush). Advisory, like drop_cache.
  virtual Status start_writeback(const File& f, std::uint64_t offset, std::uint64_t len) = 0;
  // Size, mtime and type of an open file (exists is always true).
  virtual Result<FileStat> fstat(const File& f) = 0;

  // --- Extended attributes of an open file. Names are full names, e.g. "user.swift.metadata".
  // ENOSPC, EDQUOT, E2BIG (value too big for the filesystem, e.g. ext4 without ea_inode) and
  // ENOTSUP (no xattr support) all give InsufficientStorage, as Swift answers 507 for them.
  virtual Status set_xattr(File& f, const std::string& name, std::string_view value) = 0;
  // The value of name; NotFound if the file has no such attribute.
  virtual Result<std::string> get_xattr(const File& f, const std::string& name) = 0;
  // NotFound if the file has no such attribute.
  virtual Status remove_xattr(File& f, const std::string& name) = 0;
  // Names of the file's "user.*" attributes, in the order the filesystem lists them.
  virtual Result<std::vector<std::string>> list_xattrs(const File& f) = 0;

  // --- Paths.
  // rename(2): atomically replaces to. NotFound if from (or to's directory) is missing.
  virtual Status rename(const std::string& from, const std::string& to) = 0;
  // link(2): a second name for a file. Conflict if `to` exists, NotFound if `from` (or to's
  // directory) is missing.
  virtual Status link(const std::string& from, const std::string& to) = 0;
  // Names an open unnamed file (create_unnamed) `to`: linkat(2) through /proc/self/fd, as Swift.
  // Unlike rename, never replaces: Conflict if `to` exists, NotFound if its directory is missing.
  virtual Status link_file(File& f, const std::string& to) = 0;
  // Removes a file. NotFound if missing.
  virtual Status unlink(const std::string& path) = 0;
  // Removes an empty directory. NotFound if missing, Conflict if not empty.
  virtual Status rmdir(const std::string& path) = 0;
  // mkdir -p (mode 0777 & ~umask). Returns how many directories it created (0: all existed);
  // concurrent creators are tolerated. Conflict if path or a parent exists and is not a directory.
  virtual Result<int> mkdirs(const std::string& path) = 0;
  // Opens the directory and fsyncs it, making renames and creations in it durable.
  virtual Status fsync_dir(const std::string& path) = 0;
  // Entry names in the directory, without "." and "..", in no particular order. NotFound if
  // missing; IOError (ENOTDIR) if path is a file, which callers can confirm with stat().
  virtual Result<std::vector<std::string>> list_dir(const std::string& path) = 0;
  // Follows symlinks. A missing path (ENOENT, ENOTDIR) is OK with exists == false.
  virtual Result<FileStat> stat(const std::string& path) = 0;
  // Free and total bytes of the filesystem holding path.
  virtual Result<DiskSpace> statvfs(const std::string& path) = 0;
  // Swift's ismount: true if path's st_dev differs from its parent's, or path and its parent are
  // the same inode (/), or path holds a ".ismount" stub file (containers, symlinked devices);
  // false if path is missing or a symlink without the stub.
  virtual Result<bool> is_mount(const std::string& path) = 0;

  // --- Helpers, built on the calls above (so a FaultInjectingFs sees and can fail each step).
  // The whole content of a small file. NotFound if missing, Corruption if over max_bytes.
  Result<std::string> read_file(const std::string& path,
                                std::size_t max_bytes = kMaxSmallFileBytes);
  // Swift's renamer: mkdirs to's directory, rename from -> to, then fsync to's directory and the
  // parent of every directory created on the way, so the new name survives a crash.
  Status durable_rename(const std::string& from, const std::string& to);
  // Replaces path with data atomically and durably (Swift's write_pickle): a temp file in
  // tmp_dir (default: path's directory; must exist, on the same filesystem), write, fsync,
  // durable_rename. A failure before the rename removes the temp file and leaves path as it was;
  // a failed directory fsync after the rename is still reported.
  Status write_file_atomic(const std::string& path, std::string_view data,
                           const std::string& tmp_dir = "");
  // Removes the files directly in `dir` last modified more than `age` ago (Swift's
  // unlink_older_than, which its replicators run on <dev>/tmp each pass: what a crash left
  // there). Subdirectories and newer files stay; a missing dir is nothing to do. Returns how
  // many went.
  std::size_t remove_older_than(const std::string& dir, std::chrono::seconds age);
};

// The process-wide POSIX filesystem. Never destroyed.
Fs& default_fs();

// An Fs that forwards to another and injects faults and delays on request, and counts calls (in
// the spirit of LevelDB's SpecialEnv and fault_injection_test). For tests.
//
// An injected failure happens before the call reaches the wrapped Fs (nothing is done), except
// the write limit, which writes the part that fits first, like a filling disk. Injected errno
// values map to Status exactly as real ones do. Every call is counted, failed or not.
//
// Thread-safe: the fault knobs and the write budget are guarded by a mutex; call counters and
// the fsync delay are atomics, so count() never blocks. Sleeps happen outside the mutex.
class FaultInjectingFs final : public Fs {
 public:
  // One per Fs entry point (open_read and open_append share kOpen; write and pwrite kWrite).
  enum class Op {
    kOpen,
    kCreateTemp,
    kCreateUnnamed,
    kWrite,
    kRead,
    kFsync,
    kFdatasync,
    kFallocate,
    kTruncate,
    kDropCache,
    kStartWriteback,
    kFstat,
    kSetXattr,
    kGetXattr,
    kRemoveXattr,
    kListXattrs,
    kRename,
    kLink,
    kLinkFile,
    kUnlink,
    kRmdir,
    kMkdir,
    kFsyncDir,
    kListDir,
    kStat,
    kStatvfs,
    kIsMount,
  };
  static constexpr std::size_t kNumOps = static_cast<std::size_t>(Op::kIsMount) + 1;

  // base must outlive this.
  explicit FaultInjectingFs(Fs& base) : base_(base) {}

  // The next `count` calls of op fail with err (e.g. EIO), then calls pass again. Replaces any
  // earlier fail_next for op.
  void fail_next(Op op, int err, int count = 1) APUS_EXCLUDES(mu_);
  // After n more bytes in total have been written (write + pwrite, all files), writes fail with
  // err. The write that crosses the limit writes its first bytes up to it, then fails.
  void fail_writes_after_bytes(std::uint64_t n, int err = ENOSPC) APUS_EXCLUDES(mu_);
  // fsync, fdatasync and fsync_dir sleep this long before doing anything (0: no delay).
  void set_fsync_delay(std::chrono::milliseconds delay);
  // Drops every pending fail_next, the write limit and the fsync delay.
  void clear_faults() APUS_EXCLUDES(mu_);

  // Calls of op since construction or reset_counts().
  std::uint64_t count(Op op) const;
  // Bytes the wrapped Fs accepted through write and pwrite since construction or reset_counts().
  std::uint64_t bytes_written() const;
  void reset_counts();

  // Fs
  Result<File> open_read(const std::string& path) override;
  Result<File> open_append(const std::string& path) override;
  Result<File> create_temp(const std::string& dir) override;
  Result<File> create_unnamed(const std::string& dir) override;
  Status write(File& f, std::string_view data) override;
  Status pwrite(File& f, std::string_view data, std::uint64_t offset) override;
  Result<std::size_t> pread(const File& f, std::uint64_t offset, std::span<char> buf) override;
  Status fsync(File& f) override;
  Status fdatasync(File& f) override;
  Status fallocate(File& f, std::uint64_t offset, std::uint64_t len) override;
  Status ftruncate(File& f, std::uint64_t size) override;
  Status drop_cache(const File& f, std::uint64_t offset, std::uint64_t len) override;
  Status start_writeback(const File& f, std::uint64_t offset, std::uint64_t len) override;
  Result<FileStat> fstat(const File& f) override;
  Status set_xattr(File& f, const std::string& name, std::string_view value) override;
  Result<std::string> get_xattr(const File& f, const std::string& name) override;
  Status remove_xattr(File& f, const std::string& name) override;
  Result<std::vector<std::string>> list_xattrs(const File& f) override;
  Status rename(const std::string& from, const std::string& to) override;
  Status link(const std::string& from, const std::string& to) override;
  Status link_file(File& f, const std::string& to) override;
  Status unlink(const std::string& path) override;
  Status rmdir(const std::string& path) override;
  Result<int> mkdirs(const std::string& path) override;
  Status fsync_dir(const std::string& path) override;
  Result<std::vector<std::string>> list_dir(const std::string& path) override;
  Result<FileStat> stat(const std::string& path) override;
  Result<DiskSpace> statvfs(const std::string& path) override;
  Result<bool> is_mount(const std::string& path) override;

 private:
  // Counts the call, applies the fsync delay to sync ops, and returns the armed failure for op
  // (its message naming `subject`), or OK.
  Status enter(Op op, std::string_view subject) APUS_EXCLUDES(mu_);
  // enter()'s first part: counts, delays, and returns the armed errno for op (0: none).
  int take_fault(Op op) APUS_EXCLUDES(mu_);
  // Takes up to `want` bytes from the write budget; sets *err when the budget is short.
  std::size_t reserve_write(std::size_t want, int* err) APUS_EXCLUDES(mu_);
  // Shared by write and pwrite: applies the budget around `do_write(prefix)`.
  template <class WriteFn>
  Status limited_write(File& f, std::string_view data, WriteFn do_write);

  Fs& base_;

  Mutex mu_;
  std::array<int, kNumOps> fail_errno_ APUS_GUARDED_BY(mu_) = {};      // errno to inject per op
  std::array<int, kNumOps> fail_remaining_ APUS_GUARDED_BY(mu_) = {};  // calls left to fail, per op
  bool write_limited_ APUS_GUARDED_BY(mu_) = false;
  std::uint64_t write_budget_ APUS_GUARDED_BY(mu_) = 0;  // bytes still allowed when write_limited_
  int write_errno_ APUS_GUARDED_BY(mu_) = ENOSPC;

  // Lock-free.
  std::array<std::atomic<std::uint64_t>, kNumOps> counts_{};
  std::atomic<std::uint64_t> bytes_written_{0};
  std::atomic<std::int64_t> fsync_delay_ms_{0};
};

}  // namespace apus::common::io
