// KernelPagePusher: the prefetcher's PagePusher over FUSE. Puts a prefetched
// file's bytes into the kernel's page cache with fuse_lowlevel_notify_store
// (from a prefetch worker, never a FUSE request thread), so the loader's reads
// of it are served by the kernel without waking the daemon.
//
// - Only the version the namespace holds now is pushed; a file whose version
//   changed in the source while it was pushed gets its pages invalidated again
//   (the change-detection path of --revalidate stays the only way new bytes
//   arrive: docs/SEMANTICS.md).
// - The kernel must know the inode (a lookup or readdirplus made it); ENOENT
//   from the kernel is "not pushed", not a failure.
// Thread-safety: push() from any thread, concurrently; close() once.
#pragma once

#include "cache/shared_mutex.h"
#include "fusefs/dataset_namespace.h"
#include "fusefs/file_index.h"
#include "fusefs/fuse_server.h"
#include "prefetch/page_pusher.h"

namespace epochfs::fusefs {

class KernelPagePusher : public prefetch::PagePusher {
 public:
  // `fuse` must be mounted (its session exists).
  KernelPagePusher(FuseServer& fuse, const DatasetNamespace& ns, const FileIndex& files);

  Outcome push(const cache::FileIdentity& id, const std::vector<cache::ChunkRef>& chunks) override;

  // Waits for the pushes in progress; later ones do nothing. Call before the
  // FUSE session goes.
  void close();

 private:
  FuseServer& fuse_;
  const DatasetNamespace& ns_;
  const FileIndex& files_;
  cache::SharedMutex mu_;  // shared: a push in progress; exclusive: close()
  bool closed_ GUARDED_BY(mu_) = false;
};

}  // namespace epochfs::fusefs
