// DatasetNamespace::fromEntries: the namespace built from a listing (an object
// store's keys) is numbered like a POSIX walk of the same tree, whatever the
// order of the listing; duplicates and malformed paths are skipped, not fatal.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>

#include "fusefs/dataset_namespace.h"

namespace epochfs::fusefs {
namespace {

namespace fs = std::filesystem;
using Ino = DatasetNamespace::Ino;

NodeAttr fileAttr(uint64_t size, int64_t mtimeNs = 1000, uint64_t version = 7) {
  NodeAttr a;
  a.mode = S_IFREG | 0444;
  a.size = size;
  a.sourceIno = version;
  a.atimeNs = a.mtimeNs = a.ctimeNs = mtimeNs;
  return a;
}

NodeAttr dirAttr(int64_t mtimeNs = 0) {
  NodeAttr a;
  a.mode = S_IFDIR | 0555;
  a.nlink = 2;
  a.atimeNs = a.mtimeNs = a.ctimeNs = mtimeNs;
  return a;
}

DatasetNamespace build(std::vector<NamespaceEntry> entries, const NodeAttr& root = dirAttr()) {
  auto ns = DatasetNamespace::fromEntries(std::move(entries), root);
  EXPECT_TRUE(ns.isOk()) << ns.status().message();
  return std::move(ns).value();
}

// stem + i (GCC 12 warns falsely, -Wrestrict, on "x" + std::to_string(i) here).
std::string numbered(std::string_view stem, int i) {
  std::string s(stem);
  s += std::to_string(i);
  return s;
}

std::map<std::string, Ino> numbering(const DatasetNamespace& ns) {
  std::map<std::string, Ino> out;
  for (Ino ino = 1; ino <= ns.nodeCount(); ++ino) out[ns.path(ino)] = ino;
  return out;
}

// Pass: parents nobody listed are created with dirAttr; numbering is
// breadth-first in name order; lookup, children, parentOf, path, name, fileId,
// identity and the counters are those of the tree.
TEST(NamespaceFromEntriesTest, ImplicitParentsNumberedBreadthFirst) {
  const DatasetNamespace ns = build({{"b/c/d.txt", fileAttr(4, 1000, 42)},
                                     {"a.txt", fileAttr(1)},
                                     {"b/e", fileAttr(2)},
                                     {"b/c-d", fileAttr(3)}},
                                    dirAttr(99));
  ASSERT_EQ(ns.nodeCount(), 7u);
  EXPECT_EQ(ns.path(1), "");
  EXPECT_EQ(ns.path(2), "a.txt");
  EXPECT_EQ(ns.path(3), "b");
  EXPECT_EQ(ns.path(4), "b/c");
  EXPECT_EQ(ns.path(5), "b/c-d");  // name order: "c" < "c-d" < "e"
  EXPECT_EQ(ns.path(6), "b/e");
  EXPECT_EQ(ns.path(7), "b/c/d.txt");
  EXPECT_EQ(ns.lookup(1, "b"), 3u);
  EXPECT_EQ(ns.lookup(3, "c"), 4u);
  EXPECT_EQ(ns.lookup(4, "d.txt"), 7u);
  EXPECT_EQ(ns.lookup(3, "nope"), 0u);
  EXPECT_EQ(ns.children(1).toVector(), (std::vector<uint32_t>{2, 3}));
  EXPECT_EQ(ns.children(3).toVector(), (std::vector<uint32_t>{4, 5, 6}));
  EXPECT_EQ(ns.parentOf(7), 4u);
  EXPECT_EQ(ns.name(7), "d.txt");
  EXPECT_EQ(ns.fileId(7), cache::fileIdForPath("b/c/d.txt"));
  EXPECT_EQ(ns.fileId(4), cache::fileIdForPath("b/c"));
  EXPECT_EQ(ns.attr(1).mtimeNs, 99);  // the root and the implicit parents: dirAttr
  EXPECT_EQ(ns.attr(4).mode, S_IFDIR | 0555u);
  EXPECT_EQ(ns.attr(4).mtimeNs, 99);
  EXPECT_EQ(ns.identity(7).inode, 42u);
  EXPECT_EQ(ns.identity(7).size, 4u);
  EXPECT_EQ(ns.fileCount(), 4u);
  EXPECT_EQ(ns.dirCount(), 2u);
  EXPECT_EQ(ns.totalBytes(), 10u);
  struct stat st;
  ns.fillStat(7, &st);
  EXPECT_EQ(st.st_ino, 7u);
  EXPECT_EQ(st.st_size, 4);
}

// Pass: a listed directory keeps its own attributes whether it comes before or
// after its contents; listed twice, the first wins; an empty listed directory exists.
TEST(NamespaceFromEntriesTest, ExplicitDirectoriesKeepTheirAttributes) {
  const DatasetNamespace ns = build({{"d/x", fileAttr(1)},
                                     {"d", dirAttr(555)},
                                     {"d", dirAttr(666)},
                                     {"e", dirAttr(777)},
                                     {"e/y", fileAttr(1)},
                                     {"empty", dirAttr(888)}});
  EXPECT_EQ(ns.attr(ns.lookup(1, "d")).mtimeNs, 555);
  EXPECT_EQ(ns.attr(ns.lookup(1, "e")).mtimeNs, 777);
  const Ino empty = ns.lookup(1, "empty");
  ASSERT_NE(empty, 0u);
  EXPECT_EQ(ns.attr(empty).mtimeNs, 888);
  EXPECT_TRUE(ns.children(empty).empty());
  EXPECT_EQ(ns.dirCount(), 3u);
}

// Pass: of two files with one path the first wins; a file beside a directory of
// the same path loses (the directory holds entries); malformed paths are skipped.
TEST(NamespaceFromEntriesTest, DuplicatesAndMalformedPathsAreSkipped) {
  const DatasetNamespace ns = build({{"f", fileAttr(1)},
                                     {"f", fileAttr(2)},
                                     {"clash", fileAttr(3)},
                                     {"clash/inner", fileAttr(4)},
                                     {"marker", fileAttr(5)},
                                     {"marker", dirAttr(1)},
                                     {"", fileAttr(6)},
                                     {"/lead", fileAttr(6)},
                                     {"a//b", fileAttr(6)},
                                     {"a/./b", fileAttr(6)},
                                     {"a/../b", fileAttr(6)},
                                     {"trail/", fileAttr(6)}});
  EXPECT_EQ(numbering(ns),
            (std::map<std::string, Ino>{
                {"", 1}, {"clash", 2}, {"f", 3}, {"marker", 4}, {"clash/inner", 5}}));
  EXPECT_EQ(ns.attr(3).size, 1u);
  EXPECT_TRUE(S_ISDIR(ns.attr(2).mode));
  EXPECT_TRUE(S_ISDIR(ns.attr(4).mode));
  EXPECT_EQ(ns.fileCount(), 2u);
  EXPECT_EQ(ns.totalBytes(), 5u);
}

std::vector<NamespaceEntry> sampleTree() {
  std::vector<NamespaceEntry> e;
  for (int d = 0; d < 12; ++d) {
    const std::string dir = "class_" + std::to_string(d);
    e.push_back({dir + "/sub", dirAttr(d)});
    for (int f = 0; f < d * 3 + 1; ++f) {
      e.push_back({dir + "/img_" + std::to_string(f), fileAttr(f, d * 100 + f, d * 1000 + f)});
    }
    e.push_back({dir + "/sub/x", fileAttr(d)});
  }
  return e;
}

// Pass: the same entries in any order give the same numbers and fingerprint; a
// changed version hash, size or extra file changes the fingerprint.
TEST(NamespaceFromEntriesTest, FingerprintIndependentOfOrderSensitiveToVersions) {
  const DatasetNamespace first = build(sampleTree());
  const auto firstNumbers = numbering(first);
  std::mt19937 rng(12345);
  for (int i = 0; i < 5; ++i) {
    auto shuffled = sampleTree();
    std::shuffle(shuffled.begin(), shuffled.end(), rng);
    const DatasetNamespace ns = build(std::move(shuffled));
    EXPECT_EQ(numbering(ns), firstNumbers) << "shuffle " << i;
    EXPECT_EQ(ns.fingerprint(), first.fingerprint()) << "shuffle " << i;
  }
  auto changed = sampleTree();
  changed[5].attr.sourceIno ^= 1;  // a new ETag, same size and time
  EXPECT_NE(build(changed).fingerprint(), first.fingerprint());
  changed = sampleTree();
  changed[5].attr.size += 1;
  EXPECT_NE(build(changed).fingerprint(), first.fingerprint());
  changed = sampleTree();
  changed.push_back({"class_3/added", fileAttr(1)});
  EXPECT_NE(build(changed).fingerprint(), first.fingerprint());
}

// Pass: the nodes of a POSIX walk, listed in shuffled order, give back the
// walk's numbering, parents, children, file ids and attributes.
TEST(NamespaceFromEntriesTest, SameNumberingAsPosixWalk) {
  char tmpl[] = "/tmp/epochfs-nsfe-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const fs::path root = tmpl;
  for (int d = 0; d < 15; ++d) {
    const fs::path dir = root / numbered("c", d);
    fs::create_directories(dir / "deep" / "er");
    fs::create_directories(dir / "empty");
    for (int f = 0; f < d % 5 + 1; ++f) std::ofstream(dir / numbered("f", f)) << f;
    std::ofstream(dir / "deep" / "er" / "leaf") << d;
    std::ofstream(dir / "deep-x") << d;  // sorts between "deep" and "empty"
  }
  const int fd = open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  auto walked = DatasetNamespace::snapshot(fd, 8);
  close(fd);
  fs::remove_all(root);
  ASSERT_TRUE(walked.isOk());
  std::vector<NamespaceEntry> entries;
  for (Ino ino = 2; ino <= walked->nodeCount(); ++ino) {
    entries.push_back({walked->path(ino), walked->attr(ino)});
  }
  std::shuffle(entries.begin(), entries.end(), std::mt19937(7));
  const DatasetNamespace listed = build(std::move(entries), walked->attr(1));
  ASSERT_EQ(listed.nodeCount(), walked->nodeCount());
  for (Ino ino = 1; ino <= listed.nodeCount(); ++ino) {
    ASSERT_EQ(listed.path(ino), walked->path(ino)) << ino;
    EXPECT_EQ(listed.parentOf(ino), walked->parentOf(ino)) << ino;
    EXPECT_EQ(listed.children(ino).toVector(), walked->children(ino).toVector()) << ino;
    EXPECT_EQ(listed.fileId(ino), walked->fileId(ino)) << ino;
    EXPECT_EQ(listed.identity(ino), walked->identity(ino)) << ino;
  }
  EXPECT_EQ(listed.fileCount(), walked->fileCount());
  EXPECT_EQ(listed.dirCount(), walked->dirCount());
  EXPECT_EQ(listed.totalBytes(), walked->totalBytes());
}

// Pass: 100 000 files in 800 directories, shuffled, build in well under the
// bound (a few hundred ms in Release), with every node in place.
TEST(NamespaceFromEntriesTest, HundredThousandEntries) {
  std::vector<NamespaceEntry> entries;
  entries.reserve(100000);
  for (int i = 0; i < 100000; ++i) {
    entries.push_back(
        {numbered("d", i % 100) + numbered("/s", i % 7) + numbered("/f", i), fileAttr(i)});
  }
  std::shuffle(entries.begin(), entries.end(), std::mt19937(1));
  const auto start = std::chrono::steady_clock::now();
  const DatasetNamespace ns = build(std::move(entries));
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::steady_clock::now() - start)
                      .count();
  EXPECT_LT(ms, 20000);
  EXPECT_EQ(ns.nodeCount(), 1u + 100 + 700 + 100000);
  EXPECT_EQ(ns.fileCount(), 100000u);
  EXPECT_EQ(ns.dirCount(), 800u);
  const Ino d3 = ns.lookup(1, "d3");
  const Ino s3 = ns.lookup(d3, "s3");
  const Ino f = ns.lookup(s3, "f1403");  // 1403 % 100 == 3, 1403 % 7 == 3
  ASSERT_NE(f, 0u);
  EXPECT_EQ(ns.path(f), "d3/s3/f1403");
  EXPECT_EQ(ns.attr(f).size, 1403u);
  RecordProperty("build_ms", std::to_string(ms));
}

}  // namespace
}  // namespace epochfs::fusefs
