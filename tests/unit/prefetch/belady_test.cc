// The RAM tier's eviction rule against the optimum. With an advisor that
// knows every chunk's next use, RamTier evicts the farthest-needed chunk and
// refuses a newcomer needed later than that (Belady's rule with bypass),
// which is optimal when all chunks have the same size and the victim scan
// covers the whole cache. Checked against an exhaustive search and a
// dynamic program over cache states; without an advisor the tier is LRU on
// these sequences. Last, three shuffled epochs over a dataset twice the cache
// through Prefetcher + RamTier + ChunkCache: with the plan, epochs 2 and 3
// read about half the files from the source; without it, once the tier sees
// epochs (cache/epoch_detector.h), barely more.
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <random>
#include <thread>
#include <unordered_map>
#include <vector>

#include "cache/chunk_cache.h"
#include "cache/ram_tier.h"
#include "prefetch/access_plan.h"
#include "prefetch/prefetcher.h"
#include "tests/unit/cache/fake_source.h"
#include "tests/unit/prefetch/prefetch_test_util.h"

namespace epochfs::prefetch {
namespace {

using namespace std::chrono_literals;
using cache::EvictionAdvisor;

constexpr uint64_t kDataset = 9;
constexpr size_t kChunkBytes = 1000;

// Files are 0..M-1; file f has fileId f + 1 and one chunk.
cache::FileIdentity identityOf(int f) {
  const uint64_t id = static_cast<uint64_t>(f) + 1;
  return cache::FileIdentity{id, kChunkBytes, 1, 1, id};
}
cache::ChunkKey keyOf(int f) { return cache::ChunkKey::make(kDataset, identityOf(f).fileId, 0); }

// Next use from the known sequence: the distance from the current access to
// the next access of the chunk's file after it.
class SequenceAdvisor : public EvictionAdvisor {
 public:
  explicit SequenceAdvisor(const std::vector<int>& seq, bool active = true)
      : seq_(seq), active_(active) {}
  void setPosition(size_t pos) { pos_.store(pos); }
  bool active() const override { return active_; }
  uint64_t nextUseNs(const cache::ChunkKey& key) const override {
    const size_t pos = pos_.load();
    for (size_t j = pos + 1; j < seq_.size(); ++j) {
      if (identityOf(seq_[j]).fileId == key.fileId) return j - pos;
    }
    return kNever;
  }

 private:
  std::vector<int> seq_;
  bool active_;
  std::atomic<size_t> pos_{0};
};

// Misses of a RamTier of `capacity` chunks on `seq`: lookup, insert on a miss.
int tierMisses(int capacity, const std::vector<int>& seq, SequenceAdvisor* advisor) {
  cache::RamTier tier(static_cast<uint64_t>(capacity) * kChunkBytes);
  EXPECT_EQ(tier.shardCount(), 1u);
  cache::Lease lease;
  if (advisor != nullptr) lease = tier.lendAdvisor(*advisor);
  std::map<int, cache::ChunkRef> chunks;
  int misses = 0;
  for (size_t i = 0; i < seq.size(); ++i) {
    if (advisor != nullptr) advisor->setPosition(i);
    const int f = seq[i];
    if (tier.lookup(keyOf(f), identityOf(f)) != nullptr) continue;
    ++misses;
    auto& c = chunks[f];
    if (!c) c = cache::makeChunk(keyOf(f), identityOf(f), std::vector<char>(kChunkBytes, 'x'));
    tier.insert(c);
    EXPECT_LE(tier.usage().chunks, static_cast<uint64_t>(capacity));
  }
  return misses;
}

// The optimum by a dynamic program over cache states (bitmasks of files):
// on a miss, keep the state (bypass, if allowed), add the file if there is
// room, or replace any one cached file by it.
int optimalMisses(int capacity, const std::vector<int>& seq, bool bypass) {
  std::unordered_map<uint32_t, int> states{{0u, 0}};
  for (int f : seq) {
    const uint32_t bit = 1u << f;
    std::unordered_map<uint32_t, int> next;
    next.reserve(states.size() * 2);
    auto relax = [&](uint32_t s, int m) {
      auto [it, inserted] = next.try_emplace(s, m);
      if (!inserted) it->second = std::min(it->second, m);
    };
    for (const auto& [s, m] : states) {
      if (s & bit) {
        relax(s, m);
        continue;
      }
      if (bypass) relax(s, m + 1);
      if (std::popcount(s) < capacity) {
        relax(s | bit, m + 1);
      } else {
        for (uint32_t rest = s; rest != 0; rest &= rest - 1) {
          relax((s & ~(rest & -rest)) | bit, m + 1);
        }
      }
    }
    states = std::move(next);
  }
  int best = INT32_MAX;
  for (const auto& [s, m] : states) best = std::min(best, m);
  return best;
}

// The optimum by plain exhaustive search over every admission and eviction
// choice (branch and bound), for tiny cases.
int bruteForceMisses(int capacity, const std::vector<int>& seq) {
  int best = static_cast<int>(seq.size());
  std::vector<int> cached;
  std::function<void(size_t, int)> go = [&](size_t i, int misses) {
    if (misses >= best) return;
    if (i == seq.size()) {
      best = misses;
      return;
    }
    const int f = seq[i];
    if (std::find(cached.begin(), cached.end(), f) != cached.end()) return go(i + 1, misses);
    if (static_cast<int>(cached.size()) < capacity) {
      cached.push_back(f);
      go(i + 1, misses + 1);
      cached.pop_back();
    } else {
      for (int& slot : cached) {
        const int old = slot;
        slot = f;
        go(i + 1, misses + 1);
        slot = old;
      }
    }
    go(i + 1, misses + 1);  // bypass
  };
  go(0, 0);
  return best;
}

// Belady's rule with bypass, written out: evict the cached file used
// farthest ahead, unless the newcomer is used even later.
int beladyMisses(int capacity, const std::vector<int>& seq) {
  auto nextUse = [&](size_t i, int f) {
    for (size_t j = i + 1; j < seq.size(); ++j) {
      if (seq[j] == f) return j;
    }
    return SIZE_MAX;
  };
  std::vector<int> cached;
  int misses = 0;
  for (size_t i = 0; i < seq.size(); ++i) {
    const int f = seq[i];
    if (std::find(cached.begin(), cached.end(), f) != cached.end()) continue;
    ++misses;
    if (static_cast<int>(cached.size()) < capacity) {
      cached.push_back(f);
      continue;
    }
    auto victim = std::max_element(cached.begin(), cached.end(),
                                   [&](int a, int b) { return nextUse(i, a) < nextUse(i, b); });
    if (nextUse(i, f) <= nextUse(i, *victim)) *victim = f;
  }
  return misses;
}

int lruMisses(int capacity, const std::vector<int>& seq) {
  std::list<int> lru;  // front: most recent
  int misses = 0;
  for (int f : seq) {
    auto it = std::find(lru.begin(), lru.end(), f);
    if (it != lru.end()) {
      lru.erase(it);
    } else {
      ++misses;
      if (static_cast<int>(lru.size()) == capacity) lru.pop_back();
    }
    lru.push_front(f);
  }
  return misses;
}

// A random sequence over `files` files; half the time from a hot set, so
// that both reuse and churn occur.
std::vector<int> randomSequence(std::mt19937& rng, int files, int hot, size_t length) {
  std::uniform_int_distribution<int> any(0, files - 1), hotOne(0, hot - 1), coin(0, 1);
  std::vector<int> seq(length);
  for (auto& f : seq) f = coin(rng) ? hotOne(rng) : any(rng);
  return seq;
}

std::string show(const std::vector<int>& seq) {
  std::string s;
  for (int f : seq) s += std::to_string(f) + " ";
  return s;
}

TEST(BeladyTest, ExhaustiveSearchAgreesWithTheDynamicProgram) {
  std::mt19937 rng(11);
  for (int round = 0; round < 30; ++round) {
    const auto seq = randomSequence(rng, 6, 3, 14);
    EXPECT_EQ(bruteForceMisses(3, seq), optimalMisses(3, seq, /*bypass=*/true)) << show(seq);
  }
}

TEST(BeladyTest, TierWithAdvisorIsOptimalOnTinyCases) {
  std::mt19937 rng(12);
  for (int round = 0; round < 100; ++round) {
    const auto seq = randomSequence(rng, 6, 3, 14);
    SequenceAdvisor advisor(seq);
    EXPECT_EQ(tierMisses(3, seq, &advisor), bruteForceMisses(3, seq)) << show(seq);
  }
}

TEST(BeladyTest, TierWithAdvisorIsOptimalOnRandomSequences) {
  std::mt19937 rng(13);
  int beatLru = 0;
  for (int round = 0; round < 200; ++round) {
    const int capacity = 2 + round % 4;  // 2..5 chunks
    const int files = std::uniform_int_distribution<int>(2 * capacity, 4 * capacity)(rng);
    const auto seq = randomSequence(rng, files, capacity + 1, 60);
    SequenceAdvisor advisor(seq);
    const int tier = tierMisses(capacity, seq, &advisor);
    const int optimum = optimalMisses(capacity, seq, /*bypass=*/true);
    ASSERT_EQ(tier, optimum) << "C=" << capacity << " M=" << files << " seq " << show(seq);
    EXPECT_EQ(beladyMisses(capacity, seq), optimum);
    EXPECT_LE(optimum, lruMisses(capacity, seq));
    if (optimum < lruMisses(capacity, seq)) ++beatLru;
  }
  EXPECT_GT(beatLru, 100) << "the cases should tell Belady from LRU";
}

TEST(BeladyTest, TierWithAdvisorIsOptimalWhenTheScanCoversTheCache) {
  constexpr int kCapacity = cache::RamTier::kVictimScan;
  std::mt19937 rng(14);
  for (int round = 0; round < 3; ++round) {
    const auto seq = randomSequence(rng, 3 * kCapacity, kCapacity + 8, 3000);
    SequenceAdvisor advisor(seq);
    const int tier = tierMisses(kCapacity, seq, &advisor);
    EXPECT_EQ(tier, beladyMisses(kCapacity, seq));
    EXPECT_LE(tier, lruMisses(kCapacity, seq)) << "the advisor does no worse than LRU";
  }
}

TEST(BeladyTest, TierWithoutAdvisorIsLru) {
  std::mt19937 rng(15);
  for (int round = 0; round < 200; ++round) {
    const int capacity = 2 + round % 7;
    const int files = std::uniform_int_distribution<int>(2 * capacity, 4 * capacity)(rng);
    const auto seq = randomSequence(rng, files, capacity + 1, 60);
    EXPECT_EQ(tierMisses(capacity, seq, nullptr), lruMisses(capacity, seq)) << show(seq);
    SequenceAdvisor inactive(seq, /*active=*/false);
    EXPECT_EQ(tierMisses(capacity, seq, &inactive), lruMisses(capacity, seq)) << show(seq);
  }
}

// --- Through the Prefetcher -------------------------------------------------

using testing::LatencySource;

// Source + RAM tier of `capacityBytes` + chunk cache + prefetcher (the tier's advisor).
struct Rig {
  Rig(const PrefetchOptions& po, uint64_t capacityBytes, std::chrono::microseconds latency)
      : source(latency),
        ram(capacityBytes),
        cache(testing::cacheOptions(kDataset), source, ram, nullptr) {
    spdlog::set_level(spdlog::level::warn);
    prefetcher = std::make_unique<Prefetcher>(po, cache);
    advisorLease = ram.lendAdvisor(*prefetcher);
  }
  std::vector<PlanEntry> addFiles(int n, size_t size) {
    std::vector<PlanEntry> out;
    for (int i = 0; i < n; ++i) {
      PlanEntry e;
      e.relPath = "d/" + std::to_string(i);
      e.identity = source.addFile(e.relPath, size);
      e.length = size;
      out.push_back(e);
    }
    return out;
  }
  // A whole-file FUSE read of a one-chunk file, then onRead.
  void read(const PlanEntry& e) {
    cache::ChunkCache::Tier tier;
    auto r = cache.get(e.relPath, e.identity, 0, &tier);
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    prefetcher->onRead(e.identity.fileId, 0, e.length, tier);
  }
  LatencySource source;
  cache::RamTier ram;
  cache::ChunkCache cache;
  std::unique_ptr<Prefetcher> prefetcher;
  cache::Lease advisorLease;  // declared after the prefetcher: ends before it goes
};

// With no lookahead (windowFiles = 0) the prefetcher still advises the tier.
// A demand-read chunk is inserted before its read is reported (onRead comes
// after the cache's get), so it is always admitted: Belady without bypass,
// the optimum among policies that admit every miss.
TEST(BeladyTest, PrefetcherAdvisedDemandReadsAreOptimalWithoutBypass) {
  std::mt19937 rng(16);
  for (int round = 0; round < 40; ++round) {
    const int capacity = 2 + round % 4;
    const int files = std::uniform_int_distribution<int>(2 * capacity, 4 * capacity)(rng);
    const auto seq = randomSequence(rng, files, capacity + 1, 60);
    PrefetchOptions po;
    po.workers = 1;
    po.windowFiles = 0;
    Rig rig(po, static_cast<uint64_t>(capacity) * 4096, 0us);
    const auto fileEntries = rig.addFiles(files, 4096);
    std::vector<PlanEntry> plan;
    for (int f : seq) plan.push_back(fileEntries[f]);
    rig.prefetcher->setPlan(std::make_shared<const AccessPlan>(0, 0, 0, plan));
    for (const auto& e : plan) rig.read(e);
    const int misses = static_cast<int>(rig.source.totalReads());
    EXPECT_EQ(misses, optimalMisses(capacity, seq, /*bypass=*/false)) << show(seq);
    EXPECT_GE(misses, optimalMisses(capacity, seq, /*bypass=*/true));
    EXPECT_EQ(rig.prefetcher->stats()[0].consumed, seq.size());
  }
}

// Source reads per epoch for three shuffled epochs over `files` files with a
// RAM tier of half the dataset; with a plan registered at each epoch start,
// or none.
std::vector<uint64_t> sourceReadsPerEpoch(bool withPlan, int files) {
  constexpr size_t kFileBytes = 4096;
  PrefetchOptions po;
  po.workers = 8;
  po.windowFiles = 8;
  Rig rig(po, files / 2 * kFileBytes, 300us);
  const auto entries = rig.addFiles(files, kFileBytes);
  std::vector<uint64_t> reads;
  for (int epoch = 1; epoch <= 3; ++epoch) {
    auto order = entries;
    std::mt19937 rng(100 + epoch);
    std::shuffle(order.begin(), order.end(), rng);
    EXPECT_TRUE(rig.prefetcher->waitIdle(5s));
    const uint64_t before = rig.source.totalReads();
    if (withPlan) rig.prefetcher->setPlan(std::make_shared<const AccessPlan>(epoch, 0, 0, order));
    for (const auto& e : order) {
      rig.read(e);
      std::this_thread::sleep_for(100us);  // the training step
    }
    EXPECT_TRUE(rig.prefetcher->waitIdle(5s));
    reads.push_back(rig.source.totalReads() - before);
  }
  return reads;
}

TEST(BeladyTest, ShuffledEpochsOverTwiceTheCache) {
  constexpr int kFiles = 1000;
  const auto planned = sourceReadsPerEpoch(/*withPlan=*/true, kFiles);
  // Without a plan the tier is LRU only until it sees epochs; then it evicts
  // what the epoch has read first (cache/epoch_detector.h) and also keeps
  // about half the dataset for the next epoch.
  const auto noPlan = sourceReadsPerEpoch(/*withPlan=*/false, kFiles);
  EXPECT_GE(planned[0], static_cast<uint64_t>(kFiles));
  EXPECT_EQ(noPlan[0], static_cast<uint64_t>(kFiles));
  // Belady keeps half the dataset for the next epoch: at most (1 - 0.95 * 0.5) of it is read.
  const auto bound = static_cast<uint64_t>((1 - 0.95 * 0.5) * kFiles);
  // The epoch-aware rule without a plan, a little less (LRU read ~85 %).
  const auto noPlanBound = static_cast<uint64_t>((1 - 0.9 * 0.5) * kFiles);
  for (int e = 1; e < 3; ++e) {
    EXPECT_LE(planned[e], bound) << "epoch " << e + 1;
    EXPECT_LE(planned[e], noPlan[e] + kFiles / 50) << "epoch " << e + 1 << ": plan worse";
    EXPECT_LE(noPlan[e], noPlanBound) << "epoch " << e + 1 << ": no plan, no epochs seen";
  }
}

}  // namespace
}  // namespace epochfs::prefetch
