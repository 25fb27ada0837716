// The one clock helper: nanoseconds on the steady (monotonic) clock, for
// ages, rates and timeouts inside the daemon (never for wall-clock time).
#pragma once

#include <chrono>
#include <cstdint>

namespace epochfs::cache {

inline int64_t steadyNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace epochfs::cache
