// NamespaceImage: a namespace survives encode/decode exactly (what a
// restarted worker serves, issue #34), and every malformed image is a
// Status error, never a crash.
#include "fusefs/namespace_image.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "tests/unit/scoped_temp_dir.h"

namespace epochfs::fusefs {
namespace {

namespace fs = std::filesystem;
using Ino = DatasetNamespace::Ino;

void expectSame(const DatasetNamespace& a, const DatasetNamespace& b) {
  ASSERT_EQ(a.nodeCount(), b.nodeCount());
  EXPECT_EQ(a.fileCount(), b.fileCount());
  EXPECT_EQ(a.dirCount(), b.dirCount());
  EXPECT_EQ(a.totalBytes(), b.totalBytes());
  EXPECT_EQ(a.fingerprint(), b.fingerprint());
  for (Ino ino = 1; ino <= a.nodeCount(); ++ino) {
    SCOPED_TRACE("inode " + std::to_string(ino) + " " + a.path(ino));
    EXPECT_EQ(a.path(ino), b.path(ino));
    EXPECT_EQ(a.name(ino), b.name(ino));
    if (ino > 1) {
      EXPECT_EQ(a.parentOf(ino), b.parentOf(ino));
    }
    EXPECT_EQ(a.children(ino).toVector(), b.children(ino).toVector());
    EXPECT_EQ(a.symlinkTarget(ino), b.symlinkTarget(ino));
    EXPECT_EQ(a.fileId(ino), b.fileId(ino));
    const NodeAttr x = a.attr(ino), y = b.attr(ino);
    EXPECT_EQ(x.mode, y.mode);
    EXPECT_EQ(x.uid, y.uid);
    EXPECT_EQ(x.gid, y.gid);
    EXPECT_EQ(x.nlink, y.nlink);
    EXPECT_EQ(x.size, y.size);
    EXPECT_EQ(x.sourceIno, y.sourceIno);
    EXPECT_EQ(x.rdev, y.rdev);
    EXPECT_EQ(x.atimeNs, y.atimeNs);
    EXPECT_EQ(x.mtimeNs, y.mtimeNs);
    EXPECT_EQ(x.ctimeNs, y.ctimeNs);
    EXPECT_EQ(x.gone, y.gone);
    if (ino > 1) {  // a gone entry a graft replaced is not what its name finds
      EXPECT_EQ(b.lookup(b.parentOf(ino), b.name(ino)), a.lookup(a.parentOf(ino), a.name(ino)));
    }
  }
}

DatasetNamespace walk(const std::string& dir) {
  const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  auto ns = DatasetNamespace::snapshot(fd, 4);
  close(fd);
  EXPECT_TRUE(ns.isOk()) << ns.status().message();
  return std::move(ns).value();
}

// Two files at the root ("a", "b"): inode 2 is "a", inode 3 is "b".
DatasetNamespace twoFiles() {
  NodeAttr file;
  file.mode = S_IFREG | 0644;
  file.size = 5;
  NodeAttr dir;
  dir.mode = S_IFDIR | 0755;
  auto ns = DatasetNamespace::fromEntries({{"a", file}, {"b", file}}, dir);
  EXPECT_TRUE(ns.isOk());
  return std::move(ns).value();
}

// Offsets in an image of twoFiles(): header 40, counts 32, the root's record
// (no name, no target) 89 bytes.
constexpr size_t kRootAt = 72;
constexpr size_t kNode2At = kRootAt + 89;

void putU32(std::string& s, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) s[at + i] = static_cast<char>(v >> (8 * i));
}
void putU64(std::string& s, size_t at, uint64_t v) {
  for (int i = 0; i < 8; ++i) s[at + i] = static_cast<char>(v >> (8 * i));
}

// A resealed change must still be refused, with `what` in the message.
void expectRefused(std::string image, const std::string& what) {
  NamespaceImage::reseal(image);
  auto d = NamespaceImage::decode(image);
  ASSERT_FALSE(d.isOk()) << "expected: " << what;
  EXPECT_EQ(d.status().code(), cache::Status::Code::kCorruption);
  EXPECT_NE(d.status().message().find(what), std::string::npos) << d.status().message();
}

// Pass: a walked tree with files, dirs, symlinks, odd names and a gone,
// changed entry decodes to the same namespace.
TEST(NamespaceImageTest, WalkedTreeRoundTrips) {
  testing::ScopedTempDir tmp("epochfs-nsimg");
  const fs::path root = tmp.path();
  fs::create_directories(root / "train" / "cls 1" / "deep");
  fs::create_directories(root / "-dash" / "\xc3\xa9t\xc3\xa9");
  for (const char* n : {"a", "b b", "z\xff", "new\nline", ".hidden", "-x", "\xe2\x98\x83"}) {
    std::ofstream(root / "train" / "cls 1" / n) << n << n;
  }
  std::ofstream(root / "train" / "cls 1" / "deep" / "f") << "deep";
  fs::create_symlink("train/cls 1/a", root / "link");
  fs::create_symlink("/does/not/exist", root / "-dash" / "dangling");
  DatasetNamespace ns = walk(root);
  ASSERT_GT(ns.nodeCount(), 12u);
  NodeAttr a = ns.attr(3);
  a.gone = true;
  a.size = 12345;
  ns.setAttr(3, a);
  const std::string image = NamespaceImage::encode(ns);
  auto d = NamespaceImage::decode(image);
  ASSERT_TRUE(d.isOk()) << d.status().message();
  expectSame(ns, d->ns);
  EXPECT_FALSE(d->versions.has_value());
  EXPECT_EQ(NamespaceImage::encode(d->ns), image);  // byte for byte
}

// Pass: a namespace built from a listing, with its versions section, round trips.
TEST(NamespaceImageTest, FromEntriesWithVersionsRoundTrips) {
  NodeAttr dir;
  dir.mode = S_IFDIR | 0755;
  std::vector<NamespaceEntry> entries;
  for (int i = 0; i < 300; ++i) {
    NodeAttr f;
    f.mode = S_IFREG | 0444;
    f.size = static_cast<uint64_t>(i) * 7;
    f.mtimeNs = 1700000000000000000 + i;
    f.sourceIno = 0x9e3779b97f4a7c15ULL * static_cast<uint64_t>(i + 1);
    std::string path = "c";
    path += std::to_string(i % 7);
    path += "/sub/";
    path += std::to_string(i);
    path += ".jpg";
    entries.push_back({std::move(path), f});
  }
  auto ns = DatasetNamespace::fromEntries(entries, dir);
  ASSERT_TRUE(ns.isOk());
  std::vector<ImageVersion> versions;
  for (uint64_t i = 0; i < 5; ++i) {
    ImageVersion v;
    v.fileId = i * 11;
    v.kind = static_cast<uint8_t>(i % 3);
    v.parts = static_cast<uint32_t>(i);
    v.bytes[i] = static_cast<uint8_t>(0xa0 + i);
    versions.push_back(v);
  }
  auto d = NamespaceImage::decode(NamespaceImage::encode(*ns, &versions));
  ASSERT_TRUE(d.isOk()) << d.status().message();
  expectSame(*ns, d->ns);
  ASSERT_TRUE(d->versions.has_value());
  EXPECT_EQ(*d->versions, versions);
}

// Pass: flipping any single byte (any bit) is refused as a checksum error;
// so is every truncation.
TEST(NamespaceImageTest, AnyByteFlipOrTruncationIsRefused) {
  const std::string image = NamespaceImage::encode(twoFiles());
  for (size_t i = 0; i < image.size(); ++i) {
    for (uint8_t bit : {uint8_t{1}, uint8_t{0x80}}) {
      std::string bad = image;
      bad[i] = static_cast<char>(bad[i] ^ bit);
      auto d = NamespaceImage::decode(bad);
      ASSERT_FALSE(d.isOk()) << "byte " << i;
      EXPECT_NE(d.status().message().find("checksum"), std::string::npos) << i;
    }
  }
  for (size_t n = 0; n < image.size(); ++n) {
    EXPECT_FALSE(NamespaceImage::decode(image.substr(0, n)).isOk()) << "length " << n;
  }
  std::string longer = image;
  longer.push_back('x');
  EXPECT_FALSE(NamespaceImage::decode(longer).isOk());
  NamespaceImage::reseal(longer);
  EXPECT_FALSE(NamespaceImage::decode(longer).isOk());
}

// Pass: an image written to a file with encodeTo() is the bytes encode()
// gives, and decodeFile() reads it in pieces (here over 4 MiB: several) to
// the same namespace; a flipped byte deep in the file, or a truncated file,
// is refused; the descriptor's offset is left alone.
TEST(NamespaceImageTest, FileImageIsReadInPieces) {
  std::vector<NamespaceEntry> entries;
  NodeAttr file;
  file.mode = S_IFREG | 0644;
  for (int i = 0; i < 50000; ++i) {
    file.size = static_cast<uint64_t>(i);
    char path[48];
    snprintf(path, sizeof path, "d%d/n01440764_%d", i % 97, i);
    entries.push_back({path, file});
  }
  NodeAttr dir;
  dir.mode = S_IFDIR | 0755;
  auto ns = DatasetNamespace::fromEntries(std::move(entries), dir);
  ASSERT_TRUE(ns.isOk());
  const std::string image = NamespaceImage::encode(*ns);
  ASSERT_GT(image.size(), 4u << 20);
  testing::ScopedTempDir tmp("epochfs-nsimg");
  const std::string path = tmp.path() + "/ns.img";
  const int out = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  ASSERT_GE(out, 0);
  ASSERT_TRUE(NamespaceImage::encodeTo(out, *ns).isOk());
  close(out);
  std::ifstream in(path, std::ios::binary);
  const std::string written((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(written, image);

  const int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  auto d = NamespaceImage::decodeFile(fd);
  ASSERT_TRUE(d.isOk()) << d.status().message();
  expectSame(*ns, d->ns);
  EXPECT_EQ(lseek(fd, 0, SEEK_CUR), 0);
  char byte = 0;
  const off_t deep = static_cast<off_t>(image.size() - 100000);
  ASSERT_EQ(pread(fd, &byte, 1, deep), 1);
  byte = static_cast<char>(byte ^ 0x10);
  ASSERT_EQ(pwrite(fd, &byte, 1, deep), 1);
  auto flipped = NamespaceImage::decodeFile(fd);
  ASSERT_FALSE(flipped.isOk());
  EXPECT_EQ(flipped.status().code(), cache::Status::Code::kCorruption);
  byte = static_cast<char>(byte ^ 0x10);
  ASSERT_EQ(pwrite(fd, &byte, 1, deep), 1);
  ASSERT_EQ(ftruncate(fd, static_cast<off_t>(image.size() - 1)), 0);
  EXPECT_FALSE(NamespaceImage::decodeFile(fd).isOk());
  close(fd);
}

// Pass: structural damage behind a valid checksum is refused, each with its reason.
TEST(NamespaceImageTest, StructuralDamageIsRefused) {
  const std::string image = NamespaceImage::encode(twoFiles());
  ASSERT_TRUE(NamespaceImage::decode(image).isOk());
  std::string s = image;
  s[0] = 'X';
  expectRefused(s, "bad magic");
  // {offset, width, value, reason}
  struct Field {
    size_t at;
    int width;
    uint64_t value;
    const char* reason;
  };
  const Field fields[] = {
      {8, 4, 2, "format version 2"},
      {12, 4, 0x10, "unknown flags"},
      {16, 8, uint64_t{1} << 40, "node count"},  // oversized: no huge allocation
      {16, 8, 0, "node count"},
      {24, 8, 1000, "payload"},
      {kNode2At, 4, 999, "parent"},           // parent out of range
      {kNode2At, 4, 2, "parent"},             // its own parent: a cycle
      {kRootAt + 4, 4, 7, "out of range"},    // more children than nodes
      {kRootAt + 4, 4, 1, "no parent"},       // node 3 is nobody's child
      {kNode2At + 4, 4, 1, "non-directory"},  // a file with children
  };
  for (const Field& f : fields) {
    s = image;
    if (f.width == 4) {
      putU32(s, f.at, static_cast<uint32_t>(f.value));
    } else {
      putU64(s, f.at, f.value);
    }
    SCOPED_TRACE(f.at);
    expectRefused(s, f.reason);
  }
  s = image;
  s[kNode2At + 12] = 'c';  // "c" before "b"
  expectRefused(s, "not sorted");
  s = image;
  s[kNode2At + 12] = 'b';  // two children named "b"
  expectRefused(s, "not sorted");
  s = image;
  s[kNode2At + 12] = '/';
  expectRefused(s, "bad name");
  s = image;
  putU32(s, kNode2At + 8, 0);  // an empty name: the rest shifts, and does not fit
  expectRefused(s, "");
  s = image;
  putU32(s, kNode2At + 8, 0xffffffff);  // a name longer than the image
  expectRefused(s, "truncated");
  s = image;
  putU32(s, kRootAt + 16 + 8, S_IFREG | 0644);  // the root's mode: not a directory
  expectRefused(s, "root");
}

// twoFiles() after a refresh: "b" gone and replaced by a directory "b" with
// "b/z", and "c" added: inodes 4 (b), 5 (c), 6 (b/z); the root lists 2, 4, 5.
DatasetNamespace grownTwoFiles() {
  DatasetNamespace ns = twoFiles();
  NodeAttr b = ns.attr(3);
  b.gone = true;
  ns.setAttr(3, b);
  NodeAttr file;
  file.mode = S_IFREG | 0644;
  file.size = 9;
  NodeAttr dir;
  dir.mode = S_IFDIR | 0755;
  auto fresh = DatasetNamespace::fromEntries({{"a", file}, {"b/z", file}, {"c", file}}, dir);
  EXPECT_TRUE(fresh.isOk());
  auto added = ns.graft(1, *fresh, {fresh->lookup(1, "b"), fresh->lookup(1, "c")});
  EXPECT_TRUE(added.isOk());
  return ns;
}

// Pass: a namespace a refresh grew (not numbered breadth-first, a gone entry
// in no child list) round trips, and again after decoding (a second restart).
TEST(NamespaceImageTest, GraftedNamespaceRoundTrips) {
  DatasetNamespace ns = grownTwoFiles();
  ASSERT_EQ(ns.nodeCount(), 6u);
  ASSERT_EQ(ns.children(1).toVector(), (std::vector<uint32_t>{2, 4, 5}));
  const std::string image = NamespaceImage::encode(ns);
  auto d = NamespaceImage::decode(image);
  ASSERT_TRUE(d.isOk()) << d.status().message();
  expectSame(ns, d->ns);
  EXPECT_EQ(d->ns.lookup(d->ns.lookup(1, "b"), "z"), 6u);
  EXPECT_FALSE(d->ns.numberedBreadthFirst());
  EXPECT_EQ(NamespaceImage::encode(d->ns), image);  // byte for byte
}

// Pass: a grown image's child lists are checked: a child at or before its
// parent, a child claimed twice, and an unclaimed entry that is not gone are
// refused.
TEST(NamespaceImageTest, GraftedChildListDamageIsRefused) {
  const std::string image = NamespaceImage::encode(grownTwoFiles());
  const size_t rootKids = kRootAt + 89;  // the root's record, then its 3 children
  std::string s = image;
  putU32(s, rootKids, 1);
  expectRefused(s, "bad child 1");
  s = image;
  putU32(s, rootKids + 4, 2);
  expectRefused(s, "bad child 2");
  // Node 3 ("b", gone, unclaimed) starts after node 2's 90 bytes; its gone
  // flag is its last byte.
  s = image;
  const size_t node3 = rootKids + 12 + 90;
  ASSERT_EQ(s[node3 + 89], 1);
  s[node3 + 89] = 0;
  expectRefused(s, "node 3 has no parent");
}

// Pass: the sealed memfd refuses writes and reads back the bytes, twice
// (pread: the offset is shared with every copy of the descriptor).
TEST(NamespaceImageTest, SealedMemfdHoldsTheImage) {
  const std::string image = NamespaceImage::encode(twoFiles());
  auto fd = NamespaceImage::toSealedMemfd(image);
  ASSERT_TRUE(fd.isOk()) << fd.status().message();
  EXPECT_LT(write(*fd, "x", 1), 0);
  EXPECT_NE(fcntl(*fd, F_ADD_SEALS, 0), 0);  // F_SEAL_SEAL
  for (int i = 0; i < 2; ++i) {
    auto back = NamespaceImage::readSealedMemfd(*fd);
    ASSERT_TRUE(back.isOk());
    EXPECT_EQ(*back, image);
  }
  close(*fd);
  const int unsealed = memfd_create("x", MFD_CLOEXEC);
  ASSERT_GE(unsealed, 0);
  EXPECT_FALSE(NamespaceImage::readSealedMemfd(unsealed).isOk());
  close(unsealed);
}

}  // namespace
}  // namespace epochfs::fusefs
