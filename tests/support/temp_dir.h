// TempDir: a fresh directory under the system temp dir, removed with everything in it when the
// object goes. Usable as a doctest fixture (TEST_CASE_FIXTURE) or as a plain local.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>

namespace apus::test {

class TempDir {
 public:
  explicit TempDir(std::string_view tag = "apus_test") {
    std::string tmpl =
        (std::filesystem::temp_directory_path() / (std::string(tag) + ".XXXXXX")).string();
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed: " + tmpl);
    root_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  // `name` inside the directory.
  std::string path(std::string_view name) const { return root_ + "/" + std::string(name); }
  const std::string& root() const { return root_; }

 protected:
  std::string root_;
};

}  // namespace apus::test
