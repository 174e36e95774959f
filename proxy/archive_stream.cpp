// ArchiveStream (archive_stream.h). The reader thread runs libarchive; the coroutine feeds it
// input and takes its results. Both sides change the Shared state under its mutex; the thread
// waits on a condition variable, the coroutine on a timer that the thread cancels by posting
// to the coroutine's executor (one post at a time: wake_posted).
#include "proxy/archive_stream.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <thread>

#include <archive.h>
#include <archive_entry.h>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "common/thread_annotations.h"

namespace apus::proxy {

namespace net = boost::asio;
using common::Result;
using common::Status;

namespace {

constexpr auto kTuple = net::as_tuple(net::use_awaitable);
constexpr size_t kTarBlock = 512;

Status bad_archive(std::string_view message) {
  return Status::invalid_argument(std::string(message));
}

// libarchive's errno for a damaged or truncated archive (kFileFormatErrno in its
// private headers); filters report others.
constexpr int kFileFormatErrno = EILSEQ;

// Python's nti() on a header's checksum field: whether it reads as a number (then a bad
// header is a "bad checksum", else an "invalid header").
bool checksum_field_parses(std::string_view block) {
  if (block.size() < 156) return false;
  std::string_view f = block.substr(148, 8);
  if (!f.empty() &&
      (static_cast<unsigned char>(f[0]) == 0200 || static_cast<unsigned char>(f[0]) == 0377)) {
    return true;  // base-256
  }
  f = f.substr(0, f.find('\0'));
  constexpr std::string_view kSpace = " \t\n\r\x0b\x0c";
  size_t b = f.find_first_not_of(kSpace);
  if (b == std::string_view::npos) return true;  // int("0", 8)
  f = f.substr(b, f.find_last_not_of(kSpace) - b + 1);
  return std::all_of(f.begin(), f.end(), [](char c) { return c >= '0' && c <= '7'; });
}

bool mentions_truncation(const char* message) {
  return message != nullptr && (std::strstr(message, "runcated") != nullptr);
}

}  // namespace

struct ArchiveStream::Shared : std::enable_shared_from_this<Shared> {
  Shared(net::any_io_executor ex, ArchiveCompression c, ArchiveStreamOptions o)
      : executor(std::move(ex)), wake(executor), compression(c), options(o) {}

  const net::any_io_executor executor;
  net::steady_timer wake;  // the coroutine waits on it; only touched on `executor`
  const ArchiveCompression compression;
  const ArchiveStreamOptions options;

  common::Mutex mu;
  common::CondVar cv;  // the thread waits on it
  bool wake_posted APUS_GUARDED_BY(mu) = false;
  bool cancelled APUS_GUARDED_BY(mu) = false;
  bool done APUS_GUARDED_BY(mu) = false;  // the thread has ended

  // Input, from the coroutine.
  std::deque<std::string> input APUS_GUARDED_BY(mu);
  bool input_end APUS_GUARDED_BY(mu) = false;
  std::optional<Status> input_error APUS_GUARDED_BY(mu);

  // Commands, from the coroutine.
  bool want_header APUS_GUARDED_BY(mu) = false;
  bool want_data APUS_GUARDED_BY(mu) = false;

  // Results, from the thread.
  std::optional<Result<std::optional<ArchiveEntry>>> header APUS_GUARDED_BY(mu);
  std::deque<std::string> data APUS_GUARDED_BY(mu);
  bool data_end APUS_GUARDED_BY(mu) = false;
  std::optional<Status> data_error APUS_GUARDED_BY(mu);

  // Bytes in input, data and the chunk libarchive reads; the peak of that.
  size_t buffered APUS_GUARDED_BY(mu) = 0;
  size_t peak APUS_GUARDED_BY(mu) = 0;

  // Thread only.
  std::thread thread;   // started and joined by the coroutine
  std::string reading;  // the input chunk libarchive reads now
  std::string head;     // the first bytes of raw input, for error messages
  uint64_t raw_bytes = 0;
  bool any_entry = false;

  void count(size_t add, size_t remove) APUS_REQUIRES(mu) {
    buffered = buffered + add - remove;
    peak = std::max(peak, buffered);
  }

  // Wakes the coroutine (once per post; it re-checks the state).
  void notify_coroutine() APUS_REQUIRES(mu) {
    if (wake_posted) return;
    wake_posted = true;
    net::post(executor, [self = shared_from_this()] {
      {
        common::MutexLock lock(&self->mu);
        self->wake_posted = false;
      }
      self->wake.cancel();
    });
  }

  // Thread: libarchive's read callback.
  static la_ssize_t read_input(struct archive* a, void* client, const void** buf) {
    auto* self = static_cast<Shared*>(client);
    return self->next_input(a, buf);
  }

  la_ssize_t next_input(struct archive* a, const void** buf) APUS_EXCLUDES(mu) {
    std::string next;
    {
      common::MutexLock lock(&mu);
      count(0, reading.size());
      while (input.empty() && !input_end && !input_error && !cancelled) cv.wait(&mu);
      if (cancelled || (input.empty() && input_error)) {
        archive_set_error(a, ECANCELED, "input failed");
        return ARCHIVE_FATAL;
      }
      if (input.empty()) {
        reading.clear();
        return 0;  // the body ended
      }
      next = std::move(input.front());
      input.pop_front();
      count(next.size(), next.size());  // moved from the queue to `reading`
      notify_coroutine();               // room for more input
    }
    reading = std::move(next);
    if (head.size() < kTarBlock) {
      head.append(reading, 0, std::min(reading.size(), kTarBlock - head.size()));
    }
    raw_bytes += reading.size();
    *buf = reading.data();
    return static_cast<la_ssize_t>(reading.size());
  }

  // Thread: the input's own failure, if that is why libarchive failed.
  std::optional<Status> input_failure() APUS_EXCLUDES(mu) {
    common::MutexLock lock(&mu);
    if (cancelled) return Status::cancelled("archive stream closed");
    return input_error;
  }

  // Thread: why the archive could not be opened or its first header read, in Python's words.
  Status first_header_error(struct archive* a) {
    if (auto s = input_failure()) return *s;
    auto byte = [&](size_t i) { return i < head.size() ? static_cast<unsigned char>(head[i]) : 0; };
    switch (compression) {
      case ArchiveCompression::kGzip:
        if (raw_bytes < 2 || byte(0) != 0x1f || byte(1) != 0x8b) {
          return bad_archive("not a gzip file");
        }
        break;
      case ArchiveCompression::kBzip2:
        if (raw_bytes == 0) return bad_archive("empty file");
        if (head.compare(0, 3, "BZh") != 0) return bad_archive("invalid compressed data");
        break;
      case ArchiveCompression::kNone:
        if (raw_bytes == 0) return bad_archive("empty file");
        if (raw_bytes < kTarBlock) return bad_archive("truncated header");
        return bad_archive(checksum_field_parses(head) ? "bad checksum" : "invalid header");
    }
    // Compressed: the decompressor failed, or what it gave is not a tar.
    if (archive_errno(a) != kFileFormatErrno) {
      return bad_archive(mentions_truncation(archive_error_string(a)) ? "truncated header"
                                                                      : "invalid compressed data");
    }
    return bad_archive("invalid header");
  }

  // Thread: why reading or skipping entry data failed.
  Status data_failure(struct archive* a) {
    if (auto s = input_failure()) return *s;
    if (archive_errno(a) == kFileFormatErrno ||
        mentions_truncation(archive_error_string(a))) {
      return bad_archive("unexpected end of data");
    }
    return bad_archive("invalid compressed data");
  }

  // Thread: the next header, skipping the rest of the current entry.
  Result<std::optional<ArchiveEntry>> next_header(struct archive* a, bool& opened,
                                                  bool& entry_pending) {
    if (!opened) {
      opened = true;
      if (archive_read_open(a, this, nullptr, &Shared::read_input, nullptr) != ARCHIVE_OK) {
        return first_header_error(a);
      }
    }
    if (entry_pending && archive_read_data_skip(a) != ARCHIVE_OK) return data_failure(a);
    entry_pending = false;
    struct archive_entry* e = nullptr;
    int r = archive_read_next_header(a, &e);
    if (r == ARCHIVE_EOF) return std::optional<ArchiveEntry>();
    if (r < ARCHIVE_WARN) {
      if (!any_entry) return first_header_error(a);
      if (auto s = input_failure()) return *s;
      // Python's stream reader ends the archive at a damaged or cut header after the first;
      // a decompression failure is still an error.
      if (archive_errno(a) == kFileFormatErrno ||
          mentions_truncation(archive_error_string(a))) {
        return std::optional<ArchiveEntry>();
      }
      return bad_archive("invalid compressed data");
    }
    any_entry = true;
    entry_pending = true;
    return std::optional<ArchiveEntry>(describe(e));
  }

  static ArchiveEntry describe(struct archive_entry* e) {
    ArchiveEntry entry;
    const char* path = archive_entry_pathname(e);
    if (path == nullptr) path = archive_entry_pathname_utf8(e);
    entry.path = path ? path : "";
    entry.size = archive_entry_size(e) > 0 ? static_cast<uint64_t>(archive_entry_size(e)) : 0;
    entry.regular = archive_entry_filetype(e) == AE_IFREG && archive_entry_hardlink(e) == nullptr;
    archive_entry_xattr_reset(e);
    const char* name = nullptr;
    const void* value = nullptr;
    size_t size = 0;
    while (archive_entry_xattr_next(e, &name, &value, &size) == ARCHIVE_OK) {
      entry.xattrs.emplace_back(name ? name : "",
                                std::string(static_cast<const char*>(value), size));
    }
    // libarchive lists them last first.
    std::reverse(entry.xattrs.begin(), entry.xattrs.end());
    return entry;
  }

  // Thread: the reader's loop, until the archive ends, fails, or the stream is closed.
  void run() APUS_EXCLUDES(mu) {
    struct archive* a = archive_read_new();
    archive_read_support_format_tar(a);
    if (compression == ArchiveCompression::kGzip)
      archive_read_append_filter(a, ARCHIVE_FILTER_GZIP);
    if (compression == ArchiveCompression::kBzip2) {
      archive_read_append_filter(a, ARCHIVE_FILTER_BZIP2);
    }
    bool opened = false, entry_pending = false;
    while (true) {
      bool header_job = false;
      {
        common::MutexLock lock(&mu);
        while (!cancelled && !want_header &&
               !(want_data && entry_pending && !data_end && !data_error &&
                 data.size() < options.output_chunks)) {
          cv.wait(&mu);
        }
        if (cancelled) break;
        header_job = want_header;
        want_header = false;
      }
      if (header_job) {
        auto r = next_header(a, opened, entry_pending);
        bool last = !r.ok() || !r->has_value();
        common::MutexLock lock(&mu);
        header = std::move(r);
        notify_coroutine();
        if (last) break;
        continue;
      }
      std::string chunk(options.chunk, '\0');
      la_ssize_t n = archive_read_data(a, chunk.data(), chunk.size());
      std::optional<Status> failure;
      if (n < 0) failure = data_failure(a);
      common::MutexLock lock(&mu);
      if (want_header) continue;  // the reader moved on: this entry's data is not wanted
      if (n > 0) {
        chunk.resize(static_cast<size_t>(n));
        count(chunk.size(), 0);
        data.push_back(std::move(chunk));
      } else if (n == 0) {
        data_end = true;
        entry_pending = false;
      } else {
        data_error = failure;
      }
      notify_coroutine();
      if (failure) break;
    }
    archive_read_free(a);
    common::MutexLock lock(&mu);
    count(0, reading.size());
    reading.clear();
    done = true;
    notify_coroutine();
  }
};

ArchiveStream::ArchiveStream(ArchiveCompression compression, BodySource& input,
                             ArchiveStreamOptions options)
    : input_(input), options_(options), compression_(compression) {
  options_.chunk = std::max<size_t>(options_.chunk, 1);
  options_.input_chunks = std::max<size_t>(options_.input_chunks, 1);
  options_.output_chunks = std::max<size_t>(options_.output_chunks, 1);
}

ArchiveStream::~ArchiveStream() {
  if (!shared_) return;
  {
    common::MutexLock lock(&shared_->mu);
    shared_->cancelled = true;
  }
  shared_->cv.signal_all();
  // A short block of the loop: the thread ends at its next wait, at most one chunk of
  // decompression away. Joining here means it never outlives the executor it posts to.
  if (shared_->thread.joinable()) shared_->thread.join();
}

template <class Ready>
net::awaitable<Status> ArchiveStream::wait_for(Ready ready) {
  Shared& sh = *shared_;
  while (true) {
    bool room = false;
    {
      common::MutexLock lock(&sh.mu);
      if (ready()) co_return Status();
      if (sh.done) co_return Status::io_error("archive reader ended");
      room = !input_done_ && sh.input.size() < options_.input_chunks;
    }
    if (!room) {
      sh.wake.expires_at(net::steady_timer::time_point::max());
      auto [ec] = co_await sh.wake.async_wait(kTuple);
      (void)ec;
      continue;
    }
    std::string chunk(options_.chunk, '\0');
    auto n = co_await input_.read(std::span<char>(chunk.data(), chunk.size()));
    {
      common::MutexLock lock(&sh.mu);
      if (!n.ok()) {
        sh.input_error = n.status();
        input_done_ = true;
      } else if (*n == 0) {
        sh.input_end = true;
        input_done_ = true;
      } else {
        chunk.resize(*n);
        sh.count(chunk.size(), 0);
        sh.input.push_back(std::move(chunk));
      }
    }
    sh.cv.signal_all();
  }
}

net::awaitable<Result<std::optional<ArchiveEntry>>> ArchiveStream::next_entry() {
  if (failed_) co_return *failed_;
  if (ended_ || closed_) co_return std::optional<ArchiveEntry>();
  if (!shared_) {
    shared_ = std::make_shared<Shared>(co_await net::this_coro::executor, compression_, options_);
    shared_->thread = std::thread([sh = shared_] { sh->run(); });
  }
  Shared& sh = *shared_;
  current_.clear();
  current_pos_ = 0;
  {
    common::MutexLock lock(&sh.mu);
    sh.want_header = true;
    sh.want_data = false;
    sh.header.reset();
    size_t dropped = 0;
    for (const auto& c : sh.data) dropped += c.size();
    sh.count(0, dropped);
    sh.data.clear();
    sh.data_end = false;
    sh.data_error.reset();
  }
  sh.cv.signal_all();
  Status s = co_await wait_for([&sh] {
    sh.mu.assert_held();
    return sh.header.has_value();
  });
  if (!s.ok()) {
    failed_ = s;
    co_return s;
  }
  Result<std::optional<ArchiveEntry>> r = Status::io_error("no header");
  {
    common::MutexLock lock(&sh.mu);
    r = std::move(*sh.header);
    sh.header.reset();
  }
  if (!r.ok()) {
    failed_ = r.status();
  } else if (!r->has_value()) {
    ended_ = true;
  }
  co_return r;
}

net::awaitable<Result<size_t>> ArchiveStream::read(std::span<char> buf) {
  if (failed_) co_return *failed_;
  if (!shared_ || closed_) co_return Status::cancelled("archive stream closed");
  Shared& sh = *shared_;
  if (current_pos_ == current_.size()) {
    {
      common::MutexLock lock(&sh.mu);
      sh.want_data = true;
    }
    sh.cv.signal_all();
    Status s = co_await wait_for([&sh] {
      sh.mu.assert_held();
      return !sh.data.empty() || sh.data_end || sh.data_error.has_value();
    });
    if (!s.ok()) {
      failed_ = s;
      co_return s;
    }
    {
      common::MutexLock lock(&sh.mu);
      if (!sh.data.empty()) {
        current_ = std::move(sh.data.front());
        current_pos_ = 0;
        sh.data.pop_front();
        sh.count(0, current_.size());
      } else if (sh.data_error) {
        failed_ = *sh.data_error;
      } else {
        current_.clear();
        current_pos_ = 0;
      }
    }
    sh.cv.signal_all();  // room for the next chunk
    if (failed_) co_return *failed_;
    if (current_.empty()) co_return size_t{0};
  }
  size_t n = std::min(buf.size(), current_.size() - current_pos_);
  std::memcpy(buf.data(), current_.data() + current_pos_, n);
  current_pos_ += n;
  co_return n;
}

net::awaitable<void> ArchiveStream::close() {
  if (closed_) co_return;
  closed_ = true;
  if (!shared_) co_return;
  Shared& sh = *shared_;
  {
    common::MutexLock lock(&sh.mu);
    sh.cancelled = true;
  }
  sh.cv.signal_all();
  while (true) {
    {
      common::MutexLock lock(&sh.mu);
      if (sh.done) break;
    }
    sh.wake.expires_at(net::steady_timer::time_point::max());
    auto [ec] = co_await sh.wake.async_wait(kTuple);
    (void)ec;
  }
  if (sh.thread.joinable()) sh.thread.join();  // it has ended: no wait
}

size_t ArchiveStream::peak_buffered() const {
  if (!shared_) return 0;
  common::MutexLock lock(&shared_->mu);
  return shared_->peak;
}

}  // namespace apus::proxy
