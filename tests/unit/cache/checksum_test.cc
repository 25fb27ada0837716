// checksum(): whichever XXH3 build the CPU gets (AVX2 or the library's), the
// value is libxxhash's XXH3_64bits, byte for byte: the disk tier's records and
// the peers' wire format carry it, so a node with AVX2 and one without (or an
// upgrade) must agree on every length and alignment.
#include "cache/checksum.h"

#include <gtest/gtest.h>
#include <xxhash.h>

#include <cstdint>
#include <random>
#include <vector>

namespace epochfs::cache {
namespace {

TEST(Checksum, EqualsTheLibrarysXxh3AtEveryLengthAndAlignment) {
  std::vector<char> bytes((1 << 20) + 4096);
  std::mt19937_64 rng(7);
  for (auto& b : bytes) b = static_cast<char>(rng());
  // Every branch of XXH3: 0, 1–3, 4–8, 9–16, 17–128, 129–240, long inputs
  // with and without a partial stripe and block.
  std::vector<size_t> lengths = {0,
                                 1,
                                 3,
                                 4,
                                 8,
                                 9,
                                 16,
                                 17,
                                 64,
                                 128,
                                 129,
                                 200,
                                 240,
                                 241,
                                 1023,
                                 1024,
                                 1025,
                                 4096,
                                 65536 + 3,
                                 112640,
                                 (1 << 20) - 1,
                                 1 << 20,
                                 (1 << 20) + 17};
  for (size_t len : lengths) {
    for (size_t offset : {0, 1, 7, 64}) {
      const char* p = bytes.data() + offset;
      EXPECT_EQ(checksum(p, len), XXH3_64bits(p, len)) << "length " << len << " offset " << offset;
    }
  }
}

TEST(Checksum, AOneBitChangeChangesIt) {
  std::vector<char> bytes(112640, 'x');
  const uint64_t before = checksum(bytes.data(), bytes.size());
  bytes[70000] ^= 1;
  EXPECT_NE(checksum(bytes.data(), bytes.size()), before);
}

}  // namespace
}  // namespace epochfs::cache
