// `stats` agrees with what the test read, tier by tier (the kernel page cache
// dropped before each pass, whole files read, so the kernel neither hides nor
// adds reads); `warm` shows progress (a bar on a terminal, plain lines
// otherwise) and leaves `ls` at 100%.
#include <unistd.h>

#include <fstream>
#include <random>

#include "tests/integration/admin_shapes.h"
#include "tests/integration/admin_test_util.h"

namespace epochfs::itest {
namespace {

using nlohmann::json;

class AdminStatsTest : public MountTest {
 protected:
  // Files up to `maxSize` bytes in a few directories.
  void makeDataset(int n, size_t maxSize, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<size_t> size(1, maxSize);
    for (int i = 0; i < n; ++i) {
      std::string dir = "d";
      dir += std::to_string(i % 5);
      mkdirs(src_ + "/" + dir);
      const std::string rel = dir + "/f" + std::to_string(i);
      const size_t sz = size(rng);
      writeFile(src_ + "/" + rel, randomBytes(sz, seed + static_cast<uint64_t>(i)));
      files_.push_back(rel);
      bytes_ += sz;
    }
  }
  uint64_t readAll() {
    uint64_t n = 0;
    for (const auto& rel : files_) {
      auto r = readFile(mnt_ + "/" + rel, 1 << 20);
      EXPECT_EQ(r.err, 0) << rel;
      n += r.data.size();
    }
    return n;
  }
  static uint64_t delta(const json& a, const json& b, const char* path) {
    return counter(b, path).value_or(0) - counter(a, path).value_or(0);
  }
  std::vector<std::string> files_;
  uint64_t bytes_ = 0;
};

// Files of at most one chunk, each read with one 1 MiB read(): the kernel
// sends one READ per file, so each chunk is served whole from one tier (a
// chunk served in several pieces counts its first piece under the tier that
// had it and the rest as RAM hits, where it then is), and no read-ahead moves
// chunks between tiers.
TEST_F(AdminStatsTest, ByteCountsMatchWhatWasReadPerTier) {
  makeDataset(60, 1 << 20, 3);
  ASSERT_EQ(mount({"--cache-dir", cache_, "--ram-cache", "256M"}).exitCode, 0);
  struct Pass {
    const char* name;
    const char* tier;  // the counter that must grow by exactly the bytes read
  };
  const char* tiers[] = {"tiers.ram.hit_bytes", "tiers.disk.hit_bytes", "tiers.source.bytes"};
  for (const Pass& pass : {Pass{"cold: from the source", "tiers.source.bytes"},
                           Pass{"second: from RAM", "tiers.ram.hit_bytes"},
                           Pass{"RAM evicted: from disk", "tiers.disk.hit_bytes"}}) {
    if (std::string(pass.tier) == "tiers.disk.hit_bytes") {
      ProcResult ev = runCtl({"evict", mnt_, "--all", "--tier", "ram"});
      ASSERT_EQ(ev.exitCode, 0) << ev.describe();
      ASSERT_EQ(counter(stats(), "tiers.ram.chunks").value_or(1), 0u);
    }
    dropCaches();
    const json before = stats();
    const uint64_t read = readAll();
    const json after = stats();
    ASSERT_EQ(read, bytes_);
    SCOPED_TRACE(pass.name);
    EXPECT_EQ(delta(before, after, "read_bytes"), read);
    for (const char* t : tiers) {
      EXPECT_EQ(delta(before, after, t), std::string(t) == pass.tier ? read : 0) << t;
    }
    // Source I/O: each byte once on the cold pass, never again.
    EXPECT_EQ(delta(before, after, "tiers.source.read_bytes"),
              std::string(pass.tier) == "tiers.source.bytes" ? read : 0);
    EXPECT_GE(delta(before, after, "read_requests"), files_.size());
  }
  // The human form says the same: one line per tier.
  ProcResult r = runCtl({"stats", mnt_});
  EXPECT_EQ(r.exitCode, 0);
  EXPECT_NE(r.out.find("kernel page cache"), std::string::npos) << r.out;
}

// Multi-chunk files: read-ahead fetches chunks before the reader asks, so a
// byte may be read from the source and served from RAM; the totals still
// add up exactly.
TEST_F(AdminStatsTest, TotalsAddUpWithMultiChunkFiles) {
  makeDataset(20, 5 << 20, 4);
  ASSERT_EQ(mount({"--ram-cache", "256M"}).exitCode, 0);
  dropCaches();
  const json before = stats();
  const uint64_t read = readAll();
  const json after = stats();
  ASSERT_EQ(read, bytes_);
  EXPECT_EQ(delta(before, after, "read_bytes"), read);
  EXPECT_EQ(
      delta(before, after, "tiers.ram.hit_bytes") + delta(before, after, "tiers.source.bytes"),
      read);
  EXPECT_EQ(delta(before, after, "tiers.source.read_bytes"), read) << "each byte read once";
}

// Chunk buffers come from huge-page slabs (--huge-pages auto, no watched
// cgroup limit) and, after an eviction, the next cold pass reuses their
// memory: every byte right both times; with --huge-pages off, no slab.
TEST_F(AdminStatsTest, ChunkBuffersFromHugePageSlabsKeepEveryByte) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "sanitizer builds do not use the slabs";
#endif
  makeDataset(60, 1 << 20, 5);
  // Chunks under 64 KiB are read through a bounce buffer into malloc'd memory
  // (cache/posix_source.h): only the others are carved.
  uint64_t carvable = 0;
  const auto readAndCompare = [&] {
    dropCaches();
    carvable = 0;
    for (const auto& rel : files_) {
      auto got = readFile(mnt_ + "/" + rel, 1 << 20);
      auto want = readFile(src_ + "/" + rel, 1 << 20);
      ASSERT_EQ(got.err, 0) << rel;
      ASSERT_TRUE(got.data == want.data) << rel;
      carvable += want.data.size() >= 64 * 1024;
    }
  };
  ASSERT_EQ(mount({"--ram-cache", "256M"}).exitCode, 0);
  if (stats()["memory"]["pressure"].value("watching", false)) {
    GTEST_SKIP() << "under a watched cgroup limit --huge-pages auto leaves the slabs off";
  }
  constexpr uint64_t kSlab = 2 << 20;
  readAndCompare();
  const json first = stats();
  ASSERT_GT(carvable, files_.size() / 2);
  EXPECT_GE(counter(first, "memory.chunk_buffers.slab_carved").value_or(0), carvable);
  const uint64_t slabBytes = counter(first, "memory.chunk_buffers.slab_bytes").value_or(0);
  EXPECT_GE(slabBytes, bytes_);
  EXPECT_EQ(slabBytes % kSlab, 0u);
  ASSERT_EQ(runCtl({"evict", mnt_, "--all"}).exitCode, 0);
  readAndCompare();  // into holes the evicted chunks left, and new slabs
  const json second = stats();
  EXPECT_GE(counter(second, "memory.chunk_buffers.slab_carved").value_or(0), 2 * carvable);
  EXPECT_EQ(counter(second, "memory.chunk_buffers.slab_refused").value_or(1), 0u);
  EXPECT_TRUE(unmount());

  ASSERT_EQ(mount({"--ram-cache", "256M", "--huge-pages", "off"}).exitCode, 0);
  readAndCompare();
  EXPECT_EQ(counter(stats(), "memory.chunk_buffers.slab_carved").value_or(1), 0u);
  EXPECT_EQ(counter(stats(), "memory.chunk_buffers.slab_bytes").value_or(1), 0u);
}

TEST_F(AdminStatsTest, WarmShowsProgressAndLeavesLsAtFullResidency) {
  makeDataset(80, 2 << 20, 5);
  ASSERT_EQ(mount({"--cache-dir", cache_, "--ram-cache", "512M"}).exitCode, 0);
  json ls = jsonOf(runCtl({"ls", mnt_, "--json"}));
  ASSERT_FALSE(ls.is_discarded());
  EXPECT_EQ(ls["paths"][0]["cached_pct"], 0.0);

  // Not a terminal: plain progress lines on stderr, the summary on stdout.
  ProcResult w = runCtl({"warm", mnt_, "d0", "d1"});
  ASSERT_EQ(w.exitCode, 0) << w.describe();
  EXPECT_NE(w.err.find("warm: 100%"), std::string::npos) << w.err;
  EXPECT_NE(w.err.find(" files "), std::string::npos) << w.err;
  EXPECT_NE(w.err.find("/s"), std::string::npos) << w.err;
  EXPECT_NE(w.err.find("ETA"), std::string::npos) << w.err;
  EXPECT_EQ(w.err.find('\r'), std::string::npos) << "no bar redraws without a terminal";
  EXPECT_NE(w.out.find("warmed 32 files"), std::string::npos) << w.out;

  // A terminal: a bar redrawn in place.
  ProcResult tty = runCtlOnPty({"warm", mnt_, "d2", "d3", "d4"});
  ASSERT_EQ(tty.exitCode, 0) << tty.describe();
  EXPECT_NE(tty.out.find("\r["), std::string::npos) << tty.out;
  EXPECT_NE(tty.out.find("] 100%"), std::string::npos) << tty.out;
  EXPECT_NE(tty.out.find("48/48 files"), std::string::npos) << tty.out;

  // --list FILE, and --json.
  const std::string list = root_ + "/list";
  {
    std::ofstream o(list);
    for (const auto& f : files_) o << f << "\n";
  }
  ProcResult j = runCtl({"warm", mnt_, "--list", list, "--json"});
  ASSERT_EQ(j.exitCode, 0) << j.describe();
  json wj = jsonOf(j);
  EXPECT_EQ(shapeErrors(wj, shapes::warm()), "");
  EXPECT_EQ(wj["files"], files_.size());
  EXPECT_EQ(wj["bytes"], bytes_);

  ls = jsonOf(runCtl({"ls", mnt_, "--json"}));
  const json& root = ls["paths"][0];
  EXPECT_EQ(root["cached_pct"], 100.0) << root.dump();
  EXPECT_EQ(root["ram_pct"], 100.0);
  EXPECT_EQ(root["disk_pct"], 100.0);
  EXPECT_EQ(root["cached_bytes"], bytes_);
  EXPECT_EQ(root["not_cached_bytes"], 0);
  for (const json& c : root["children"]) EXPECT_EQ(c["cached_pct"], 100.0) << c.dump();
  // Warming reads the source once; stats count it.
  const json s = stats();
  EXPECT_EQ(counter(s, "tiers.source.read_bytes").value_or(0), bytes_);
  EXPECT_EQ(counter(s, "warm.jobs").value_or(0), 3u);
  // Reading now touches no source byte.
  dropCaches();
  readAll();
  EXPECT_EQ(counter(stats(), "tiers.source.read_bytes").value_or(0), bytes_);
}

}  // namespace
}  // namespace epochfs::itest
