// ScopedTempDir: a fresh directory (mkdtemp) for one test, removed with
// everything in it when the test's fixture goes. Unit tests only touch files
// inside their own.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <string>

namespace epochfs::testing {

class ScopedTempDir {
 public:
  // `parent`: /var/tmp where a test needs a disk filesystem (O_DIRECT), as
  // /tmp may be tmpfs.
  explicit ScopedTempDir(const std::string& prefix, const std::string& parent = "/tmp") {
    std::string tmpl = parent + "/" + prefix + "-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) {
      ADD_FAILURE() << "mkdtemp " << tmpl << " failed";
      return;
    }
    path_ = tmpl;
  }
  ~ScopedTempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  ScopedTempDir(const ScopedTempDir&) = delete;
  ScopedTempDir& operator=(const ScopedTempDir&) = delete;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace epochfs::testing
