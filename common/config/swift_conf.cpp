#include "common/config/swift_conf.h"

#include <algorithm>
#include <charconv>
#include <limits>
#include <optional>

#include "common/http/headers.h"

namespace apus::common {

namespace {

using http::iequals;

constexpr std::string_view kPolicyPrefix = "storage-policy:";
constexpr std::string_view kLegacyPolicyName = "Policy-0";
constexpr std::string_view kReplication = "replication";
constexpr std::string_view kErasureCoding = "erasure_coding";

// Options a [storage-policy:N] section may hold; anything else is refused, as Swift does.
constexpr std::string_view kBaseOptions[] = {"name",    "aliases",    "policy_type",
                                             "default", "deprecated", "diskfile_module"};
constexpr std::string_view kEcOptions[] = {"ec_type", "ec_object_segment_size",
                                           "ec_num_data_fragments", "ec_num_parity_fragments",
                                           "ec_duplication_factor"};

// This EC scheme is known to lose data with 5 or more parity fragments (Swift bug 1639691);
// Swift only accepts such a policy when it is deprecated.
constexpr std::string_view kRiskyEcType = "isa_l_rs_vand";
constexpr int64_t kRiskyEcParity = 5;

bool valid_name_chars(std::string_view name) {
  return std::all_of(name.begin(), name.end(), [](char ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           ch == '-';
  });
}

bool has_name(const StoragePolicy& p, std::string_view name) {
  return std::any_of(p.names.begin(), p.names.end(),
                     [&](const std::string& n) { return iequals(n, name); });
}

std::string describe(const StoragePolicy& p) {
  return "policy " + std::to_string(p.index) + " (" + p.name() + ")";
}

// Builds one policy from its section; `section_name` is "storage-policy:<N>".
class PolicyReader {
 public:
  PolicyReader(const Config& config, const std::string& section_name)
      : section_(config.section(section_name)),
        prefix_("[" + section_name + "] "),
        source_(config.source()) {}

  Result<StoragePolicy> read(std::string_view index_text) {
    StoragePolicy p;
    std::string type = section_.get_string("policy_type", kReplication);
    if (type == kErasureCoding) {
      p.type = StoragePolicy::Type::kErasureCoding;
    } else if (type != kReplication) {
      return fail("invalid policy_type \"" + type + "\"");
    }
    for (const auto& [key, value] : section_.items()) {
      bool known = std::find(std::begin(kBaseOptions), std::end(kBaseOptions), key) !=
                   std::end(kBaseOptions);
      if (!known && p.type == StoragePolicy::Type::kErasureCoding) {
        known =
            std::find(std::begin(kEcOptions), std::end(kEcOptions), key) != std::end(kEcOptions);
      }
      if (!known) return fail("invalid option \"" + key + "\" in a storage-policy section");
    }

    std::optional<int64_t> index = parse_python_int(index_text);
    if (!index || *index < 0 || *index > std::numeric_limits<int>::max()) {
      return fail("invalid policy index \"" + std::string(index_text) + "\"");
    }
    p.index = static_cast<int>(*index);

    std::string name = section_.get_string("name");
    APUS_RETURN_IF_ERROR(add_name(p, name));
    for (const std::string& alias : section_.get_list("aliases")) {
      if (alias == name) continue;  // the name may repeat itself, exactly
      APUS_RETURN_IF_ERROR(add_name(p, alias));
    }
    p.is_deprecated = config_true_value(section_.get_string("deprecated"));
    p.is_default = config_true_value(section_.get_string("default"));
    if (p.is_deprecated && p.is_default) return fail("a deprecated policy cannot be the default");

    bool ec = p.type == StoragePolicy::Type::kErasureCoding;
    p.diskfile_module = section_.get_string(
        "diskfile_module", ec ? "egg:swift#erasure_coding.fs" : "egg:swift#replication.fs");
    if (ec) APUS_RETURN_IF_ERROR(read_ec(p));
    return p;
  }

 private:
  Status fail(const std::string& what) const {
    return Status::invalid_argument(source_ + ": invalid storage policy configuration: " + prefix_ +
                                    what);
  }

  Status add_name(StoragePolicy& p, const std::string& name) const {
    if (name.empty()) return fail("missing or empty policy name");
    if (!valid_name_chars(name)) {
      return fail("invalid name \"" + name + "\": only letters, digits and '-' are allowed");
    }
    if (iequals(name, kLegacyPolicyName) && p.index != 0) {
      return fail("the name " + std::string(kLegacyPolicyName) + " is reserved for policy index 0");
    }
    if (has_name(p, name)) return fail("the name " + name + " is already given to this policy");
    p.names.push_back(name);
    return Status();
  }

  // A positive integer option, `def` when unset.
  Status positive_int(std::string_view key, int64_t def, int64_t* out) const {
    std::optional<std::string> v = section_.get(key);
    std::optional<int64_t> n = v ? parse_python_int(*v) : std::optional<int64_t>(def);
    if (!n || *n <= 0) {
      return fail("invalid " + std::string(key) + " \"" + v.value_or("") +
                  "\": must be a positive integer");
    }
    *out = *n;
    return Status();
  }

  Status read_ec(StoragePolicy& p) const {
    p.ec_type = section_.get_string("ec_type");
    if (p.ec_type.empty()) return fail("missing ec_type");
    APUS_RETURN_IF_ERROR(positive_int("ec_num_data_fragments", 0, &p.ec_num_data_fragments));
    APUS_RETURN_IF_ERROR(positive_int("ec_num_parity_fragments", 0, &p.ec_num_parity_fragments));
    APUS_RETURN_IF_ERROR(
        positive_int("ec_object_segment_size", 1048576, &p.ec_object_segment_size));
    if (p.ec_type == kRiskyEcType && p.ec_num_parity_fragments >= kRiskyEcParity &&
        !p.is_deprecated) {
      return fail("ec_type " + p.ec_type + " with " + std::to_string(kRiskyEcParity) +
                  " or more parity fragments harms durability; the policy must be deprecated");
    }
    return positive_int("ec_duplication_factor", 1, &p.ec_duplication_factor);
  }

  Section section_;
  std::string prefix_;
  std::string source_;
};

}  // namespace

std::string_view StoragePolicy::policy_type() const {
  return type == Type::kErasureCoding ? kErasureCoding : kReplication;
}

std::string StoragePolicy::aliases() const {
  std::string out;
  for (const std::string& n : names) {
    if (!out.empty()) out += ", ";
    out += n;
  }
  return out;
}

std::string StoragePolicy::policy_string(std::string_view base) const {
  std::string out(base);
  if (index != 0) out += "-" + std::to_string(index);
  return out;
}

StoragePolicies::StoragePolicies() {
  StoragePolicy p;
  p.names.emplace_back(kLegacyPolicyName);
  p.is_default = true;
  p.diskfile_module = "egg:swift#replication.fs";
  policies_.push_back(std::move(p));
}

Result<StoragePolicies> StoragePolicies::from_config(const Config& swift_conf) {
  auto fail = [&](const std::string& what) {
    return Status::invalid_argument(swift_conf.source() +
                                    ": invalid storage policy configuration: " + what);
  };
  StoragePolicies out;
  out.policies_.clear();
  std::optional<size_t> default_pos;
  for (const std::string& section_name : swift_conf.sections()) {
    if (!section_name.starts_with(kPolicyPrefix)) continue;
    Result<StoragePolicy> read =
        PolicyReader(swift_conf, section_name)
            .read(std::string_view(section_name).substr(kPolicyPrefix.size()));
    if (!read.ok()) return read.status();
    StoragePolicy& p = *read;
    for (const StoragePolicy& other : out.policies_) {
      if (other.index == p.index) {
        return fail("duplicate index " + std::to_string(p.index) + " ([" + section_name + "])");
      }
      for (const std::string& n : p.names) {
        if (has_name(other, n)) {
          return fail("duplicate name " + n + " in " + describe(p) + " conflicts with " +
                      describe(other));
        }
      }
    }
    if (p.is_default) {
      if (default_pos) {
        return fail("duplicate default: " + describe(p) + " conflicts with " +
                    describe(out.policies_[*default_pos]));
      }
      default_pos = out.policies_.size();
    }
    out.policies_.push_back(std::move(p));
  }

  if (out.by_index(0) == nullptr) {
    if (!out.policies_.empty()) {
      return fail("policies are defined but none has index 0; add a [storage-policy:0] section");
    }
    return StoragePolicies();  // nothing configured: the implicit Policy-0
  }
  if (std::all_of(out.policies_.begin(), out.policies_.end(),
                  [](const StoragePolicy& p) { return p.is_deprecated; })) {
    return fail("every policy is deprecated; at least one must not be");
  }
  if (!default_pos) {
    if (out.policies_.size() > 1) return fail("no policy is marked default = yes");
    default_pos = 0;
    out.policies_[0].is_default = true;
  }
  out.default_ = *default_pos;
  return out;
}

const StoragePolicy* StoragePolicies::by_index(int64_t index) const {
  for (const StoragePolicy& p : policies_) {
    if (p.index == index) return &p;
  }
  return nullptr;
}

const StoragePolicy* StoragePolicies::by_index_string(std::string_view index) const {
  if (index.empty()) return by_index(0);
  std::optional<int64_t> n = parse_python_int(index);
  return n ? by_index(*n) : nullptr;
}

const StoragePolicy* StoragePolicies::by_name(std::string_view name) const {
  for (const StoragePolicy& p : policies_) {
    if (has_name(p, name)) return &p;
  }
  return nullptr;
}

std::vector<const StoragePolicy*> StoragePolicies::visible() const {
  std::vector<const StoragePolicy*> out;
  for (const StoragePolicy& p : policies_) {
    if (!p.is_deprecated) out.push_back(&p);
  }
  return out;
}

namespace {

// Apus stores replicated objects only. An erasure-coded policy served as a replicated one
// would write whole objects where Swift's EC nodes expect fragments (and answer for a policy it
// does not implement), so every server refuses to start on one, naming it, until EC exists.
Status refuse_unserved_policies(const std::string& source, const StoragePolicies& policies) {
  for (const StoragePolicy& p : policies.all()) {
    if (p.type != StoragePolicy::Type::kErasureCoding) continue;
    return Status::invalid_argument(
        source + ": [storage-policy:" + std::to_string(p.index) + "] policy \"" + p.name() +
        "\" has policy_type = " + std::string(kErasureCoding) +
        ", which Apus does not serve yet (replication policies only)");
  }
  return Status();
}

}  // namespace

Result<SwiftConf> SwiftConf::from_config(const Config& swift_conf) {
  SwiftConf out;
  if (swift_conf.has_section("swift-hash")) {
    Section hash = swift_conf.section("swift-hash");
    out.hash_path_prefix = hash.get_string("swift_hash_path_prefix");
    out.hash_path_suffix = hash.get_string("swift_hash_path_suffix");
  }
  if (out.hash_path_prefix.empty() && out.hash_path_suffix.empty()) {
    return Status::invalid_argument(
        swift_conf.source() +
        ": [swift-hash] swift_hash_path_prefix and swift_hash_path_suffix are both missing or "
        "empty; set at least one to a secret, never-changing value");
  }
  Result<StoragePolicies> policies = StoragePolicies::from_config(swift_conf);
  if (!policies.ok()) return policies.status();
  APUS_RETURN_IF_ERROR(refuse_unserved_policies(swift_conf.source(), *policies));
  out.policies = std::move(*policies);
  Result<Constraints> constraints = Constraints::from_config(swift_conf);
  if (!constraints.ok()) return constraints.status();
  out.constraints = std::move(*constraints);
  return out;
}

Result<SwiftConf> load_swift_conf(const std::string& path) {
  Result<Config> config = Config::load(path);
  if (!config.ok()) return config.status();
  return SwiftConf::from_config(*config);
}

}  // namespace apus::common
