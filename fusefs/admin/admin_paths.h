// Paths in admin requests: relative to the mount, checked per component (no
// "..", ".", empty components, absolute paths or NUL), resolved in the
// in-memory snapshot only — never through the filesystem, so a request can
// neither escape the dataset nor make the daemon look up its own mountpoint.
// A name that is not UTF-8 travels as {"b64": BASE64 OF THE RAW BYTES}.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "cache/status.h"
#include "fusefs/dataset_namespace.h"

namespace epochfs::fusefs {

inline constexpr size_t kMaxAdminPathBytes = 4096;

// Decodes a path field (string or {"b64": ...}) to raw bytes.
cache::Result<std::string> decodeAdminPath(const nlohmann::json& field);

// Validates `path` and resolves it in `ns` (symlinks are not followed: a path
// through one is not found). "" and "." name the root.
cache::Result<DatasetNamespace::Ino> resolveAdminPath(const DatasetNamespace& ns,
                                                      const std::string& path);

// The reverse: a path for JSON replies (a string when valid UTF-8, else {"b64": ...}).
nlohmann::json encodeAdminPath(const std::string& raw);

std::string base64Encode(const std::string& raw);
cache::Result<std::string> base64Decode(const std::string& text);

}  // namespace epochfs::fusefs
