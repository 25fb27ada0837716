// Test helper: runs a script with Debian's /usr/bin/python3 (the interpreter
// that has torch and torchvision) and returns its stdout, so tests can compare
// our reproductions of torch's behaviour with the real thing.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

namespace epochfs::prefetch::testing {

inline constexpr const char* kPython = "/usr/bin/python3";

inline std::string shellQuote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// Runs `python script arg`, returns its stdout (stderr passes through); *ok is
// false on a non-zero exit.
inline std::string runPython(const std::string& script, const std::string& arg, bool* ok) {
  char path[] = "/tmp/epochfs_python_XXXXXX";
  const int fd = ::mkstemp(path);
  if (fd < 0) {
    *ok = false;
    return "";
  }
  ::close(fd);
  std::ofstream(path) << script;
  const std::string cmd = std::string(kPython) + " " + path + " " + shellQuote(arg);
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p != nullptr) {
    char buf[1 << 16];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    *ok = ::pclose(p) == 0;
  } else {
    *ok = false;
  }
  ::unlink(path);
  return out;
}

// True when kPython can import `module`.
inline bool pythonCanImport(const std::string& module) {
  bool ok = false;
  runPython("import " + module + "\n", "", &ok);
  return ok;
}

}  // namespace epochfs::prefetch::testing
