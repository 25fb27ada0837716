// listImageFolderSamples against the installed torchvision's ImageFolder (Debian's
// /usr/bin/python3 with torchvision 0.14) on trees with the corner cases that decide an
// ImageFolder's order: nesting, symlinks, extensions, hidden and non-UTF-8 names, loops.
// Comparisons skip with a message where that torchvision is missing.
#include "prefetch/image_folder_samples.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/unit/prefetch/python_runner.h"
#include "tests/unit/scoped_temp_dir.h"

namespace epochfs::prefetch {
namespace {

namespace fs = std::filesystem;
using testing::kPython;
using testing::runPython;

bool haveTorchvision() {
  static const bool have = [] { return testing::pythonCanImport("torchvision"); }();
  return have;
}

#define SKIP_WITHOUT_TORCHVISION() \
  if (!haveTorchvision())          \
  GTEST_SKIP() << kPython << " cannot import torchvision; nothing to compare with"

// ImageFolder(root) as JSON. Names travel as hex of their on-disk bytes (os.fsencode), so
// non-UTF-8 names compare exactly; errors travel as their type and message.
constexpr const char* kImageFolderScript = R"PY(
import json, os, sys, torchvision
root = sys.argv[1]
try:
    d = torchvision.datasets.ImageFolder(root, loader=lambda p: None)
except OSError as e:
    print(json.dumps({"error": type(e).__name__, "message": str(e)}))
    sys.exit(0)
prefix = os.fsencode(os.path.join(root, ""))
samples = []
for path, target in d.samples:
    b = os.fsencode(path)
    assert b.startswith(prefix), (b, prefix)
    samples.append([b[len(prefix):].hex(), target])
print(json.dumps({"classes": [os.fsencode(c).hex() for c in d.classes], "samples": samples}))
)PY";

std::string hex(const std::string& s) {
  static const char* kDigits = "0123456789abcdef";
  std::string h;
  for (unsigned char c : s) {
    h += kDigits[c >> 4];
    h += kDigits[c & 15];
  }
  return h;
}

class ImageFolderSamplesTest : public ::testing::Test {
 protected:
  void SetUp() override { fs::create_directories(root_); }

  // Creates an empty file (and its parents) at root/rel.
  void file(const std::string& rel) {
    fs::create_directories(fs::path(root_ + "/" + rel).parent_path());
    std::ofstream(root_ + "/" + rel) << "x";
  }
  void dir(const std::string& rel) { fs::create_directories(root_ + "/" + rel); }
  void symlink(const std::string& target, const std::string& rel) {
    fs::create_directories(fs::path(root_ + "/" + rel).parent_path());
    ASSERT_EQ(::symlink(target.c_str(), (root_ + "/" + rel).c_str()), 0) << rel;
  }

  // Compares listImageFolderSamples(root) with torchvision on the same root.
  void expectSameAsTorchvision(const std::string& root) {
    bool ok = false;
    const std::string out = runPython(kImageFolderScript, root, &ok);
    ASSERT_TRUE(ok) << out;
    const auto want = nlohmann::json::parse(out);
    const auto got = listImageFolderSamples(root);
    if (want.contains("error")) {
      ASSERT_FALSE(got.isOk()) << "torchvision raised " << want["error"] << ": " << want["message"];
      const std::string message = want["message"];
      if (want["error"] == "FileNotFoundError") {
        EXPECT_EQ(got.status().code(), cache::Status::Code::kNotFound);
      }
      // torchvision's own messages are reproduced verbatim; OS errors ("[Errno 2] ...") are
      // worded by Status::fromErrno instead.
      if (message.rfind("[Errno", 0) != 0) {
        EXPECT_EQ(got.status().message(), message);
      }
      return;
    }
    ASSERT_TRUE(got.isOk()) << got.status().toString();
    std::vector<std::string> wantClasses = want["classes"];
    std::vector<std::string> gotClasses;
    for (const auto& c : got->classes) gotClasses.push_back(hex(c));
    EXPECT_EQ(gotClasses, wantClasses);
    std::vector<std::pair<std::string, int>> wantSamples, gotSamples;
    for (const auto& s : want["samples"]) wantSamples.emplace_back(s[0], s[1]);
    for (const auto& s : got->samples) gotSamples.emplace_back(hex(s.relPath), s.classIndex);
    EXPECT_EQ(gotSamples, wantSamples);
    samplesSeen_ = gotSamples.size();
  }

  ::epochfs::testing::ScopedTempDir tmp_{"epochfs_imagefolder"};
  const std::string base_ = tmp_.path();
  const std::string root_ = base_ + "/root";
  size_t samplesSeen_ = 0;
};

TEST_F(ImageFolderSamplesTest, CornerCasesMatchTorchvision) {
  SKIP_WITHOUT_TORCHVISION();
  // Classes: sort order is by code point (upper case first), hidden dirs are classes, a
  // symlink to a directory is a class, files and dangling symlinks in the root are not.
  for (const std::string cls :
       {"cat", "dog", "Zebra", ".hidden_class", "with space", "\xc3\xbcn\xc3\xaf", "a-b", "a b"}) {
    file(cls + "/base.jpg");
  }
  file("root_file.jpg");
  symlink("dog", "alias");
  symlink("nowhere", "dangling_class");

  // Nesting whose sorted-walk order differs from depth-first: ' ' < '-' < '/' < letters.
  file("cat/a/x.jpg");
  file("cat/a/b/z.JPEG");
  file("cat/a b/y.png");
  file("cat/a-b/w.jpeg");
  file("cat/a0/v.bmp");
  file("cat/A/u.ppm");
  // Extensions: case-insensitive, full list, near misses rejected.
  for (const std::string f :
       {"UPPER.Png", "p.PGM", "t.tif", "t2.TIFF", "w.webp", "j.JPG", "readme.txt", "meta.json",
        "noext", "x.jpg.txt", "jpg", ".jpg", "x.jpegx", "x.tif ", "x.gif", ".hidden.png"}) {
    file("cat/ext/" + f);
  }
  dir("cat/emptydir/deeper");
  // A symlinked directory inside a class (pointing outside the root), a symlinked file, a
  // dangling symlink with an image name (os.walk lists it as a file, so it is a sample).
  fs::create_directories(base_ + "/outside/inner");
  std::ofstream(base_ + "/outside/o.jpg") << "x";
  std::ofstream(base_ + "/outside/inner/i.png") << "x";
  symlink("../../outside", "dog/linked dir");
  symlink("../cat/a/x.jpg", "dog/linked_file.jpg");
  symlink("missing.jpg", "dog/dangling.jpg");
  // UTF-8 names, including decomposed vs precomposed and characters beyond the BMP.
  file("dog/caf\xc3\xa9.jpg");
  file("dog/cafe\xcc\x81.jpg");
  file("dog/\xf0\x9f\x98\x80 smile.png");
  file("dog/\xe6\x97\xa5\xe6\x9c\xac/\xe7\x8c\xab.jpg");
  expectSameAsTorchvision(root_);
  EXPECT_GT(samplesSeen_, 30u);
}

TEST_F(ImageFolderSamplesTest, NonUtf8NamesSortLikePython) {
  SKIP_WITHOUT_TORCHVISION();
  // Python decodes invalid bytes to U+DC80..U+DCFF, which sort between U+D7FF (ED 9F BF) and
  // U+E000 (EE 80 80): byte order would put \xff after both.
  for (const std::string f :
       {"\xff.jpg", "\xee\x80\x80.jpg", "\xed\x9f\xbf.jpg", "\xe9t\xe9.jpg",
        "\xed\xa0\x80.jpg" /* encoded surrogate: invalid */, "\xc0\xaf.jpg" /* overlong: invalid */,
        "\xe2\x82.jpg", "z.jpg", "\xf4\x90\x80\x80.jpg" /* above U+10FFFF: invalid */}) {
    file("cls/" + f);
  }
  // (A hex escape swallows following hex digits, hence the concatenations.)
  file(std::string("cls/\xfe") + "dir/a.jpg");
  file(std::string("cls/\xef\xbf\xbd") + "dir/a.jpg");
  file(std::string("\xff") + "class/a.jpg");
  file(std::string("\xee\x80\x80") + "class/a.jpg");
  expectSameAsTorchvision(root_);
  EXPECT_EQ(samplesSeen_, 13u);
}

TEST_F(ImageFolderSamplesTest, SymlinkLoopIsWalkedLikePython) {
  SKIP_WITHOUT_TORCHVISION();
  file("cls/a.jpg");
  symlink(".", "cls/loop");  // os.walk(followlinks=True) descends until the kernel says ELOOP
  file("other/b.png");
  expectSameAsTorchvision(root_);
  EXPECT_GT(samplesSeen_, 10u);
}

TEST_F(ImageFolderSamplesTest, TrailingSlashRootGivesSamePaths) {
  SKIP_WITHOUT_TORCHVISION();
  file("b/x/1.jpg");
  file("a/2.png");
  expectSameAsTorchvision(root_ + "/");
  const auto got = listImageFolderSamples(root_ + "/");
  ASSERT_TRUE(got.isOk());
  ASSERT_EQ(got->samples.size(), 2u);
  EXPECT_EQ(got->samples[0], (ImageFolderSample{"a/2.png", 0}));
  EXPECT_EQ(got->samples[1], (ImageFolderSample{"b/x/1.jpg", 1}));
}

TEST_F(ImageFolderSamplesTest, EmptyClassIsAnErrorLikeTorchvision) {
  SKIP_WITHOUT_TORCHVISION();
  file("a/1.jpg");
  file("b/notes.txt");
  dir("c/d");
  expectSameAsTorchvision(root_);
}

TEST_F(ImageFolderSamplesTest, NoClassIsAnErrorLikeTorchvision) {
  SKIP_WITHOUT_TORCHVISION();
  file("lonely.jpg");
  expectSameAsTorchvision(root_);
}

TEST_F(ImageFolderSamplesTest, MissingRootIsAnErrorLikeTorchvision) {
  SKIP_WITHOUT_TORCHVISION();
  expectSameAsTorchvision(base_ + "/does-not-exist");
}

TEST_F(ImageFolderSamplesTest, SelfLoopInRootIsAnErrorLikeTorchvision) {
  SKIP_WITHOUT_TORCHVISION();
  file("a/1.jpg");
  symlink("self", "self");  // DirEntry.is_dir() raises ELOOP inside find_classes
  expectSameAsTorchvision(root_);
}

TEST(ImageFolderNamesTest, PythonOrderAndExtensions) {
  EXPECT_TRUE(pythonNameLess("Z", "a"));
  EXPECT_TRUE(pythonNameLess("a b", "a/x"));
  EXPECT_TRUE(pythonNameLess("\xed\x9f\xbf", "\xff"));
  EXPECT_TRUE(pythonNameLess("\xff", "\xee\x80\x80"));  // bytes would say the opposite
  EXPECT_FALSE(pythonNameLess("\xee\x80\x80", "\xff"));
  EXPECT_TRUE(hasImageExtension("a.JpEg"));
  EXPECT_TRUE(hasImageExtension(".jpg"));
  EXPECT_FALSE(hasImageExtension("jpg"));
  EXPECT_FALSE(hasImageExtension("a.gif"));
}

}  // namespace
}  // namespace epochfs::prefetch
