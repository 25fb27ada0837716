// How a path travels in admin requests and replies (fusefs/admin_protocol.h):
// a string when it is valid UTF-8, else {"b64": BASE64 OF THE RAW BYTES}, so
// that every file stays addressable.
// Thread-safety: pure functions.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "fusefs/admin_protocol.h"

namespace epochfs::admin {

// The field for `raw`, a path relative to the mount.
inline nlohmann::json encodePath(std::string_view raw) {
  if (isValidUtf8(raw)) return nlohmann::json(std::string(raw));
  return nlohmann::json{{"b64", base64Encode(raw)}};
}

// The raw bytes of a path field; false when it is neither form.
inline bool decodePath(const nlohmann::json& field, std::string* raw) {
  if (field.is_string()) {
    *raw = field.get<std::string>();
    return true;
  }
  const auto b64 = field.is_object() ? field.find("b64") : field.end();
  return b64 != field.end() && b64->is_string() && base64Decode(b64->get<std::string>(), raw);
}

}  // namespace epochfs::admin
