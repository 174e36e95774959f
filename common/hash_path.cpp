#include "common/hash_path.h"

#include <cassert>

namespace apus::common {
namespace {

// Names are short (constraints cap a full path near 1.3 KiB), so gathering the message in one
// stack buffer and hashing it with a single update beats several EVP_DigestUpdate calls.
constexpr size_t kStackMessage = 2048;

}  // namespace

Result<PathHash> hash_path(const HashPathConfig& config, std::string_view account,
                           std::string_view container, std::string_view object) {
  if (!object.empty() && container.empty()) {
    return Status::invalid_argument("hash_path: container is required if object is provided");
  }
  const size_t total = config.prefix.size() + 1 + account.size() +
                       (container.empty() ? 0 : 1 + container.size()) +
                       (object.empty() ? 0 : 1 + object.size()) + config.suffix.size();
  char stack[kStackMessage];
  std::string heap;
  char* buf = stack;
  if (total > sizeof(stack)) {
    heap.resize(total);
    buf = heap.data();
  }
  char* p = buf;
  auto put = [&p](std::string_view s) {
    s.copy(p, s.size());
    p += s.size();
  };
  put(config.prefix);
  *p++ = '/';
  put(account);
  if (!container.empty()) {
    *p++ = '/';
    put(container);
  }
  if (!object.empty()) {
    *p++ = '/';
    put(object);
  }
  put(config.suffix);
  assert(static_cast<size_t>(p - buf) == total);
  return crypto::md5(std::string_view(buf, total));
}

Result<std::string> hash_path_hex(const HashPathConfig& config, std::string_view account,
                                  std::string_view container, std::string_view object) {
  Result<PathHash> digest = hash_path(config, account, container, object);
  if (!digest.ok()) return digest.status();
  return crypto::to_hex(*digest);
}

uint32_t partition_of(const PathHash& digest, unsigned part_power) {
  assert(part_power <= 32);
  if (part_power == 0) return 0;  // a shift by 32 is undefined for uint32_t
  const uint32_t top = (uint32_t{digest[0]} << 24) | (uint32_t{digest[1]} << 16) |
                       (uint32_t{digest[2]} << 8) | uint32_t{digest[3]};
  return top >> (32 - part_power);
}

uint64_t hex_mod(std::string_view hex, uint64_t divisor) {
  // The value does not fit an integer: reduce digit by digit.
  unsigned __int128 rest = 0;
  for (char c : hex) {
    unsigned digit = 0;
    if (c >= '0' && c <= '9') {
      digit = static_cast<unsigned>(c - '0');
    } else if (c >= 'a' && c <= 'f') {
      digit = static_cast<unsigned>(c - 'a' + 10);
    } else if (c >= 'A' && c <= 'F') {
      digit = static_cast<unsigned>(c - 'A' + 10);
    }
    rest = (rest * 16 + digit) % divisor;
  }
  return static_cast<uint64_t>(rest);
}

}  // namespace apus::common
