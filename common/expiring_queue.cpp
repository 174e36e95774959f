#include "common/expiring_queue.h"

#include "common/crypto/md5.h"
#include "common/hash_path.h"

namespace apus::common {

int64_t expirer_shard(std::string_view path_hash_hex) {
  return static_cast<int64_t>(hex_mod(path_hash_hex, 100));
}

int64_t expirer_container_number(int64_t delete_at, int64_t divisor,
                                 std::string_view path_hash_hex) {
  // delete_at >= 0, so C++'s division rounds down as Python's // does.
  return delete_at / divisor * divisor - expirer_shard(path_hash_hex);
}

std::string expirer_container_name(int64_t delete_at, int64_t divisor,
                                   std::string_view path_hash_hex) {
  return normalize_delete_at(expirer_container_number(delete_at, divisor, path_hash_hex));
}

std::string expirer_task_name(int64_t delete_at, std::string_view account,
                              std::string_view container, std::string_view object) {
  std::string out = normalize_delete_at(delete_at);
  out += '-';
  out += account;
  out += '/';
  out += container;
  out += '/';
  out += object;
  return out;
}

std::optional<ExpirerTask> parse_expirer_task(std::string_view name) {
  size_t dash = name.find('-');
  if (dash == std::string_view::npos) return std::nullopt;
  auto when = Timestamp::parse(name.substr(0, dash));
  if (!when.ok()) return std::nullopt;
  std::string_view path = name.substr(dash + 1);
  size_t first = path.find('/');
  if (first == std::string_view::npos || first == 0) return std::nullopt;
  size_t second = path.find('/', first + 1);
  if (second == std::string_view::npos || second == first + 1 || second + 1 == path.size()) {
    return std::nullopt;
  }
  ExpirerTask task;
  task.delete_at = *when;
  task.account = std::string(path.substr(0, first));
  task.container = std::string(path.substr(first + 1, second - first - 1));
  task.object = std::string(path.substr(second + 1));
  return task;
}

uint64_t expirer_hash_mod(std::string_view name, uint64_t divisor) {
  crypto::Md5Digest digest = crypto::md5(name);
  // The digest is the big-endian 128-bit integer Python reads from its hex form.
  unsigned __int128 rest = 0;
  for (uint8_t byte : digest) {
    rest = (rest * 256 + byte) % divisor;
  }
  return static_cast<uint64_t>(rest);
}

}  // namespace apus::common
