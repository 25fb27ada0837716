// Bit-exact reproductions of the two PyTorch functions that decide a
// training epoch's order, so the daemon can derive the plan itself from
// (seed, epoch, world size) without running Python:
//
//   torchRandperm(n, seed)  ==  torch.randperm(n, generator=torch.Generator().manual_seed(seed))
//   distributedSamplerIndices(len, world, rank, seed, epoch, shuffle, dropLast)
//                           ==  list(DistributedSampler(ds, world, rank, shuffle, seed, dropLast)
//                                    after set_epoch(epoch))
//
// Verified against Debian's torch 1.13 (CPU generator) by
// tests/unit/prefetch/torch_order_test.cc, which runs the installed torch.
//
// How torch 1.13 does it (aten/src/ATen/native/TensorFactories.cpp, randperm_cpu;
// ATen/core/MT19937RNGEngine.h; ATen/CPUGeneratorImpl.cpp):
//   - manual_seed(s) seeds a standard MT19937 with the LOW 32 BITS of the 64-bit seed
//     (state[0] = s & 0xffffffff, the usual 1812433253 recurrence) — identical to
//     std::mt19937(static_cast<uint32_t>(s)). Python seeds that are negative are mapped by
//     torch to s + 2^64 first, which is what converting to uint64_t does.
//   - randperm: r = [0, n); for i in [0, n-1): z = next32() % (n - i); swap(r[i], r[i + z]).
//     One 32-bit draw per step for every n (there is no separate small-n path).
// Caveat (newer torch): later releases (2.x) switched to 64-bit draws and an inside-out
// shuffle for n >= 2^32 / 20 (= 214,748,364); below that threshold they kept this algorithm.
// This file follows 1.13 for all n (verified against it up to n = 214,749,364); see
// kTorchLargeNThreshold.
//
// Thread-safety: pure functions; safe to call concurrently.
#pragma once

#include <cstdint>
#include <vector>

namespace epochfs::prefetch {

// n at and above which newer torch (2.x) uses a different shuffle than 1.13. Callers that
// must match a newer torch for datasets this large cannot rely on torchRandperm.
inline constexpr int64_t kTorchLargeNThreshold = 214748364;  // UINT32_MAX / 20

// torch.randperm(n, generator=torch.Generator().manual_seed(seed)).tolist() on CPU, torch 1.13.
// n <= 0 gives an empty vector.
std::vector<int64_t> torchRandperm(int64_t n, uint64_t seed);

// The indices torch.utils.data.DistributedSampler.__iter__ yields for `rank` (torch 1.13):
// seeded with seed + epoch (mod 2^64), padded by repeating the permutation from its start
// when !dropLast (also when the padding is longer than the dataset), truncated when dropLast,
// then every world-th index starting at rank. Preconditions (DistributedSampler raises
// otherwise): datasetLen >= 0, world >= 1, 0 <= rank < world; if violated the result is empty.
std::vector<int64_t> distributedSamplerIndices(int64_t datasetLen, int world, int rank,
                                               uint64_t seed, int64_t epoch, bool shuffle = true,
                                               bool dropLast = false);

// DistributedSampler.num_samples (== len(sampler)) for these arguments; 0 on bad arguments.
int64_t distributedSamplerNumSamples(int64_t datasetLen, int world, bool dropLast = false);

}  // namespace epochfs::prefetch
