// apus-object-info: what swift-object-info prints for an object file, for operators without
// Python: the object's path and hash, content type and timestamp, its metadata by kind, the
// ETag and length checked against the file's bytes, and where the ring puts the object.
//
//   apus-object-info [-n|--no-check-etag] [-d|--swift-dir DIR] [-P|--policy-name NAME]
//                    [--drop-prefixes] OBJECT_FILE
//
// The report is swift-object-info's, line for line (interop/object_info compares the two),
// encrypted objects' crypto details included.
// Exit status 1 when the file does not exist or its metadata cannot be read.

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/json.hpp>

#include "common/config/swift_conf.h"
#include "common/crypto/md5.h"
#include "common/hash_path.h"
#include "common/http/headers.h"
#include "common/http/url.h"
#include "common/listing_format.h"
#include "common/io/fs.h"
#include "common/timestamp.h"
#include "object-server/diskfile.h"
#include "ring/locations.h"
#include "ring/ring.h"
#include "ring/ring_data.h"

namespace {

using apus::object::Metadata;

struct Options {
  bool check_etag = true;
  bool drop_prefixes = false;
  std::string swift_dir = "/etc/swift";
  std::optional<std::string> policy_name;
  std::string file;
};

[[noreturn]] void usage() {
  std::fprintf(stderr,
               "Usage: apus-object-info [options] OBJECT_FILE\n\n"
               "Options:\n"
               "  -n, --no-check-etag   Don't verify file contents against stored etag\n"
               "  -d SWIFT_DIR, --swift-dir=SWIFT_DIR\n"
               "                        Pass location of swift directory\n"
               "  --drop-prefixes       When outputting metadata, drop the per-section common\n"
               "                        prefixes\n"
               "  -P POLICY_NAME, --policy-name=POLICY_NAME\n"
               "                        Specify storage policy name\n");
  std::exit(1);
}

Options parse_args(int argc, char** argv) {
  Options o;
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    auto value = [&](std::string_view name) -> std::string {
      if (a.size() > name.size() && a.substr(0, name.size()) == name && a[name.size()] == '=') {
        return std::string(a.substr(name.size() + 1));
      }
      if (i + 1 >= argc) usage();
      return argv[++i];
    };
    if (a == "-n" || a == "--no-check-etag") {
      o.check_etag = false;
    } else if (a == "--drop-prefixes") {
      o.drop_prefixes = true;
    } else if (a == "-d" || a.starts_with("--swift-dir")) {
      o.swift_dir = value("--swift-dir");
    } else if (a == "-P" || a.starts_with("--policy-name")) {
      o.policy_name = value("--policy-name");
    } else if (a == "-h" || a == "--help" || (a.size() > 1 && a[0] == '-')) {
      usage();
    } else {
      args.emplace_back(a);
    }
  }
  if (args.size() != 1) usage();
  o.file = args.front();
  return o;
}

// Swift's extract_policy: the index in the last "objects[-N]" directory of the path; nullopt
// when there is none or it does not parse.
std::optional<int> policy_of_path(const std::string& path) {
  const size_t at = path.rfind("objects");
  if (at == std::string::npos) return std::nullopt;
  const size_t slash = path.find('/', at);
  if (slash == std::string::npos) return std::nullopt;
  std::string_view dir = std::string_view(path).substr(at, slash - at);
  if (dir == "objects") return 0;
  if (!dir.starts_with("objects-")) return std::nullopt;
  dir.remove_prefix(8);
  if (dir.empty() || !std::all_of(dir.begin(), dir.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  return std::atoi(std::string(dir).c_str());
}

// Python's metadata.pop(key, ''): removes `key` and gives its value, "" when absent.
std::string pop_meta(Metadata& metadata, std::string_view key) {
  auto it = std::find_if(metadata.begin(), metadata.end(),
                         [&](const auto& kv) { return kv.first == key; });
  if (it == metadata.end()) return {};
  std::string value = std::move(it->second);
  metadata.erase(it);
  return value;
}

// path.split('/', 3)[1:] of an object's name "/a/c/o": account, container and object (which
// keeps any further slashes); nullopt when the name has fewer parts.
std::optional<apus::ring::RingTarget> split_object_name(const std::string& path) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (int i = 0; i < 3; ++i) {
    const size_t slash = path.find('/', start);
    if (slash == std::string::npos) break;
    parts.push_back(path.substr(start, slash - start));
    start = slash + 1;
  }
  parts.push_back(path.substr(start));
  if (parts.size() != 4) return std::nullopt;
  return apus::ring::RingTarget{parts[1], parts[2], parts[3]};
}

bool has_longer_prefix(std::string_view key, std::string_view prefix) {
  return key.size() > prefix.size() && apus::common::http::istarts_with(key, prefix);
}

const std::string* find_exact(const std::vector<std::pair<std::string, std::string>>& items,
                              std::string_view key) {
  for (const auto& [k, v] : items) {
    if (k == key) return &v;
  }
  return nullptr;
}

// Swift's load_crypto_meta(value, b64decode=False) shown as swift-object-info shows it: the
// form-decoded value parsed as a JSON object, printed with an indent of 2 and sorted keys.
// nullopt when it is not a JSON object.
std::optional<std::string> crypto_details(const std::string& value) {
  std::string form = value;
  std::replace(form.begin(), form.end(), '+', ' ');
  boost::system::error_code ec;
  boost::json::value parsed = boost::json::parse(apus::common::http::percent_decode(form), ec);
  if (ec || !parsed.is_object()) return std::nullopt;
  return apus::common::listing::python_json_indented(parsed, 2);
}

void print_section(const char* title, std::vector<std::pair<std::string, std::string>> items) {
  std::printf("%s\n", title);
  if (items.empty()) {
    std::printf("  No metadata found\n");
    return;
  }
  std::sort(items.begin(), items.end());
  for (const auto& [k, v] : items) std::printf("  %s: %s\n", k.c_str(), v.c_str());
}

// Swift's print_obj_metadata on what is left of the metadata once ETag and Content-Length are
// taken out.
int print_obj_metadata(Metadata metadata, const apus::common::HashPathConfig& hash,
                       bool drop_prefixes) {
  const std::string path = pop_meta(metadata, "name");
  const std::string content_type = pop_meta(metadata, "Content-Type");
  const std::string timestamp = pop_meta(metadata, "X-Timestamp");
  if (!path.empty()) {
    const auto parts = split_object_name(path);
    if (!parts) {
      std::fprintf(stderr, "Path is invalid for object '%s'\n", path.c_str());
      return 1;
    }
    auto object_hash =
        apus::common::hash_path_hex(hash, parts->account, parts->container, parts->object);
    std::printf("Path: %s\n", path.c_str());
    std::printf("  Account: %s\n", parts->account.c_str());
    std::printf("  Container: %s\n", parts->container.c_str());
    std::printf("  Object: %s\n", parts->object.c_str());
    std::printf("  Object hash: %s\n", object_hash.ok() ? object_hash->c_str() : "None");
  } else {
    std::printf("Path: Not found in metadata\n");
  }
  if (!content_type.empty()) {
    std::printf("Content-Type: %s\n", content_type.c_str());
  } else {
    std::printf("Content-Type: Not found in metadata\n");
  }
  auto ts = apus::common::Timestamp::parse(timestamp.empty() ? "0" : timestamp);
  if (ts.ok() && *ts != apus::common::Timestamp()) {
    std::printf("Timestamp: %s (%s)\n", ts->isoformat().c_str(), ts->internal().c_str());
  } else {
    std::printf("Timestamp: Not found in metadata\n");
  }
  std::vector<std::pair<std::string, std::string>> user, sys, transient, other;
  constexpr std::string_view kUser = "x-object-meta-";
  constexpr std::string_view kSys = "x-object-sysmeta-";
  constexpr std::string_view kTransient = "x-object-transient-sysmeta-";
  for (auto& [key, value] : metadata) {
    for (auto [prefix, into] : {std::pair{kUser, &user}, std::pair{kSys, &sys},
                                std::pair{kTransient, &transient}}) {
      if (has_longer_prefix(key, prefix)) {
        into->emplace_back(drop_prefixes ? key.substr(prefix.size()) : key, value);
        goto next;
      }
    }
    other.emplace_back(key, value);
  next:;
  }
  // The crypto metadata of an encrypted object, found (as Swift looks) by the full names, so
  // not with --drop-prefixes.
  const std::string* body_crypto = find_exact(sys, "X-Object-Sysmeta-Crypto-Body-Meta");
  const std::string* meta_crypto =
      find_exact(transient, "X-Object-Transient-Sysmeta-Crypto-Meta");
  print_section("System Metadata:", sys);
  print_section("Transient System Metadata:", transient);
  print_section("User Metadata:", std::move(user));
  print_section("Other Metadata:", std::move(other));
  for (auto [label, value] : {std::pair{"Data crypto details", body_crypto},
                              std::pair{"Metadata crypto details", meta_crypto}}) {
    if (value == nullptr) continue;
    auto details = crypto_details(*value);
    if (!details) {
      std::fprintf(stderr, "Bad crypto meta '%s'\n", value->c_str());
      return 1;
    }
    std::printf("%s: %s\n", label, details->c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse_args(argc, argv);
  if (::access(o.file.c_str(), F_OK) != 0) {
    std::printf("Data file doesn't exist\n");
    return 1;
  }
  auto conf = apus::common::load_swift_conf(o.swift_dir + "/swift.conf");
  if (!conf.ok()) {
    std::fprintf(stderr, "%s\n", conf.status().to_string().c_str());
    return 1;
  }
  const apus::common::HashPathConfig hash{conf->hash_path_prefix, conf->hash_path_suffix};

  // The ring and data directory, as swift-object-info picks them.
  char resolved[PATH_MAX];
  const std::string full = ::realpath(o.file.c_str(), resolved) ? resolved : o.file;
  const int policy_index = policy_of_path(full).value_or(0);
  std::string datadir = "objects";
  std::shared_ptr<const apus::ring::RingState> ring;
  auto load = [&](int index) {
    const std::string name = index ? "object-" + std::to_string(index) : "object";
    auto data = apus::ring::load_ring_file(o.swift_dir + "/" + name + ".ring.gz");
    if (!data.ok()) return;  // no such ring: no locations, as Swift
    auto state = apus::ring::RingState::create(std::move(*data));
    if (state.ok()) ring = *state;
  };
  if (policy_index) datadir += "-" + std::to_string(policy_index);
  load(policy_index);
  if (o.policy_name) {
    if (const auto* policy = conf->policies.by_name(*o.policy_name)) {
      if (policy_index != policy->index) {
        std::printf("Warning: Ring does not match policy!\n");
        std::printf("Double check your policy name!\n");
      }
      if (!ring && policy->index) {
        load(policy->index);
        datadir = "objects-" + std::to_string(policy->index);
      }
    }
  }

  apus::common::io::Fs& fs = apus::common::io::default_fs();
  apus::object::DiskFileManager files(fs, apus::object::DiskFileOptions{}, hash);
  auto metadata = files.read_metadata_at(o.file);
  if (!metadata.ok()) {
    std::printf("Invalid metadata\n");
    return 1;
  }
  const std::string etag = pop_meta(*metadata, "ETag");
  const std::string length = pop_meta(*metadata, "Content-Length");
  std::string path;
  for (const auto& [k, v] : *metadata) {
    if (k == "name") path = v;
  }
  if (int rc = print_obj_metadata(*metadata, hash, o.drop_prefixes); rc != 0) return rc;

  uint64_t file_len = 0;
  const int fd = ::open(o.file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    std::printf("Invalid metadata\n");
    return 1;
  }
  if (o.check_etag) {
    apus::common::crypto::Md5 md5;
    std::vector<char> buf(64 << 10);
    for (ssize_t n; (n = ::read(fd, buf.data(), buf.size())) > 0;) {
      md5.update(std::string_view(buf.data(), static_cast<size_t>(n)));
      file_len += static_cast<uint64_t>(n);
    }
    const std::string got = md5.hex_digest();
    if (etag.empty()) {
      std::printf("ETag: Not found in metadata\n");
    } else if (got == etag) {
      std::printf("ETag: %s (valid)\n", etag.c_str());
    } else {
      std::printf("ETag: %s doesn't match file hash of %s!\n", etag.c_str(), got.c_str());
    }
  } else {
    std::printf("ETag: %s (not checked)\n", etag.c_str());
    file_len = static_cast<uint64_t>(::lseek(fd, 0, SEEK_END));
  }
  ::close(fd);
  if (length.empty()) {
    std::printf("Content-Length: Not found in metadata\n");
  } else if (length == std::to_string(file_len)) {
    std::printf("Content-Length: %s (valid)\n", length.c_str());
  } else {
    std::printf("Content-Length: %s doesn't match file length of %llu\n", length.c_str(),
                static_cast<unsigned long long>(file_len));
  }

  // Without a name there is nothing to place (Swift fails here with a traceback).
  if (const auto target = split_object_name(path); ring && target) {
    auto printed = apus::ring::print_ring_locations(stdout, *ring, hash, datadir, *target,
                                                    std::nullopt, false, policy_index);
    if (!printed.ok()) {
      std::fprintf(stderr, "%s\n", printed.message().c_str());
      return 1;
    }
  }
  return std::fflush(stdout) == 0 ? 0 : 1;
}
