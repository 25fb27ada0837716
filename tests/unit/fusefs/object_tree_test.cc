// objectTreeFromKeys: an object store's keys become namespace entries —
// directories from the '/'s, explicit markers, and every key that cannot be a
// path skipped and counted by kind.
#include "fusefs/object_tree.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <random>

namespace epochfs::fusefs {
namespace {

using Ino = DatasetNamespace::Ino;

std::map<std::string, NodeAttr> byPath(const ObjectTree& t) {
  std::map<std::string, NodeAttr> out;
  for (const NamespaceEntry& e : t.entries) {
    EXPECT_TRUE(out.emplace(e.path, e.attr).second) << "listed twice: " << e.path;
  }
  return out;
}

std::vector<std::string> paths(const ObjectTree& t) {
  std::vector<std::string> out;
  for (const NamespaceEntry& e : t.entries) out.push_back(e.path);
  std::sort(out.begin(), out.end());
  return out;
}

ObjectRecord obj(std::string key, uint64_t size = 1, int64_t mtimeNs = 1, uint64_t version = 9) {
  return {std::move(key), size, mtimeNs, version};
}

DatasetNamespace build(const ObjectTree& t) {
  auto ns = DatasetNamespace::fromEntries(t.entries, t.rootAttr);
  EXPECT_TRUE(ns.isOk());
  return std::move(ns).value();
}

// Pass: directories come from the '/'s with the newest time below them; files
// and directories get the documented modes, owner, size, times and version.
TEST(ObjectTreeTest, ImplicitDirectoriesAndAttributes) {
  const ObjectTree t =
      objectTreeFromKeys({obj("train/a.jpg", 10, 100, 0xabc), obj("train/sub/b.jpg", 20, 300),
                          obj("val/c.jpg", 30, 200)},
                         "", 1000, 1001);
  EXPECT_EQ(t.skips.total(), 0u);
  const auto m = byPath(t);
  ASSERT_EQ(paths(t), (std::vector<std::string>{"train", "train/a.jpg", "train/sub",
                                                "train/sub/b.jpg", "val", "val/c.jpg"}));
  const NodeAttr& a = m.at("train/a.jpg");
  EXPECT_EQ(a.mode, S_IFREG | 0444u);
  EXPECT_EQ(a.uid, 1000u);
  EXPECT_EQ(a.gid, 1001u);
  EXPECT_EQ(a.nlink, 1u);
  EXPECT_EQ(a.size, 10u);
  EXPECT_EQ(a.sourceIno, 0xabcu);
  EXPECT_EQ(a.mtimeNs, 100);
  EXPECT_EQ(a.ctimeNs, 100);
  EXPECT_EQ(a.atimeNs, 100);
  const NodeAttr& train = m.at("train");
  EXPECT_EQ(train.mode, S_IFDIR | 0555u);
  EXPECT_EQ(train.nlink, 2u);
  EXPECT_EQ(train.uid, 1000u);
  EXPECT_EQ(train.size, 0u);
  EXPECT_EQ(train.mtimeNs, 300);  // newest below, two levels down
  EXPECT_EQ(train.ctimeNs, 300);
  EXPECT_EQ(m.at("train/sub").mtimeNs, 300);
  EXPECT_EQ(m.at("val").mtimeNs, 200);
  EXPECT_EQ(t.rootAttr.mode, S_IFDIR | 0555u);
  EXPECT_EQ(t.rootAttr.mtimeNs, 300);
  EXPECT_EQ(t.rootAttr.uid, 1000u);
}

// Pass: a key ending in '/' is a directory (its size ignored, its own time
// counted), with its parents; the prefix's own marker is ignored, not counted.
TEST(ObjectTreeTest, ExplicitDirectoryMarkers) {
  const ObjectTree t = objectTreeFromKeys(
      {obj("p/", 0, 5), obj("p/empty/", 7, 50), obj("p/x/y/", 0, 60), obj("p/x/y/z", 3, 40)}, "p/",
      0, 0);
  EXPECT_EQ(t.skips.total(), 0u);
  EXPECT_EQ(paths(t), (std::vector<std::string>{"empty", "x", "x/y", "x/y/z"}));
  const auto m = byPath(t);
  EXPECT_TRUE(S_ISDIR(m.at("empty").mode));
  EXPECT_EQ(m.at("empty").size, 0u);
  EXPECT_EQ(m.at("empty").mtimeNs, 50);
  EXPECT_EQ(m.at("x/y").mtimeNs, 60);
  EXPECT_EQ(m.at("x").mtimeNs, 60);
  EXPECT_EQ(t.rootAttr.mtimeNs, 60);
  const DatasetNamespace ns = build(t);
  EXPECT_TRUE(ns.children(ns.lookup(1, "empty")).empty());
  EXPECT_EQ(ns.path(ns.lookup(ns.lookup(ns.lookup(1, "x"), "y"), "z")), "x/y/z");
}

// Pass: a key that is also the directory of other keys (implicitly or by a
// marker) is skipped and counted; the directory keeps its contents.
TEST(ObjectTreeTest, FileDirectoryCollisionsDirectoryWins) {
  const ObjectTree t = objectTreeFromKeys(
      {obj("a", 1, 900), obj("a/b"), obj("c"), obj("c/"), obj("d/e"), obj("d/e/f/g"), obj("plain")},
      "", 0, 0);
  EXPECT_EQ(t.skips.collisions, 3u);
  EXPECT_EQ(t.skips.collisionExample, "a");
  EXPECT_EQ(t.skips.total(), 3u);
  EXPECT_EQ(paths(t),
            (std::vector<std::string>{"a", "a/b", "c", "d", "d/e", "d/e/f", "d/e/f/g", "plain"}));
  const auto m = byPath(t);
  EXPECT_TRUE(S_ISDIR(m.at("a").mode));
  EXPECT_EQ(m.at("a").mtimeNs, 1);  // the skipped file's time does not count
  EXPECT_TRUE(S_ISDIR(m.at("c").mode));
  EXPECT_TRUE(S_ISDIR(m.at("d/e").mode));
}

// Pass: empty, "." / ".." and over-long components are skipped and counted by
// kind, with the first key of each kind as the example; 255 bytes is allowed.
TEST(ObjectTreeTest, UnusableKeysSkippedByKind) {
  const std::string n255(255, 'n'), n256(256, 'n');
  const ObjectTree t = objectTreeFromKeys(
      {obj("a//b"), obj("/lead"), obj("//"), obj("x/./y"), obj("x/../y"), obj(".."), obj("./"),
       obj(n256 + "/f"), obj("ok/" + n256 + "/"), obj("ok/" + n255)},
      "", 0, 0);
  EXPECT_EQ(t.skips.emptyComponents, 3u);
  EXPECT_EQ(t.skips.emptyComponentExample, "a//b");
  EXPECT_EQ(t.skips.dotComponents, 4u);
  EXPECT_EQ(t.skips.dotComponentExample, "x/./y");
  EXPECT_EQ(t.skips.longNames, 2u);
  EXPECT_EQ(t.skips.longNameExample, n256 + "/f");
  EXPECT_EQ(t.skips.collisions, 0u);
  EXPECT_EQ(t.skips.total(), 9u);
  EXPECT_EQ(paths(t), (std::vector<std::string>{"ok", "ok/" + n255}));
  logSkips(t.skips, "s3://bucket/");  // one warning per kind; must not throw
}

// Pass: the prefix is removed from every key (one is slashed if it lacks the
// '/'); keys outside it are counted, including ones that only share its letters.
TEST(ObjectTreeTest, PrefixStripped) {
  const std::vector<ObjectRecord> keys = {obj("data/train/x/1.jpg"), obj("data/train/"),
                                          obj("data/val/2.jpg"), obj("data/trainx/3"),
                                          obj("data/train/4.jpg")};
  for (std::string_view prefix : {"data/train/", "data/train"}) {
    const ObjectTree t = objectTreeFromKeys(keys, prefix, 0, 0);
    EXPECT_EQ(paths(t), (std::vector<std::string>{"4.jpg", "x", "x/1.jpg"})) << prefix;
    EXPECT_EQ(t.skips.outsidePrefix, 2u) << prefix;
    EXPECT_EQ(t.skips.outsidePrefixExample, "data/val/2.jpg") << prefix;
    EXPECT_EQ(t.skips.total(), 2u) << prefix;
  }
}

std::vector<ObjectRecord> sampleKeys() {
  std::vector<ObjectRecord> keys;
  for (int i = 0; i < 300; ++i) {
    keys.push_back(obj("ds/shard_" + std::to_string(i % 13) + "/" + std::to_string(i) + ".tar",
                       i * 10, 1000 + i, 0x5000 + i));
  }
  keys.push_back(obj("ds/meta/"));
  return keys;
}

// Pass: the same keys listed in any order build the same numbering and
// fingerprint; a changed ETag (version hash) changes the fingerprint and the
// file's identity, nothing else.
TEST(ObjectTreeTest, NamespaceStableAcrossListingOrderAndSeesNewVersions) {
  const DatasetNamespace first = build(objectTreeFromKeys(sampleKeys(), "ds/", 1, 1));
  std::mt19937 rng(99);
  for (int i = 0; i < 5; ++i) {
    auto keys = sampleKeys();
    std::shuffle(keys.begin(), keys.end(), rng);
    const DatasetNamespace ns = build(objectTreeFromKeys(keys, "ds/", 1, 1));
    ASSERT_EQ(ns.nodeCount(), first.nodeCount());
    for (Ino ino = 1; ino <= ns.nodeCount(); ++ino) ASSERT_EQ(ns.path(ino), first.path(ino));
    EXPECT_EQ(ns.fingerprint(), first.fingerprint()) << "shuffle " << i;
  }
  auto keys = sampleKeys();
  keys[17].versionHash ^= 0xff;
  const DatasetNamespace changed = build(objectTreeFromKeys(keys, "ds/", 1, 1));
  EXPECT_NE(changed.fingerprint(), first.fingerprint());
  const Ino shard = first.lookup(1, "shard_4");
  const Ino f = first.lookup(shard, "17.tar");
  ASSERT_NE(f, 0u);
  EXPECT_EQ(changed.lookup(changed.lookup(1, "shard_4"), "17.tar"), f);
  EXPECT_NE(changed.identity(f), first.identity(f));
  EXPECT_EQ(changed.identity(f).fileId, first.identity(f).fileId);
  EXPECT_EQ(first.identity(f).inode, 0x5000u + 17);
  EXPECT_EQ(first.fileCount(), 300u);
  EXPECT_EQ(first.dirCount(), 14u);
}

// Pass: 100 000 keys become a namespace (keys to entries to nodes) well inside
// the bound (a few hundred ms in Release).
TEST(ObjectTreeTest, HundredThousandKeys) {
  std::vector<ObjectRecord> keys;
  keys.reserve(100000);
  for (int i = 0; i < 100000; ++i) {
    keys.push_back(obj("prefix/c" + std::to_string(i % 1000) + "/" + std::to_string(i % 3) +
                           "/img_" + std::to_string(i) + ".jpg",
                       i, i, i));
  }
  std::shuffle(keys.begin(), keys.end(), std::mt19937(3));
  const auto start = std::chrono::steady_clock::now();
  ObjectTree t = objectTreeFromKeys(keys, "prefix/", 0, 0);
  const NodeAttr root = t.rootAttr;
  auto ns = DatasetNamespace::fromEntries(std::move(t.entries), root);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::steady_clock::now() - start)
                      .count();
  ASSERT_TRUE(ns.isOk());
  EXPECT_LT(ms, 20000);
  EXPECT_EQ(ns->nodeCount(), 1u + 1000 + 3000 + 100000);
  EXPECT_EQ(ns->fileCount(), 100000u);
  EXPECT_EQ(root.mtimeNs, 99999);
  RecordProperty("build_ms", std::to_string(ms));
}

}  // namespace
}  // namespace epochfs::fusefs
