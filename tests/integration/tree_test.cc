// (a) Tree conformance: what the mount shows equals what the source holds —
// names, types, sizes, modes, owners, nanosecond mtimes, symlink targets and
// every byte — plus pread/mmap edge cases.
#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <set>

#include "tests/integration/mount_fixture.h"

namespace epochfs::itest {
namespace {

constexpr size_t kMiB = 1024 * 1024;
const std::vector<size_t> kSizes = {0, 1, 4095, 4096, kMiB - 1, kMiB, kMiB + 1, kMiB * 7 / 2};

std::string sizeName(size_t n) { return "size_" + std::to_string(n) + ".bin"; }

class TreeTest : public MountTest {
 protected:
  void SetUp() override {
    MountTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    buildTree();
  }

  void file(const std::string& rel, size_t size, mode_t mode = 0644) {
    writeFile(src_ + "/" + rel, randomBytes(size, std::hash<std::string>{}(rel)), mode);
  }
  void link(const std::string& target, const std::string& rel) {
    ASSERT_EQ(symlink(target.c_str(), (src_ + "/" + rel).c_str()), 0) << rel;
  }

  void buildTree() {
    for (size_t n : kSizes) file(sizeName(n), n);
    mkdirs(src_ + "/a/b/c/d");
    file("a/x.txt", 100);
    file("a/b/c/d/deep.bin", 1000);
    // Modes and owners.
    file("mode_0644", 10, 0644);
    file("mode_0600", 10, 0600);
    file("mode_0755", 10, 0755);
    file("mode_0444", 10, 0444);
    file("owned_by_1234", 10, 0640);
    ASSERT_EQ(lchown((src_ + "/owned_by_1234").c_str(), 1234, 5678), 0);
    mkdirs(src_ + "/private_dir");
    file("private_dir/inside", 5);
    chmod((src_ + "/private_dir").c_str(), 0700);
    mkdirs(src_ + "/readonly_dir");
    file("readonly_dir/inside", 5);
    chmod((src_ + "/readonly_dir").c_str(), 0555);
    mkdirs(src_ + "/empty_dir");
    // Odd names.
    for (const char* n : {"name with spaces.txt",
                          "\xc3\xbcn\xc3\xaf c\xc3\xb8"
                          "d\xc3\xa9 "
                          "\xe6\x97\xa5\xe6\x9c\xac.bin",
                          "new\nline", ".hidden", "-leading-dash", "percent%25#hash?",
                          "back\\slash", "tab\there"}) {
      file(n, 33);
    }
    file(std::string(255, 'L'), 7);  // NAME_MAX
    // Symlinks: relative, going up, absolute, dangling, to a directory.
    link("a/b/c/d/deep.bin", "link_rel");
    link("../size_1.bin", "a/link_up");
    link("/etc/hostname", "link_abs");
    link("does/not/exist", "link_dangling");
    link("a/b", "link_dir");
    // A 2,000-entry directory.
    mkdirs(src_ + "/big");
    for (int i = 0; i < 2000; ++i) {
      char name[32];
      snprintf(name, sizeof name, "big/f%04d", i);
      file(name, static_cast<size_t>(i % 64));
    }
    // Distinct nanosecond mtimes everywhere, children before parents.
    Tree t = snapshotTree(src_, false);
    int i = 0;
    for (auto it = t.rbegin(); it != t.rend(); ++it, ++i) {
      timespec ts[2] = {{1600000000 + i, 111111111}, {1500000000 + i, 123456789 + i}};
      std::string p = it->first == "." ? src_ : src_ + "/" + it->first;
      ASSERT_EQ(utimensat(AT_FDCWD, p.c_str(), ts, AT_SYMLINK_NOFOLLOW), 0) << p;
    }
  }
};

std::string typeName(mode_t m) {
  if (S_ISREG(m)) return "file";
  if (S_ISDIR(m)) return "dir";
  if (S_ISLNK(m)) return "symlink";
  return "other";
}

TEST_F(TreeTest, MountShowsExactlyTheSourceTree) {
  auto r = mount({"--ram-cache", "64M"});
  ASSERT_EQ(r.exitCode, 0) << r.describe();
  Tree want = snapshotTree(src_, true);
  Tree got = snapshotTree(mnt_, true);

  std::set<std::string> wantNames, gotNames;
  for (const auto& [k, v] : want) wantNames.insert(k);
  for (const auto& [k, v] : got) gotNames.insert(k);
  for (const auto& k : wantNames) EXPECT_TRUE(gotNames.count(k)) << "missing on mount: " << k;
  for (const auto& k : gotNames) EXPECT_TRUE(wantNames.count(k)) << "extra on mount: " << k;

  int compared = 0;
  for (const auto& [rel, w] : want) {
    auto it = got.find(rel);
    if (it == got.end()) continue;
    const Entry& g = it->second;
    SCOPED_TRACE("entry '" + rel + "' (" + typeName(w.mode) + ")");
    EXPECT_EQ(typeName(g.mode), typeName(w.mode));
    EXPECT_EQ(g.mode & 07777, w.mode & 07777) << std::oct << "mode " << g.mode << " vs " << w.mode;
    EXPECT_EQ(g.uid, w.uid);
    EXPECT_EQ(g.gid, w.gid);
    EXPECT_EQ(g.mtimeNs, w.mtimeNs) << "mtime (ns)";
    if (!S_ISDIR(w.mode)) {
      EXPECT_EQ(g.size, w.size);
    }
    if (S_ISLNK(w.mode)) {
      EXPECT_EQ(g.target, w.target) << "readlink";
    }
    if (S_ISREG(w.mode)) {
      EXPECT_EQ(g.readErr, 0) << strerror(g.readErr);
      EXPECT_EQ(g.hash, w.hash) << "content (XXH3) differs";
    }
    ++compared;
  }
  EXPECT_GT(compared, 2000);
}

TEST_F(TreeTest, ReaddirTypesAndNoDuplicates) {
  auto r = mount();
  ASSERT_EQ(r.exitCode, 0) << r.describe();
  for (const auto& [rel, e] : snapshotTree(src_, false)) {
    if (!S_ISDIR(e.mode)) continue;
    std::string dir = rel == "." ? mnt_ : mnt_ + "/" + rel;
    DIR* d = opendir(dir.c_str());
    ASSERT_NE(d, nullptr) << dir << ": " << strerror(errno);
    std::multiset<std::string> seen;
    while (dirent* de = readdir(d)) {
      std::string n = de->d_name;
      seen.insert(n);
      if (n == "." || n == "..") continue;
      struct stat st;
      ASSERT_EQ(lstat((src_ + "/" + (rel == "." ? n : rel + "/" + n)).c_str(), &st), 0) << n;
      if (de->d_type != DT_UNKNOWN) {
        EXPECT_EQ(de->d_type, IFTODT(st.st_mode)) << "d_type of " << rel << "/" << n;
      }
    }
    closedir(d);
    for (const auto& n : seen) EXPECT_EQ(seen.count(n), 1u) << "duplicate " << rel << "/" << n;
  }
}

TEST_F(TreeTest, PreadEdgeCases) {
  auto r = mount({"--chunk-size", "1M"});
  ASSERT_EQ(r.exitCode, 0) << r.describe();
  for (size_t size : kSizes) {
    std::string want = readFile(src_ + "/" + sizeName(size)).data;
    ASSERT_EQ(want.size(), size);
    int fd = open((mnt_ + "/" + sizeName(size)).c_str(), O_RDONLY);
    ASSERT_GE(fd, 0) << sizeName(size) << ": " << strerror(errno);
    struct Case {
      size_t off, len;
    };
    std::vector<Case> cases = {{0, 0},
                               {size, 10},
                               {size + 4096, 10},
                               {size / 3 + 1, 12345},
                               {1, 4097},
                               {0, size + 100},
                               {size ? size - 1 : 0, 100},
                               {kMiB - 7, 100},
                               {kMiB * 3 - 1, 2},
                               {size / 2, 0},
                               {size + kMiB * 10, 1}};
    for (const auto& c : cases) {
      std::string buf(c.len + 1, '\x55');
      ssize_t n = pread(fd, buf.data(), c.len, static_cast<off_t>(c.off));
      size_t expectLen = c.off >= size ? 0 : std::min(c.len, size - c.off);
      SCOPED_TRACE(sizeName(size) + " pread(off=" + std::to_string(c.off) +
                   ", len=" + std::to_string(c.len) + ")");
      ASSERT_EQ(n, static_cast<ssize_t>(expectLen)) << strerror(errno);
      EXPECT_TRUE(buf.compare(0, expectLen, want, std::min(c.off, size), expectLen) == 0)
          << "bytes differ";
      EXPECT_EQ(buf[expectLen], '\x55') << "wrote past the returned length";
    }
    close(fd);
  }
}

TEST_F(TreeTest, OddSizedSequentialReadsMatch) {
  auto r = mount();
  ASSERT_EQ(r.exitCode, 0) << r.describe();
  const std::string name = sizeName(kMiB * 7 / 2);
  std::string want = readFile(src_ + "/" + name).data;
  for (size_t buf : {size_t{1}, size_t{7}, size_t{4095}, size_t{65537}, size_t{3 * kMiB + 5}}) {
    if (buf == 1) {
      // One byte at a time over the first 64 KiB only (slow otherwise).
      int fd = open((mnt_ + "/" + name).c_str(), O_RDONLY);
      ASSERT_GE(fd, 0);
      std::string got;
      char c;
      while (got.size() < 65536 && read(fd, &c, 1) == 1) got.push_back(c);
      close(fd);
      EXPECT_EQ(got, want.substr(0, 65536)) << "1-byte reads";
      continue;
    }
    auto got = readFile(mnt_ + "/" + name, buf);
    EXPECT_EQ(got.err, 0);
    EXPECT_TRUE(got.data == want) << "read() with " << buf << "-byte buffer differs";
  }
}

TEST_F(TreeTest, MmapMatches) {
  auto r = mount();
  ASSERT_EQ(r.exitCode, 0) << r.describe();
  for (size_t size : {size_t{4095}, kMiB + 1, kMiB * 7 / 2}) {
    std::string want = readFile(src_ + "/" + sizeName(size)).data;
    int fd = open((mnt_ + "/" + sizeName(size)).c_str(), O_RDONLY);
    ASSERT_GE(fd, 0);
    void* p = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    ASSERT_NE(p, MAP_FAILED) << sizeName(size) << ": " << strerror(errno);
    EXPECT_EQ(std::memcmp(p, want.data(), size), 0) << "mmap of " << sizeName(size);
    size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    if (size % page) {
      const char* tail = static_cast<const char*>(p) + size;
      for (size_t i = 0; i < page - size % page; ++i) {
        ASSERT_EQ(tail[i], 0) << "byte past EOF in the last page is not zero";
      }
    }
    munmap(p, size);
    close(fd);
  }
}

TEST_F(TreeTest, LookupOfMissingNamesFails) {
  auto r = mount();
  ASSERT_EQ(r.exitCode, 0) << r.describe();
  struct stat st;
  EXPECT_EQ(lstat((mnt_ + "/no-such-file").c_str(), &st), -1);
  EXPECT_EQ(errno, ENOENT);
  EXPECT_EQ(lstat((mnt_ + "/a/b/no-such").c_str(), &st), -1);
  EXPECT_EQ(errno, ENOENT);
  EXPECT_EQ(lstat((mnt_ + "/size_1.bin/child").c_str(), &st), -1);
  EXPECT_EQ(errno, ENOTDIR);
  // Through symlinks: resolved by the kernel via readlink.
  auto viaLink = readFile(mnt_ + "/link_rel");
  EXPECT_EQ(viaLink.err, 0);
  EXPECT_EQ(viaLink.data, readFile(src_ + "/a/b/c/d/deep.bin").data);
  EXPECT_EQ(readFile(mnt_ + "/link_dangling").err, ENOENT);
  EXPECT_EQ(stat((mnt_ + "/link_dir/c/d/deep.bin").c_str(), &st), 0);
}

}  // namespace
}  // namespace epochfs::itest
