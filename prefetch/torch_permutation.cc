#include "prefetch/torch_permutation.h"

#include <random>
#include <utility>

namespace epochfs::prefetch {

std::vector<int64_t> torchRandperm(int64_t n, uint64_t seed) {
  std::vector<int64_t> r;
  if (n <= 0) return r;
  r.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) r[static_cast<size_t>(i)] = i;
  // at::mt19937 keeps only seed & 0xffffffff; std::mt19937 produces the same stream.
  std::mt19937 engine(static_cast<uint32_t>(seed & 0xffffffffu));
  for (int64_t i = 0; i < n - 1; ++i) {
    const int64_t z = static_cast<int64_t>(static_cast<uint32_t>(engine())) % (n - i);
    std::swap(r[static_cast<size_t>(i)], r[static_cast<size_t>(i + z)]);
  }
  return r;
}

namespace {

// math.ceil(a / b) for b > 0 and the a DistributedSampler can produce (a > -b), computed
// exactly in integers instead of Python's float division (identical for len < 2^53).
int64_t ceilDiv(int64_t a, int64_t b) {
  if (a >= 0) return a / b + (a % b != 0 ? 1 : 0);
  return -((-a) / b);  // ceil of a negative quotient truncates towards zero
}

}  // namespace

int64_t distributedSamplerNumSamples(int64_t datasetLen, int world, bool dropLast) {
  if (datasetLen < 0 || world < 1) return 0;
  if (dropLast && datasetLen % world != 0) return ceilDiv(datasetLen - world, world);
  return ceilDiv(datasetLen, world);
}

std::vector<int64_t> distributedSamplerIndices(int64_t datasetLen, int world, int rank,
                                               uint64_t seed, int64_t epoch, bool shuffle,
                                               bool dropLast) {
  std::vector<int64_t> out;
  if (datasetLen < 0 || world < 1 || rank < 0 || rank >= world) return out;
  const int64_t numSamples = distributedSamplerNumSamples(datasetLen, world, dropLast);
  if (numSamples <= 0) return out;

  std::vector<int64_t> perm;
  if (shuffle) {
    perm = torchRandperm(datasetLen, seed + static_cast<uint64_t>(epoch));
  } else {
    perm.resize(static_cast<size_t>(datasetLen));
    for (int64_t i = 0; i < datasetLen; ++i) perm[static_cast<size_t>(i)] = i;
  }
  // The padded (or truncated) list is perm repeated cyclically up to total_size: both of
  // DistributedSampler's padding branches and its truncation agree with "element j is
  // perm[j % len]" for j < total_size. numSamples > 0 implies datasetLen > 0 here.
  out.reserve(static_cast<size_t>(numSamples));
  for (int64_t k = 0; k < numSamples; ++k) {
    const int64_t j = rank + k * static_cast<int64_t>(world);
    out.push_back(perm[static_cast<size_t>(j % datasetLen)]);
  }
  return out;
}

}  // namespace epochfs::prefetch
