#include "common/crypto/random.h"

#include <array>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include <pthread.h>
#include <sys/random.h>

#include "common/status.h"

namespace apus::common::crypto {
namespace {

ssize_t kernel_getrandom(void* buf, size_t len, unsigned flags) {
  return ::getrandom(buf, len, flags);
}

std::atomic<GetrandomFn> g_getrandom{&kernel_getrandom};

// A broken source that keeps answering 0 bytes would spin forever; this many empty answers in
// a row mean the source is broken (the kernel never does it).
constexpr int kMaxEmptyReads = 64;

constexpr char kHexDigits[] = "0123456789abcdef";

std::string to_hex(std::span<const uint8_t> bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (uint8_t b : bytes) {
    out.push_back(kHexDigits[b >> 4]);
    out.push_back(kHexDigits[b & 0xF]);
  }
  return out;
}

}  // namespace

void random_bytes(std::span<uint8_t> out) {
  GetrandomFn fn = g_getrandom.load(std::memory_order_acquire);
  size_t filled = 0;
  int empty_reads = 0;
  while (filled < out.size()) {
    // Flags 0: the urandom pool, blocking only until the kernel has seeded it once.
    ssize_t n = fn(out.data() + filled, out.size() - filled, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      std::fprintf(stderr, "getrandom: %s\n", std::strerror(errno));
      APUS_CHECK(false && "the kernel cannot provide random bytes");
    }
    if (n == 0) {
      APUS_CHECK(++empty_reads < kMaxEmptyReads);
      continue;
    }
    empty_reads = 0;
    filled += static_cast<size_t>(n);
  }
}

namespace {

// Bumped by fork() in the child and by the test seam: a thread's buffer of another generation
// is discarded unused.
std::atomic<uint64_t> g_generation{0};

void discard_request_buffers() { g_generation.fetch_add(1, std::memory_order_relaxed); }

[[maybe_unused]] const int g_fork_handler =
    ::pthread_atfork(nullptr, nullptr, &discard_request_buffers);

}  // namespace

void request_random_bytes(std::span<uint8_t> out) {
  struct Buffer {
    std::array<uint8_t, 256> bytes;
    size_t used = 256;  // nothing drawn yet
    uint64_t generation = 0;
  };
  thread_local Buffer buffer;
  if (out.size() > buffer.bytes.size()) return random_bytes(out);
  const uint64_t generation = g_generation.load(std::memory_order_relaxed);
  if (buffer.generation != generation || buffer.bytes.size() - buffer.used < out.size()) {
    random_bytes(buffer.bytes);
    buffer.used = 0;
    buffer.generation = generation;
  }
  std::memcpy(out.data(), buffer.bytes.data() + buffer.used, out.size());
  // What was handed out does not stay behind.
  std::memset(buffer.bytes.data() + buffer.used, 0, out.size());
  buffer.used += out.size();
}

namespace {

using Draw = void (*)(std::span<uint8_t>);

std::string drawn_hex(size_t bytes, Draw draw) {
  std::string raw(bytes, '\0');
  draw({reinterpret_cast<uint8_t*>(raw.data()), raw.size()});
  return to_hex({reinterpret_cast<const uint8_t*>(raw.data()), raw.size()});
}

std::string drawn_uuid4(Draw draw) {
  std::array<uint8_t, 16> b;
  draw(b);
  b[6] = static_cast<uint8_t>((b[6] & 0x0F) | 0x40);  // version 4
  b[8] = static_cast<uint8_t>((b[8] & 0x3F) | 0x80);  // RFC 4122 variant (10xx)
  return to_hex(b);
}

}  // namespace

std::string random_hex(size_t bytes) { return drawn_hex(bytes, &random_bytes); }
std::string request_random_hex(size_t bytes) { return drawn_hex(bytes, &request_random_bytes); }
std::string uuid4_hex() { return drawn_uuid4(&random_bytes); }
std::string request_uuid4_hex() { return drawn_uuid4(&request_random_bytes); }

void set_getrandom_for_test(GetrandomFn fn) {
  g_getrandom.store(fn ? fn : &kernel_getrandom, std::memory_order_release);
  discard_request_buffers();
}

}  // namespace apus::common::crypto
