// ArchiveStream: reads a tar archive (plain, gzip or bzip2) with libarchive as its bytes arrive
// from an asynchronous source (a client's request body), entry by entry, for
// ?extract-archive.
//
// libarchive pulls its input through a synchronous read callback, while the body arrives on
// the request's coroutine. So libarchive runs on a thread of its own (one per stream: it lives
// as long as the upload, which a slow client makes long, and would hold a shared pool's thread
// for all that time), and the two sides meet in a small shared state under a mutex:
// - input: the coroutine reads body chunks from the BodySource and queues them, at most
//   `input_chunks` ahead; the read callback waits (condition variable) for the next one.
// - commands and results: the coroutine asks for the next entry header, or for the current
//   entry's data; the thread answers with the header, or with data chunks queued at most
//   `output_chunks` ahead of the reader. It wakes the coroutine by posting to its executor.
// The coroutine only reads input while it waits for a result, so nothing is read faster than
// the archive is consumed. Memory per stream: at most (input_chunks + output_chunks + 1)
// chunks of `chunk` bytes, plus libarchive's own state (a decompressor window, and one header,
// which libarchive caps at 1 MiB for long names), never the archive.
//
// Errors: messages are Python tarfile's words for the same failure (Swift's answers carry
// them): "empty file", "not a gzip file", "invalid compressed data", "invalid header", "bad
// checksum", "truncated header", "unexpected end of data". As Python's stream reader does, a
// damaged or truncated header after the first entry ends the archive quietly, while truncated
// entry data is an error. A failure of the input source is returned as it is.
//
// Teardown: close() stops the thread (its waits end, its read callback fails) and waits until
// it has ended; it is always safe, whichever side failed. Destroying a stream without close()
// stops the thread without waiting: the thread then ends on its own, keeping the shared state
// alive, but the input source must not be read by it any more (it is not: only the coroutine
// reads it).
//
// Thread-compatible: every call on the coroutine that created the stream (its executor).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio/awaitable.hpp>

#include "common/status.h"
#include "proxy/subrequest.h"

namespace apus::proxy {

enum class ArchiveCompression { kNone, kGzip, kBzip2 };

// One entry of an archive, as its header describes it.
struct ArchiveEntry {
  std::string path;      // the name's bytes as stored (pax names are UTF-8)
  uint64_t size = 0;     // bytes of data
  bool regular = false;  // a regular file (not a directory, link, hard link or device)
  // Extended attributes from pax headers (SCHILY.xattr.*, LIBARCHIVE.xattr.*), in archive
  // order: ("user.meta.color", "blue").
  std::vector<std::pair<std::string, std::string>> xattrs;
};

struct ArchiveStreamOptions {
  size_t chunk = 64 * 1024;  // bytes per input read and per data chunk handed over
  size_t input_chunks = 2;   // body chunks read ahead of libarchive
  size_t output_chunks = 2;  // data chunks decompressed ahead of the reader
};

class ArchiveStream {
 public:
  struct Shared;  // with the reader thread (archive_stream.cpp)

  // Starts the reader thread. `input` must outlive the stream, or its close().
  ArchiveStream(ArchiveCompression compression, BodySource& input,
                ArchiveStreamOptions options = {});
  ~ArchiveStream();
  ArchiveStream(const ArchiveStream&) = delete;
  ArchiveStream& operator=(const ArchiveStream&) = delete;

  // The next entry (skipping what is left of the current one's data); nullopt at the end of
  // the archive. InvalidArgument with the message above for a bad archive; the input's own
  // failure when it failed. After a failure every call fails the same way.
  boost::asio::awaitable<common::Result<std::optional<ArchiveEntry>>> next_entry();

  // Up to buf.size() bytes of the current entry's data; 0 at its end. InvalidArgument
  // ("unexpected end of data", "invalid compressed data") or the input's failure.
  // REQUIRES: next_entry() gave an entry.
  boost::asio::awaitable<common::Result<size_t>> read(std::span<char> buf);

  // Stops the reader thread and waits until it has ended. Idempotent.
  boost::asio::awaitable<void> close();

  // The most bytes held at once in the stream's queues so far (input and data chunks, and the
  // chunk libarchive is reading): for tests of the memory bound.
  size_t peak_buffered() const;

 private:
  // Waits until `ready()` (checked under the lock), feeding input meanwhile.
  template <class Ready>
  boost::asio::awaitable<common::Status> wait_for(Ready ready);

  std::shared_ptr<Shared> shared_;  // made, and the thread started, by the first next_entry()
  BodySource& input_;
  ArchiveStreamOptions options_;
  ArchiveCompression compression_;
  bool input_done_ = false;  // the input ended or failed
  std::string current_;      // the data chunk being read
  size_t current_pos_ = 0;
  std::optional<common::Status> failed_;  // sticky failure
  bool ended_ = false;                    // the archive's end was reached
  bool closed_ = false;
};

// A BodySource reading the data of an ArchiveStream's current entry, cut at `size` bytes as
// the header announced (a PUT of that length).
class ArchiveEntryBody final : public BodySource {
 public:
  explicit ArchiveEntryBody(ArchiveStream& stream) : stream_(stream) {}
  boost::asio::awaitable<common::Result<size_t>> read(std::span<char> buf) override {
    return stream_.read(buf);
  }

 private:
  ArchiveStream& stream_;
};

}  // namespace apus::proxy
