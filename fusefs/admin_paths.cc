#include "fusefs/admin_paths.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace epochfs::fusefs {

using cache::Result;
using cache::Status;

namespace {

constexpr char kB64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

bool validUtf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    const size_t n = c < 0x80 ? 0 : (c >> 5) == 6 ? 1 : (c >> 4) == 14 ? 2 : (c >> 3) == 30 ? 3 : 9;
    if (n == 9 || i + n >= s.size()) return false;  // bad lead byte or truncated
    for (size_t k = 1; k <= n; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) >> 6) != 2) return false;
    }
    i += n + 1;
  }
  return true;
}

}  // namespace

std::string base64Encode(const std::string& raw) {
  std::string out;
  size_t i = 0;
  for (; i + 2 < raw.size(); i += 3) {
    const uint32_t v = (uint32_t{static_cast<unsigned char>(raw[i])} << 16) |
                       (uint32_t{static_cast<unsigned char>(raw[i + 1])} << 8) |
                       static_cast<unsigned char>(raw[i + 2]);
    out += {kB64[v >> 18], kB64[(v >> 12) & 63], kB64[(v >> 6) & 63], kB64[v & 63]};
  }
  if (i + 1 == raw.size()) {
    const uint32_t v = uint32_t{static_cast<unsigned char>(raw[i])} << 16;
    out += {kB64[v >> 18], kB64[(v >> 12) & 63], '=', '='};
  } else if (i + 2 == raw.size()) {
    const uint32_t v = (uint32_t{static_cast<unsigned char>(raw[i])} << 16) |
                       (uint32_t{static_cast<unsigned char>(raw[i + 1])} << 8);
    out += {kB64[v >> 18], kB64[(v >> 12) & 63], kB64[(v >> 6) & 63], '='};
  }
  return out;
}

Result<std::string> base64Decode(const std::string& text) {
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : text) {
    if (c == '=') break;
    const char* p = std::strchr(kB64, c);
    if (p == nullptr || c == '\0') return Status::invalidArgument("malformed base64 path");
    acc = (acc << 6) | static_cast<uint32_t>(p - kB64);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
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

Result<DatasetNamespace::Ino> resolveAdminPath(const DatasetNamespace& ns, const std::string& path) {
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
  if (validUtf8(raw)) return raw;
  return nlohmann::json{{"b64", base64Encode(raw)}};
}

}  // namespace epochfs::fusefs
