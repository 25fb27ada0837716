// The prefetcher's parts on their own, without threads: PlanStream's entry
// states, PlanTracker's matching and next use, the three PositionSources,
// ChunkSpan, FetchBudget and WindowScheduler's window, lead cap and budget.
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "cache/chunk_cache.h"
#include "cache/eviction_advisor.h"
#include "cache/ram_tier.h"
#include "prefetch/fetch_budget.h"
#include "prefetch/plan_stream.h"
#include "prefetch/plan_tracker.h"
#include "prefetch/position_source.h"
#include "prefetch/window_scheduler.h"
#include "tests/unit/cache/fake_source.h"
#include "tests/unit/prefetch/prefetch_test_util.h"

namespace epochfs::prefetch {
namespace {

PlanEntry entry(uint64_t fileId, uint64_t size, uint64_t offset = 0, uint64_t length = 0) {
  PlanEntry e;
  e.relPath = std::to_string(fileId);
  e.identity.fileId = fileId;
  e.identity.size = size;
  e.offset = offset;
  e.length = length == 0 ? size : length;
  return e;
}

// Files 1..n, each `size` bytes, in order.
std::shared_ptr<const AccessPlan> plan(int n, uint64_t size = 1000, int rank = 0,
                                       uint64_t start = 0) {
  std::vector<PlanEntry> entries;
  for (int i = 1; i <= n; ++i) entries.push_back(entry(i, size));
  return std::make_shared<AccessPlan>(0, rank, start, std::move(entries));
}

TEST(ChunkSpan, CoversTheChunksAnEntryTouches) {
  EXPECT_EQ(chunkSpan(entry(1, 10000), 4096).first, 0u);
  EXPECT_EQ(chunkSpan(entry(1, 10000), 4096).end, 3u);
  const ChunkSpan range = chunkSpan(entry(1, 10000, 5000, 4000), 4096);  // [5000, 9000)
  EXPECT_EQ(range.first, 1u);
  EXPECT_EQ(range.end, 3u);
  const ChunkSpan past = chunkSpan(entry(1, 4096, 4096, 100), 4096);  // starts at the end
  EXPECT_EQ(past.end - past.first, 0u);
  EXPECT_EQ(chunkSpan(entry(1, 0), 4096).end - chunkSpan(entry(1, 0), 4096).first, 0u);
}

TEST(PlanStream, ConsumingCountsOnceInAnyOrderAndTheLeadFollows) {
  PlanStream s(plan(5, 1000, 0, 1), 0);
  EXPECT_EQ(s.progress(), 1u);
  s.markPrefetched(3);
  s.markPrefetched(4);
  EXPECT_EQ(s.stats().leadFiles, 2u);
  EXPECT_EQ(s.consume(4), 1u);
  EXPECT_EQ(s.consume(4), 0u) << "the second time is a no-op";
  EXPECT_EQ(s.highest(), 5u);
  EXPECT_EQ(s.progress(), 2u) << "progress counts entries, not the highest one";
  EXPECT_EQ(s.stats().leadFiles, 1u);
  EXPECT_EQ(s.consume(2), 2u);
  s.markPrefetched(2);  // a fetch that finished after its read: not lead
  EXPECT_EQ(s.stats().leadFiles, 1u);
}

TEST(PlanStream, OpenedAndPushedReportEachOther) {
  PlanStream s(plan(3), 0);
  EXPECT_FALSE(s.markOpened(0));
  s.markPrefetched(0);
  EXPECT_TRUE(s.markPushed(0)) << "opened before the push";
  s.markPrefetched(1);
  EXPECT_FALSE(s.markPushed(1));
  EXPECT_TRUE(s.markOpened(1)) << "pushed before the open";
  uint64_t from = 0;
  EXPECT_TRUE(s.claimSweep(2, &from));
  EXPECT_EQ(from, 0u);
  EXPECT_FALSE(s.claimSweep(1, &from)) << "covered by the first sweep";
}

TEST(PlanTracker, AnAccessIsTheNearestUnconsumedEntryAcrossRanks) {
  PlanTracker t(1000);
  EXPECT_FALSE(t.live());
  // Rank 0 reads 1..10; rank 1 reads 10..1 (file 10 first).
  auto s0 = t.set(plan(10), 0);
  std::vector<PlanEntry> reversed;
  for (int i = 10; i >= 1; --i) reversed.push_back(entry(i, 1000));
  auto s1 = t.set(std::make_shared<AccessPlan>(0, 1, 0, reversed), 0);
  EXPECT_TRUE(t.live());
  PlanTracker::Match m = t.nearest(10, nullptr);
  EXPECT_EQ(m.stream, s1);
  EXPECT_EQ(m.pos, 0u);
  EXPECT_TRUE(m.planned);
  s1->consume(0);
  m = t.nearest(10, nullptr);
  EXPECT_EQ(m.stream, s0);
  EXPECT_EQ(m.distance, 9u);
  EXPECT_EQ(t.nextUse(10), 9u);
  EXPECT_EQ(t.nextUse(99), cache::EvictionAdvisor::kNever);
  EXPECT_FALSE(t.nearest(99, nullptr).planned);
  // A filter: only odd positions of rank 0.
  m = t.nearest(2, [&](const PlanStream& s, uint32_t p) { return &s == s0.get() && p % 2 == 1; });
  EXPECT_EQ(m.stream, s0);
  EXPECT_EQ(m.pos, 1u);
}

// Two jobs (mounts) read the same files at different speeds: eviction asks
// which is read first in time, so the fast job's farther entry comes before
// the slow job's nearer one.
TEST(PlanTracker, NextUseIsInTimeAtEachStreamsRate) {
  PlanTracker t(1000);
  std::vector<PlanEntry> files;
  for (int i = 1; i <= 200; ++i) files.push_back(entry(i, 1000));
  // Job 1 reads 1..200; job 2 reads 200..1.
  auto fast = t.set(std::make_shared<AccessPlan>(0, 0, 0, files, 1), 0);
  auto slow = t.set(std::make_shared<AccessPlan>(
                        0, 0, 0, std::vector<PlanEntry>(files.rbegin(), files.rend()), 2),
                    0);
  // Before either rate is known, an entry counts 1 ms.
  EXPECT_EQ(t.nextUseNs(150), 50'000'000u);  // job 2's entry 50
  EXPECT_EQ(t.nextUse(150), 50u);
  // Over 2 s, job 1 consumes 100 entries (50/s), job 2 consumes 10 (5/s).
  for (uint32_t p = 0; p < 100; ++p) fast->consume(p);
  for (uint32_t p = 0; p < 10; ++p) slow->consume(p);
  fast->updateRate(2'000'000'000);
  slow->updateRate(2'000'000'000);
  // File 150: job 1's next entry is 49 ahead (0.98 s), job 2's 40 ahead (8 s).
  EXPECT_EQ(t.nextUse(150), 40u);
  EXPECT_NEAR(static_cast<double>(t.nextUseNs(150)), 0.98e9, 1e6);
  // File 101: job 1 reads it next (0 ahead), before job 2.
  EXPECT_EQ(t.nextUseNs(101), 0u);
  // File 5: job 1 consumed it; job 2 reads it 185 entries on, 37 s.
  EXPECT_NEAR(static_cast<double>(t.nextUseNs(5)), 37e9, 1e7);
  // A stream whose reader stopped is slow, not never needed: 1 s an entry.
  slow->updateRate(1'000'000'000'000);
  EXPECT_LE(t.nextUseNs(5), 185'000'000'000u);
  EXPECT_EQ(t.nextUseNs(999), cache::EvictionAdvisor::kNever);
}

TEST(PlanTracker, ANewPlanReplacesItsRanksAndRemovalEndsLiveness) {
  PlanTracker t(1000);
  auto first = t.set(plan(3), 0);
  auto second = t.set(plan(3), 0);
  EXPECT_TRUE(first->expired());
  EXPECT_EQ(t.streams()->size(), 1u);
  t.remove(second);
  EXPECT_TRUE(second->expired());
  EXPECT_FALSE(t.live());
}

// A lookup keeps the stream list it scans alive while a new plan replaces it
// (under ASan a scan of the freed list is a heap-use-after-free report).
TEST(PlanTracker, LookupsRaceNewPlansWithoutTouchingAFreedList) {
  PlanTracker t(1000);
  t.set(plan(64), 0);
  std::atomic<bool> done{false};
  std::thread planner([&] {
    for (int i = 0; i < 2000; ++i) t.set(plan(64, 1000, i % 2), 0);
    done = true;
  });
  uint64_t found = 0;
  while (!done) {
    for (uint64_t f = 1; f <= 64; f += 7) found += t.nearest(f, nullptr).planned ? 1 : 0;
    found += t.stats().size();
  }
  planner.join();
  EXPECT_GT(found, 0u);
  EXPECT_EQ(t.streams()->size(), 2u);
}

TEST(PlanTracker, DeviationCountsAccessesOffEveryPlanInARow) {
  PlanTracker t(3);
  EXPECT_FALSE(t.offPlan(false));
  EXPECT_FALSE(t.offPlan(false));
  EXPECT_FALSE(t.offPlan(true)) << "an access on a plan resets the streak";
  EXPECT_FALSE(t.offPlan(false));
  EXPECT_FALSE(t.offPlan(false));
  EXPECT_TRUE(t.offPlan(false));
}

// A PositionSource over a tracker, its hooks recording what they were asked.
struct PositionRig {
  explicit PositionRig(PositionMode mode, uint32_t every = 4) : tracker(1000) {
    PositionHooks hooks;
    hooks.consume = [this](PlanStream& s, uint32_t pos) {
      if (s.consume(pos) != 0) consumed.push_back(pos);
    };
    hooks.observe = [this](uint64_t fileId, uint32_t) { observed.push_back(fileId); };
    hooks.leftPlans = [this](uint32_t) { ++leftPlans; };
    hooks.now = [] { return int64_t{1}; };
    source = PositionSource::make(mode, every, tracker, hooks);
  }
  PlanTracker tracker;
  std::unique_ptr<PositionSource> source;
  std::vector<uint32_t> consumed;
  std::vector<uint64_t> observed;
  int leftPlans = 0;
};

TEST(PositionSource, ReadsConsumeAnEntryWhenTheyReachItsEnd) {
  PositionRig rig(PositionMode::kReads);
  EXPECT_FALSE(rig.source->needsOpens());
  EXPECT_FALSE(rig.source->mayPush(0));
  auto s = rig.tracker.set(plan(3), 0);
  rig.source->onRead(2, 0, 500, /*stalled=*/true);
  EXPECT_TRUE(rig.consumed.empty());
  EXPECT_EQ(rig.observed, std::vector<uint64_t>{2});
  rig.source->onRead(2, 500, 500, false);
  EXPECT_EQ(rig.consumed, std::vector<uint32_t>{1});
  EXPECT_EQ(s->stats().stalls, 1u);
  EXPECT_EQ(s->stats().hits, 1u);
  rig.source->onOpen(1);  // opens mean nothing here
  EXPECT_EQ(rig.observed.size(), 1u);
}

TEST(PositionSource, OpensConsumePushedEntriesAndReadsNeedAnOpen) {
  PositionRig rig(PositionMode::kOpens);
  EXPECT_TRUE(rig.source->needsOpens());
  EXPECT_TRUE(rig.source->mayPush(3));
  auto s = rig.tracker.set(plan(3), 0);
  s->markPrefetched(0);
  rig.source->onPushed(*s, 0);  // pushed, not opened: not consumed yet
  EXPECT_TRUE(rig.consumed.empty());
  rig.source->onOpen(1);
  EXPECT_EQ(rig.consumed, std::vector<uint32_t>{0});
  EXPECT_EQ(rig.observed, std::vector<uint64_t>{1});
  rig.source->onRead(2, 0, 1000, false);  // file 2 was never opened: not its entry
  EXPECT_EQ(rig.consumed.size(), 1u);
  rig.source->onOpen(2);
  rig.source->onRead(2, 0, 1000, false);
  EXPECT_EQ(rig.consumed, (std::vector<uint32_t>{0, 1}));
  s->markPrefetched(2);
  rig.source->onOpen(3);
  rig.source->onPushed(*s, 2);  // opened first: the push consumes it
  EXPECT_EQ(rig.consumed, (std::vector<uint32_t>{0, 1, 2}));
}

TEST(PositionSource, SentinelReadsSweepPushedEntriesBeforeTheirSlack) {
  PositionRig rig(PositionMode::kSentinels, 2);
  EXPECT_FALSE(rig.source->mayPush(1));
  EXPECT_TRUE(rig.source->mayPush(2));
  auto s = rig.tracker.set(plan(10), 0);
  for (uint32_t p = 0; p < 10; ++p) {
    s->markPrefetched(p);
    if (rig.source->mayPush(p)) rig.source->onPushed(*s, p);
  }
  rig.source->onRead(8, 0, 1000, false);  // sentinel at 7: sweeps [0, 4) pushed: 0, 2
  EXPECT_EQ(rig.consumed, (std::vector<uint32_t>{7, 0, 2}));
}

TEST(PositionSource, ReadersLeavingThePlansEndThem) {
  PlanTracker tracker(2);
  int left = 0;
  PositionHooks hooks{[](PlanStream& s, uint32_t p) { s.consume(p); }, [](uint64_t, uint32_t) {},
                      [&](uint32_t) { ++left; }, [] { return int64_t{0}; }};
  auto source = PositionSource::make(PositionMode::kReads, 8, tracker, hooks);
  tracker.set(plan(3), 0);
  source->onRead(50, 0, 10, false);
  EXPECT_EQ(left, 0);
  source->onRead(51, 0, 10, false);
  EXPECT_EQ(left, 1);
}

TEST(FetchBudget, OneReservationOfAnySizeWhenEmptyElseWithinCapacity) {
  FetchBudget b(1000);
  EXPECT_TRUE(b.tryReserve(5000)) << "an entry larger than the budget still goes";
  EXPECT_FALSE(b.tryReserve(1));
  b.release(5000);
  EXPECT_TRUE(b.tryReserve(600));
  EXPECT_FALSE(b.tryReserve(600));
  EXPECT_TRUE(b.tryReserve(400));
  EXPECT_EQ(b.bytes(), 1000u);
  EXPECT_EQ(b.tasks(), 2u);
  EXPECT_EQ(b.peak(), 5000u);
}

struct WindowRig {
  explicit WindowRig(WindowScheduler::Limits limits, uint64_t budgetBytes)
      : ram(16ull << 20),
        cache(testing::cacheOptions(3), source, ram, nullptr),
        budget(budgetBytes),
        window(limits, cache, budget, [this](FetchTask t) { queued.push_back(t.pos); }) {
    spdlog::set_level(spdlog::level::warn);
  }
  testing::LatencySource source;
  cache::RamTier ram;
  cache::ChunkCache cache;
  FetchBudget budget;
  WindowScheduler window;
  std::vector<uint32_t> queued;
};

TEST(WindowScheduler, QueuesTheWindowAheadOfTheReaderAndSkipsConsumedEntries) {
  WindowRig rig({4, 0}, 1 << 20);
  auto s = std::make_shared<PlanStream>(plan(10), 0);
  s->consume(1);
  rig.window.fill(s, 1);
  // Progress 1 (one entry consumed), highest 2: issuing starts at the
  // progress, skips the consumed entry and stops at highest + 4.
  EXPECT_EQ(rig.queued, (std::vector<uint32_t>{2, 3, 4, 5}));
  rig.window.fill(s, 1);
  EXPECT_EQ(rig.queued.size(), 4u) << "nothing twice";
  s->consume(0);
  s->consume(2);
  rig.window.fill(s, 1);
  EXPECT_EQ(rig.queued.back(), 6u);
}

TEST(WindowScheduler, StopsAtTheLeadCapAndAtAFullBudgetThenAsksForAWake) {
  WindowRig lead({100, 2500}, 1 << 20);
  auto s = std::make_shared<PlanStream>(plan(10, 1000), 0);
  lead.window.fill(s, 1);
  EXPECT_EQ(lead.queued, (std::vector<uint32_t>{0, 1}))
      << "the lead past the reader within 2,500 B";
  EXPECT_EQ(lead.window.leadWaits(), 1u);

  WindowRig budget({100, 0}, 2000);
  auto t = std::make_shared<PlanStream>(plan(10, 1000), 0);
  budget.window.fill(t, 1);
  EXPECT_EQ(budget.queued.size(), 2u);
  EXPECT_EQ(budget.window.budgetWaits(), 1u);
  EXPECT_TRUE(budget.window.takeWakeRequest());
  EXPECT_FALSE(budget.window.takeWakeRequest()) << "once";
  budget.budget.release(1000);
  budget.window.fill(t, 1);
  EXPECT_EQ(budget.queued.size(), 3u);
}

}  // namespace
}  // namespace epochfs::prefetch
