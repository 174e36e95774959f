// SwiftConf: the cluster-wide settings every Swift process reads from /etc/swift/swift.conf.
//
// That is the hash path prefix/suffix ([swift-hash]), the storage policies
// ([storage-policy:N]) and the constraint overrides ([swift-constraints]). Loading validates
// everything the way Swift 2.30.1 (swift/common/storage_policy.py, utils.validate_hash_conf)
// does and refuses the file with an InvalidArgument Status naming the file and the problem,
// since Swift's daemons refuse to start on the same input.
//
// Storage policy rules, as Swift's StoragePolicyCollection enforces them: indexes are unique
// non-negative integers; every policy has a name of letters, digits and '-', unique across all
// names and aliases ignoring case, and "Policy-0" belongs to index 0 only; if any policy is
// defined, index 0 must be among them; exactly one policy is the default, except that a lone
// policy is the default without saying so; a deprecated policy cannot be the default and at
// least one policy must not be deprecated. With no [storage-policy:N] section at all there is
// one implicit policy 0 named "Policy-0", the default.
//
// Thread-compatible: values, immutable after loading; const methods may be called from any
// thread. Pointers returned by lookups live as long as the StoragePolicies they came from.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/config/config.h"
#include "common/constraints.h"
#include "common/status.h"

namespace apus::common {

inline constexpr std::string_view kDefaultSwiftConfPath = "/etc/swift/swift.conf";

struct StoragePolicy {
  enum class Type { kReplication, kErasureCoding };

  int index = 0;
  std::vector<std::string> names;  // the primary name first, then the other aliases
  bool is_default = false;
  bool is_deprecated = false;  // hidden from /info; not usable for new containers
  Type type = Type::kReplication;
  std::string diskfile_module;

  // Erasure coding options, kept for /info and the ring check but otherwise unused by Apus.
  std::string ec_type;
  int64_t ec_num_data_fragments = 0;
  int64_t ec_num_parity_fragments = 0;
  int64_t ec_object_segment_size = 1048576;  // bytes
  int64_t ec_duplication_factor = 1;

  const std::string& name() const { return names.front(); }
  // "replication" or "erasure_coding", as swift.conf and /info spell it.
  std::string_view policy_type() const;
  // The names joined with ", ", as /info shows them.
  std::string aliases() const;
  // Policy-specific names: "object" for index 0, else "object-<index>" (ring file stem);
  // likewise with "objects", "async_pending", "tmp" as `base`.
  std::string policy_string(std::string_view base) const;
};

class StoragePolicies {
 public:
  // The implicit configuration: policy 0 "Policy-0", default.
  StoragePolicies();

  // Reads every [storage-policy:N] section of `swift_conf` and validates them (file comment).
  // Any violation, unknown option or bad value: InvalidArgument naming the file and problem.
  static Result<StoragePolicies> from_config(const Config& swift_conf);

  // The policy with `index`, or nullptr.
  const StoragePolicy* by_index(int64_t index) const;
  // Like Swift's get_by_index() on a header value: "" means 0; a non-integer gives nullptr.
  const StoragePolicy* by_index_string(std::string_view index) const;
  // The policy with `name` as its name or an alias, ignoring ASCII case; or nullptr.
  const StoragePolicy* by_name(std::string_view name) const;
  // The default policy (always exists).
  const StoragePolicy& default_policy() const { return policies_[default_]; }
  // Every policy in swift.conf order (an implicit policy 0 last), deprecated ones included.
  const std::vector<StoragePolicy>& all() const { return policies_; }
  // The policies /info lists: the non-deprecated ones, in the order of all().
  std::vector<const StoragePolicy*> visible() const;

 private:
  std::vector<StoragePolicy> policies_;
  size_t default_ = 0;  // index into policies_
};

struct SwiftConf {
  std::string hash_path_prefix;  // raw bytes of swift_hash_path_prefix
  std::string hash_path_suffix;  // raw bytes of swift_hash_path_suffix
  StoragePolicies policies;
  Constraints constraints;

  // Validates and extracts all of the above from a parsed swift.conf. InvalidArgument when
  // both hash values are missing or empty, on any policy or constraint error, and for any
  // erasure_coding policy (valid for Swift, but Apus serves replication only; the message names
  // the policy), so that no server starts and stores EC objects as replicas.
  static Result<SwiftConf> from_config(const Config& swift_conf);
};

// Config::load(path) then SwiftConf::from_config(). NotFound/IOError when unreadable.
Result<SwiftConf> load_swift_conf(const std::string& path = std::string(kDefaultSwiftConfPath));

}  // namespace apus::common
