// Unit tests for Prefetcher over a real ChunkCache + RamTier and an in-memory
// source with latency (LatencySource): lookahead window and lead, reads never
// doubled, out-of-order consumption, the in-flight byte budget and worker
// count, queue depth, plan expiry, start positions, several ranks, source
// errors, byte-range entries. Assertions are on counts; time appears only as
// generous bounded waits.
#include "prefetch/prefetcher.h"

#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cache/ram_tier.h"
#include "prefetch/access_plan.h"
#include "tests/unit/cache/fake_source.h"
#include "tests/unit/prefetch/prefetch_test_util.h"

namespace epochfs::prefetch {
namespace {

using namespace std::chrono_literals;
using cache::ChunkCache;
using testing::LatencySource;
using Tier = ChunkCache::Tier;

using testing::kChunkSize;
using testing::waitFor;

// Polls `pred` every 2 ms until it holds or `timeout` passes.

// Source + RAM tier + chunk cache + prefetcher, wired as the daemon wires them
// (the prefetcher is the RAM tier's eviction advisor).
class Rig {
 public:
  Rig(const PrefetchOptions& po, std::chrono::microseconds latency, uint64_t ramBytes = 16ull << 20)
      : source(latency), ram(ramBytes), cache(testing::cacheOptions(42), source, ram, nullptr) {
    spdlog::set_level(spdlog::level::warn);
    prefetcher = std::make_unique<Prefetcher>(po, cache);
    advisorLease = ram.lendAdvisor(*prefetcher);
  }

  std::vector<PlanEntry> addFiles(int n, size_t size, const std::string& prefix = "f") {
    return testing::addPlanFiles(source, n, size, prefix);
  }

  // True when every chunk of the entry's range is in the RAM tier.
  bool inRam(const PlanEntry& e) const {
    const uint64_t end = std::min(e.identity.size, e.offset + e.length);
    for (uint64_t off = e.offset - e.offset % kChunkSize; off < end; off += kChunkSize) {
      if (!ram.contains(cache.keyFor(e.identity.fileId, static_cast<uint32_t>(off / kChunkSize)))) {
        return false;
      }
    }
    return true;
  }

  // Waits until every entry is in the RAM tier (false after waitFor's bound).
  bool waitAllInRam(const std::vector<PlanEntry>& entries) const {
    return waitFor([&] {
      return std::all_of(entries.begin(), entries.end(), [&](const auto& e) { return inRam(e); });
    });
  }

  // One FUSE read of the entry's range: the chunks through the cache, then
  // onRead with the worst tier (as FuseServer::onRead). A failed read replies
  // an error and does not call onRead.
  cache::Result<Tier> read(const PlanEntry& e) {
    const uint64_t end = std::min(e.identity.size, e.offset + e.length);
    Tier worst = Tier::kRam;
    for (uint64_t off = e.offset - e.offset % kChunkSize; off < end; off += kChunkSize) {
      Tier tier;
      auto r = cache.get(e.relPath, e.identity, static_cast<uint32_t>(off / kChunkSize), &tier);
      if (!r.isOk()) return r.status();
      worst = std::max(worst, tier);
    }
    prefetcher->onRead(e.identity.fileId, e.offset, end - e.offset, worst);
    return worst;
  }

  StreamStats streamOf(int rank) const {
    for (const auto& s : prefetcher->stats()) {
      if (s.rank == rank) return s;
    }
    ADD_FAILURE() << "no stream for rank " << rank;
    return {};
  }

  LatencySource source;
  cache::RamTier ram;
  ChunkCache cache;
  std::unique_ptr<Prefetcher> prefetcher;
  cache::Lease advisorLease;  // declared after the prefetcher: ends before it goes
};

std::shared_ptr<const AccessPlan> planOf(std::vector<PlanEntry> entries, int64_t epoch = 0,
                                         int rank = 0, uint64_t start = 0) {
  return std::make_shared<const AccessPlan>(epoch, rank, start, std::move(entries));
}

std::vector<PlanEntry> shuffled(std::vector<PlanEntry> v, unsigned seed) {
  std::mt19937 rng(seed);
  std::shuffle(v.begin(), v.end(), rng);
  return v;
}

PrefetchOptions optionsWith(unsigned workers, uint32_t window, uint64_t memory = 64ull << 20) {
  PrefetchOptions po;
  po.workers = workers;
  po.windowFiles = window;
  po.memoryBytes = memory;
  return po;
}

TEST(PrefetcherTest, PrefetchesTheWindowAheadAndKeepsTheLead) {
  constexpr int kFiles = 120;
  constexpr uint32_t kWindow = 16;
  Rig rig(optionsWith(32, kWindow), 20ms);
  const auto entries = shuffled(rig.addFiles(kFiles, 3000), 1);
  rig.prefetcher->setPlan(planOf(entries));
  EXPECT_TRUE(rig.prefetcher->active());

  ASSERT_TRUE(waitFor([&] {
    for (uint32_t i = 0; i < kWindow; ++i) {
      if (!rig.inRam(entries[i])) return false;
    }
    return true;
  })) << "the first "
      << kWindow << " entries were not prefetched within 5 s";
  // A scheduler that overshot the window would have read more before idle.
  ASSERT_TRUE(rig.prefetcher->waitIdle(5s));
  for (int i = kWindow; i < kFiles; ++i) EXPECT_FALSE(rig.inRam(entries[i])) << "position " << i;
  EXPECT_EQ(rig.source.totalReads(), kWindow);
  EXPECT_EQ(rig.streamOf(0).leadFiles, kWindow);

  // The reader: in plan order, 5 ms of "compute" per entry; the source takes 20 ms.
  for (int i = 0; i < kFiles; ++i) {
    // The scheduler aims at position + window: nothing from there on is fetched yet.
    for (int j = i + kWindow; j < kFiles; ++j) {
      ASSERT_FALSE(rig.inRam(entries[j])) << "position " << j << " fetched while reading " << i;
    }
    const StreamStats st = rig.streamOf(0);
    EXPECT_EQ(st.position, static_cast<uint64_t>(i));
    EXPECT_LE(st.leadFiles, kWindow);
    ASSERT_TRUE(rig.read(entries[i]).isOk());
    std::this_thread::sleep_for(5ms);
  }

  const StreamStats st = rig.streamOf(0);
  EXPECT_EQ(st.position, static_cast<uint64_t>(kFiles));
  EXPECT_EQ(st.consumed, static_cast<uint64_t>(kFiles));
  EXPECT_EQ(st.hits + st.stalls, static_cast<uint64_t>(kFiles));
  EXPECT_LE(st.stalls, static_cast<uint64_t>(kFiles / 10)) << "hits " << st.hits;
  ASSERT_TRUE(waitFor([&] { return rig.prefetcher->inflightBytes() == 0; }));
  // Every hit was prefetched (a stalled entry may or may not have been).
  EXPECT_GE(rig.streamOf(0).prefetchedFiles + st.stalls, static_cast<uint64_t>(kFiles));
  for (const auto& e : entries) EXPECT_EQ(rig.source.readsOf(e.relPath), 1u) << e.relPath;
}

TEST(PrefetcherTest, PrefetchesEveryChunkOfMultiChunkFiles) {
  constexpr uint32_t kWindow = 5;
  Rig rig(optionsWith(8, kWindow), 1ms);
  const auto entries = rig.addFiles(20, 3 * kChunkSize + 100);  // 4 chunks each
  rig.prefetcher->setPlan(planOf(entries));
  ASSERT_TRUE(waitFor([&] {
    for (uint32_t i = 0; i < kWindow; ++i) {
      if (!rig.inRam(entries[i])) return false;
    }
    return true;
  }));
  ASSERT_TRUE(waitFor([&] { return rig.prefetcher->inflightBytes() == 0; }));
  for (uint32_t i = 0; i < kWindow; ++i) EXPECT_EQ(rig.source.readsOf(entries[i].relPath), 4u);
  EXPECT_EQ(rig.source.totalReads(), 4u * kWindow);
  auto r = rig.read(entries[0]);
  ASSERT_TRUE(r.isOk());
  EXPECT_EQ(*r, Tier::kRam);
  EXPECT_EQ(rig.streamOf(0).consumed, 1u);
}

TEST(PrefetcherTest, NothingIsReadTwiceWhenDemandReadsRacePrefetches) {
  constexpr int kFiles = 160;
  constexpr int kReaders = 4;
  Rig rig(optionsWith(8, 32), 20ms);
  const auto entries = shuffled(rig.addFiles(kFiles, 2000), 2);
  rig.prefetcher->setPlan(planOf(entries));

  // Readers without compute time: they catch up with the prefetch at once and
  // ask for chunks whose prefetch is in flight (and the other way round).
  std::atomic<int> errors{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < kReaders; ++t) {
    readers.emplace_back([&, t] {
      for (int i = t; i < kFiles; i += kReaders) {
        if (!rig.read(entries[i]).isOk()) errors.fetch_add(1);
      }
    });
  }
  for (auto& r : readers) r.join();
  EXPECT_EQ(errors.load(), 0);
  // Let queued prefetch tasks drain: they must find the entries consumed or cached.
  ASSERT_TRUE(waitFor([&] { return rig.prefetcher->inflightBytes() == 0; }));
  ASSERT_TRUE(rig.prefetcher->waitIdle(5s));

  // A second read here is ChunkCache's lost-race re-fetch: see ChunkCacheRaceTest.
  for (const auto& e : entries) EXPECT_EQ(rig.source.readsOf(e.relPath), 1u) << e.relPath;
  EXPECT_EQ(rig.source.totalReads(), static_cast<uint64_t>(kFiles));
  EXPECT_GT(rig.cache.stats().coalesced.load(), 0u) << "no demand read met an in-flight fetch";
  const StreamStats st = rig.streamOf(0);
  EXPECT_EQ(st.consumed, static_cast<uint64_t>(kFiles));
  EXPECT_EQ(st.position, static_cast<uint64_t>(kFiles));
}

TEST(PrefetcherTest, ShuffledArrivalFromFourLoaderWorkers) {
  constexpr int kFiles = 256;
  constexpr int kBatch = 8;
  Rig rig(optionsWith(16, 64), 5ms);
  const auto entries = shuffled(rig.addFiles(kFiles, 1500), 3);
  rig.prefetcher->setPlan(planOf(entries));

  // Each worker takes the next batch of 8 and reads it backwards (DataLoader
  // workers deliver samples of a window in any order).
  std::atomic<int> nextBatch{0};
  std::atomic<uint64_t> sourceReads{0}, stallsOnPrefetched{0}, prefetchedBefore{0};
  std::atomic<int> errors{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < 4; ++t) {
    workers.emplace_back([&] {
      for (int b; (b = nextBatch.fetch_add(1)) * kBatch < kFiles;) {
        for (int k = kBatch - 1; k >= 0; --k) {
          const PlanEntry& e = entries[b * kBatch + k];
          const bool wasPrefetched = rig.inRam(e);
          auto r = rig.read(e);
          if (!r.isOk()) {
            errors.fetch_add(1);
            continue;
          }
          if (wasPrefetched) prefetchedBefore.fetch_add(1);
          if (*r == Tier::kSource) {
            sourceReads.fetch_add(1);
            if (wasPrefetched) stallsOnPrefetched.fetch_add(1);
          }
          std::this_thread::sleep_for(1ms);
        }
      }
    });
  }
  for (auto& w : workers) w.join();
  EXPECT_EQ(errors.load(), 0);

  const StreamStats st = rig.streamOf(0);
  EXPECT_EQ(st.position, static_cast<uint64_t>(kFiles));
  EXPECT_EQ(st.consumed, static_cast<uint64_t>(kFiles));
  EXPECT_EQ(st.hits + st.stalls, static_cast<uint64_t>(kFiles));
  EXPECT_EQ(st.stalls, sourceReads.load()) << "stalls are the reads that waited on the source";
  EXPECT_EQ(stallsOnPrefetched.load(), 0u);
  ASSERT_TRUE(waitFor([&] { return rig.prefetcher->inflightBytes() == 0; }));
  EXPECT_EQ(rig.streamOf(0).leadFiles, 0u);
  for (const auto& e : entries) EXPECT_EQ(rig.source.readsOf(e.relPath), 1u) << e.relPath;
}

// Samples inflightBytes() until stopped; keeps the largest value seen.
class InflightSampler {
 public:
  explicit InflightSampler(const Prefetcher& p)
      : thread_([this, &p] {
          while (!stop_.load()) {
            const uint64_t v = p.inflightBytes();
            if (v > max_.load()) max_.store(v);
            std::this_thread::sleep_for(100us);
          }
        }) {}
  ~InflightSampler() { stop(); }
  uint64_t stop() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
    return max_.load();
  }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> max_{0};
  std::thread thread_;
};

TEST(PrefetcherTest, MemoryBudgetBoundsBytesInFlight) {
  constexpr int kFiles = 48;
  constexpr uint64_t kFileBytes = 4096;
  constexpr uint64_t kBudget = 3 * kFileBytes;
  Rig rig(optionsWith(16, kFiles, kBudget), 10ms);
  const auto entries = rig.addFiles(kFiles, kFileBytes);
  InflightSampler sampler(*rig.prefetcher);
  rig.prefetcher->setPlan(planOf(entries));
  ASSERT_TRUE(rig.waitAllInRam(entries));
  const uint64_t maxInflight = sampler.stop();
  EXPECT_LE(maxInflight, kBudget + kFileBytes);
  EXPECT_GT(maxInflight, 0u);
  EXPECT_LE(rig.source.maxConcurrentReads(), 3 + 1);
  EXPECT_EQ(rig.source.totalReads(), static_cast<uint64_t>(kFiles));
}

// Pass: with read-ahead requests from 8 threads racing the scheduler, the
// in-flight peak never exceeds the budget (reservations are atomic), the
// prefetcher reports that it waited (budget_waits) and skipped read-ahead,
// and once everything is fetched in-flight bytes and tasks are both zero.
TEST(PrefetcherTest, BudgetIsStrictUnderConcurrentReadAheadAndDrainsToZero) {
  constexpr int kFiles = 64;
  constexpr uint64_t kFileBytes = kChunkSize;
  constexpr uint64_t kBudget = 4 * kChunkSize;
  Rig rig(optionsWith(16, kFiles, kBudget), 2ms);
  const auto entries = rig.addFiles(kFiles, kFileBytes);
  const auto big = rig.addFiles(8, 64 * kChunkSize, "big");
  rig.prefetcher->setPlan(planOf(entries));
  std::vector<std::thread> readers;
  for (int t = 0; t < 8; ++t) {
    readers.emplace_back([&, t] {
      for (uint32_t c = 0; c < 64; c += 4) {
        rig.prefetcher->readAhead(big[t].relPath, big[t].identity, c, 8);
      }
    });
  }
  for (auto& r : readers) r.join();
  ASSERT_TRUE(rig.waitAllInRam(entries));
  ASSERT_TRUE(waitFor([&] {
    return rig.prefetcher->inflightBytes() == 0 && rig.prefetcher->inflightTasks() == 0;
  }));
  EXPECT_LE(rig.prefetcher->peakInflightBytes(), kBudget);
  EXPECT_GT(rig.prefetcher->peakInflightBytes(), 0u);
  EXPECT_GT(rig.prefetcher->budgetWaits(), 0u);
  EXPECT_GT(rig.prefetcher->readAheadSkipped(), 0u);
}

TEST(PrefetcherTest, WorkerCountBoundsConcurrency) {
  constexpr int kFiles = 48;
  Rig rig(optionsWith(3, kFiles), 10ms);
  const auto entries = rig.addFiles(kFiles, 2048);
  rig.prefetcher->setPlan(planOf(entries));
  ASSERT_TRUE(rig.waitAllInRam(entries));
  EXPECT_LE(rig.source.maxConcurrentReads(), 3);
  EXPECT_GE(rig.source.maxConcurrentReads(), 2);
}

TEST(PrefetcherTest, DeepQueueKeepsManyReadsInFlight) {
  constexpr int kFiles = 64;
  Rig rig(optionsWith(32, kFiles), 20ms);
  const auto entries = rig.addFiles(kFiles, 2048);
  rig.prefetcher->setPlan(planOf(entries));
  ASSERT_TRUE(rig.waitAllInRam(entries));
  EXPECT_GE(rig.source.maxConcurrentReads(), 16);
  EXPECT_LE(rig.source.maxConcurrentReads(), 32);
}

TEST(PrefetcherTest, PlanExpiresWithoutProgress) {
  PrefetchOptions po = optionsWith(4, 4);
  po.expirySeconds = 0.3;
  Rig rig(po, 0us);
  rig.prefetcher->setPlan(planOf(rig.addFiles(20, 1000)));
  EXPECT_TRUE(rig.prefetcher->active());
  ASSERT_TRUE(waitFor([&] { return !rig.prefetcher->active(); }, 2000ms));
  for (const auto& s : rig.prefetcher->stats()) EXPECT_TRUE(s.expired);
  EXPECT_EQ(rig.prefetcher->nextUse(rig.cache.keyFor(cache::fileIdForPath("f0"), 0)),
            cache::EvictionAdvisor::kNever);
}

TEST(PrefetcherTest, ProgressKeepsAPlanAlive) {
  PrefetchOptions po = optionsWith(4, 4);
  po.expirySeconds = 0.3;
  Rig rig(po, 0us);
  const auto entries = rig.addFiles(40, 1000);
  rig.prefetcher->setPlan(planOf(entries));
  // 0.9 s of reads, one every 50 ms: three expiry periods, never idle for one.
  for (int i = 0; i < 18; ++i) {
    ASSERT_TRUE(rig.read(entries[i]).isOk());
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_TRUE(rig.prefetcher->active());
  EXPECT_EQ(rig.streamOf(0).consumed, 18u);
}

TEST(PrefetcherTest, PlanExpiresWhenReadersLeaveIt) {
  PrefetchOptions po = optionsWith(4, 4);
  po.deviationReads = 50;
  Rig rig(po, 0us);
  const auto planned = rig.addFiles(20, 1000, "planned");
  const auto others = rig.addFiles(120, 1000, "other");
  rig.prefetcher->setPlan(planOf(planned));

  for (int i = 0; i < 49; ++i) ASSERT_TRUE(rig.read(others[i]).isOk());
  EXPECT_TRUE(rig.prefetcher->active());
  ASSERT_TRUE(rig.read(planned[0]).isOk());  // back on the plan: the streak restarts
  for (int i = 49; i < 98; ++i) ASSERT_TRUE(rig.read(others[i]).isOk());
  EXPECT_TRUE(rig.prefetcher->active());
  ASSERT_TRUE(rig.read(others[98]).isOk());  // the 50th in a row
  EXPECT_FALSE(rig.prefetcher->active());
  for (const auto& s : rig.prefetcher->stats()) EXPECT_TRUE(s.expired);
}

TEST(PrefetcherTest, StartsAtThePlansStartPosition) {
  constexpr int kFiles = 100;
  constexpr uint64_t kStart = 40;
  constexpr uint32_t kWindow = 10;
  Rig rig(optionsWith(8, kWindow), 1ms);
  const auto entries = shuffled(rig.addFiles(kFiles, 1000), 4);
  rig.prefetcher->setPlan(planOf(entries, 3, 0, kStart));
  const auto windowInRam = [&](uint64_t from) {
    for (uint64_t i = from; i < from + kWindow; ++i) {
      if (!rig.inRam(entries[i])) return false;
    }
    return true;
  };
  ASSERT_TRUE(waitFor([&] { return windowInRam(kStart); }));
  ASSERT_TRUE(rig.prefetcher->waitIdle(5s));  // what it would read more, it has read
  for (uint64_t i = 0; i < kStart; ++i) {
    EXPECT_EQ(rig.source.readsOf(entries[i].relPath), 0u) << "position " << i;
  }
  for (uint64_t i = kStart + kWindow; i < kFiles; ++i) EXPECT_FALSE(rig.inRam(entries[i]));
  StreamStats st = rig.streamOf(0);
  EXPECT_EQ(st.start, kStart);
  EXPECT_EQ(st.position, kStart);
  EXPECT_EQ(st.epoch, 3);

  for (uint64_t i = kStart; i < kStart + 5; ++i) {
    auto r = rig.read(entries[i]);
    ASSERT_TRUE(r.isOk());
    EXPECT_EQ(*r, Tier::kRam);
  }
  st = rig.streamOf(0);
  EXPECT_EQ(st.position, kStart + 5);
  EXPECT_EQ(st.hits, 5u);
  ASSERT_TRUE(waitFor([&] { return windowInRam(kStart + 5); }));
}

TEST(PrefetcherTest, RanksKeepSeparateStreams) {
  constexpr uint32_t kWindow = 8;
  Rig rig(optionsWith(8, kWindow), 1ms);
  const auto a = rig.addFiles(40, 1000, "a");
  const auto b = rig.addFiles(40, 1000, "b");
  rig.prefetcher->setPlan(planOf(a, /*epoch=*/1, /*rank=*/0));
  rig.prefetcher->setPlan(planOf(b, /*epoch=*/1, /*rank=*/1));
  ASSERT_EQ(rig.prefetcher->stats().size(), 2u);
  ASSERT_TRUE(waitFor([&] {
    for (uint32_t i = 0; i < kWindow; ++i) {
      if (!rig.inRam(a[i]) || !rig.inRam(b[i])) return false;
    }
    return true;
  })) << "both ranks' windows are prefetched";
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(rig.read(b[i]).isOk());
  EXPECT_EQ(rig.streamOf(1).consumed, 5u);
  EXPECT_EQ(rig.streamOf(0).consumed, 0u);

  // A new epoch for rank 0 replaces rank 0's stream only.
  const auto a2 = shuffled(a, 5);
  rig.prefetcher->setPlan(planOf(a2, /*epoch=*/2, /*rank=*/0));
  const auto all = rig.prefetcher->stats();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(rig.streamOf(0).epoch, 2);
  EXPECT_EQ(rig.streamOf(0).consumed, 0u);
  EXPECT_EQ(rig.streamOf(1).epoch, 1);
  EXPECT_EQ(rig.streamOf(1).consumed, 5u);
  ASSERT_TRUE(rig.read(b[5]).isOk());
  EXPECT_EQ(rig.streamOf(1).consumed, 6u);
  ASSERT_TRUE(rig.read(a2[0]).isOk());
  EXPECT_EQ(rig.streamOf(0).consumed, 1u);
  ASSERT_TRUE(waitFor([&] {
    for (uint32_t i = 1; i < 1 + kWindow; ++i) {
      if (!rig.inRam(a2[i])) return false;
    }
    return true;
  }));
}

TEST(PrefetcherTest, IdleRankExpiresAlone) {
  PrefetchOptions po = optionsWith(4, 4);
  po.expirySeconds = 0.3;
  Rig rig(po, 0us);
  const auto a = rig.addFiles(200, 1000, "a");
  const auto b = rig.addFiles(40, 1000, "b");
  rig.prefetcher->setPlan(planOf(a, 1, /*rank=*/0));
  rig.prefetcher->setPlan(planOf(b, 1, /*rank=*/1));
  // Rank 0 reads steadily (an entry every 20 ms); rank 1 never does.
  size_t i = 0;
  const bool rank1Gone = waitFor(
      [&] {
        if (i < a.size()) {
          EXPECT_TRUE(rig.read(a[i++]).isOk());
        }
        std::this_thread::sleep_for(20ms);
        const auto all = rig.prefetcher->stats();
        return std::none_of(all.begin(), all.end(),
                            [](const StreamStats& s) { return s.rank == 1 && !s.expired; });
      },
      2000ms);
  EXPECT_TRUE(rank1Gone);
  EXPECT_TRUE(rig.prefetcher->active()) << "rank 0 made progress all along";
  const auto all = rig.prefetcher->stats();
  EXPECT_TRUE(std::any_of(all.begin(), all.end(),
                          [](const StreamStats& s) { return s.rank == 0 && !s.expired; }));
}

TEST(PrefetcherTest, ReplacedPlanIsNoLongerPrefetched) {
  constexpr uint32_t kWindow = 20;
  Rig rig(optionsWith(1, kWindow), 20ms);  // one worker: a queue of 20 tasks takes 0.4 s
  const auto a = rig.addFiles(40, 1000, "a");
  const auto b = rig.addFiles(40, 1000, "b");
  rig.prefetcher->setPlan(planOf(a, 1));
  ASSERT_TRUE(waitFor([&] { return rig.source.totalReads() > 0; }));
  rig.prefetcher->setPlan(planOf(b, 2));
  ASSERT_TRUE(waitFor([&] {
    for (uint32_t i = 0; i < kWindow; ++i) {
      if (!rig.inRam(b[i])) return false;
    }
    return true;
  }));
  uint64_t readsOfA = 0;
  for (const auto& e : a) readsOfA += rig.source.readsOf(e.relPath);
  // At most the fetch in progress at the switch (and one more on a slow machine).
  EXPECT_LE(readsOfA, 3u) << "the replaced plan's queued entries were still fetched";
}

TEST(PrefetcherTest, SourceErrorsDoNotStopThePrefetch) {
  constexpr int kFiles = 30;
  Rig rig(optionsWith(4, kFiles), 1ms);
  const auto entries = rig.addFiles(kFiles, 1000);
  rig.source.injectError(entries[5].relPath, cache::Status::ioError("injected"));
  rig.prefetcher->setPlan(planOf(entries));
  ASSERT_TRUE(waitFor([&] {
    for (int i = 0; i < kFiles; ++i) {
      if (i != 5 && !rig.inRam(entries[i])) return false;
    }
    return true;
  }));
  ASSERT_TRUE(waitFor([&] { return rig.prefetcher->inflightBytes() == 0; }));
  EXPECT_FALSE(rig.inRam(entries[5]));
  EXPECT_EQ(rig.source.readsOf(entries[5].relPath), 1u);

  for (int i = 0; i < 5; ++i) ASSERT_TRUE(rig.read(entries[i]).isOk());
  auto failed = rig.read(entries[5]);
  ASSERT_FALSE(failed.isOk());
  EXPECT_EQ(failed.status().code(), cache::Status::Code::kIoError);
  rig.source.clearError(entries[5].relPath);
  auto retried = rig.read(entries[5]);  // errors are not cached
  ASSERT_TRUE(retried.isOk());
  EXPECT_EQ(*retried, Tier::kSource);
  const StreamStats st = rig.streamOf(0);
  EXPECT_EQ(st.consumed, 6u);
  EXPECT_EQ(st.stalls, 1u);
  EXPECT_EQ(st.hits, 5u);
}

// Byte-range entries (record formats): several entries of one file, read in any order.
TEST(PrefetcherTest, AdjacentRangesConsumedInAnyOrder) {
  constexpr uint64_t kRecord = 1000;
  Rig rig(optionsWith(2, 0), 0us);
  const auto file = rig.addFiles(1, 4 * kRecord, "records")[0];
  std::vector<PlanEntry> entries;
  for (uint64_t r : {1, 0, 3, 2}) {  // plan order of the file's four records
    PlanEntry e = file;
    e.offset = r * kRecord;
    e.length = kRecord;
    entries.push_back(e);
  }
  rig.prefetcher->setPlan(planOf(entries));
  // Arrival order differs from plan order: record 0 (position 1) first; its
  // range ends where record 1 (position 0, not consumed yet) begins.
  for (int pos : {1, 0, 3, 2}) ASSERT_TRUE(rig.read(entries[pos]).isOk());
  const StreamStats st = rig.streamOf(0);
  EXPECT_EQ(st.consumed, 4u);
  EXPECT_EQ(st.position, 4u);
  EXPECT_EQ(st.hits + st.stalls, 4u);
  EXPECT_EQ(rig.prefetcher->nextUse(rig.cache.keyFor(file.identity.fileId, 0)),
            cache::EvictionAdvisor::kNever);
}

// A partial read counts for the entry it falls in; the read reaching the
// entry's last byte consumes it.
TEST(PrefetcherTest, EntryConsumedByTheReadReachingItsEnd) {
  Rig rig(optionsWith(2, 0), 0us);
  const auto entries = rig.addFiles(3, 3 * kChunkSize);
  rig.prefetcher->setPlan(planOf(entries));
  const auto& e = entries[0];
  rig.prefetcher->onRead(e.identity.fileId, 0, kChunkSize, Tier::kRam);
  rig.prefetcher->onRead(e.identity.fileId, kChunkSize, kChunkSize, Tier::kRam);
  EXPECT_EQ(rig.streamOf(0).consumed, 0u);
  EXPECT_EQ(rig.prefetcher->nextUse(rig.cache.keyFor(entries[1].identity.fileId, 0)), 1u);
  rig.prefetcher->onRead(e.identity.fileId, 2 * kChunkSize, kChunkSize, Tier::kSource);
  const StreamStats st = rig.streamOf(0);
  EXPECT_EQ(st.consumed, 1u);
  EXPECT_EQ(st.hits, 2u);
  EXPECT_EQ(st.stalls, 1u);
  EXPECT_EQ(rig.prefetcher->nextUse(rig.cache.keyFor(e.identity.fileId, 0)),
            cache::EvictionAdvisor::kNever);
  EXPECT_EQ(rig.prefetcher->nextUse(rig.cache.keyFor(entries[2].identity.fileId, 0)), 1u);
}

}  // namespace
}  // namespace epochfs::prefetch
