// `epochctl model [--paper] [--png DIR] [inputs...]`: the seed paper's
// data-loading model and the placement + balancing simulator (docs/MODEL.md).
// The model is Python (tools/python/epochfs/model.py, numpy; matplotlib for
// --png); this command runs it with /usr/bin/python3, finding the package
// relative to the epochctl binary, so it works from a checkout's build/bin.
#pragma once

#include <optional>
#include <string>

namespace epochfs::ctl {

// The directory holding the `epochfs` Python package, first match of:
// $EPOCHFS_PYTHONPATH; <exe dir>/../../tools/python (build/bin of a checkout);
// <exe dir>/../share/epochfs/python (installed); the source tree epochctl was
// built from. nullopt if none holds epochfs/model.py.
std::optional<std::string> findModelPythonPath();

// Replaces this process with the model, passing `args` on. Returns (with a
// one-line reason on stderr) only when that is impossible: exit status 1.
int runModel(int argc, char** args);

}  // namespace epochfs::ctl
