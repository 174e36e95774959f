// hash_path: Swift's name hashing, which places every account, container and object.
//
// The digest is MD5(prefix + "/" + account [+ "/" + container [+ "/" + object]] + suffix), with
// the names taken as raw bytes (UTF-8 on the wire; an object name's own '/' are hashed as is)
// and the cluster secrets `swift_hash_path_prefix` / `swift_hash_path_suffix` from swift.conf
// taken as bytes too. A component is included only when it is non-empty. The 32-character hex
// form names directories on disk; the raw digest feeds the ring (partition_of()).
//
// An object without a container is an error that callers may meet with data from the network,
// so it is reported as Status::invalid_argument (Swift raises ValueError) rather than asserted.
//
// Thread-safe: all functions are pure (hashing uses a per-thread MD5 context).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/crypto/md5.h"
#include "common/status.h"

namespace apus::common {

using PathHash = crypto::Md5Digest;

// The cluster-wide secrets from swift.conf [swift-hash]. Swift refuses to start when both are
// empty; validating that is the config loader's job, not hash_path()'s.
struct HashPathConfig {
  std::string prefix;  // swift_hash_path_prefix, as bytes
  std::string suffix;  // swift_hash_path_suffix, as bytes
};

// The raw 16-byte digest naming account / container / object. Empty container or object means
// "not given". Fails with InvalidArgument when `object` is non-empty and `container` is empty.
Result<PathHash> hash_path(const HashPathConfig& config, std::string_view account,
                           std::string_view container = {}, std::string_view object = {});

// hash_path() as 32 lowercase hex characters (the on-disk directory name). Same failures.
Result<std::string> hash_path_hex(const HashPathConfig& config, std::string_view account,
                                  std::string_view container = {}, std::string_view object = {});

// The ring partition of a digest: the big-endian uint32 of its first 4 bytes shifted right by
// (32 - part_power). REQUIRES: part_power <= 32 (0 gives partition 0).
uint32_t partition_of(const PathHash& digest, unsigned part_power);

// Python's int(hex, 16) % divisor for a hex string of any length (a digest's hex form), as
// Swift's daemons split work among `processes` by it; characters that are no hex digit count
// as 0. REQUIRES: divisor > 0.
uint64_t hex_mod(std::string_view hex, uint64_t divisor);

}  // namespace apus::common
