#include "common/config/swift_conf.h"

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <doctest/doctest.h>

namespace apus::common {
namespace {

constexpr std::string_view kHash = "[swift-hash]\nswift_hash_path_suffix = changeme\n";

Result<SwiftConf> swift_conf(std::string_view body, bool with_hash = true) {
  std::string text = with_hash ? std::string(kHash) : std::string();
  text += body;
  Result<Config> c = Config::parse(text, "swift.conf");
  REQUIRE_MESSAGE(c.ok(), c.status().to_string());
  return SwiftConf::from_config(*c);
}

SwiftConf swift_conf_ok(std::string_view body) {
  Result<SwiftConf> s = swift_conf(body);
  REQUIRE_MESSAGE(s.ok(), s.status().to_string());
  return std::move(s).value();
}

// The error message of a swift.conf that must be refused.
std::string refused(std::string_view body, bool with_hash = true) {
  Result<SwiftConf> s = swift_conf(body, with_hash);
  REQUIRE_FALSE(s.ok());
  CHECK(s.status().code() == Status::Code::kInvalidArgument);
  CHECK(s.status().message().starts_with("swift.conf"));
  return s.status().message();
}

// The policies of a swift.conf body, read on their own (an EC policy parses here; SwiftConf
// refuses it).
StoragePolicies policies_ok(std::string_view body) {
  Result<Config> c = Config::parse(std::string(kHash) + std::string(body), "swift.conf");
  REQUIRE_MESSAGE(c.ok(), c.status().to_string());
  Result<StoragePolicies> p = StoragePolicies::from_config(*c);
  REQUIRE_MESSAGE(p.ok(), p.status().to_string());
  return std::move(p).value();
}

bool contains(const std::string& haystack, std::string_view needle) {
  return haystack.find(needle) != std::string::npos;
}

TEST_CASE("swift_conf: hash path prefix and suffix") {
  Result<SwiftConf> both = swift_conf(
      "[swift-hash]\nswift_hash_path_prefix = pre\xe9\nswift_hash_path_suffix = suf\n", false);
  REQUIRE(both.ok());
  CHECK(both->hash_path_prefix == "pre\xe9");  // a raw latin-1 byte is kept as is
  CHECK(both->hash_path_suffix == "suf");

  Result<Config> only_prefix =
      Config::parse("[swift-hash]\nswift_hash_path_prefix = p\n", "swift.conf");
  REQUIRE(only_prefix.ok());
  Result<SwiftConf> s = SwiftConf::from_config(*only_prefix);
  REQUIRE(s.ok());
  CHECK(s->hash_path_prefix == "p");
  CHECK(s->hash_path_suffix.empty());

  std::string msg = refused("[swift-hash]\nswift_hash_path_suffix =\n", false);
  CHECK(contains(msg, "[swift-hash]"));
  CHECK(contains(msg, "swift_hash_path_prefix"));
  CHECK(contains(msg, "swift_hash_path_suffix"));
  CHECK(contains(refused("[storage-policy:0]\nname = gold\n", false), "[swift-hash]"));
}

TEST_CASE("swift_conf: no policy sections give the implicit Policy-0") {
  SwiftConf s = swift_conf_ok("");
  REQUIRE(s.policies.all().size() == 1);
  const StoragePolicy& p = s.policies.default_policy();
  CHECK(p.index == 0);
  CHECK(p.name() == "Policy-0");
  CHECK(p.is_default);
  CHECK(p.type == StoragePolicy::Type::kReplication);
  CHECK(p.policy_string("object") == "object");
  CHECK(s.policies.by_name("policy-0") == &p);
  CHECK(s.policies.by_index_string("") == &p);
  CHECK(StoragePolicies().default_policy().name() == "Policy-0");
}

TEST_CASE("swift_conf: policies, aliases, defaults and lookups") {
  StoragePolicies ps = policies_ok(
      "[storage-policy:0]\n"
      "name = gold\n"
      "aliases = yellow, orange\n"
      "[storage-policy:1]\n"
      "name = silver\n"
      "aliases = silver, grey\n"
      "default = yes\n"
      "[storage-policy:2]\n"
      "name = bronze\n"
      "deprecated = true\n"
      "[storage-policy:3]\n"
      "name = ec\n"
      "policy_type = erasure_coding\n"
      "ec_type = liberasurecode_rs_vand\n"
      "ec_num_data_fragments = 4\n"
      "ec_num_parity_fragments = 2\n");
  REQUIRE(ps.all().size() == 4);
  CHECK(ps.default_policy().index == 1);
  CHECK(ps.default_policy().name() == "silver");
  CHECK_FALSE(ps.by_index(0)->is_default);
  CHECK(ps.by_index(0)->names == std::vector<std::string>{"gold", "yellow", "orange"});
  CHECK(ps.by_index(0)->aliases() == "gold, yellow, orange");
  CHECK(ps.by_index(1)->names == std::vector<std::string>{"silver", "grey"});
  CHECK(ps.by_name("ORANGE")->index == 0);
  CHECK(ps.by_name("Grey")->index == 1);
  CHECK(ps.by_name("platinum") == nullptr);
  CHECK(ps.by_index(9) == nullptr);
  CHECK(ps.by_index_string("2")->name() == "bronze");
  CHECK(ps.by_index_string("x") == nullptr);
  CHECK(ps.by_index(2)->is_deprecated);
  CHECK(ps.by_index(2)->policy_string("objects") == "objects-2");

  const StoragePolicy* ec = ps.by_index(3);
  REQUIRE(ec != nullptr);
  CHECK(ec->type == StoragePolicy::Type::kErasureCoding);
  CHECK(ec->policy_type() == "erasure_coding");
  CHECK(ec->ec_type == "liberasurecode_rs_vand");
  CHECK(ec->ec_num_data_fragments == 4);
  CHECK(ec->ec_num_parity_fragments == 2);
  CHECK(ec->ec_object_segment_size == 1048576);
  CHECK(ec->ec_duplication_factor == 1);
  CHECK(ec->diskfile_module == "egg:swift#erasure_coding.fs");
  CHECK(ps.by_index(0)->diskfile_module == "egg:swift#replication.fs");

  std::vector<int> visible;
  for (const StoragePolicy* p : ps.visible()) visible.push_back(p->index);
  CHECK(visible == std::vector<int>{0, 1, 3});
}

TEST_CASE("swift_conf: a lone policy is the default without saying so") {
  SwiftConf s = swift_conf_ok("[storage-policy:0]\nname = gold\n");
  CHECK(s.policies.default_policy().name() == "gold");
  CHECK(s.policies.by_index(0)->is_default);
  CHECK(s.policies.by_name("Policy-0") == nullptr);
}

TEST_CASE("swift_conf: policy errors") {
  CHECK(
      contains(refused("[storage-policy:0]\nname = a\n[storage-policy:1]\nname = b\n"), "default"));
  CHECK(contains(refused("[storage-policy:0]\nname = a\ndefault = yes\n"
                         "[storage-policy:1]\nname = b\ndefault = yes\n"),
                 "duplicate default"));
  CHECK(contains(refused("[storage-policy:0]\nname = a\ndefault = yes\n"
                         "[storage-policy:1]\nname = A\n"),
                 "duplicate name"));
  CHECK(contains(refused("[storage-policy:0]\nname = a\ndefault = yes\n"
                         "[storage-policy:1]\nname = b\naliases = c, A\n"),
                 "duplicate name"));
  CHECK(contains(refused("[storage-policy:0]\nname = a\naliases = b, B\n"),
                 "already given to this policy"));
  CHECK(contains(refused("[storage-policy:0]\nname = a\ndefault = yes\n"
                         "[storage-policy:00]\nname = b\n"),
                 "duplicate index 0"));
  CHECK(contains(refused("[storage-policy:0]\nname = a\ndefault = yes\n"
                         "[storage-policy:1]\nname = policy-0\n"),
                 "reserved for policy index 0"));
  CHECK(contains(refused("[storage-policy:0]\nname = a\ndefault = yes\ndeprecated = yes\n"),
                 "deprecated policy cannot be the default"));
  CHECK(contains(refused("[storage-policy:0]\nname = a\ndeprecated = yes\n"),
                 "every policy is deprecated"));
  CHECK(contains(refused("[storage-policy:1]\nname = a\n"), "index 0"));
  CHECK(contains(refused("[storage-policy:-1]\nname = a\n"), "invalid policy index \"-1\""));
  CHECK(contains(refused("[storage-policy:x]\nname = a\n"), "invalid policy index"));
  CHECK(contains(refused("[storage-policy:0]\naliases = a\n"), "missing or empty policy name"));
  CHECK(contains(refused("[storage-policy:0]\nname = go_ld\n"), "invalid name \"go_ld\""));
  CHECK(contains(refused("[storage-policy:0]\nname = a\npolicy_type = magic\n"),
                 "invalid policy_type \"magic\""));
  CHECK(contains(refused("[storage-policy:0]\nname = a\ncolour = red\n"),
                 "invalid option \"colour\""));
  // ec_* options belong to erasure_coding policies only.
  CHECK(contains(refused("[storage-policy:0]\nname = a\nec_type = x\n"), "ec_type"));
  CHECK(contains(refused("[storage-policy:0]\nname = a\npolicy_type = erasure_coding\n"
                         "ec_num_data_fragments = 4\nec_num_parity_fragments = 2\n"),
                 "missing ec_type"));
  CHECK(contains(refused("[storage-policy:0]\nname = a\npolicy_type = erasure_coding\n"
                         "ec_type = jerasure_rs_vand\nec_num_data_fragments = 0\n"
                         "ec_num_parity_fragments = 2\n"),
                 "ec_num_data_fragments"));
  CHECK(contains(refused("[storage-policy:0]\nname = a\n[storage-policy:1]\nname = b\n"
                         "default = y\npolicy_type = erasure_coding\nec_type = isa_l_rs_vand\n"
                         "ec_num_data_fragments = 10\nec_num_parity_fragments = 5\n"),
                 "must be deprecated"));
  // The message says where the problem is.
  CHECK(contains(refused("[storage-policy:0]\nname = a\ndefault = yes\n"
                         "[storage-policy:7]\nname = Policy-0\n"),
                 "[storage-policy:7]"));
}

TEST_CASE("swift_conf: an erasure_coding policy is refused, naming it") {
  // Valid for Swift, but Apus would serve it as replicas: no server may start on it.
  constexpr std::string_view kEc =
      "[storage-policy:0]\nname = gold\ndefault = yes\n"
      "[storage-policy:2]\nname = ec42\npolicy_type = erasure_coding\n"
      "ec_type = liberasurecode_rs_vand\nec_num_data_fragments = 4\n"
      "ec_num_parity_fragments = 2\n";
  std::string msg = refused(kEc);
  CHECK(contains(msg, "[storage-policy:2]"));
  CHECK(contains(msg, "\"ec42\""));
  CHECK(contains(msg, "policy_type = erasure_coding"));
  // Deprecated ones too: objects of them may still be on disk.
  std::string deprecated(kEc);
  deprecated += "deprecated = yes\n";
  CHECK(contains(refused(deprecated), "\"ec42\""));
  // The policies themselves still parse (for /info-like tools and the checks above).
  CHECK(policies_ok(kEc).by_index(2)->type == StoragePolicy::Type::kErasureCoding);
}

TEST_CASE("swift_conf: [swift-constraints] overrides") {
  SwiftConf defaults = swift_conf_ok("");
  CHECK(defaults.constraints.max_file_size == 5368709122);
  CHECK(defaults.constraints.valid_api_versions == std::vector<std::string>{"v1", "v1.0"});

  SwiftConf s = swift_conf_ok(
      "[swift-constraints]\n"
      "max_file_size = 1048576\n"
      "max_meta_count = 10\n"
      "container_listing_limit = 100\n"
      "valid_api_versions = v1, v2 ,\n"
      "extra_header_count = 4\n"
      "auto_create_account_prefix = _\n");
  const Constraints& c = s.constraints;
  CHECK(c.max_file_size == 1048576);
  CHECK(c.max_meta_count == 10);
  CHECK(c.container_listing_limit == 100);
  CHECK(c.account_listing_limit == 10000);
  CHECK(c.valid_api_versions == std::vector<std::string>{"v1", "v2"});
  CHECK(c.auto_create_account_prefix == "_");
  CHECK(c.max_header_count() == 10 + 36 + 4);

  std::string msg = refused("[swift-constraints]\nmax_meta_count = lots\n");
  CHECK(msg == "swift.conf [swift-constraints] max_meta_count: \"lots\" is not an integer");
}

TEST_CASE("swift_conf: load_swift_conf reads a file") {
  namespace fs = std::filesystem;
  static std::atomic<int> counter{0};
  fs::path dir = fs::temp_directory_path() /
                 ("apus_swift_conf_test_" +
                  std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()) +
                  "_" + std::to_string(counter++));
  fs::create_directories(dir);
  {
    std::ofstream out(dir / "swift.conf");
    out << kHash << "[storage-policy:0]\nname = gold\n";
  }
  Result<SwiftConf> s = load_swift_conf((dir / "swift.conf").string());
  Result<SwiftConf> missing = load_swift_conf((dir / "absent.conf").string());
  std::error_code ec;
  fs::remove_all(dir, ec);
  REQUIRE_MESSAGE(s.ok(), s.status().to_string());
  CHECK(s->policies.default_policy().name() == "gold");
  CHECK(s->hash_path_suffix == "changeme");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().is_not_found());
}

}  // namespace
}  // namespace apus::common
