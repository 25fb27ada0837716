// FuseServer: the libfuse 3 low-level frontend. Translates FUSE requests into
// DatasetNamespace lookups and ChunkCache reads; replies exactly once per
// request; every mutating call gets EROFS. Built for speed in the default
// immutable mode: long entry/attr timeouts, zero-message open (ENOSYS to
// OPEN/OPENDIR, so the kernel keeps pages and sends no OPEN/RELEASE),
// readdirplus, 1 MiB reads served from shared chunk buffers without copying.
// In --revalidate mode, lookups/getattrs older than the age re-stat the source,
// opens are real and pin one file version per open. With --push-page-cache,
// opens are real too (they carry the readers' position) and keep the pages.
// The handlers reply through a FuseReply (fuse_reply.h): libfuse in the
// daemon, a recording fake in tests/unit/fusefs/fuse_server_test.cc.
// Thread-safety: callbacks run on the session's worker threads concurrently.
#pragma once

#include <pthread.h>

#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>

#include <atomic>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cache/chunk_cache.h"
#include "cache/mutex.h"
#include "cache/source.h"
#include "fusefs/dataset_namespace.h"
#include "fusefs/fuse_reply.h"
#include "fusefs/segmented_array.h"
#include "prefetch/prefetcher.h"

namespace epochfs::fusefs {

class FuseServer {
 public:
  // What this mount's readers asked (stats.mount; the cache's own counters
  // are the daemon's, over every mount).
  struct Counters {
    std::atomic<uint64_t> readRequests{0};
    std::atomic<uint64_t> readBytes{0};
    std::atomic<uint64_t> stalledReads{0};  // waited on the source or a peer
  };

  struct Config {
    unsigned revalidateSeconds = 0;  // 0: immutable snapshot
    // The snapshot may predate the mount (kept on disk): an entry is checked
    // against the source once, at its first lookup, getattr, open or read.
    bool validateFirstUse = false;
    unsigned threads = 1;  // FUSE worker threads (the daemon passes --threads)
    bool allowOther = false;
    std::string fsname;             // shown in /proc/mounts
    std::string adminSocketPath;    // advertised via the xattr on the root
    uint32_t readAheadChunks = 16;  // chunks read ahead of a sequential reader (0: off)
    // Under the supervisor (docs/ARCHITECTURE.md "Processes"): one /dev/fuse
    // descriptor shared with the supervisor (no cloned descriptors: requests
    // read on a clone die with it), and the supervisor owns the unmount.
    bool supervised = false;
    // A restarted worker: serve this already-initialised /dev/fuse descriptor
    // instead of mounting, replaying `initMessage` (the kernel's FUSE_INIT of
    // the first worker) so libfuse negotiates the same connection.
    int adoptFd = -1;
    std::string initMessage;
    // The job its reads and opens count for in the prefetcher (AccessPlan::
    // job): this mount's number in a daemon that serves several.
    uint32_t job = 0;
  };

  // `prefetcher` (may be null) is told of every read, to track the readers'
  // positions in their plans; when its position source needs opens
  // (--push-page-cache=on: pushed files' reads never reach the daemon), opens
  // are not zero-message and keep the cached pages (FOPEN_KEEP_CACHE).
  FuseServer(const Config& config, DatasetNamespace& ns, cache::ChunkCache& cache,
             cache::Source& source, prefetch::Prefetcher* prefetcher);
  ~FuseServer();

  // Creates the session and mounts it (or adopts Config::adoptFd); the kernel
  // answers accesses once loop() runs. When supervised, the FUSE_INIT
  // handshake is done here and its message kept (initMessage()).
  cache::Status mount(const std::string& mountpoint);
  // Serves until unmounted or requestStop(). Installs no handler of the stop
  // signals: the daemon reads them (fusefs/daemon/stop_signals.h) and calls
  // requestStop(), so several servers can serve in one process.
  int loop();
  // Ends loop() from another thread (`restart`: restartRequested() set, as
  // for an upgrade): the session exits and the loop's thread, asleep until a
  // request or a signal, gets SIGUSR1 (whose handler does nothing). Before
  // loop(), it makes loop() return at once.
  void requestStop(bool restart);
  void unmount();
  int fuseFd() const { return session_ != nullptr ? fuse_session_fd(session_) : -1; }
  const std::string& initMessage() const { return initMessage_; }
  bool restartRequested() const;
  const Counters& counters() const { return counters_; }
  // The FUSE protocol this connection speaks ("7.38": the lower of the
  // kernel's and libfuse's), and what the kernel offered; "" before FUSE_INIT.
  std::string protocol() const;
  std::string kernelProtocol() const;
  // The session, for kernel notifications from other threads (valid from
  // mount() until this server is destroyed).
  fuse_session* session() const { return session_; }
  // After a refresh: the kernel forgets its dentries of `gone` (directory,
  // name) pairs, and the attributes, pages and listings it cached of
  // `stale` inodes, so new entries show, gone ones stop showing and changed
  // files are read afresh. Call from outside a FUSE request.
  void dropKernelEntries(const std::vector<std::pair<DatasetNamespace::Ino, std::string>>& gone,
                         const std::vector<DatasetNamespace::Ino>& stale);
  // --revalidate mode: true (once) when `ino` changed and the kernel may still
  // hold its old pages; the caller must drop them before pushing new ones.
  bool takeStalePages(fuse_ino_t ino) {
    return stalePages_ && stalePages_->at(ino).exchange(false, std::memory_order_acq_rel);
  }

  // Callbacks (public for the ops table and the unit tests): each replies
  // exactly once through `reply`. Without mount(), they serve the namespace
  // and cache as a mounted server does (no session: nothing to notify).
  void onInit(fuse_conn_info* conn);
  void onLookup(FuseReply& reply, fuse_ino_t parent, const char* name);
  void onGetattr(FuseReply& reply, fuse_ino_t ino, fuse_file_info* fi);
  void onReadlink(FuseReply& reply, fuse_ino_t ino);
  void onOpen(FuseReply& reply, fuse_ino_t ino, fuse_file_info* fi);
  void onRelease(FuseReply& reply, fuse_ino_t ino, fuse_file_info* fi);
  void onOpendir(FuseReply& reply, fuse_ino_t ino, fuse_file_info* fi);
  void onRead(FuseReply& reply, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi);
  void onReaddir(FuseReply& reply, fuse_ino_t ino, size_t size, off_t off, bool plus);
  void onStatfs(FuseReply& reply, fuse_ino_t ino);
  void onGetxattr(FuseReply& reply, fuse_ino_t ino, const char* name, size_t size);
  void onListxattr(FuseReply& reply, fuse_ino_t ino, size_t size);

 private:
  double timeout() const;
  fuse_entry_param entryFor(fuse_ino_t ino) const;
  // In --revalidate mode: re-stat `ino` if its last check is older than the
  // age; with validateFirstUse: if it was never checked. Returns true if the
  // file changed (its chunks were dropped and its kernel pages scheduled for
  // invalidation).
  bool revalidate(fuse_ino_t ino);
  // Re-stats `ino` in the source and applies a change (revalidate's work).
  bool recheck(fuse_ino_t ino);
  void invalidationLoop();
  cache::Status handshake();        // reads and answers the kernel's FUSE_INIT
  cache::Status replayHandshake();  // a restart: FUSE_INIT again, then resend
  // Sequential reader of a multi-chunk file: read ahead of it.
  void maybeReadAhead(fuse_ino_t ino, const cache::FileIdentity& id, uint32_t first, uint32_t last);

  Config config_;
  Counters counters_;
  DatasetNamespace& ns_;
  cache::ChunkCache& cache_;
  cache::Source& source_;
  prefetch::Prefetcher* prefetcher_;
  fuse_session* session_ = nullptr;
  bool mounted_ = false;
  cache::Mutex loopMu_;  // a signal only while loop() serves
  bool looping_ GUARDED_BY(loopMu_) = false;
  pthread_t loopThread_ GUARDED_BY(loopMu_){};
  std::atomic<bool> restart_{false};
  bool noOpenSupport_ = false;
  bool noOpendirSupport_ = false;
  bool initDone_ = false;                  // onInit ran
  std::atomic<uint32_t> kernelMinor_{0};   // from FUSE_INIT (0: none yet)
  std::atomic<uint32_t> libfuseMinor_{0};  // FuseInitReplay::libfuseMinor
  std::string initMessage_;
  // --revalidate mode: the version each open pinned, by file handle. A table,
  // not a pointer in fh: after a restart the kernel still holds the old
  // worker's handles (unknown ones read the current version).
  cache::Mutex opensMu_;
  std::unordered_map<uint64_t, cache::FileIdentity> opens_ GUARDED_BY(opensMu_);
  uint64_t nextFh_ GUARDED_BY(opensMu_) = 0;
  // Per-inode state, by inode number: it grows with the namespace (a refresh adds inodes).
  template <class T>
  using PerInode = SegmentedArray<std::atomic<T>>;
  // --revalidate mode only: steady-clock ns of each inode's last source check.
  std::unique_ptr<PerInode<int64_t>> checkedAt_;
  // --revalidate mode only: the file changed and no open has made the kernel
  // drop its old pages yet.
  std::unique_ptr<PerInode<bool>> stalePages_;
  // Per inode: the last chunk read + 1, and how far read-ahead was issued.
  std::unique_ptr<PerInode<uint32_t>> lastChunk_;
  std::unique_ptr<PerInode<uint32_t>> readAheadTo_;
  // Kernel page invalidations run on their own thread, never inside a request.
  cache::Mutex invalMu_;
  cache::CondVar invalCv_;  // with invalMu_: an inode queued, or stopping_
  std::deque<fuse_ino_t> invalQueue_ GUARDED_BY(invalMu_);
  bool stopping_ GUARDED_BY(invalMu_) = false;
  std::thread invalThread_;
};

}  // namespace epochfs::fusefs
