// S3ClientCounters: what one S3Client counts, live (lock-free, relaxed
// atomics), header-only so the admin's metric declarations
// (fusefs/admin/mount_metrics.cc) read them without linking the client.
// S3Client::stats() is a snapshot of them. Thread-safe.
#pragma once

#include <atomic>
#include <cstdint>

#include "cache/cache_stats.h"

namespace epochfs::transport::s3 {

struct S3ClientCounters {
  // Requests (a request's retries are counted in `retries`, not here).
  std::atomic<uint64_t> gets{0}, heads{0}, lists{0};
  std::atomic<uint64_t> bytesReceived{0};      // body bytes of successful GETs and listings
  std::atomic<uint64_t> errors{0};             // requests that ended in an error (after retries)
  std::atomic<uint64_t> inFlight{0};           // attempts on the wire now
  std::atomic<uint64_t> retries{0};            // attempts after a request's first
  std::atomic<uint64_t> slowdowns{0};          // throttling answers (503 SlowDown, 429, ...)
  std::atomic<uint64_t> timeouts{0};           // attempts ended by a timeout (curl's)
  std::atomic<uint64_t> gaveUp{0};             // requests that failed after retrying
  std::atomic<uint64_t> credentialReloads{0};  // new keys read from the credentials file
  // Latency of each GET attempt that got an answer (any status), send to last byte.
  cache::LatencyHistogram getLatency;
};

}  // namespace epochfs::transport::s3
