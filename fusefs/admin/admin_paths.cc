#include "fusefs/admin/admin_paths.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "fusefs/admin_protocol.h"

namespace epochfs::fusefs {

using cache::Result;
using cache::Status;

std::string base64Encode(const std::string& raw) { return admin::base64Encode(raw); }

Result<std::string> base64Decode(const std::string& text) {
  std::string out;
  if (!admin::base64Decode(text, &out)) return Status::invalidArgument("malformed base64 path");
  return out;
}

Result<std::string> decodeAdminPath(const nlohmann::json& field) {
  if (field.is_string()) return field.get<std::string>();
  if (field.is_object() && field.contains("b64") && field["b64"].is_string()) {
    if (field["b64"].get_ref<const std::string&>().size() > kMaxAdminPathBytes * 2) {
      return Status::invalidArgument("path too long");
    }
    return base64Decode(field["b64"].get<std::string>());
  }
  return Status::invalidArgument("a path must be a string or {\"b64\": ...}");
}

Result<DatasetNamespace::Ino> resolveAdminPath(const DatasetNamespace& ns,
                                               const std::string& path) {
  if (path.size() > kMaxAdminPathBytes) return Status::invalidArgument("path too long");
  if (path.find('\0') != std::string::npos) return Status::invalidArgument("NUL byte in path");
  if (!path.empty() && path[0] == '/') {
    return Status::invalidArgument("absolute path refused (paths are relative to the mount)");
  }
  if (path.empty() || path == ".") return DatasetNamespace::kRootIno;
  // Check every component before resolving any.
  std::vector<std::string_view> parts;
  for (size_t pos = 0;;) {
    const size_t slash = std::min(path.find('/', pos), path.size());
    const std::string_view part(path.data() + pos, slash - pos);
    if (part.empty() || part == "." || part == "..") {
      return Status::invalidArgument("path component '" + std::string(part) + "' refused in '" +
                                     path + "'");
    }
    parts.push_back(part);
    if (slash == path.size()) break;
    pos = slash + 1;
  }
  DatasetNamespace::Ino ino = DatasetNamespace::kRootIno;
  for (std::string_view part : parts) {
    if (!S_ISDIR(ns.attr(ino).mode)) return Status::notFound("no such file: " + path);
    ino = ns.lookup(ino, part);
    if (ino == 0 || ns.attr(ino).gone) return Status::notFound("no such file: " + path);
  }
  return ino;
}

nlohmann::json encodeAdminPath(const std::string& raw) {
  if (admin::isValidUtf8(raw)) return raw;
  return nlohmann::json{{"b64", base64Encode(raw)}};
}

}  // namespace epochfs::fusefs
