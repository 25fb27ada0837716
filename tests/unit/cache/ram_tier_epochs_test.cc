// The RAM tier's eviction without an advisor under epoch workloads
// (EpochDetector, ram_tier.h): a fresh permutation (or random subset) per
// epoch hits ≈ C/D from epoch 3 on, where LRU hits well below; a hot set
// still hits like LRU; the pieces of one file's read (several requests per
// chunk, several chunks, readers interleaved) do not end a generation; an
// active advisor keeps Belady's rule.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <list>
#include <numeric>
#include <random>
#include <unordered_map>
#include <vector>

#include "cache/ram_tier.h"

namespace epochfs::cache {
namespace {

constexpr size_t kChunk = 4096;

// Hit ratio of a cache of `capacity` equal chunks under plain LRU: the old
// policy, as reference.
class LruModel {
 public:
  explicit LruModel(size_t capacity) : capacity_(capacity) {}
  bool access(uint64_t key) {
    auto it = where_.find(key);
    if (it != where_.end()) {
      order_.splice(order_.begin(), order_, it->second);
      return true;
    }
    if (order_.size() == capacity_) {
      where_.erase(order_.back());
      order_.pop_back();
    }
    order_.push_front(key);
    where_[key] = order_.begin();
    return false;
  }

 private:
  size_t capacity_;
  std::list<uint64_t> order_;
  std::unordered_map<uint64_t, std::list<uint64_t>::iterator> where_;
};

struct Reads {
  uint64_t chunks = 0, hits = 0, lruHits = 0;
  double ratio() const { return chunks ? double(hits) / double(chunks) : 0; }
  double lruRatio() const { return chunks ? double(lruHits) / double(chunks) : 0; }
};

// Files of `chunks` chunks of kChunk bytes, read through the tier as FUSE
// does: every chunk looked up `requests` times (128 KiB pieces), a miss
// inserted; `readers` files at a time with their lookups interleaved. A
// chunk's first lookup counts as its hit or miss.
class Reader {
 public:
  Reader(RamTier& tier, size_t capacityChunks, uint32_t chunks = 1, int requests = 1,
         int readers = 1)
      : tier_(tier),
        lru_(capacityChunks),
        chunks_(chunks),
        requests_(requests),
        readers_(readers) {}

  Reads read(const std::vector<uint64_t>& files) {
    Reads r;
    const int steps = static_cast<int>(chunks_) * requests_;
    for (size_t w = 0; w < files.size(); w += readers_) {
      const size_t end = std::min(files.size(), w + readers_);
      for (int step = 0; step < steps; ++step) {
        for (size_t i = w; i < end; ++i) {
          const auto chunk = static_cast<uint32_t>(step / requests_);
          const bool first = step % requests_ == 0;
          const bool hit = lookup(files[i], chunk);
          if (!first) continue;
          ++r.chunks;
          r.hits += hit;
          r.lruHits += lru_.access(files[i] * 1024 + chunk);
        }
      }
    }
    return r;
  }

 private:
  bool lookup(uint64_t file, uint32_t index) {
    FileIdentity id;
    id.fileId = file;
    id.size = uint64_t{chunks_} * kChunk;
    id.inode = file;
    const ChunkKey key = ChunkKey::make(7, file, index);
    if (tier_.lookup(key, id) != nullptr) return true;
    tier_.insert(makeChunk(key, id, std::vector<char>(kChunk, 'x')));
    return false;
  }

  RamTier& tier_;
  LruModel lru_;
  uint32_t chunks_;
  int requests_, readers_;
};

std::vector<uint64_t> shuffled(uint64_t n, std::mt19937_64& rng, uint64_t first = 1) {
  std::vector<uint64_t> v(n);
  std::iota(v.begin(), v.end(), first);
  std::shuffle(v.begin(), v.end(), rng);
  return v;
}

// Pass: every epoch reads all D files in a fresh order (two requests per
// file, 8 readers interleaved); at C/D = 1/3, 1/2, 3/4 epochs 3-6 hit within
// 0.03 of C/D, where LRU (the old policy) hits at least 0.05 below it.
TEST(RamTierEpochsTest, PermutationPerEpochHitsCOverD) {
  for (const double share : {1.0 / 3, 0.5, 0.75}) {
    const uint64_t files = 1200;
    const auto capacity = static_cast<size_t>(share * files);
    RamTier tier(capacity * kChunk);
    ASSERT_EQ(tier.shardCount(), 1u);
    Reader reader(tier, capacity, /*chunks=*/1, /*requests=*/2, /*readers=*/8);
    std::mt19937_64 rng(42);
    for (int epoch = 1; epoch <= 6; ++epoch) {
      const Reads r = reader.read(shuffled(files, rng));
      if (epoch < 3) continue;
      SCOPED_TRACE(testing::Message() << "C/D " << share << " epoch " << epoch << " hits "
                                      << r.ratio() << " LRU " << r.lruRatio());
      EXPECT_NEAR(r.ratio(), share, 0.03);
      EXPECT_LT(r.lruRatio(), share - 0.05);
    }
    EXPECT_TRUE(tier.epochs().readFirst);
    EXPECT_EQ(tier.epochs().generation, 6u);
  }
}

// Pass: the lab's `local` case: each epoch a node reads a fresh random D/p of
// the D files into a tier of 1.5·D/p. Epochs 3-8 hit C/D on average (within
// 0.02; p = 2, 4, 8), none below C/D - 0.05; LRU's average is at least 0.03
// below C/D.
TEST(RamTierEpochsTest, RandomSubsetPerEpochHitsCOverD) {
  for (const uint64_t p : {2, 4, 8}) {
    const uint64_t files = 4000, perEpoch = files / p;
    const size_t capacity = perEpoch * 3 / 2;
    const double model = double(capacity) / double(files);
    RamTier tier(capacity * kChunk);
    Reader reader(tier, capacity, 1, 3, 8);
    std::mt19937_64 rng(p);
    double sum = 0, lruSum = 0;
    for (int epoch = 1; epoch <= 8; ++epoch) {
      std::vector<uint64_t> order = shuffled(files, rng);
      order.resize(perEpoch);
      const Reads r = reader.read(order);
      if (epoch < 3) continue;
      EXPECT_GT(r.ratio(), model - 0.05) << "p " << p << " epoch " << epoch;
      sum += r.ratio() / 6;
      lruSum += r.lruRatio() / 6;
    }
    SCOPED_TRACE(testing::Message()
                 << "p " << p << " hits " << sum << " LRU " << lruSum << " model " << model);
    EXPECT_NEAR(sum, model, 0.02);
    EXPECT_LT(lruSum, model - 0.03);
  }
}

// Hot files re-read at random (70 %) among files streaming by once (30 %).
Reads hotSet(Reader& reader, std::mt19937_64& rng, uint64_t hot, int reads, uint64_t& cold) {
  std::vector<uint64_t> order;
  std::uniform_real_distribution<double> coin(0, 1);
  std::uniform_int_distribution<uint64_t> pick(1, hot);
  for (int i = 0; i < reads; ++i) order.push_back(coin(rng) < 0.7 ? pick(rng) : cold++);
  return reader.read(order);
}

// Pass: a hot set of C/2 files re-read among a cold stream hits as LRU does
// (within 0.01) and never turns epoch mode on.
TEST(RamTierEpochsTest, HotSetHitsLikeLru) {
  const size_t capacity = 400;
  RamTier tier(capacity * kChunk);
  Reader reader(tier, capacity, 1, 2, 4);
  std::mt19937_64 rng(7);
  uint64_t cold = 1'000'000;
  for (int round = 0; round < 4; ++round) {
    const Reads r = hotSet(reader, rng, capacity / 2, 10000, cold);
    SCOPED_TRACE(testing::Message()
                 << "round " << round << " hits " << r.ratio() << " LRU " << r.lruRatio());
    EXPECT_NEAR(r.ratio(), r.lruRatio(), 0.01);
    EXPECT_FALSE(tier.epochs().readFirst);
  }
}

// Pass: after epochs (mode on), a hot-set workload turns the mode off and,
// from its second 10,000 reads on, hits as LRU does (within 0.02).
TEST(RamTierEpochsTest, HotSetAfterEpochsReturnsToLru) {
  const size_t capacity = 300;
  RamTier tier(capacity * kChunk);
  Reader reader(tier, capacity, 1, 2, 4);
  std::mt19937_64 rng(9);
  for (int epoch = 1; epoch <= 4; ++epoch) reader.read(shuffled(600, rng));
  ASSERT_TRUE(tier.epochs().readFirst);
  uint64_t cold = 1'000'000;
  hotSet(reader, rng, capacity / 2, 10000, cold);
  EXPECT_FALSE(tier.epochs().readFirst);
  const Reads r = hotSet(reader, rng, capacity / 2, 10000, cold);
  EXPECT_NEAR(r.ratio(), r.lruRatio(), 0.02) << "LRU " << r.lruRatio();
}

// Pass: files of 3 chunks, each chunk looked up 8 times (1 MiB in 128 KiB
// pieces), 12 readers interleaved in one shard: a generation ends once per
// epoch (at the epoch's first hit), no piece of a read counts as a re-read,
// and epoch 3 hits ≈ C/D.
TEST(RamTierEpochsTest, PiecesOfOneReadAreNotReReads) {
  const uint64_t files = 400;
  const size_t capacity = files * 3 / 2;  // half of the chunks
  RamTier tier(capacity * kChunk);
  Reader reader(tier, capacity, /*chunks=*/3, /*requests=*/8, /*readers=*/12);
  std::mt19937_64 rng(3);
  for (uint32_t epoch = 1; epoch <= 4; ++epoch) {
    const Reads r = reader.read(shuffled(files, rng));
    const EpochDetector::State s = tier.epochs();
    EXPECT_EQ(s.generation, epoch);
    EXPECT_EQ(s.reReads, 0u);
    if (epoch >= 3) {
      EXPECT_NEAR(r.ratio(), 0.5, 0.04) << "epoch " << epoch;
    }
  }
}

// Three epochs of 300 files through a tier of 150, then the first `reads`
// files of a fourth (returned): epoch mode on, chunks read in the epoch there.
std::vector<uint64_t> intoFourthEpoch(RamTier& tier, uint64_t seed, size_t reads) {
  Reader reader(tier, 150, 1, 1, 1);
  std::mt19937_64 rng(seed);
  for (int epoch = 1; epoch <= 3; ++epoch) reader.read(shuffled(300, rng));
  std::vector<uint64_t> order = shuffled(300, rng);
  order.resize(reads);
  reader.read(order);
  return order;
}

// Pass: in epoch mode a lower capacity (the memory-pressure watcher's
// setCapacity) drops chunks the epoch has read, not the ones it has not
// reached: after 80 reads into epoch 4, shrinking by 20 chunks keeps every
// chunk the epoch has not read.
TEST(RamTierEpochsTest, ShrinkDropsWhatTheEpochRead) {
  const size_t capacity = 150;
  RamTier tier(capacity * kChunk);
  const std::vector<uint64_t> read = intoFourthEpoch(tier, 11, 80);
  ASSERT_TRUE(tier.epochs().readFirst);
  std::vector<uint64_t> unread;
  for (uint64_t f = 1; f <= 300; ++f) {
    if (std::find(read.begin(), read.end(), f) == read.end() &&
        tier.contains(ChunkKey::make(7, f, 0))) {
      unread.push_back(f);
    }
  }
  tier.setCapacity((capacity - 20) * kChunk);
  EXPECT_EQ(tier.usage().chunks, capacity - 20);
  for (uint64_t f : unread) EXPECT_TRUE(tier.contains(ChunkKey::make(7, f, 0))) << f;
}

// Every chunk needed at position 1 but the newcomer (2): Belady's admission
// control refuses it.
class NeededSooner : public EvictionAdvisor {
 public:
  bool active() const override { return true; }
  uint64_t nextUseNs(const ChunkKey& key) const override { return key.fileId == newcomer ? 2 : 1; }
  uint64_t newcomer = 0;
};

// Pass: in epoch mode, an active advisor still decides: the newcomer needed
// after every resident chunk is refused and nothing is evicted; with the lease
// ended it is admitted (epoch mode evicts a chunk read this epoch).
TEST(RamTierEpochsTest, ActiveAdvisorKeepsBelady) {
  const size_t capacity = 150;
  RamTier tier(capacity * kChunk);
  intoFourthEpoch(tier, 5, 20);
  ASSERT_TRUE(tier.epochs().readFirst);
  NeededSooner advisor;
  advisor.newcomer = 5000;
  FileIdentity id;
  id.fileId = advisor.newcomer;
  id.size = kChunk;
  const ChunkRef c = makeChunk(ChunkKey::make(7, id.fileId, 0), id, std::vector<char>(kChunk));
  const uint64_t before = tier.usage().evictions;
  {
    Lease lease = tier.lendAdvisor(advisor);
    EXPECT_FALSE(tier.insert(c));
    EXPECT_EQ(tier.usage().evictions, before);
    EXPECT_EQ(tier.usage().chunks, capacity);
  }
  EXPECT_TRUE(tier.insert(c));
  EXPECT_EQ(tier.usage().evictions, before + 1);
}

}  // namespace
}  // namespace epochfs::cache
