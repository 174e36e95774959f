#include "common/crypto/random.h"

#include <cerrno>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include <doctest/doctest.h>

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

}  // namespace
}  // namespace apus::common::crypto
