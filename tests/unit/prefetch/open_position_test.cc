// Unit tests for the prefetcher with page-cache push (PositionMode::kOpens): a
// recording PagePusher stands in for the kernel (the real one is covered by
// tests/integration/push_page_cache_test.cc). Position comes from opens; an
// entry pushed before its open is consumed by the open, one opened before its
// push by its reads or by the push; expiry and deviation work on opens.
// Assertions are on counts; time appears only as generous bounded waits.
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "cache/ram_tier.h"
#include "prefetch/prefetcher.h"
#include "tests/unit/cache/fake_source.h"
#include "tests/unit/prefetch/prefetch_test_util.h"

namespace epochfs::prefetch {
namespace {

using namespace std::chrono_literals;
using cache::ChunkCache;
using Tier = ChunkCache::Tier;

using testing::kChunkSize;
using testing::waitFor;

// Records what it is asked to push and answers `outcome`; with a gate, each
// push waits until open() (to land a push after an open).
class RecordingPusher : public PagePusher {
 public:
  Outcome push(const cache::FileIdentity& id, const std::vector<cache::ChunkRef>& chunks) override {
    {
      std::unique_lock<std::mutex> lock(mu_);
      waiting_++;
      cv_.notify_all();
      cv_.wait(lock, [&] { return !gated_; });
      waiting_--;
      uint64_t bytes = 0;
      for (const auto& c : chunks) bytes += c->size();
      if (bytes == id.size)
        pushed_.insert(id.fileId);
      else
        badSizes_++;
    }
    return outcome.load();
  }
  void gate() {
    std::lock_guard<std::mutex> l(mu_);
    gated_ = true;
  }
  void open() {
    std::lock_guard<std::mutex> l(mu_);
    gated_ = false;
    cv_.notify_all();
  }
  size_t waiting() {
    std::lock_guard<std::mutex> l(mu_);
    return waiting_;
  }
  size_t pushedCount() {
    std::lock_guard<std::mutex> l(mu_);
    return pushed_.size();
  }
  bool pushed(uint64_t fileId) {
    std::lock_guard<std::mutex> l(mu_);
    return pushed_.count(fileId) > 0;
  }
  int badSizes() {
    std::lock_guard<std::mutex> l(mu_);
    return badSizes_;
  }

  std::atomic<Outcome> outcome{Outcome::kPushed};

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool gated_ = false;
  size_t waiting_ = 0;
  std::set<uint64_t> pushed_;
  int badSizes_ = 0;
};

struct Rig {
  // Position from opens unless `po` names another mode.
  explicit Rig(PrefetchOptions po, PositionMode mode = PositionMode::kOpens)
      : ram(16ull << 20), cache(testing::cacheOptions(7), source, ram, nullptr) {
    spdlog::set_level(spdlog::level::warn);
    po.position = mode;
    prefetcher = std::make_unique<Prefetcher>(po, cache);
    advisorLease = ram.lendAdvisor(*prefetcher);
    prefetcher->setPagePusher(&pusher);
  }
  ~Rig() { pusher.open(); }
  std::vector<PlanEntry> addFiles(int n, size_t size, const std::string& prefix = "f") {
    return testing::addPlanFiles(source, n, size, prefix);
  }
  // A whole read of the entry served by the daemon (what FuseServer::onRead does).
  void read(const PlanEntry& e) {
    const uint64_t end = std::min(e.identity.size, e.offset + e.length);
    prefetcher->onRead(e.identity.fileId, e.offset, end - e.offset, Tier::kRam);
  }
  StreamStats stream(int rank = 0) const {
    for (const auto& s : prefetcher->stats()) {
      if (s.rank == rank) return s;
    }
    ADD_FAILURE() << "no stream for rank " << rank;
    return {};
  }

  testing::LatencySource source;
  cache::RamTier ram;
  ChunkCache cache;
  RecordingPusher pusher;
  std::unique_ptr<Prefetcher> prefetcher;
  cache::Lease advisorLease;  // declared after the prefetcher: ends before it goes
};

std::shared_ptr<const AccessPlan> planOf(std::vector<PlanEntry> entries, int rank = 0) {
  return std::make_shared<const AccessPlan>(0, rank, 0, std::move(entries));
}

PrefetchOptions options(uint32_t window = 64) {
  PrefetchOptions po;
  po.workers = 4;
  po.windowFiles = window;
  po.memoryBytes = 64ull << 20;
  return po;
}

// Pass: every whole-file entry of the window is pushed with all its bytes
// (multi-chunk files too), and opening the pushed files alone — no read —
// advances the position to the end, counted as hits.
TEST(OpenPositionTest, OpensOfPushedFilesAdvanceThePositionWithoutReads) {
  Rig rig(options());
  auto entries = rig.addFiles(30, 3 * kChunkSize + 100);
  rig.prefetcher->setPlan(planOf(entries));
  ASSERT_TRUE(waitFor([&] { return rig.prefetcher->pushedFiles() == 30; }));
  EXPECT_EQ(rig.pusher.pushedCount(), 30u);
  EXPECT_EQ(rig.pusher.badSizes(), 0);
  EXPECT_EQ(rig.prefetcher->pushedBytes(), 30u * (3 * kChunkSize + 100));
  for (const auto& e : entries) rig.prefetcher->onOpen(e.identity.fileId);
  const StreamStats s = rig.stream();
  EXPECT_EQ(s.position, 30u);
  EXPECT_EQ(s.hits, 30u);
  EXPECT_EQ(s.leadFiles, 0u);
  EXPECT_TRUE(rig.prefetcher->active());
}

// Pass: with pushes skipped (the kernel did not know the inode), an open
// alone does not consume the entry; the read reaching its end does, and a
// read of a planned file that was never opened does not.
TEST(OpenPositionTest, UnpushedEntryIsConsumedByItsReadsAfterTheOpen) {
  Rig rig(options());
  rig.pusher.outcome = PagePusher::Outcome::kSkipped;
  auto entries = rig.addFiles(10, 1000);
  rig.prefetcher->setPlan(planOf(entries));
  ASSERT_TRUE(waitFor([&] { return rig.pusher.pushedCount() == 10; }));
  EXPECT_EQ(rig.prefetcher->pushedFiles(), 0u);
  rig.prefetcher->onOpen(entries[0].identity.fileId);
  EXPECT_EQ(rig.stream().position, 0u);
  rig.read(entries[0]);
  EXPECT_EQ(rig.stream().position, 1u);
  rig.read(entries[1]);  // no open first
  EXPECT_EQ(rig.stream().position, 1u);
  rig.prefetcher->onOpen(entries[1].identity.fileId);
  rig.read(entries[1]);
  EXPECT_EQ(rig.stream().position, 2u);
}

// Pass: the kernel refusing a push counts a failure, not a pushed file.
TEST(OpenPositionTest, RefusedPushesAreCountedAsFailures) {
  Rig rig(options());
  rig.pusher.outcome = PagePusher::Outcome::kFailed;
  rig.prefetcher->setPlan(planOf(rig.addFiles(12, 1000)));
  ASSERT_TRUE(waitFor([&] { return rig.prefetcher->pushFailures() == 12; }));
  EXPECT_EQ(rig.prefetcher->pushedFiles(), 0u);
}

// Pass: a file opened while its push was still in progress is consumed when
// the push lands (its reads may then never reach the daemon).
TEST(OpenPositionTest, PushLandingAfterTheOpenConsumesTheEntry) {
  Rig rig(options(1));
  rig.pusher.gate();
  auto entries = rig.addFiles(3, 1000);
  rig.prefetcher->setPlan(planOf(entries));
  ASSERT_TRUE(waitFor([&] { return rig.pusher.waiting() == 1; }));  // entry 0's push, held
  rig.prefetcher->onOpen(entries[0].identity.fileId);
  EXPECT_EQ(rig.stream().position, 0u);
  rig.pusher.open();
  ASSERT_TRUE(waitFor([&] { return rig.stream().position >= 1; }));
  EXPECT_EQ(rig.stream().consumed, 1u);
}

// Pass: once an open consumed a pushed entry, a read of that file (the kernel
// dropped the pages) consumes neither it again nor another rank's entry of
// the same file.
TEST(OpenPositionTest, ReadAfterAConsumingOpenTouchesNoOtherEntry) {
  Rig rig(options());
  auto entries = rig.addFiles(8, 1000);
  rig.prefetcher->setPlan(planOf(entries, 0));
  rig.prefetcher->setPlan(planOf({entries[5], entries[0]}, 1));
  ASSERT_TRUE(waitFor([&] { return rig.prefetcher->pushedFiles() >= 9; }));
  rig.prefetcher->onOpen(entries[0].identity.fileId);  // rank 0's entry 0 is nearest
  EXPECT_EQ(rig.stream(0).position, 1u);
  EXPECT_EQ(rig.stream(1).position, 0u);
  rig.read(entries[0]);
  EXPECT_EQ(rig.stream(0).position, 1u);
  EXPECT_EQ(rig.stream(1).position, 0u);
  rig.prefetcher->onOpen(entries[0].identity.fileId);  // a second open: rank 1's
  EXPECT_EQ(rig.stream(1).position, 1u);
}

// Pass: opens (no reads at all) keep a plan alive past several expiry
// periods; with the opens stopped it expires.
TEST(OpenPositionTest, OpensKeepAPlanAliveAndItExpiresWithoutThem) {
  PrefetchOptions po = options();
  po.expirySeconds = 0.3;
  Rig rig(po);
  auto entries = rig.addFiles(40, 1000);
  rig.prefetcher->setPlan(planOf(entries));
  for (int i = 0; i < 18; ++i) {  // 0.9 s, one open every 50 ms
    rig.prefetcher->onOpen(entries[i].identity.fileId);
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_TRUE(rig.prefetcher->active());
  EXPECT_EQ(rig.stream().position, 18u);
  ASSERT_TRUE(waitFor([&] { return !rig.prefetcher->active(); }, 3000ms));
}

// Pass: opens of files no plan names expire the plans after deviationReads in
// a row (an open of a planned file restarts the count); reads do not count.
TEST(OpenPositionTest, OpensOffThePlanExpireIt) {
  PrefetchOptions po = options();
  po.deviationReads = 20;
  Rig rig(po);
  auto planned = rig.addFiles(5, 1000, "planned");
  auto others = rig.addFiles(60, 1000, "other");
  rig.prefetcher->setPlan(planOf(planned));
  for (int i = 0; i < 40; ++i) rig.read(others[i]);  // reads: not counted
  for (int i = 0; i < 19; ++i) rig.prefetcher->onOpen(others[i].identity.fileId);
  EXPECT_TRUE(rig.prefetcher->active());
  rig.prefetcher->onOpen(planned[0].identity.fileId);
  for (int i = 19; i < 38; ++i) rig.prefetcher->onOpen(others[i].identity.fileId);
  EXPECT_TRUE(rig.prefetcher->active());
  rig.prefetcher->onOpen(others[38].identity.fileId);  // the 20th in a row
  EXPECT_FALSE(rig.prefetcher->active());
}

// Pass: byte-range entries are never pushed (an open does not say which
// range is read) and keep read-based consumption; the observer sees opens,
// not reads.
TEST(OpenPositionTest, RangeEntriesStayReadTrackedAndTheObserverSeesOpens) {
  Rig rig(options());
  std::atomic<int> observed{0};
  rig.prefetcher->setReadObserver([&](uint64_t, uint32_t) { observed++; });
  auto files = rig.addFiles(1, 4 * kChunkSize, "shard");
  std::vector<PlanEntry> ranges;
  for (int i = 0; i < 4; ++i) {
    PlanEntry e = files[0];
    e.offset = static_cast<uint64_t>(i) * kChunkSize;
    e.length = kChunkSize;
    ranges.push_back(e);
  }
  rig.prefetcher->setPlan(planOf(ranges));
  ASSERT_TRUE(waitFor([&] { return rig.stream().prefetchedFiles == 4; }));
  EXPECT_EQ(rig.prefetcher->pushedFiles(), 0u);
  EXPECT_EQ(rig.pusher.pushedCount(), 0u);
  rig.prefetcher->onOpen(files[0].identity.fileId);
  EXPECT_EQ(observed.load(), 1);
  EXPECT_EQ(rig.stream().position, 0u);
  for (const auto& e : ranges) rig.read(e);
  EXPECT_EQ(rig.stream().position, 4u);
  EXPECT_EQ(observed.load(), 1);
}

// Pass (sentinel mode): every 4th entry is not pushed; reading only the
// sentinels (no opens, no reads of pushed files) consumes the pushed entries
// more than 2 x 4 before each sentinel read, so the position follows the
// readers; a read of a pushed file consumes only its own entry.
TEST(SentinelPositionTest, SentinelReadsSweepThePushedEntriesBeforeThem) {
  PrefetchOptions po = options();
  po.sentinelEvery = 4;
  Rig rig(po, PositionMode::kSentinels);
  auto entries = rig.addFiles(40, 1000);
  rig.prefetcher->setPlan(planOf(entries));
  ASSERT_TRUE(waitFor([&] { return rig.stream().prefetchedFiles == 40; }));
  ASSERT_TRUE(waitFor([&] { return rig.prefetcher->pushedFiles() == 30; }));
  for (int i = 3; i < 40; i += 4) EXPECT_FALSE(rig.pusher.pushed(entries[i].identity.fileId)) << i;
  rig.prefetcher->onOpen(entries[0].identity.fileId);  // opens are not tracked here
  EXPECT_EQ(rig.stream().position, 0u);
  rig.read(entries[3]);  // sentinel at 3: slack 8, nothing before it yet
  EXPECT_EQ(rig.stream().position, 1u);
  rig.read(entries[11]);  // sweeps [0, 4): pushed 0, 1, 2 (3 consumed already)
  EXPECT_EQ(rig.stream().position, 5u);
  rig.read(entries[9]);  // a pushed file read anyway (pages dropped): only itself
  EXPECT_EQ(rig.stream().position, 6u);
  rig.read(entries[39]);  // sweeps [4, 32): the pushed ones, 9 already consumed
  const uint64_t sentinelsRead = 3, pushedSwept = 3 + 20;  // 4..31 minus 7, 11, 15.., minus 9
  EXPECT_EQ(rig.stream().position, sentinelsRead + 1 + pushedSwept);
  EXPECT_TRUE(rig.prefetcher->active());
}

}  // namespace
}  // namespace epochfs::prefetch
