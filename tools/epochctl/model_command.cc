#include "tools/epochctl/model_command.h"

#include <limits.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace epochfs::ctl {

namespace {

bool holdsModel(const std::string& dir) {
  return access((dir + "/epochfs/model.py").c_str(), R_OK) == 0;
}

std::string exeDir() {
  char buf[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "";
  std::string p(buf, static_cast<size_t>(n));
  return p.substr(0, p.rfind('/'));
}

}  // namespace

std::optional<std::string> findModelPythonPath() {
  std::vector<std::string> candidates;
  if (const char* env = getenv("EPOCHFS_PYTHONPATH"); env != nullptr && *env != '\0') {
    candidates.emplace_back(env);
  }
  const std::string dir = exeDir();
  if (!dir.empty()) {
    candidates.push_back(dir + "/../../tools/python");
#ifdef EPOCHFS_PYTHON_FROM_BINDIR
    candidates.push_back(dir + "/" + EPOCHFS_PYTHON_FROM_BINDIR);  // installed
#endif
  }
#ifdef EPOCHFS_SOURCE_DIR
  candidates.push_back(std::string(EPOCHFS_SOURCE_DIR) + "/tools/python");
#endif
  for (const auto& c : candidates) {
    if (holdsModel(c)) {
      char real[PATH_MAX];
      return realpath(c.c_str(), real) != nullptr ? std::string(real) : c;
    }
  }
  return std::nullopt;
}

int runModel(int argc, char** args) {
  const auto path = findModelPythonPath();
  if (!path) {
    std::fprintf(stderr,
                 "epochctl: error: cannot find the epochfs Python package (epochfs/model.py) next "
                 "to this binary; set EPOCHFS_PYTHONPATH to the checkout's tools/python\n");
    return 1;
  }
  const char* python = access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
  const char* old = getenv("PYTHONPATH");
  const std::string pp = old != nullptr && *old != '\0' ? *path + ":" + old : *path;
  setenv("PYTHONPATH", pp.c_str(), 1);
  std::vector<char*> argv = {
      const_cast<char*>(python), const_cast<char*>("-c"),
      const_cast<char*>("import sys; from epochfs.model import main; "
                        "sys.exit(main(sys.argv[1:], prog='epochctl model'))")};
  for (int i = 0; i < argc; ++i) argv.push_back(args[i]);
  argv.push_back(nullptr);
  execvp(python, argv.data());
  std::fprintf(stderr, "epochctl: error: cannot run %s: %s\n", python, std::strerror(errno));
  return 1;
}

}  // namespace epochfs::ctl
