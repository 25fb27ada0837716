// DatasetNamespace numbering: a restarted daemon must give every node the
// inode number the kernel already holds (docs/RELIABILITY.md, case 9).
#include "fusefs/dataset_namespace.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "fusefs/daemon/supervisor_link.h"

namespace epochfs::fusefs {
namespace {

namespace fs = std::filesystem;

class NamespaceNumberingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/epochfs-ns-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    // Directories of different sizes so the walk's threads finish in varying order.
    for (int d = 0; d < 40; ++d) {
      const fs::path dir = fs::path(root_) / ("class_" + std::to_string(d));
      fs::create_directories(dir / "sub");
      for (int f = 0; f < (d % 7) * 5 + 1; ++f) {
        std::ofstream(dir / ("img_" + std::to_string(f))) << f;
      }
      std::ofstream(dir / "sub" / "x") << d;
    }
  }
  void TearDown() override { fs::remove_all(root_); }

  std::map<std::string, DatasetNamespace::Ino> numbering(uint64_t* fingerprint) {
    const int fd = open(root_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    auto ns = DatasetNamespace::snapshot(fd, 16);
    close(fd);
    EXPECT_TRUE(ns.isOk());
    std::map<std::string, DatasetNamespace::Ino> out;
    for (DatasetNamespace::Ino ino = 1; ino <= ns->nodeCount(); ++ino) out[ns->path(ino)] = ino;
    *fingerprint = ns->fingerprint();
    return out;
  }

  std::string root_;
};

// Pass: ten snapshots of the same tree with 16 threads give every path the
// same inode number and the same fingerprint.
TEST_F(NamespaceNumberingTest, SameTreeSameNumbersEveryTime) {
  uint64_t fp0 = 0;
  const auto first = numbering(&fp0);
  ASSERT_GT(first.size(), 100u);
  for (int i = 0; i < 10; ++i) {
    uint64_t fp = 0;
    EXPECT_EQ(numbering(&fp), first) << "snapshot " << i;
    EXPECT_EQ(fp, fp0);
  }
}

// Pass: numbering is breadth-first in name order (root 1, then its children
// sorted by name); one added file, or one file rewritten, changes the fingerprint.
TEST_F(NamespaceNumberingTest, BreadthFirstInNameOrderAndFingerprintSeesChanges) {
  uint64_t fp0 = 0;
  const auto n = numbering(&fp0);
  EXPECT_EQ(n.at(""), 1u);
  EXPECT_EQ(n.at("class_0"), 2u);
  EXPECT_EQ(n.at("class_1"), 3u);
  EXPECT_EQ(n.at("class_10"), 4u);  // name order, not numeric
  std::ofstream(fs::path(root_) / "class_3" / "added") << "new";
  uint64_t fp1 = 0;
  numbering(&fp1);
  EXPECT_NE(fp1, fp0);
  // A file rewritten in place (same path, other size) changes it too.
  std::ofstream(fs::path(root_) / "class_3" / "img_0") << "rewritten";
  uint64_t fp2 = 0;
  numbering(&fp2);
  EXPECT_NE(fp2, fp1);
}

// Pass: after the walk's in-place renumbering every directory's children are
// one range of inodes, sorted by name, each naming the directory as its
// parent, and every path leads back to its inode.
TEST_F(NamespaceNumberingTest, ChildrenAreRangesAndNodesAreCompact) {
  for (int f = 0; f < 20000; ++f) {
    std::ofstream(fs::path(root_) / "class_5" / ("n01440764_" + std::to_string(f) + ".JPEG"));
  }
  const int fd = open(root_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  auto ns = DatasetNamespace::snapshot(fd, 16);
  close(fd);
  ASSERT_TRUE(ns.isOk()) << ns.status().message();
  size_t reached = 1;
  for (DatasetNamespace::Ino dir = 1; dir <= ns->nodeCount(); ++dir) {
    const auto kids = ns->children(dir);
    reached += kids.size();
    for (size_t k = 0; k < kids.size(); ++k) {
      ASSERT_EQ(kids[k], kids[0] + k) << ns->path(dir);
      ASSERT_EQ(ns->parentOf(kids[k]), dir);
      if (k > 0) {
        ASSERT_LT(ns->name(kids[k - 1]), ns->name(kids[k]));
      }
    }
  }
  EXPECT_EQ(reached, ns->nodeCount());
  for (DatasetNamespace::Ino ino = 2; ino <= ns->nodeCount(); ino += 97) {
    const std::string p = ns->path(ino);
    DatasetNamespace::Ino at = 1;
    for (size_t start = 0; start <= p.size();) {
      const size_t slash = std::min(p.find('/', start), p.size());
      at = ns->lookup(at, std::string_view(p).substr(start, slash - start));
      start = slash + 1;
    }
    EXPECT_EQ(at, ino) << p;
  }
  ASSERT_GT(ns->nodeCount(), 20000u);
}

// Pass: 300,000 files named as ImageNet's take under 80 bytes each: a 48-byte
// node, the name, one partly used chunk of nodes and of names. (The daemon's
// resident memory is measured from outside: tools/bench/namespace-memory.)
TEST(NamespaceMemoryTest, UnderEightyBytesAFile) {
  std::vector<NamespaceEntry> entries;
  for (int i = 0; i < 300000; ++i) {
    char path[64];
    snprintf(path, sizeof path, "n%08d/n%08d_%d.JPEG", i / 1300, i / 1300, i);
    NodeAttr a;
    a.mode = S_IFREG | 0444;
    a.size = 110000;
    entries.push_back({path, a});
  }
  NodeAttr dir;
  dir.mode = S_IFDIR | 0555;
  auto ns = DatasetNamespace::fromEntries(std::move(entries), dir);
  ASSERT_TRUE(ns.isOk());
  EXPECT_EQ(ns->fileCount(), 300000u);
  EXPECT_LT(ns->memoryBytes() / ns->nodeCount(), 80u) << ns->memoryBytes();
}

// Pass: the FUSE_INIT message survives the hex round trip to a restarted
// worker byte for byte; malformed hex decodes to nothing.
TEST(SupervisorLinkTest, HexRoundTrip) {
  std::string bytes;
  for (int i = 0; i < 256; ++i) bytes.push_back(static_cast<char>(i));
  EXPECT_EQ(fromHex(toHex(bytes)), bytes);
  EXPECT_EQ(fromHex("abc"), "");
  EXPECT_EQ(fromHex("zz"), "");
}

NodeAttr fileAttr(uint64_t size) {
  NodeAttr a;
  a.mode = S_IFREG | 0444;
  a.size = size;
  return a;
}

NodeAttr dirAttr() {
  NodeAttr a;
  a.mode = S_IFDIR | 0755;
  return a;
}

DatasetNamespace fromPaths(const std::vector<std::pair<std::string, uint64_t>>& files) {
  std::vector<NamespaceEntry> entries;
  for (const auto& [path, size] : files) entries.push_back({path, fileAttr(size)});
  auto ns = DatasetNamespace::fromEntries(std::move(entries), dirAttr());
  EXPECT_TRUE(ns.isOk());
  return std::move(ns).value();
}

// The children of `dir` in `ns` named `names`, in name order.
std::vector<DatasetNamespace::Ino> childrenNamed(const DatasetNamespace& ns,
                                                 DatasetNamespace::Ino dir,
                                                 const std::vector<std::string>& names) {
  std::vector<DatasetNamespace::Ino> out;
  for (const auto& n : names) out.push_back(ns.lookup(dir, n));
  return out;
}

// Pass: grafted entries (a file into an existing directory, a new directory
// with its subtree, a directory replacing a gone file of the same name) get
// the next inode numbers, show in lookups and child lists in name order, and
// count in the totals; the snapshot's inodes keep their numbers.
TEST(NamespaceGraftTest, AddedEntriesGetNewInodesAndShow) {
  DatasetNamespace live = fromPaths({{"a/x", 10}, {"b", 20}, {"d/y", 30}});
  DatasetNamespace fresh =
      fromPaths({{"a/w", 5}, {"a/x", 10}, {"b/z", 7}, {"c/sub/q", 3}, {"c/r", 4}, {"d/y", 30}});
  const auto before = live.nodeCount();  // root, a, b, d, a/x, d/y
  ASSERT_EQ(before, 6u);
  EXPECT_TRUE(live.numberedBreadthFirst());
  const DatasetNamespace::Ino a = live.lookup(1, "a"), b = live.lookup(1, "b");
  const uint64_t aId = live.fileId(live.lookup(a, "x"));
  // The refresher marks "b" (a file, now a directory) gone first.
  NodeAttr gone = live.attr(b);
  gone.gone = true;
  live.setAttr(b, gone);

  const DatasetNamespace::Ino fa = fresh.lookup(1, "a");
  auto intoA = live.graft(a, fresh, childrenNamed(fresh, fa, {"w"}));
  ASSERT_TRUE(intoA.isOk());
  EXPECT_EQ(*intoA, 1u);
  auto intoRoot = live.graft(1, fresh, childrenNamed(fresh, 1, {"b", "c"}));
  ASSERT_TRUE(intoRoot.isOk());
  EXPECT_EQ(*intoRoot, 3u);  // b/z, c/r, c/sub/q
  EXPECT_FALSE(live.numberedBreadthFirst());

  EXPECT_EQ(live.nodeCount(), before + 7);  // a/w, b, c, b/z, c/r, c/sub, c/sub/q
  // Counts are the namespace's now: "b" (20 bytes) gone, 4 files added.
  EXPECT_EQ(live.fileCount(), 3u - 1 + 4);
  EXPECT_EQ(live.dirCount(), 2u + 3);  // a, d; b, c, c/sub
  EXPECT_EQ(live.totalBytes(), 60u - 20 + 5 + 7 + 3 + 4);
  EXPECT_EQ(live.lookup(a, "x"), 5u);  // unchanged numbers
  EXPECT_EQ(live.fileId(5), aId);
  const DatasetNamespace::Ino w = live.lookup(a, "w");
  EXPECT_GT(w, before);
  EXPECT_EQ(live.path(w), "a/w");
  EXPECT_EQ(live.attr(w).size, 5u);
  EXPECT_EQ(live.fileId(w), fresh.fileId(fresh.lookup(fa, "w")));
  EXPECT_EQ(live.children(a).toVector(), (std::vector<uint32_t>{static_cast<uint32_t>(w), 5u}));

  const DatasetNamespace::Ino nb = live.lookup(1, "b");
  EXPECT_NE(nb, b);
  EXPECT_TRUE(S_ISDIR(live.attr(nb).mode));
  EXPECT_FALSE(live.attr(nb).gone);
  EXPECT_TRUE(live.attr(b).gone);  // the old inode stays valid, gone
  const DatasetNamespace::Ino c = live.lookup(1, "c");
  const DatasetNamespace::Ino sub = live.lookup(c, "sub");
  const DatasetNamespace::Ino q = live.lookup(sub, "q");
  ASSERT_NE(q, 0u);
  EXPECT_EQ(live.path(q), "c/sub/q");
  EXPECT_EQ(live.parentOf(q), sub);
  EXPECT_EQ(live.parentOf(sub), c);
  EXPECT_EQ(live.path(live.lookup(nb, "z")), "b/z");
  std::vector<std::string> rootNames;
  for (uint32_t k : live.children(1)) rootNames.emplace_back(live.name(k));
  EXPECT_EQ(rootNames, (std::vector<std::string>{"a", "b", "c", "d"}));
  EXPECT_TRUE(live.valid(live.nodeCount()));
  EXPECT_FALSE(live.valid(live.nodeCount() + 1));
}

// Pass: readers look entries up and list the root while 2,000 grafts each
// add a directory with files: every lookup finds a whole entry or none, and
// a child list never shrinks (references stay valid: the old lists are kept).
TEST(NamespaceGraftTest, ReadersRunDuringGrafts) {
  DatasetNamespace live = fromPaths({{"base/f", 1}});
  std::vector<std::pair<std::string, uint64_t>> paths = {{"base/f", 1}};
  constexpr int kDirs = 2000;
  for (int d = 0; d < kDirs; ++d) {
    for (int f = 0; f < 3; ++f) {
      std::string path = "d";  // built with += (gcc 12 warns on a + chain here)
      path += std::to_string(d);
      path += "/f";
      path += std::to_string(f);
      paths.push_back({std::move(path), 9});
    }
  }
  DatasetNamespace fresh = fromPaths(paths);
  std::atomic<bool> done{false};
  std::atomic<uint64_t> bad{0};
  std::thread reader([&] {
    size_t lastSize = 0;
    while (!done.load()) {
      const auto& kids = live.children(1);
      if (kids.size() < lastSize) ++bad;
      lastSize = kids.size();
      for (uint32_t k : kids) {
        if (live.name(k).empty() || !live.valid(k)) ++bad;
      }
      const DatasetNamespace::Ino d = live.lookup(1, "d1999");
      if (d != 0 && live.lookup(d, "f2") == 0) ++bad;
    }
  });
  for (int d = 0; d < kDirs; ++d) {
    std::string name = "d";
    name += std::to_string(d);
    ASSERT_TRUE(live.graft(1, fresh, {fresh.lookup(1, name)}).isOk());
  }
  done = true;
  reader.join();
  EXPECT_EQ(bad.load(), 0u);
  EXPECT_EQ(live.fileCount(), 1u + 3 * kDirs);
  EXPECT_EQ(live.children(1).size(), 1u + kDirs);
  EXPECT_EQ(live.path(live.lookup(live.lookup(1, "d1234"), "f1")), "d1234/f1");
}

}  // namespace
}  // namespace epochfs::fusefs
