// DatasetNamespace numbering: a restarted daemon must give every node the
// inode number the kernel already holds (docs/RELIABILITY.md, case 9).
#include "fusefs/dataset_namespace.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

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

// Pass: the FUSE_INIT message survives the hex round trip to a restarted
// worker byte for byte; malformed hex decodes to nothing.
TEST(SupervisorLinkTest, HexRoundTrip) {
  std::string bytes;
  for (int i = 0; i < 256; ++i) bytes.push_back(static_cast<char>(i));
  EXPECT_EQ(fromHex(toHex(bytes)), bytes);
  EXPECT_EQ(fromHex("abc"), "");
  EXPECT_EQ(fromHex("zz"), "");
}

}  // namespace
}  // namespace epochfs::fusefs
