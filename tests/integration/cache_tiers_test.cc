// (c)-(f) The cache tiers: a second read is served without touching the
// source, a restarted daemon serves from its warm disk tier, a corrupted disk
// chunk is detected and re-fetched, and a cache far smaller than the dataset
// still returns every byte correctly.
#include <dirent.h>
#include <fcntl.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <barrier>
#include <cstring>
#include <random>
#include <thread>

#include "tests/integration/mount_fixture.h"

namespace epochfs::itest {
namespace {

constexpr uint64_t kMiB = 1024 * 1024;

class CacheTiersTest : public MountTest {};

struct Dataset {
  std::vector<std::string> files;  // relative paths
  std::map<std::string, uint64_t> hash;
  std::map<std::string, uint64_t> size;
  uint64_t bytes = 0;
  uint64_t chunks = 0;  // 1 MiB chunks, a small file is one chunk
};

Dataset makeDataset(const std::string& root, size_t count, size_t minSize, size_t maxSize,
                    uint64_t seed, uint64_t minTotal = 0) {
  Dataset ds;
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<size_t> pick(minSize, maxSize);
  for (size_t i = 0; i < count || ds.bytes < minTotal; ++i) {
    std::string dir = "class" + std::to_string(i % 4) + (i % 3 == 0 ? "/sub" : "");
    mkdirs(root + "/" + dir);
    std::string rel = dir + "/sample" + std::to_string(i) + ".bin";
    size_t n = pick(rng);
    std::string data = randomBytes(n, seed * 1000 + i);
    writeFile(root + "/" + rel, data);
    ds.files.push_back(rel);
    ds.hash[rel] = xxh3(data);
    ds.size[rel] = n;
    ds.bytes += n;
    ds.chunks += n == 0 ? 0 : (n + kMiB - 1) / kMiB;
  }
  return ds;
}

// Reads every file of ds under mnt; returns the number of wrong files.
int readAndVerify(const std::string& mnt, const Dataset& ds, const std::vector<std::string>& order,
                  size_t bufSize = 128 * 1024) {
  int bad = 0;
  for (const auto& rel : order) {
    auto r = readFile(mnt + "/" + rel, bufSize);
    if (r.err != 0 || r.data.size() != ds.size.at(rel) || xxh3(r.data) != ds.hash.at(rel)) {
      if (++bad <= 5) {
        ADD_FAILURE() << rel << ": " << (r.err ? strerror(r.err) : "wrong bytes") << " (got "
                      << r.data.size() << " bytes, want " << ds.size.at(rel) << ")";
      }
    }
  }
  return bad;
}

uint64_t get(const nlohmann::json& j, std::string_view path) {
  auto v = counter(j, path);
  EXPECT_TRUE(v.has_value()) << "stats lack " << path << ": " << j.dump();
  return v.value_or(0);
}

// Bytes read from the source (whole chunks: misses and prefetches). The
// daemon reports that as tiers.source.read_bytes; tiers.source.bytes counts
// the bytes readers got straight from a source fetch.
uint64_t sourceIoBytes(const nlohmann::json& j) {
  if (auto v = counter(j, "tiers.source.read_bytes")) return *v;
  return get(j, "tiers.source.bytes");
}

// inotify on every directory of a tree: counts opens/reads from outside the
// daemon's own bookkeeping.
class SourceWatch {
 public:
  explicit SourceWatch(const std::string& root) {
    fd_ = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    EXPECT_GE(fd_, 0);
    for (const auto& [rel, e] : snapshotTree(root, false)) {
      if (!S_ISDIR(e.mode)) continue;
      std::string p = rel == "." ? root : root + "/" + rel;
      int wd = inotify_add_watch(fd_, p.c_str(), IN_OPEN | IN_ACCESS);
      EXPECT_GE(wd, 0) << p;
      dirs_[wd] = rel;
    }
  }
  ~SourceWatch() { close(fd_); }
  // Drains the queue; returns "dir/name OPEN" lines of the events so far.
  std::vector<std::string> drain(bool dirEvents) {
    alignas(inotify_event) char buf[64 * 1024];
    for (;;) {
      ssize_t n = read(fd_, buf, sizeof buf);
      if (n <= 0) break;
      for (char* p = buf; p < buf + n;) {
        auto* ev = reinterpret_cast<inotify_event*>(p);
        std::string what = dirs_[ev->wd] + "/" + (ev->len ? ev->name : "") +
                           ((ev->mask & IN_OPEN) ? " OPEN" : " ACCESS");
        ((ev->mask & IN_ISDIR) ? dirLog_ : fileLog_).push_back(what);
        p += sizeof(inotify_event) + ev->len;
      }
    }
    return dirEvents ? dirLog_ : fileLog_;
  }

 private:
  int fd_ = -1;
  std::map<int, std::string> dirs_;
  std::vector<std::string> fileLog_, dirLog_;
};

std::string head(const std::vector<std::string>& v) {
  std::string s;
  for (size_t i = 0; i < v.size() && i < 10; ++i) s += v[i] + "; ";
  return s;
}

// (c) After one full pass, the page cache dropped, a second pass is served by
// the RAM tier: the daemon reads (almost) nothing and the source not at all.
TEST_F(CacheTiersTest, SecondReadIsServedFromRamTier) {
  Dataset ds = makeDataset(src_, 30, 1000, kMiB * 3 / 2, 7);
  auto r = mount({"--ram-cache", "256M"});
  ASSERT_EQ(r.exitCode, 0) << r.describe();
  pid_t pid = daemonPid();
  ASSERT_GT(pid, 0) << admin("status").dump();
  auto io0 = procIo(pid);

  ASSERT_EQ(readAndVerify(mnt_, ds, ds.files), 0);
  auto s1 = stats();
  ASSERT_TRUE(s1.value("ok", false)) << s1.dump();
  EXPECT_EQ(sourceIoBytes(s1), ds.bytes)
      << "the first pass should read each byte from the source exactly once";
  auto io1 = procIo(pid);

  dropCaches();
  ASSERT_EQ(readAndVerify(mnt_, ds, ds.files), 0);
  auto s2 = stats();
  auto io2 = procIo(pid);

  // rchar only sees read()/pread()-style source I/O; say what the first pass
  // showed so a daemon reading otherwise (mmap, io_uring) is understood.
  RecordProperty("rchar_pass1", std::to_string(io1["rchar"] - io0["rchar"]));
  RecordProperty("rchar_pass2", std::to_string(io2["rchar"] - io1["rchar"]));
  uint64_t allowance = ds.bytes / 20 + 256 * 1024;
  EXPECT_LT(io2["rchar"] - io1["rchar"], allowance)
      << "daemon rchar grew by " << io2["rchar"] - io1["rchar"] << " in the second pass ("
      << ds.bytes << " bytes of files)";
  EXPECT_LT(io2["read_bytes"] - io1["read_bytes"], allowance) << "daemon read_bytes grew";
  EXPECT_EQ(sourceIoBytes(s2), sourceIoBytes(s1)) << "the second pass read from the source";
  EXPECT_GT(get(s2, "read_requests"), get(s1, "read_requests"))
      << "no FUSE reads in the second pass: the page cache was not dropped?";
  EXPECT_GE(get(s2, "tiers.ram.hit_bytes") - get(s1, "tiers.ram.hit_bytes"), ds.bytes * 95 / 100)
      << s2.dump();
  EXPECT_GE(get(s2, "tiers.ram.hit_chunks") - get(s1, "tiers.ram.hit_chunks"), ds.files.size());
  EXPECT_LE(get(s2, "tiers.ram.used_bytes"), get(s2, "tiers.ram.capacity_bytes"));
  EXPECT_EQ(get(s2, "tiers.ram.capacity_bytes"), 256 * kMiB);
  EXPECT_FALSE(s2["tiers"].contains("disk")) << "disk tier reported without --cache-dir";
}

// (d) A restarted daemon with the same --cache-dir serves everything from its
// disk tier: inotify sees no source file opened or read.
TEST_F(CacheTiersTest, RestartServesFromWarmDiskTier) {
  Dataset ds = makeDataset(src_, 25, 1, 2 * kMiB, 11);
  const std::vector<std::string> opts = {"--cache-dir", cache_,         "--ram-cache",
                                         "1M",          "--disk-cache", "1G"};
  auto r = mount(opts);
  ASSERT_EQ(r.exitCode, 0) << r.describe();
  ASSERT_EQ(readAndVerify(mnt_, ds, ds.files), 0);
  ASSERT_TRUE(unmount());
  ASSERT_TRUE(lastDaemonStatus().has_value());
  EXPECT_TRUE(WIFEXITED(*lastDaemonStatus()) && WEXITSTATUS(*lastDaemonStatus()) == 0)
      << "daemon wait status " << *lastDaemonStatus() << " after unmount";

  r = mount(opts);
  ASSERT_EQ(r.exitCode, 0) << r.describe();
  SourceWatch watch(src_);  // after the remount: its metadata scan is not counted
  dropCaches();
  ASSERT_EQ(readAndVerify(mnt_, ds, ds.files), 0);
  auto s = stats();
  ASSERT_TRUE(s.value("ok", false)) << s.dump();

  auto fileEvents = watch.drain(false);
  EXPECT_EQ(fileEvents.size(), 0u)
      << "source files opened/read after the restart: " << head(fileEvents);
  auto dirEvents = watch.drain(true);
  EXPECT_EQ(dirEvents.size(), 0u) << "source directories opened after the mount: "
                                  << head(dirEvents);
  EXPECT_EQ(sourceIoBytes(s), 0u) << s.dump();
  EXPECT_EQ(get(s, "tiers.source.bytes"), 0u) << s.dump();
  EXPECT_GE(get(s, "tiers.disk.hit_chunks"), ds.chunks) << s.dump();
  EXPECT_GE(get(s, "tiers.disk.hit_bytes") + get(s, "tiers.ram.hit_bytes"), ds.bytes) << s.dump();
  EXPECT_EQ(get(s, "tiers.disk.corruptions"), 0u);
  EXPECT_GE(get(s, "tiers.disk.used_bytes"), ds.bytes) << "disk tier holds less than the data";
  // The instrument works: a read of the source itself is seen.
  EXPECT_EQ(readFile(src_ + "/" + ds.files[0]).err, 0);
  EXPECT_FALSE(watch.drain(false).empty()) << "inotify saw no event for a direct source read";
}

// (d') A remount with the same --cache-dir serves the namespace kept beside
// the disk tier: no source directory is opened but the root (inotify: no
// walk) and status says "kept on disk". Of the changes made between the
// mounts, a rewritten file (same size, other bytes) is served with its new
// bytes, a deleted one reads ENOENT, an added one appears after `refresh`;
// the refresh keeps the namespace again, so the next remount shows the
// addition, again without a walk.
TEST_F(CacheTiersTest, RemountServesTheKeptNamespaceCheckedAtFirstUse) {
  Dataset ds = makeDataset(src_, 400, 1, 300 * 1024, 17);
  const std::vector<std::string> opts = {"--cache-dir", cache_,         "--ram-cache",
                                         "64M",         "--disk-cache", "1G"};
  auto r = mount(opts);
  ASSERT_EQ(r.exitCode, 0) << r.describe();
  EXPECT_EQ(admin("status")["dataset"].value("namespace_source", ""), "walk");
  ASSERT_EQ(readAndVerify(mnt_, ds, ds.files), 0);
  ASSERT_TRUE(unmount());

  const std::string rewritten = ds.files[7], deleted = ds.files[8], added = "class1/added.bin";
  const std::string fresh = randomBytes(ds.size[rewritten], 4242);
  writeFile(src_ + "/" + rewritten, fresh);
  ds.hash[rewritten] = xxh3(fresh);
  ASSERT_EQ(unlink((src_ + "/" + deleted).c_str()), 0);
  const std::string addedData = randomBytes(200 * 1024, 99);
  writeFile(src_ + "/" + added, addedData);
  std::vector<std::string> kept;
  for (const auto& f : ds.files)
    if (f != deleted) kept.push_back(f);

  for (int remount = 0; remount < 2; ++remount) {
    SourceWatch watch(src_);
    r = mount(opts);
    ASSERT_EQ(r.exitCode, 0) << r.describe();
    const auto dirEvents = watch.drain(true);
    EXPECT_LE(dirEvents.size(), 1u)
        << "remount " << remount << " walked the source: " << head(dirEvents);
    EXPECT_EQ(admin("status")["dataset"].value("namespace_source", ""), "kept on disk");
    dropCaches();
    EXPECT_EQ(readAndVerify(mnt_, ds, kept), 0) << "remount " << remount;
    EXPECT_EQ(readFile(mnt_ + "/" + deleted).err, ENOENT);
    if (remount == 0) {
      EXPECT_EQ(readFile(mnt_ + "/" + added).err, ENOENT) << "an addition before refresh";
      const auto refreshed = admin("refresh");
      ASSERT_TRUE(refreshed.value("ok", false)) << refreshed.dump();
    }
    const auto got = readFile(mnt_ + "/" + added);
    EXPECT_EQ(got.err, 0) << "remount " << remount;
    EXPECT_TRUE(got.data == addedData) << "remount " << remount;
    ASSERT_TRUE(unmount());
  }
}

std::vector<std::string> segmentFiles(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& [rel, e] : snapshotTree(dir, false)) {
    auto slash = rel.rfind('/');
    std::string base = slash == std::string::npos ? rel : rel.substr(slash + 1);
    if (S_ISREG(e.mode) && base.rfind("seg-", 0) == 0 && base.size() > 8 &&
        base.compare(base.size() - 4, 4, ".dat") == 0) {
      out.push_back(dir + "/" + rel);
    }
  }
  return out;
}

// (e) A byte flipped inside every stored chunk: the disk tier notices (XXH3),
// counts a corruption and the reader still gets the right bytes.
TEST_F(CacheTiersTest, CorruptedDiskChunkIsDetectedAndRefetched) {
  std::map<std::string, std::string> files = {{"one.bin", randomBytes(300 * 1000, 21)},
                                              {"multi.bin", randomBytes(3 * kMiB + 5, 22)}};
  for (const auto& [n, d] : files) writeFile(src_ + "/" + n, d);
  const std::vector<std::string> opts = {"--cache-dir", cache_,         "--ram-cache",
                                         "64M",         "--chunk-size", "1M"};
  auto r = mount(opts);
  ASSERT_EQ(r.exitCode, 0) << r.describe();
  for (const auto& [n, d] : files) ASSERT_EQ(readFile(mnt_ + "/" + n).data, d) << n;
  ASSERT_TRUE(unmount());

  auto segs = segmentFiles(cache_);
  ASSERT_FALSE(segs.empty()) << "no seg-*.dat under " << cache_;
  std::map<std::string, std::string> segData;
  for (const auto& s : segs) segData[s] = readFile(s).data;
  int chunksFound = 0;
  for (const auto& [n, d] : files) {
    for (size_t off = 0; off < d.size(); off += kMiB) {
      size_t len = std::min<size_t>(kMiB, d.size() - off);
      if (len < 64) continue;  // too short to find reliably (multi.bin's 5-byte tail)
      std::string needle = d.substr(off + len / 2 - 32, 64);
      bool found = false;
      for (auto& [path, bytes] : segData) {
        for (size_t pos = bytes.find(needle); pos != std::string::npos;
             pos = bytes.find(needle, pos + 1)) {
          bytes[pos + 32] = static_cast<char>(bytes[pos + 32] ^ 0x5a);
          found = true;
        }
      }
      EXPECT_TRUE(found) << n << " chunk at " << off << " not found in any segment file";
      chunksFound += found;
    }
  }
  ASSERT_GT(chunksFound, 0);
  for (const auto& [path, bytes] : segData) {
    int fd = open(path.c_str(), O_WRONLY);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(pwrite(fd, bytes.data(), bytes.size(), 0), static_cast<ssize_t>(bytes.size()));
    close(fd);
  }

  r = mount(opts);
  ASSERT_EQ(r.exitCode, 0) << r.describe();
  dropCaches();
  for (const auto& [n, d] : files) {
    auto got = readFile(mnt_ + "/" + n);
    EXPECT_EQ(got.err, 0) << n << ": " << strerror(got.err);
    EXPECT_TRUE(got.data == d) << n << ": corrupted bytes served";
  }
  auto s = stats();
  EXPECT_GE(get(s, "tiers.disk.corruptions"), 1u) << s.dump();
  EXPECT_GE(sourceIoBytes(s), 300u * 1000) << "corrupt chunks not re-fetched? " << s.dump();
  // Again, now from whatever replaced the bad chunks.
  dropCaches();
  for (const auto& [n, d] : files) EXPECT_TRUE(readFile(mnt_ + "/" + n).data == d) << n;
}

// (f) A 2 MiB RAM tier over 40 MB of files: two passes (two concurrent
// readers, then reverse order with odd buffers and random preads), every byte
// right, the tier never over its budget.
TEST_F(CacheTiersTest, TinyRamCacheOverLargeDataset) {
  Dataset ds = makeDataset(src_, 40, 200 * 1000, kMiB * 3 / 2, 31, 40 * 1000 * 1000);
  auto r = mount({"--ram-cache", "2M"});
  ASSERT_EQ(r.exitCode, 0) << r.describe();

  std::vector<std::string> half[2];
  for (size_t i = 0; i < ds.files.size(); ++i) half[i % 2].push_back(ds.files[i]);
  int bad[2] = {0, 0};
  {
    std::thread t([&] { bad[1] = readAndVerify(mnt_, ds, half[1], 64 * 1024); });
    bad[0] = readAndVerify(mnt_, ds, half[0]);
    t.join();
  }
  EXPECT_EQ(bad[0] + bad[1], 0) << "pass 1";
  auto s1 = stats();
  EXPECT_LE(get(s1, "tiers.ram.used_bytes"), get(s1, "tiers.ram.capacity_bytes")) << s1.dump();

  dropCaches();
  std::vector<std::string> rev(ds.files.rbegin(), ds.files.rend());
  EXPECT_EQ(readAndVerify(mnt_, ds, rev, 300 * 1000 + 7), 0) << "pass 2";
  std::mt19937_64 rng(5);
  for (int i = 0; i < 200; ++i) {
    const auto& rel = ds.files[rng() % ds.files.size()];
    size_t size = ds.size.at(rel);
    size_t off = rng() % size, len = 1 + rng() % (kMiB + 3);
    std::string want(len, '\0'), got(len, '\0');
    int sfd = open((src_ + "/" + rel).c_str(), O_RDONLY);
    int mfd = open((mnt_ + "/" + rel).c_str(), O_RDONLY);
    ASSERT_GE(mfd, 0);
    ssize_t w = pread(sfd, want.data(), len, static_cast<off_t>(off));
    ssize_t g = pread(mfd, got.data(), len, static_cast<off_t>(off));
    close(sfd);
    close(mfd);
    ASSERT_EQ(g, w) << rel << " pread(" << off << ", " << len << ")";
    ASSERT_TRUE(want == got) << rel << " pread(" << off << ", " << len << ") bytes differ";
  }
  auto s2 = stats();
  EXPECT_EQ(get(s2, "tiers.ram.capacity_bytes"), 2 * kMiB) << s2.dump();
  EXPECT_LE(get(s2, "tiers.ram.used_bytes"), 2 * kMiB) << s2.dump();
  EXPECT_GT(get(s2, "tiers.ram.evictions"), 0u) << s2.dump();
  EXPECT_GE(sourceIoBytes(s2), ds.bytes) << s2.dump();
}

// Concurrent misses on one chunk are fetched once: two readers race over
// different halves of the same chunks (the kernel would merge same-page
// reads itself), and the source still reads each byte exactly once.
TEST_F(CacheTiersTest, ConcurrentReadersFetchEachChunkOnce) {
  Dataset ds = makeDataset(src_, 12, kMiB, 3 * kMiB, 41);
  auto r = mount({"--ram-cache", "256M", "--chunk-size", "1M"});
  ASSERT_EQ(r.exitCode, 0) << r.describe();
  std::barrier sync(2);
  std::atomic<int> bad{0};
  auto reader = [&](int half) {
    for (const auto& rel : ds.files) {
      std::string want = readFile(src_ + "/" + rel).data;
      int fd = open((mnt_ + "/" + rel).c_str(), O_RDONLY);
      sync.arrive_and_wait();  // both start each file together
      for (size_t off = half * kMiB / 2; off < want.size(); off += kMiB) {
        size_t len = std::min<size_t>(kMiB / 2, want.size() - off);
        std::string got(len, '\0');
        if (fd < 0 ||
            pread(fd, got.data(), len, static_cast<off_t>(off)) != static_cast<ssize_t>(len) ||
            got.compare(0, len, want, off, len) != 0) {
          ++bad;
        }
      }
      if (fd >= 0) close(fd);
    }
  };
  std::thread t(reader, 1);
  reader(0);
  t.join();
  EXPECT_EQ(bad.load(), 0) << "wrong bytes under concurrent reads";
  auto s = stats();
  EXPECT_EQ(sourceIoBytes(s), ds.bytes) << "some chunk was fetched twice: " << s.dump();
  RecordProperty("coalesced", std::to_string(counter(s, "coalesced").value_or(0)));
}

}  // namespace
}  // namespace epochfs::itest
