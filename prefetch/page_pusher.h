// PagePusher: puts a prefetched file's bytes into the kernel's page cache, so
// the loader's reads of it never wake the daemon (docs/PREFETCH.md "Pushing
// into the kernel page cache"). The prefetcher sees only this interface; the
// FUSE side implements it (fusefs/kernel_page_pusher.h).
// Thread-safety: push() is called from the prefetch workers concurrently.
#pragma once

#include <vector>

#include "cache/chunk.h"
#include "cache/file_identity.h"

namespace epochfs::prefetch {

class PagePusher {
 public:
  enum class Outcome {
    kPushed,   // every byte is in the kernel's page cache
    kSkipped,  // not pushed, and nothing wrong: the kernel does not know the
               // inode (never looked up), or the file is not this version
    kFailed,   // the kernel refused it (counted as a push failure)
  };
  virtual ~PagePusher() = default;
  // `chunks` are the file's chunks 0..n-1 of version `id`, in order, as the
  // chunk cache returned them (checksum-verified there).
  virtual Outcome push(const cache::FileIdentity& id,
                       const std::vector<cache::ChunkRef>& chunks) = 0;
};

}  // namespace epochfs::prefetch
