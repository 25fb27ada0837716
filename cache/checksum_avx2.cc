// XXH3-64 built for AVX2: the same function, value for value, as libxxhash's
// XXH3_64bits, at about 3x its speed on a cold read's 110 KB (Debian's
// library is built for baseline x86-64, SSE2). checksum() (hashing.cc) calls
// it only when the CPU has AVX2.
// This file alone is compiled with -mavx2 (cache/CMakeLists.txt) and includes
// nothing but xxhash.h, whose functions XXH_INLINE_ALL makes static: no
// inline function of another header gets an AVX2 copy the linker could pick
// for the rest of the program.
#define XXH_INLINE_ALL
#include <xxhash.h>

namespace epochfs::cache::simd {

unsigned long long xxh3Avx2(const void* data, size_t len) { return XXH3_64bits(data, len); }

}  // namespace epochfs::cache::simd
