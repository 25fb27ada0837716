#include "fusefs/object_tree.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <algorithm>
#include <unordered_map>

namespace epochfs::fusefs {

namespace {

constexpr size_t kNameMax = 255;

enum class KeyProblem { kNone, kEmptyComponent, kDotComponent, kLongName };

// The first problem among the components of `path` ("" is one empty component).
KeyProblem checkComponents(std::string_view path) {
  for (size_t start = 0;;) {
    const size_t slash = path.find('/', start);
    const std::string_view c =
        path.substr(start, slash == std::string_view::npos ? slash : slash - start);
    if (c.empty()) return KeyProblem::kEmptyComponent;
    if (c == "." || c == "..") return KeyProblem::kDotComponent;
    if (c.size() > kNameMax) return KeyProblem::kLongName;
    if (slash == std::string_view::npos) return KeyProblem::kNone;
    start = slash + 1;
  }
}

void note(uint64_t& count, std::string& example, const std::string& key) {
  if (count++ == 0) example = key;
}

NodeAttr dirAttr(uint32_t uid, uint32_t gid, int64_t mtimeNs) {
  NodeAttr a;
  a.mode = S_IFDIR | 0555;
  a.uid = uid;
  a.gid = gid;
  a.nlink = 2;
  a.atimeNs = a.mtimeNs = a.ctimeNs = mtimeNs;
  return a;
}

// A key that survived the checks: its path below the prefix (a view into the
// key) and whether it is a directory marker.
struct Kept {
  std::string_view path;
  size_t index;
  bool dir;
};

}  // namespace

uint64_t ObjectTreeSkips::total() const {
  return collisions + emptyComponents + dotComponents + longNames + outsidePrefix;
}

ObjectTree objectTreeFromKeys(const std::vector<ObjectRecord>& objects, std::string_view prefix,
                              uint32_t uid, uint32_t gid) {
  ObjectTree out;
  ObjectTreeSkips& skips = out.skips;
  std::string slashed;
  if (!prefix.empty() && prefix.back() != '/') {
    slashed = std::string(prefix) + '/';
    prefix = slashed;
  }

  // 1. Strip the prefix and check every key's components.
  std::vector<Kept> kept;
  kept.reserve(objects.size());
  for (size_t i = 0; i < objects.size(); ++i) {
    const std::string& key = objects[i].key;
    if (!std::string_view(key).starts_with(prefix)) {
      note(skips.outsidePrefix, skips.outsidePrefixExample, key);
      continue;
    }
    std::string_view rest = std::string_view(key).substr(prefix.size());
    if (rest.empty()) continue;  // the prefix's own marker: the root
    const bool dir = rest.back() == '/';
    if (dir) rest.remove_suffix(1);
    switch (checkComponents(rest)) {
      case KeyProblem::kNone:
        kept.push_back({rest, i, dir});
        break;
      case KeyProblem::kEmptyComponent:
        note(skips.emptyComponents, skips.emptyComponentExample, key);
        break;
      case KeyProblem::kDotComponent:
        note(skips.dotComponents, skips.dotComponentExample, key);
        break;
      case KeyProblem::kLongName:
        note(skips.longNames, skips.longNameExample, key);
        break;
    }
  }

  // 2. Every directory: the explicit markers and every kept key's parents
  // (views into the keys, which outlive this call). Deepest first: a known
  // directory's parents are known too.
  std::unordered_map<std::string_view, int64_t> dirs;  // path -> newest mtime below
  dirs.reserve(kept.size() / 4 + 16);
  for (const Kept& k : kept) {
    for (size_t end = k.dir ? k.path.size() : k.path.rfind('/'); end != std::string_view::npos;
         end = end == 0 ? std::string_view::npos : k.path.rfind('/', end - 1)) {
      if (!dirs.try_emplace(k.path.substr(0, end), 0).second) break;
    }
  }

  // 3. Files, unless a directory has the same path; every kept key's time
  // raises its directories'.
  int64_t newest = 0;
  out.entries.reserve(kept.size() + dirs.size());
  for (const Kept& k : kept) {
    const ObjectRecord& o = objects[k.index];
    if (k.dir) {
      int64_t& t = dirs.find(k.path)->second;
      t = std::max(t, o.mtimeNs);
    } else if (dirs.contains(k.path)) {
      note(skips.collisions, skips.collisionExample, o.key);
      continue;
    } else {
      NodeAttr a;
      a.mode = S_IFREG | 0444;
      a.uid = uid;
      a.gid = gid;
      a.nlink = 1;
      a.size = o.size;
      a.sourceIno = o.versionHash;
      a.atimeNs = a.mtimeNs = a.ctimeNs = o.mtimeNs;
      out.entries.push_back({std::string(k.path), a});
    }
    newest = std::max(newest, o.mtimeNs);
    for (size_t slash = k.path.rfind('/'); slash != std::string_view::npos;
         slash = slash == 0 ? std::string_view::npos : k.path.rfind('/', slash - 1)) {
      int64_t& t = dirs.find(k.path.substr(0, slash))->second;
      t = std::max(t, o.mtimeNs);
    }
  }
  for (const auto& [path, mtimeNs] : dirs) {
    out.entries.push_back({std::string(path), dirAttr(uid, gid, mtimeNs)});
  }
  out.rootAttr = dirAttr(uid, gid, newest);
  return out;
}

void logSkips(const ObjectTreeSkips& skips, std::string_view source) {
  auto one = [&](uint64_t count, const std::string& example, std::string_view why) {
    if (count == 0) return;
    spdlog::warn("{}: skipped {} key(s) {}, e.g. '{}'", source, count, why, example);
  };
  one(skips.collisions, skips.collisionExample,
      "that are also a directory of other keys (the directory wins)");
  one(skips.emptyComponents, skips.emptyComponentExample,
      "with an empty path component ('//' or a leading '/')");
  one(skips.dotComponents, skips.dotComponentExample, "with a '.' or '..' path component");
  one(skips.longNames, skips.longNameExample, "with a path component over 255 bytes");
  one(skips.outsidePrefix, skips.outsidePrefixExample, "outside the prefix");
}

}  // namespace epochfs::fusefs
