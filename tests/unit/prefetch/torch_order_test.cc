// torchRandperm and distributedSamplerIndices against the installed torch (Debian's
// /usr/bin/python3 with torch 1.13). Skips with a message where that torch is missing.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "prefetch/torch_permutation.h"
#include "tests/unit/prefetch/python_runner.h"

namespace epochfs::prefetch {
namespace {

using testing::kPython;
using testing::runPython;

bool haveTorch() {
  static const bool have = [] { return testing::pythonCanImport("torch"); }();
  return have;
}

#define SKIP_WITHOUT_TORCH() \
  if (!haveTorch()) GTEST_SKIP() << kPython << " cannot import torch; nothing to compare with"

std::vector<int64_t> parseList(const std::string& line) {
  std::vector<int64_t> v;
  std::istringstream in(line);
  std::string tok;
  while (std::getline(in, tok, ',')) {
    if (!tok.empty()) v.push_back(std::stoll(tok));
  }
  return v;
}

std::vector<std::string> lines(const std::string& s) {
  std::vector<std::string> v;
  std::istringstream in(s);
  std::string l;
  while (std::getline(in, l)) v.push_back(l);
  return v;
}

// sum((i + 1) * p[i]) mod 2^64: a position-sensitive fingerprint for large permutations.
uint64_t fingerprint(const std::vector<int64_t>& p) {
  uint64_t h = 0;
  for (size_t i = 0; i < p.size(); ++i)
    h += (static_cast<uint64_t>(i) + 1) * static_cast<uint64_t>(p[i]);
  return h;
}

constexpr const char* kRandpermScript = R"PY(
import sys, torch
for case in sys.argv[1].split(';'):
    n, seed, full = (int(x) for x in case.split(','))
    p = torch.randperm(n, generator=torch.Generator().manual_seed(seed)).tolist()
    if full:
        print(','.join(map(str, p)))
    else:
        print(sum((i + 1) * x for i, x in enumerate(p)) % (1 << 64))
)PY";

TEST(TorchOrderTest, RandpermMatchesTorch) {
  SKIP_WITHOUT_TORCH();
  const std::vector<int64_t> sizes = {0, 1, 2, 3, 10, 1000, 100003};
  // Around 2^32 (torch keeps the low 32 bits), 2^63 + 7 and 2^64 - 1 (Python's -1).
  const std::vector<uint64_t> seeds = {
      0,
      1,
      42,
      4294967295ull,
      4294967296ull,
      4294967301ull,
      9223372036854775815ull,
      18446744073709551615ull,
  };
  std::string cases;
  for (int64_t n : sizes) {
    for (uint64_t s : seeds) cases += std::to_string(n) + "," + std::to_string(s) + ",1;";
  }
  cases.pop_back();
  bool ok = false;
  const auto out = lines(runPython(kRandpermScript, cases, &ok));
  ASSERT_TRUE(ok);
  ASSERT_EQ(out.size(), sizes.size() * seeds.size());
  size_t k = 0;
  for (int64_t n : sizes) {
    for (uint64_t s : seeds) {
      EXPECT_EQ(torchRandperm(n, s), parseList(out[k++])) << "n=" << n << " seed=" << s;
    }
  }
}

// Torch maps a negative Python seed s to s + 2^64, and keeps only the low 32 bits.
TEST(TorchOrderTest, SeedTruncationAndNegativeSeeds) {
  SKIP_WITHOUT_TORCH();
  bool ok = false;
  const auto out = lines(runPython(kRandpermScript, "50,-1,1;50,-7,1;50,4294967338,1", &ok));
  ASSERT_TRUE(ok);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(torchRandperm(50, static_cast<uint64_t>(-1)), parseList(out[0]));
  EXPECT_EQ(torchRandperm(50, static_cast<uint64_t>(-7)), parseList(out[1]));
  EXPECT_EQ(torchRandperm(50, 42), parseList(out[2]));  // 2^32 + 42 -> 42
}

TEST(TorchOrderTest, LargeRandpermFingerprintMatchesTorch) {
  SKIP_WITHOUT_TORCH();
  const int64_t n = (int64_t{1} << 21) + 17;
  bool ok = false;
  const auto out = lines(runPython(
      kRandpermScript, std::to_string(n) + ",1234,0;" + std::to_string(n) + ",4294967296,0", &ok));
  ASSERT_TRUE(ok);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(std::to_string(fingerprint(torchRandperm(n, 1234))), out[0]);
  EXPECT_EQ(std::to_string(fingerprint(torchRandperm(n, 4294967296ull))), out[1]);
}

// Newer torch (2.x) changes algorithm at kTorchLargeNThreshold; 1.13 does not. Slow (about
// 30 s, 6 GB of memory): run with --gtest_also_run_disabled_tests.
TEST(TorchOrderTest, DISABLED_RandpermAboveNewTorchThresholdMatchesTorch) {
  SKIP_WITHOUT_TORCH();
  const int64_t n = kTorchLargeNThreshold + 1000;
  bool ok = false;
  const std::string script = "import torch\nn = " + std::to_string(n) +
                             "\np = torch.randperm(n, generator=torch.Generator().manual_seed(7))"
                             "\nprint(int((p * torch.arange(1, n + 1)).sum()) % (1 << 64))\n";
  const auto out = lines(runPython(script, "", &ok));
  ASSERT_TRUE(ok);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(std::to_string(fingerprint(torchRandperm(n, 7))), out[0]);
}

constexpr const char* kSamplerScript = R"PY(
import sys
from torch.utils.data import DistributedSampler
for case in sys.argv[1].split(';'):
    n, world, seed, epoch, drop, shuffle = (int(x) for x in case.split(','))
    for rank in range(world):
        s = DistributedSampler(range(n), num_replicas=world, rank=rank, shuffle=bool(shuffle),
                               seed=seed, drop_last=bool(drop))
        s.set_epoch(epoch)
        idx = list(s)
        assert len(idx) == len(s)
        print(','.join(map(str, idx)))
)PY";

struct SamplerCase {
  int64_t len;
  int world;
  uint64_t seed;
  int64_t epoch;
  bool dropLast;
  bool shuffle;
};

TEST(TorchOrderTest, DistributedSamplerMatchesTorch) {
  SKIP_WITHOUT_TORCH();
  std::vector<SamplerCase> cases;
  // Lengths divisible and not by the world size, world > len (padding longer than the data),
  // empty datasets, both drop_last modes, shuffle on and off, seeds above 2^32.
  for (int64_t len : {0, 1, 2, 3, 7, 10, 17, 100, 1001}) {
    for (int world : {1, 2, 3, 4, 8, 13}) {
      for (uint64_t seed : {uint64_t{0}, uint64_t{42}, uint64_t{4294967299ull}}) {
        for (int64_t epoch : {0, 1, 5}) {
          for (bool drop : {false, true}) {
            for (bool shuffle : {true, false}) {
              if (!shuffle && (seed != 0 || epoch != 0)) continue;  // order ignores them
              cases.push_back({len, world, seed, epoch, drop, shuffle});
            }
          }
        }
      }
    }
  }
  std::string arg;
  size_t expectedLines = 0;
  for (const auto& c : cases) {
    arg += std::to_string(c.len) + "," + std::to_string(c.world) + "," + std::to_string(c.seed) +
           "," + std::to_string(c.epoch) + "," + (c.dropLast ? "1" : "0") + "," +
           (c.shuffle ? "1" : "0") + ";";
    expectedLines += static_cast<size_t>(c.world);
  }
  arg.pop_back();
  bool ok = false;
  const std::string raw = runPython(kSamplerScript, arg, &ok);
  ASSERT_TRUE(ok);
  // getline drops a final empty line; keep empty lists by splitting on '\n' ourselves.
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] == '\n') {
      out.push_back(raw.substr(start, i - start));
      start = i + 1;
    }
  }
  ASSERT_EQ(out.size(), expectedLines);
  size_t k = 0;
  for (const auto& c : cases) {
    for (int rank = 0; rank < c.world; ++rank) {
      const auto got =
          distributedSamplerIndices(c.len, c.world, rank, c.seed, c.epoch, c.shuffle, c.dropLast);
      EXPECT_EQ(got, parseList(out[k++]))
          << "len=" << c.len << " world=" << c.world << " rank=" << rank << " seed=" << c.seed
          << " epoch=" << c.epoch << " drop_last=" << c.dropLast << " shuffle=" << c.shuffle;
      EXPECT_EQ(static_cast<int64_t>(got.size()),
                distributedSamplerNumSamples(c.len, c.world, c.dropLast));
    }
  }
}

TEST(TorchOrderTest, RanksPartitionThePaddedPermutation) {
  // No torch needed: ranks are disjoint slices whose union is the permutation (len % world == 0).
  const int world = 4;
  std::vector<int> seen(100, 0);
  for (int r = 0; r < world; ++r) {
    for (int64_t i : distributedSamplerIndices(100, world, r, 3, 2)) ++seen[static_cast<size_t>(i)];
  }
  for (int s : seen) EXPECT_EQ(s, 1);
}

TEST(TorchOrderTest, InvalidArgumentsGiveEmpty) {
  EXPECT_TRUE(distributedSamplerIndices(10, 0, 0, 0, 0).empty());
  EXPECT_TRUE(distributedSamplerIndices(10, 2, 2, 0, 0).empty());
  EXPECT_TRUE(distributedSamplerIndices(10, 2, -1, 0, 0).empty());
  EXPECT_TRUE(distributedSamplerIndices(-1, 2, 0, 0, 0).empty());
  EXPECT_TRUE(torchRandperm(-5, 0).empty());
}

}  // namespace
}  // namespace epochfs::prefetch
