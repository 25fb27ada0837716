// FetchTask: one unit of work for the prefetch workers — a plan entry (its
// stream and position) or one chunk read ahead of a sequential reader. Its
// bytes were reserved from the FetchBudget when it was queued. The workers
// take the task whose reader needs it soonest first (`needNs`).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "cache/file_identity.h"
#include "prefetch/plan_stream.h"

namespace epochfs::prefetch {

// A file read ahead of a sequential reader (no plan needed).
struct ReadAheadFile {
  std::string relPath;
  cache::FileIdentity identity;
};

struct FetchTask {
  // A plan entry: set `stream`.
  std::shared_ptr<PlanStream> stream;
  uint32_t pos = 0;
  bool staged = false;  // another node's file: staged as a guest of the RAM tier
  // A read-ahead chunk: set `file`.
  std::shared_ptr<const ReadAheadFile> file;
  uint32_t chunk = 0;
  // Steady-clock ns at which its reader is expected to get there: a plan
  // entry's distance from its stream's progress at the stream's read rate
  // (several jobs' streams are served by when each needs what, not by
  // which registered first); a read-ahead chunk: when it was asked for.
  int64_t needNs = 0;
  uint64_t seq = 0;  // set by FetchWorkers: first come first served among equals
};

}  // namespace epochfs::prefetch
