// Fuzzes the admin request path up to the dataset lookup: nlohmann parse of
// the request line, decodeAdminPath() of its "path" field (escaped or base64
// form) and base64Decode(). Pass: no crash, no sanitizer report, bounded memory.
#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "fusefs/admin_paths.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  auto req = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!req.is_discarded() && req.is_object()) {
    for (const char* k : {"path", "paths", "file"}) {
      if (!req.contains(k)) continue;
      const auto& f = req[k];
      if (f.is_array()) {
        for (const auto& e : f) (void)epochfs::fusefs::decodeAdminPath(e);
      } else {
        auto p = epochfs::fusefs::decodeAdminPath(f);
        if (p.isOk()) (void)epochfs::fusefs::encodeAdminPath(p.value());
      }
    }
  }
  (void)epochfs::fusefs::decodeAdminPath(nlohmann::json(text));
  (void)epochfs::fusefs::base64Decode(text);
  return 0;
}
