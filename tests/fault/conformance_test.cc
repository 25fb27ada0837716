// RELIABILITY.md case 1: differential conformance. A tree with the awkward parts of
// real datasets (a 10,000-entry directory, names that are not valid UTF-8,
// spaces, newlines, leading dashes, 255-byte names, every file size around
// the chunk boundaries, symlinks, a fifo, nanosecond times) is walked through
// the source and through the mount and compared entry by entry; 10,000 random
// preads are compared with the same preads on the source; every mutating
// syscall fails and leaves the source exactly as it was. Label `fault`.
// (tests/integration/tree_test.cc and readonly_test.cc hold the earlier,
// smaller versions.)
#include <dirent.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cstring>
#include <functional>
#include <random>
#include <set>

#include "tests/integration/mount_fixture.h"

namespace epochfs::itest {
namespace {

constexpr size_t kChunk = 64 * 1024;  // mounted with --chunk-size 64K: many boundaries
constexpr int kBigDirEntries = 10000;

// Sizes around the chunk size and the page size.
const std::vector<size_t> kSizes = {
    0,          1,          4095,           4096,        kChunk - 1,
    kChunk,     kChunk + 1, 3 * kChunk + 7, 1048576 + 3, 5 * 1048576 / 2,
    16 * kChunk};

std::string sizeName(size_t n) { return "sizes/s" + std::to_string(n); }

// What the comparison covers beyond the fixture's Entry: ctime and nlink.
struct FullEntry {
  Entry e;
  int64_t ctimeNs = 0;
};

std::map<std::string, FullEntry> fullSnapshot(const std::string& root, bool hash) {
  std::map<std::string, FullEntry> out;
  for (auto& [rel, e] : snapshotTree(root, hash)) {
    struct stat st;
    std::string p = rel == "." ? root : root + "/" + rel;
    EXPECT_EQ(lstat(p.c_str(), &st), 0) << p;
    out[rel] = {e, int64_t{st.st_ctim.tv_sec} * 1000000000 + st.st_ctim.tv_nsec};
  }
  return out;
}

std::string printable(const std::string& s) {
  std::string o;
  for (unsigned char c : s) {
    if (c >= 0x20 && c < 0x7f) {
      o += static_cast<char>(c);
    } else {
      char b[8];
      snprintf(b, sizeof b, "\\x%02x", c);
      o += b;
    }
  }
  return o;
}

class ConformanceTest : public MountTest {
 protected:
  void SetUp() override {
    MountTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    buildTree();
  }

  void file(const std::string& rel, size_t size, mode_t mode = 0644) {
    writeFile(src_ + "/" + rel, randomBytes(size, std::hash<std::string>{}(rel)), mode);
  }

  void buildTree() {
    mkdirs(src_ + "/sizes");
    for (size_t n : kSizes) file(sizeName(n), n);
    mkdirs(src_ + "/names");
    const std::vector<std::string> odd = {
        "with space", " leading space", "trailing space ", "new\nline", "-leading-dash",
        "--double-dash", "-", "tab\tname", "back\\slash", "quote\"'", "star*?[x]",
        "\xc3\xa9t\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80",  // valid UTF-8, 4-byte too
        "latin1 caf\xe9",                                               // not UTF-8: a lone 0xE9
        "\xff\xfe bytes",                                               // never valid in UTF-8
        "\xc0\xaf overlong slash",                                      // overlong encoding of '/'
        "\xed\xa0\x80 surrogate",  // UTF-8-encoded surrogate half
        "cut \xe6\x97",            // truncated sequence at the end
        "\x01\x02\x1b control", ".hidden", "..dotdot", "percent%2F", std::string(255, 'L'),
        // 255 bytes of 3-byte characters (85 x U+65E5)
        [] {
          std::string s;
          for (int i = 0; i < 85; ++i) s += "\xe6\x97\xa5";
          return s;
        }(),
        std::string(254, 'x') + "\xff"};
    for (const auto& n : odd) file("names/" + n, 17 + n.size());
    mkdirs(src_ + "/names/" + std::string(255, 'D'));
    file("names/" + std::string(255, 'D') + "/" + std::string(255, 'F'), 5);
    mkdirs(src_ + "/names/dir \xff with\nodd");
    file("names/dir \xff with\nodd/-inside", 9);
    // Symlinks (targets with odd bytes too), a fifo, modes, owners.
    mkdirs(src_ + "/links");
    for (const auto& [target, name] : std::vector<std::pair<std::string, std::string>>{
             {"../sizes/s1", "rel"},
             {"/etc/hostname", "abs"},
             {"no/such", "dangling"},
             {"../names/latin1 caf\xe9", "to-non-utf8"},
             {std::string(1000, 'a'), "long"},
             {"../names", "dir"}}) {
      ASSERT_EQ(symlink(target.c_str(), (src_ + "/links/" + name).c_str()), 0) << name;
    }
    ASSERT_EQ(mkfifo((src_ + "/fifo").c_str(), 0640), 0);
    mkdirs(src_ + "/modes");
    for (mode_t m : {0000, 0400, 0600, 0640, 0644, 0666, 0700, 0755, 0777, 01755, 02755, 04755}) {
      char n[32];
      snprintf(n, sizeof n, "modes/m%04o", m);
      file(n, 3, m);
      ASSERT_EQ(chmod((src_ + "/" + n).c_str(), m), 0);  // umask-free, setuid/setgid kept
    }
    file("modes/owned", 4, 0640);
    ASSERT_EQ(lchown((src_ + "/modes/owned").c_str(), 1234, 5678), 0);
    ASSERT_EQ(lchown((src_ + "/links/rel").c_str(), 4321, 8765), 0);
    mkdirs(src_ + "/modes/dir0700");
    ASSERT_EQ(chmod((src_ + "/modes/dir0700").c_str(), 0700), 0);
    // The 10,000-entry directory: files of 0..99 bytes, a few subdirectories.
    mkdirs(src_ + "/big");
    for (int i = 0; i < kBigDirEntries; ++i) {
      char n[32];
      snprintf(n, sizeof n, "big/e%05d", i);
      if (i % 1000 == 999) {
        mkdirs(src_ + "/" + n);
      } else {
        file(n, static_cast<size_t>(i % 100));
      }
    }
    // Distinct nanosecond atimes/mtimes, children before parents.
    auto t = snapshotTree(src_, false);
    int i = 0;
    for (auto it = t.rbegin(); it != t.rend(); ++it, ++i) {
      timespec ts[2] = {{1500000000 + i, 123456789},
                        {1600000000 + i, (987654321 + i) % 1000000000}};
      std::string p = it->first == "." ? src_ : src_ + "/" + it->first;
      ASSERT_EQ(utimensat(AT_FDCWD, p.c_str(), ts, AT_SYMLINK_NOFOLLOW), 0) << printable(p);
    }
  }
};

std::string typeName(mode_t m) {
  if (S_ISREG(m)) return "file";
  if (S_ISDIR(m)) return "dir";
  if (S_ISLNK(m)) return "symlink";
  if (S_ISFIFO(m)) return "fifo";
  return "other";
}

// PASS: the mount's tree has exactly the source's entries (every name byte
// for byte, the 10,000-entry directory included) with the same type, size,
// mode bits (setuid/setgid/sticky included), uid, gid, mtime and ctime in
// nanoseconds and symlink target, and every regular file has the same XXH3.
TEST_F(ConformanceTest, WalkOfMountEqualsWalkOfSource) {
  auto r = mount({"--chunk-size", "64K", "--ram-cache", "256M"});
  ASSERT_EQ(r.exitCode, 0) << r.describe();
  auto want = fullSnapshot(src_, true);
  auto got = fullSnapshot(mnt_, true);
  ASSERT_GT(want.size(), static_cast<size_t>(kBigDirEntries));
  for (const auto& [k, v] : want) EXPECT_TRUE(got.count(k)) << "missing on mount: " << printable(k);
  for (const auto& [k, v] : got) EXPECT_TRUE(want.count(k)) << "extra on mount: " << printable(k);
  size_t compared = 0, files = 0;
  for (const auto& [rel, wf] : want) {
    auto it = got.find(rel);
    if (it == got.end()) continue;
    const Entry& w = wf.e;
    const Entry& g = it->second.e;
    SCOPED_TRACE("entry '" + printable(rel) + "' (" + typeName(w.mode) + ")");
    EXPECT_EQ(typeName(g.mode), typeName(w.mode));
    EXPECT_EQ(g.mode & 07777, w.mode & 07777) << std::oct << g.mode << " vs " << w.mode;
    EXPECT_EQ(g.uid, w.uid);
    EXPECT_EQ(g.gid, w.gid);
    EXPECT_EQ(g.mtimeNs, w.mtimeNs) << "mtime (ns)";
    EXPECT_EQ(it->second.ctimeNs, wf.ctimeNs) << "ctime (ns)";
    if (!S_ISDIR(w.mode)) {
      EXPECT_EQ(g.size, w.size);
    }
    if (S_ISLNK(w.mode)) {
      EXPECT_EQ(g.target, w.target) << "readlink";
    }
    if (S_ISREG(w.mode)) {
      EXPECT_EQ(g.readErr, w.readErr) << strerror(g.readErr);
      EXPECT_EQ(g.hash, w.hash) << "content (XXH3) differs";
      ++files;
    }
    ++compared;
  }
  EXPECT_EQ(compared, want.size());
  RecordProperty("entries_compared", std::to_string(compared));
  RecordProperty("files_hashed", std::to_string(files));
}

// PASS: readdir of the 10,000-entry directory and of the odd-name directory
// through the mount returns each source name exactly once, byte for byte,
// with the source's d_type, and nothing else; a second listing (from the
// kernel's readdir cache) is identical.
TEST_F(ConformanceTest, ReaddirOfBigAndOddDirectoriesIsExact) {
  auto r = mount();
  ASSERT_EQ(r.exitCode, 0) << r.describe();
  auto list = [](const std::string& dir) {
    std::multiset<std::pair<std::string, int>> out;
    DIR* d = opendir(dir.c_str());
    EXPECT_NE(d, nullptr) << printable(dir) << ": " << strerror(errno);
    if (!d) return out;
    while (dirent* de = readdir(d)) out.insert({de->d_name, de->d_type});
    closedir(d);
    return out;
  };
  for (const std::string dir : {"big", "names", "links", "modes", ""}) {
    auto want = list(dir.empty() ? src_ : src_ + "/" + dir);
    for (int pass = 0; pass < 2; ++pass) {
      auto got = list(dir.empty() ? mnt_ : mnt_ + "/" + dir);
      EXPECT_EQ(got.size(), want.size()) << "dir '" << dir << "' pass " << pass;
      for (const auto& e : want) {
        EXPECT_EQ(got.count(e), 1u) << "dir '" << dir << "' pass " << pass << ": "
                                    << printable(e.first) << " (d_type " << e.second << ")";
      }
    }
  }
  EXPECT_EQ(list(mnt_ + "/big").size(), static_cast<size_t>(kBigDirEntries) + 2);
}

// PASS: 10,000 random preads on the mount (at EOF, of length 0, beyond the
// size, straddling 64 KiB chunk boundaries, up to 3 chunks long, the page
// cache dropped every 500) return the same count and bytes as the same
// pread on the source, and never write past the returned count.
TEST_F(ConformanceTest, TenThousandRandomPreadsEqualTheSource) {
  auto r = mount({"--chunk-size", "64K", "--ram-cache", "8M"});
  ASSERT_EQ(r.exitCode, 0) << r.describe();
  struct Fds {
    int src, mnt;
    size_t size;
  };
  std::vector<Fds> fds;
  for (size_t n : kSizes) {
    Fds f{open((src_ + "/" + sizeName(n)).c_str(), O_RDONLY | O_CLOEXEC),
          open((mnt_ + "/" + sizeName(n)).c_str(), O_RDONLY | O_CLOEXEC), n};
    ASSERT_GE(f.src, 0);
    ASSERT_GE(f.mnt, 0) << strerror(errno);
    fds.push_back(f);
  }
  std::mt19937_64 rng(20260707);
  auto pick = [&](uint64_t lo, uint64_t hi) {
    return std::uniform_int_distribution<uint64_t>(lo, hi)(rng);
  };
  std::map<std::string, int> kinds;
  std::string a, b;
  for (int i = 0; i < 10000; ++i) {
    if (i % 500 == 0) {
      for (const auto& f : fds) posix_fadvise(f.mnt, 0, 0, POSIX_FADV_DONTNEED);
    }
    const Fds& f = fds[pick(0, fds.size() - 1)];
    const uint64_t size = f.size;
    uint64_t off = 0, len = 0;
    std::string kind;
    switch (pick(0, 5)) {
      case 0:
        kind = "at EOF", off = size, len = pick(0, 3 * kChunk);
        break;
      case 1:
        kind = "length 0", off = pick(0, size + kChunk), len = 0;
        break;
      case 2:
        kind = "beyond size", off = size + pick(1, 10 * kChunk), len = pick(1, kChunk);
        break;
      case 3: {  // straddling a chunk boundary inside or at the end of the file
        kind = "straddling a chunk boundary";
        const uint64_t boundary = kChunk * pick(1, size / kChunk + 1);
        off = boundary - std::min<uint64_t>(boundary, pick(1, 8192));
        len = pick(2, 2 * kChunk);
        break;
      }
      case 4:
        kind = "crossing EOF", off = size - std::min<uint64_t>(size, pick(0, 4096)),
        len = pick(1, 3 * kChunk);
        break;
      default:
        kind = "random", off = pick(0, size), len = pick(1, 3 * kChunk);
    }
    ++kinds[kind];
    a.assign(len + 16, '\x5a');
    b.assign(len + 16, '\x5a');
    ssize_t na = pread(f.src, a.data(), len, static_cast<off_t>(off));
    ssize_t nb = pread(f.mnt, b.data(), len, static_cast<off_t>(off));
    const int eb = errno;
    ASSERT_EQ(nb, na) << "pread #" << i << " (" << kind << ") of s" << size << " off " << off
                      << " len " << len << ": " << (nb < 0 ? strerror(eb) : "");
    ASSERT_TRUE(a == b) << "pread #" << i << " (" << kind << ") of s" << size << " off " << off
                        << " len " << len << ": bytes differ (or written past the count)";
  }
  for (const auto& f : fds) {
    close(f.src);
    close(f.mnt);
  }
  for (const auto& [k, n] : kinds) {
    EXPECT_GT(n, 500) << k;
    RecordProperty(k, std::to_string(n));
  }
}

// PASS: every mutating syscall on the mount fails: those naming a path with
// EROFS (files, directories, the 10,000-entry directory, symlinks, odd
// names, the root), those on the only descriptors the mount hands out
// (O_RDONLY) with EBADF/EROFS/EINVAL; nothing they tried to create appears;
// and the source's tree (names, modes, owners, sizes, mtimes, ctimes, XXH3)
// is exactly what it was.
TEST_F(ConformanceTest, EveryMutatingSyscallFailsAndSourceIsUnchanged) {
  auto before = fullSnapshot(src_, true);
  auto r = mount();
  ASSERT_EQ(r.exitCode, 0) << r.describe();
  const std::string m = mnt_;
  const std::string f = m + "/sizes/s4096";
  const std::string odd = m + "/names/latin1 caf\xe9";
  const std::string big = m + "/big/e00042";
  auto err = [](long rc) { return rc >= 0 ? 0 : errno; };
  auto openErr = [](const std::string& p, int flags) {
    int fd = open(p.c_str(), flags | O_CLOEXEC, 0644);
    if (fd >= 0) close(fd);
    return fd >= 0 ? 0 : errno;
  };
  timespec times[2] = {{1, 0}, {2, 0}};
  struct Op {
    std::string what;
    std::function<int()> run;  // errno, 0 = succeeded
  };
  std::vector<Op> pathOps;
  for (const std::string& p : {f, odd, big}) {
    pathOps.push_back({"open O_WRONLY " + p, [=] { return openErr(p, O_WRONLY); }});
    pathOps.push_back({"open O_RDWR " + p, [=] { return openErr(p, O_RDWR); }});
    pathOps.push_back({"open O_APPEND " + p, [=] { return openErr(p, O_WRONLY | O_APPEND); }});
    pathOps.push_back({"open O_TRUNC " + p, [=] { return openErr(p, O_RDONLY | O_TRUNC); }});
    pathOps.push_back({"truncate " + p, [=] { return err(truncate(p.c_str(), 0)); }});
    pathOps.push_back({"unlink " + p, [=] { return err(unlink(p.c_str())); }});
    pathOps.push_back({"chmod " + p, [=] { return err(chmod(p.c_str(), 0777)); }});
    pathOps.push_back({"chown " + p, [=] { return err(chown(p.c_str(), 1, 1)); }});
    pathOps.push_back(
        {"utimensat " + p, [=] { return err(utimensat(AT_FDCWD, p.c_str(), times, 0)); }});
    pathOps.push_back(
        {"utimensat now " + p, [=] { return err(utimensat(AT_FDCWD, p.c_str(), nullptr, 0)); }});
    pathOps.push_back(
        {"setxattr " + p, [=] { return err(setxattr(p.c_str(), "user.a", "1", 1, 0)); }});
    pathOps.push_back({"removexattr " + p, [=] { return err(removexattr(p.c_str(), "user.a")); }});
    pathOps.push_back({"rename " + p, [=] { return err(rename(p.c_str(), (p + ".x").c_str())); }});
    pathOps.push_back({"link " + p, [=] { return err(link(p.c_str(), (p + ".l").c_str())); }});
  }
  for (const std::string& d : {m, m + "/big", m + "/names", m + "/modes/dir0700"}) {
    pathOps.push_back({"creat in " + d, [=] { return openErr(d + "/new", O_WRONLY | O_CREAT); }});
    pathOps.push_back(
        {"O_EXCL in " + d, [=] { return openErr(d + "/new", O_RDWR | O_CREAT | O_EXCL); }});
    pathOps.push_back({"O_TMPFILE in " + d, [=] { return openErr(d, O_TMPFILE | O_RDWR); }});
    pathOps.push_back({"mkdir in " + d, [=] { return err(mkdir((d + "/nd").c_str(), 0755)); }});
    pathOps.push_back({"symlink in " + d, [=] { return err(symlink("x", (d + "/sl").c_str())); }});
    pathOps.push_back({"mkfifo in " + d, [=] { return err(mkfifo((d + "/ff").c_str(), 0644)); }});
    pathOps.push_back({"mknod chr in " + d, [=] {
                         return err(mknod((d + "/cd").c_str(), S_IFCHR | 0644, makedev(1, 3)));
                       }});
    pathOps.push_back(
        {"mknod reg in " + d, [=] { return err(mknod((d + "/rg").c_str(), S_IFREG | 0644, 0)); }});
    pathOps.push_back({"chmod dir " + d, [=] { return err(chmod(d.c_str(), 0700)); }});
    pathOps.push_back({"chown dir " + d, [=] { return err(chown(d.c_str(), 7, 7)); }});
    pathOps.push_back(
        {"utimensat dir " + d, [=] { return err(utimensat(AT_FDCWD, d.c_str(), times, 0)); }});
    pathOps.push_back(
        {"setxattr dir " + d, [=] { return err(setxattr(d.c_str(), "user.a", "1", 1, 0)); }});
  }
  pathOps.push_back({"rmdir empty", [=] { return err(rmdir((m + "/modes/dir0700").c_str())); }});
  pathOps.push_back({"rmdir big", [=] { return err(rmdir((m + "/big/e00999").c_str())); }});
  pathOps.push_back(
      {"rename dir", [=] { return err(rename((m + "/big").c_str(), (m + "/big2").c_str())); }});
  pathOps.push_back({"rename over", [=] { return err(rename(odd.c_str(), f.c_str())); }});
  pathOps.push_back({"renameat2 NOREPLACE", [=] {
                       return err(syscall(SYS_renameat2, AT_FDCWD, f.c_str(), AT_FDCWD,
                                          (m + "/nr").c_str(), RENAME_NOREPLACE));
                     }});
  pathOps.push_back({"renameat2 EXCHANGE", [=] {
                       return err(syscall(SYS_renameat2, AT_FDCWD, f.c_str(), AT_FDCWD, odd.c_str(),
                                          RENAME_EXCHANGE));
                     }});
  pathOps.push_back({"unlink symlink", [=] { return err(unlink((m + "/links/rel").c_str())); }});
  pathOps.push_back(
      {"lchown symlink", [=] { return err(lchown((m + "/links/rel").c_str(), 1, 1)); }});
  pathOps.push_back(
      {"utimensat symlink nofollow", [=] {
         return err(utimensat(AT_FDCWD, (m + "/links/rel").c_str(), times, AT_SYMLINK_NOFOLLOW));
       }});
  pathOps.push_back({"lsetxattr symlink", [=] {
                       return err(lsetxattr((m + "/links/rel").c_str(), "trusted.a", "1", 1, 0));
                     }});
  pathOps.push_back({"unlink fifo", [=] { return err(unlink((m + "/fifo").c_str())); }});
  pathOps.push_back({"chmod fifo", [=] { return err(chmod((m + "/fifo").c_str(), 0777)); }});
  pathOps.push_back({"setxattr admin xattr",
                     [=] { return err(setxattr(m.c_str(), "user.epochfs.admin", "/x", 2, 0)); }});
  for (const auto& op : pathOps) {
    int e = op.run();
    EXPECT_EQ(e, EROFS) << printable(op.what) << " gave " << (e ? strerror(e) : "success");
  }

  // Descriptor-based calls on a read-only descriptor (the only kind there is).
  int fd = open(f.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  int dfd = open((m + "/big").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(dfd, 0);
  int srcFd = open((src_ + "/sizes/s1").c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(srcFd, 0);
  const std::set<int> refused = {EBADF, EROFS, EINVAL};
  std::vector<Op> fdOps = {
      {"write", [&] { return err(write(fd, "x", 1)); }},
      {"pwrite", [&] { return err(pwrite(fd, "x", 1, 0)); }},
      {"ftruncate", [&] { return err(ftruncate(fd, 0)); }},
      {"fallocate", [&] { return err(fallocate(fd, 0, 0, 4096)); }},
      {"fallocate punch",
       [&] { return err(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 4096)); }},
      {"fchmod", [&] { return err(fchmod(fd, 0777)); }},
      {"fchown", [&] { return err(fchown(fd, 1, 1)); }},
      {"futimens", [&] { return err(futimens(fd, times)); }},
      {"fsetxattr", [&] { return err(fsetxattr(fd, "user.a", "1", 1, 0)); }},
      {"fremovexattr", [&] { return err(fremovexattr(fd, "user.a")); }},
      {"copy_file_range into",
       [&] {
         loff_t in = 0, out = 0;
         return err(copy_file_range(srcFd, &in, fd, &out, 1, 0));
       }},
      {"mkdirat", [&] { return err(mkdirat(dfd, "nd", 0755)); }},
      {"unlinkat", [&] { return err(unlinkat(dfd, "e00001", 0)); }},
      {"openat O_CREAT",
       [&] {
         int x = openat(dfd, "new", O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
         if (x >= 0) close(x);
         return x >= 0 ? 0 : errno;
       }},
      {"linkat", [&] { return err(linkat(dfd, "e00001", dfd, "hl", 0)); }},
      {"symlinkat", [&] { return err(symlinkat("x", dfd, "sl")); }},
      {"fchmodat", [&] { return err(fchmodat(dfd, "e00001", 0777, 0)); }},
      {"fchownat", [&] { return err(fchownat(dfd, "e00001", 1, 1, 0)); }},
      {"renameat", [&] { return err(renameat(dfd, "e00001", dfd, "e00002")); }},
  };
  for (const auto& op : fdOps) {
    int e = op.run();
    EXPECT_TRUE(refused.count(e)) << op.what << " gave " << (e ? strerror(e) : "success");
  }
  close(srcFd);
  close(dfd);
  close(fd);

  // Nothing the calls tried to make is visible, and stat is unchanged.
  struct stat st;
  for (const char* n : {"new", "nd", "sl", "ff", "cd", "rg", "hl", "nr", "big2"}) {
    for (const std::string& d : {m, m + "/big", m + "/names"}) {
      EXPECT_NE(lstat((d + "/" + n).c_str(), &st), 0) << d << "/" << n << " appeared";
    }
  }
  auto mountNow = fullSnapshot(m, false);
  EXPECT_EQ(mountNow.size(), before.size());
  ASSERT_TRUE(unmount());
  auto after = fullSnapshot(src_, true);
  ASSERT_EQ(after.size(), before.size()) << "entries added to / removed from the source";
  for (const auto& [rel, b] : before) {
    auto it = after.find(rel);
    ASSERT_NE(it, after.end()) << printable(rel) << " vanished from the source";
    const Entry& a = it->second.e;
    SCOPED_TRACE(printable(rel));
    EXPECT_EQ(a.mode, b.e.mode);
    EXPECT_EQ(a.uid, b.e.uid);
    EXPECT_EQ(a.gid, b.e.gid);
    EXPECT_EQ(a.size, b.e.size);
    EXPECT_EQ(a.mtimeNs, b.e.mtimeNs);
    EXPECT_EQ(it->second.ctimeNs, b.ctimeNs) << "ctime changed: something modified it";
    EXPECT_EQ(a.hash, b.e.hash);
    EXPECT_EQ(a.target, b.e.target);
  }
}

}  // namespace
}  // namespace epochfs::itest
