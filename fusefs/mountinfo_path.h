// Paths in /proc/self/mountinfo escape space, tab, newline and backslash as
// three-digit octal (\040 ...); both the daemon and the supervisor compare
// them with canonical mountpoints.
#pragma once

#include <string>

namespace epochfs::fusefs {

inline std::string unescapeMountPath(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size()) {
      out.push_back(static_cast<char>(std::stoi(s.substr(i + 1, 3), nullptr, 8)));
      i += 3;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

}  // namespace epochfs::fusefs
