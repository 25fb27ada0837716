// Fuzzes the admin request path up to the dataset lookup: nlohmann parse of
// the request line, decodeAdminPath() of its "path" field (escaped or base64
// form), base64Decode(), and resolveAdminPath() in a small namespace (a
// snapshot of a temp tree made once at start and then deleted: lookups are
// in memory only). Pass: no crash, no sanitizer report, bounded memory, and a
// path that resolves names exactly that node (checked; a violation aborts).
#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "fusefs/admin/admin_paths.h"

namespace fusefs = epochfs::fusefs;

namespace {

void require(bool ok) {
  if (!ok) std::abort();
}

std::unique_ptr<fusefs::DatasetNamespace> g_ns;

// a/b/c.txt, a/d/, "sp ace", a non-UTF-8 name, and a symlink "link" -> a.
std::unique_ptr<fusefs::DatasetNamespace> makeNamespace() {
  namespace fs = std::filesystem;
  std::string tmpl = (fs::temp_directory_path() / "epochfs-fuzz-ns-XXXXXX").string();
  if (mkdtemp(tmpl.data()) == nullptr) std::abort();
  const fs::path root(tmpl);
  fs::create_directories(root / "a" / "b");
  fs::create_directories(root / "a" / "d");
  std::ofstream(root / "a" / "b" / "c.txt") << "x";
  std::ofstream(root / "sp ace") << "y";
  std::ofstream(root / "\xff\xfe") << "z";
  fs::create_directory_symlink("a", root / "link");
  const int fd = open(tmpl.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) std::abort();
  auto ns = fusefs::DatasetNamespace::snapshot(fd, 1);
  close(fd);
  fs::remove_all(root);
  if (!ns.isOk()) std::abort();
  return std::make_unique<fusefs::DatasetNamespace>(std::move(ns).value());
}

void resolve(const std::string& path) {
  auto ino = fusefs::resolveAdminPath(*g_ns, path);
  if (!ino.isOk()) return;
  require(g_ns->valid(*ino));
  if (path.empty() || path == ".") {
    require(*ino == fusefs::DatasetNamespace::kRootIno);
  } else {
    require(g_ns->path(*ino) == path);
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  g_ns = makeNamespace();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  auto req = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!req.is_discarded() && req.is_object()) {
    for (const char* k : {"path", "paths", "file"}) {
      if (!req.contains(k)) continue;
      const auto& f = req[k];
      if (f.is_array()) {
        for (const auto& e : f) {
          auto p = fusefs::decodeAdminPath(e);
          if (p.isOk()) resolve(p.value());
        }
      } else {
        auto p = fusefs::decodeAdminPath(f);
        if (p.isOk()) {
          (void)fusefs::encodeAdminPath(p.value());
          resolve(p.value());
        }
      }
    }
  }
  (void)fusefs::decodeAdminPath(nlohmann::json(text));
  auto raw = fusefs::base64Decode(text);
  if (raw.isOk())
    require(fusefs::base64Decode(fusefs::base64Encode(raw.value())).value() == raw.value());
  resolve(text);
  return 0;
}
