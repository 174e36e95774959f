#include "common/crypto/random.h"

#include <array>
#include <cerrno>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

namespace apus::common::crypto {
namespace {

bool all_hex(const std::string& s) {
  return s.find_first_not_of("0123456789abcdef") == std::string::npos;
}

// Restores the kernel source when a test case ends, even when a check fails.
struct SeamGuard {
  ~SeamGuard() { set_getrandom_for_test(nullptr); }
};

// A scripted source: EINTR first, then answers of at most 3 bytes counting up from 0.
int g_calls = 0;
uint8_t g_next = 0;
ssize_t interrupted_then_short(void* buf, size_t len, unsigned) {
  if (g_calls++ == 0) {
    errno = EINTR;
    return -1;
  }
  size_t n = len < 3 ? len : 3;
  for (size_t i = 0; i < n; ++i) static_cast<uint8_t*>(buf)[i] = g_next++;
  return static_cast<ssize_t>(n);
}

ssize_t all_ones(void* buf, size_t len, unsigned) {
  std::memset(buf, 0xFF, len);
  return static_cast<ssize_t>(len);
}

ssize_t all_zeros(void* buf, size_t len, unsigned) {
  std::memset(buf, 0, len);
  return static_cast<ssize_t>(len);
}

TEST_CASE("random: hex has the asked length and only lower-case hex digits") {
  CHECK(random_hex(0).empty());
  for (size_t n : {1, 16, 32, 1000}) {
    std::string h = random_hex(n);
    CHECK(h.size() == 2 * n);
    CHECK(all_hex(h));
  }
}

TEST_CASE("random: draws are distinct and every hex digit shows up") {
  std::set<std::string> seen;
  std::set<char> digits;
  for (int i = 0; i < 2000; ++i) {
    std::string h = random_hex(16);
    seen.insert(h);
    digits.insert(h.begin(), h.end());
  }
  CHECK(seen.size() == 2000);
  CHECK(digits.size() == 16);
}

TEST_CASE("random: random_bytes fills the whole buffer") {
  // 4 KiB of zeros left in place would be a short read ignored; the chance that a real draw
  // leaves 64 aligned zero bytes in a row is nil.
  std::vector<uint8_t> buf(4096, 0);
  random_bytes(buf);
  for (size_t at = 0; at + 64 <= buf.size(); at += 64) {
    bool all_zero = true;
    for (size_t i = at; i < at + 64; ++i) all_zero = all_zero && buf[i] == 0;
    CHECK_FALSE(all_zero);
  }
}

TEST_CASE("random: uuid4_hex has Python's uuid4().hex shape") {
  std::set<std::string> seen;
  for (int i = 0; i < 500; ++i) {
    std::string u = uuid4_hex();
    REQUIRE(u.size() == 32);
    CHECK(all_hex(u));
    CHECK(u[12] == '4');
    CHECK(std::string("89ab").find(u[16]) != std::string::npos);
    seen.insert(u);
  }
  CHECK(seen.size() == 500);
}

TEST_CASE("random: the version and variant bits are forced whatever the source gives") {
  SeamGuard guard;
  set_getrandom_for_test(&all_ones);
  CHECK(uuid4_hex() == "ffffffffffff4fffbfffffffffffffff");
  set_getrandom_for_test(&all_zeros);
  CHECK(uuid4_hex() == "00000000000040008000000000000000");
}

TEST_CASE("random: EINTR is retried and short reads are continued") {
  SeamGuard guard;
  g_calls = 0;
  g_next = 0;
  set_getrandom_for_test(&interrupted_then_short);
  std::vector<uint8_t> buf(10, 0xAA);
  random_bytes(buf);
  CHECK(g_calls == 5);  // one EINTR, then 3 + 3 + 3 + 1 bytes
  for (size_t i = 0; i < buf.size(); ++i) CHECK(buf[i] == i);
  g_next = 0;
  CHECK(random_hex(4) == "00010203");
}

// A source that counts its calls and numbers the bytes it gives, from 0.
int g_counted_calls = 0;
uint8_t g_counted_next = 0;
ssize_t counted(void* buf, size_t len, unsigned) {
  ++g_counted_calls;
  for (size_t i = 0; i < len; ++i) static_cast<uint8_t*>(buf)[i] = g_counted_next++;
  return static_cast<ssize_t>(len);
}

TEST_CASE("random: request bytes come 256 at a time, each handed out once") {
  SeamGuard guard;
  g_counted_calls = 0;
  g_counted_next = 0;
  set_getrandom_for_test(&counted);  // also discards what this thread had drawn before
  std::array<uint8_t, 16> b{};
  for (int id = 0; id < 16; ++id) {
    request_random_bytes(b);
    for (size_t i = 0; i < b.size(); ++i) CHECK(b[i] == static_cast<uint8_t>(id * 16 + i));
  }
  CHECK(g_counted_calls == 1);
  request_random_bytes(b);  // the 17th: a new draw
  CHECK(g_counted_calls == 2);
  CHECK(b[0] == 0);  // the second draw's first byte (the counter wrapped at 256)
  std::array<uint8_t, 250> most{};
  request_random_bytes(most);  // 16 of this draw's 256 used: does not fit, so a new draw
  CHECK(g_counted_calls == 3);
  std::vector<uint8_t> large(1000);
  request_random_bytes(large);  // larger than the buffer: straight from the source
  CHECK(g_counted_calls == 4);
  CHECK(request_random_hex(3) == "fafbfc");  // the rest of the third draw
  set_getrandom_for_test(&all_ones);
  CHECK(request_uuid4_hex() == "ffffffffffff4fffbfffffffffffffff");
}

TEST_CASE("random: a forked child does not hand out its parent's unused request bytes") {
  std::array<uint8_t, 16> before{}, parent{}, child{};
  request_random_bytes(before);  // the parent now holds 240 unused bytes
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    request_random_bytes(child);
    const bool sent =
        ::write(fds[1], child.data(), child.size()) == static_cast<ssize_t>(child.size());
    ::_exit(sent ? 0 : 1);
  }
  request_random_bytes(parent);
  REQUIRE(::read(fds[0], child.data(), child.size()) == static_cast<ssize_t>(child.size()));
  int status = 0;
  ::waitpid(pid, &status, 0);
  ::close(fds[0]);
  ::close(fds[1]);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(child != parent);
  CHECK(child != before);
}

}  // namespace
}  // namespace apus::common::crypto
