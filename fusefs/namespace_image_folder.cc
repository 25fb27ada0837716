#include "fusefs/namespace_image_folder.h"

#include <sys/stat.h>

#include <algorithm>

namespace epochfs::fusefs {

using Ino = DatasetNamespace::Ino;

namespace {

bool isDir(const DatasetNamespace& ns, Ino ino) { return S_ISDIR(ns.attr(ino).mode); }

// The class's directories (itself first) as (suffix, ino): suffix "" or "/a/b".
void collectDirs(const DatasetNamespace& ns, Ino dir, const std::string& suffix,
                 std::vector<std::pair<std::string, Ino>>& out) {
  out.emplace_back(suffix, dir);
  for (uint32_t kid : ns.children(dir)) {
    if (isDir(ns, kid)) collectDirs(ns, kid, suffix + "/" + std::string(ns.name(kid)), out);
  }
}

}  // namespace

cache::Result<prefetch::ImageFolderSamples> imageFolderSamplesOf(const DatasetNamespace& ns) {
  using prefetch::pythonNameLess;
  std::vector<Ino> classDirs;
  for (uint32_t kid : ns.children(DatasetNamespace::kRootIno)) {
    if (isDir(ns, kid)) classDirs.push_back(kid);
  }
  if (classDirs.empty()) {
    return cache::Status::notFound("Couldn't find any class folder in the mount's root.");
  }
  std::sort(classDirs.begin(), classDirs.end(),
            [&ns](Ino a, Ino b) { return pythonNameLess(ns.name(a), ns.name(b)); });
  prefetch::ImageFolderSamples result;
  std::vector<std::string> emptyClasses;
  for (size_t ci = 0; ci < classDirs.size(); ++ci) {
    const std::string cls(ns.name(classDirs[ci]));
    result.classes.push_back(cls);
    std::vector<std::pair<std::string, Ino>> dirs;
    collectDirs(ns, classDirs[ci], "", dirs);
    std::sort(dirs.begin(), dirs.end(),
              [](const auto& a, const auto& b) { return pythonNameLess(a.first, b.first); });
    const size_t before = result.samples.size();
    for (const auto& [suffix, dir] : dirs) {
      std::vector<Ino> files;
      for (uint32_t kid : ns.children(dir)) {
        if (!isDir(ns, kid) && prefetch::hasImageExtension(ns.name(kid))) files.push_back(kid);
      }
      std::sort(files.begin(), files.end(),
                [&ns](Ino a, Ino b) { return pythonNameLess(ns.name(a), ns.name(b)); });
      for (Ino f : files) {
        result.samples.push_back(
            {cls + suffix + "/" + std::string(ns.name(f)), static_cast<int32_t>(ci)});
      }
    }
    if (result.samples.size() == before) emptyClasses.push_back(cls);
  }
  if (!emptyClasses.empty()) {
    return cache::Status::notFound(prefetch::noValidFileMessage(emptyClasses));
  }
  return result;
}

}  // namespace epochfs::fusefs
