// FetchTask: one unit of work for the prefetch workers — a plan entry (its
// stream and position) or one chunk read ahead of a sequential reader. Its
// bytes were reserved from the FetchBudget when it was queued.
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
};

}  // namespace epochfs::prefetch
