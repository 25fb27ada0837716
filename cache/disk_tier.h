// DiskTier: the local-SSD chunk tier. Owns one cache directory (created 0700
// if missing, refused if another uid owns it), its `LOCK` file and its
// segment files `seg-NNNNNN.dat` (0600); it never touches any other file.
//
// Chunks are appended as checksummed records (see segment_file.h) to the
// current segment; an in-memory index maps key.hash to the record. open()
// rebuilds the index by walking every segment's headers, so a restarted
// daemon finds its chunks again; a torn tail is truncated away. Eviction drops
// whole segments, least recently used first (a lookup hit or a write touches
// its segment), like CacheLib navy's region eviction; the bytes in use (sum of
// segment file sizes) never exceed the capacity.
//
// Health (docs/RELIABILITY.md case 7b): segment reads and writes run on a
// small DiskIoPool and the caller waits at most options.ioDeadline, so a
// stalled disk delays a read by one deadline at most. A timeout, or
// errorsBeforeUnhealthy read (or write) errors in a row, make the tier
// unhealthy (DiskHealth): lookups miss and inserts are refused without I/O, so
// readers go to the source. A prober thread checks every probeInterval: while
// healthy, that the directory still exists; while unhealthy, a DiskProbe
// (write + read + verify of a small file) and, if the directory was removed,
// recreates and relocks it (the old segments are forgotten). A passing probe
// puts the tier back in use. Faults can be injected (DiskFaults, tests only).
//
// Thread-safety: every method may be called from any thread concurrently.
// Lock order: writeMu_ (appends, segment creation and eviction, the directory
// descriptors) before mu_ (index and segment table). Lookups hold mu_ only to
// find the record and do the pread with no lock held; a segment evicted
// meanwhile stays readable until its last reader drops it. The directory is
// locked with flock() for the life of the object, so a second DiskTier (any
// process) on it is refused.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "cache/chunk_store.h"
#include "cache/disk_faults.h"
#include "cache/disk_health.h"
#include "cache/disk_io_pool.h"
#include "cache/mutex.h"
#include "cache/status.h"

namespace epochfs::cache {

class SegmentFile;

struct DiskTierOptions {
  std::string dir;                      // the daemon's own cache directory
  uint64_t capacityBytes = 0;           // bound on the sum of segment file sizes
  uint64_t segmentBytes = 64ull << 20;  // upper bound; see DiskTier::segmentBytes()
  uint64_t datasetId = 0;               // for logs; keys already include it
  // The longest a lookup or insert waits for the disk (then: a miss / not
  // admitted, and the tier goes unhealthy). A healthy SSD answers a 1 MiB
  // read in about a millisecond; one second is sick.
  std::chrono::milliseconds ioDeadline{1000};
  // How often the prober checks (and probes an unhealthy tier).
  std::chrono::milliseconds probeInterval{1000};
  int errorsBeforeUnhealthy = 3;  // consecutive read (or write) errors
  // DiskIoPool threads (concurrent disk reads). 0: I/O on the caller's
  // thread with no deadline (a stall then blocks the reader; for comparison).
  int ioThreads = 16;
  std::shared_ptr<DiskFaults> faults;  // fault injection (tests); null: none
};

class DiskTier : public ChunkStore {
 public:
  static constexpr uint64_t kMinAdaptiveSegmentBytes = 4ull << 20;

  // Creates/locks the directory and rebuilds the index from its segments.
  // kUnavailable if another DiskTier holds the directory; kPermissionDenied if
  // the directory is not ours; kInvalidArgument for bad options.
  static Result<std::unique_ptr<DiskTier>> open(const DiskTierOptions& options);
  ~DiskTier() override;
  DiskTier(const DiskTier&) = delete;
  DiskTier& operator=(const DiskTier&) = delete;

  // Reads and verifies the record (header and XXH3 of the data). A damaged
  // record is dropped and counted in usage().corruptions; a read error or an
  // identity mismatch drops the entry too. Allocates the returned chunk.
  // A miss without I/O while unhealthy; waits at most ioDeadline.
  ChunkRef lookup(const ChunkKey& key, const FileIdentity& id) override;
  // Appends the chunk (with its stored checksum); false if it is larger than a
  // segment, the tier is unhealthy, the write failed (nothing is left half
  // written) or did not finish within ioDeadline (it may still complete).
  bool insert(const ChunkRef& chunk) override;
  bool contains(const ChunkKey& key) const override;
  // Forgets the record; its bytes are reclaimed when its segment is evicted.
  void erase(const ChunkKey& key) override;
  // As erase(), counted in usage().corruptions (a caller found it damaged).
  void eraseCorrupt(const ChunkKey& key) override;
  TierUsage usage() const override;

  // Evicts every segment (not counted as evictions) and deletes their files.
  void clear();
  uint64_t segmentCount() const;
  // The segment size in use: min(options.segmentBytes,
  // max(kMinAdaptiveSegmentBytes, capacity / 16)), so small caches still have
  // many segments to evict from.
  uint64_t segmentBytes() const { return segmentBytes_; }
  // False while the tier is out of use (see the file comment).
  bool healthy() const { return health_.healthy(); }
  DiskHealthStats health() const { return health_.stats(); }
  // Torn tails cut off segments when the index was rebuilt at open().
  uint64_t tornTails() const;
  const std::string& dir() const { return dir_; }

 private:
  struct IndexEntry {
    uint32_t segment = 0;
    uint32_t length = 0;  // data bytes
    uint64_t offset = 0;  // of the record header
    uint64_t checksum = 0;
    FileIdentity identity;
  };
  struct Segment {
    std::shared_ptr<SegmentFile> file;
    uint64_t size = 0;           // bytes written (the file size)
    uint64_t lastAccess = 0;     // tick_ at the last hit or write
    std::vector<uint64_t> keys;  // key hashes written here, in order
  };

  DiskTier(const DiskTierOptions& options, int dirFd, int lockFd);
  Status recoverSegments();
  ChunkRef lookupNow(const ChunkKey& key, const FileIdentity& id);
  bool insertNow(const ChunkRef& chunk);
  void proberLoop() EXCLUDES(proberMu_);
  // One prober round: notices a removed directory; probes an unhealthy tier.
  void checkHealth();
  // Recreates and relocks a removed directory, forgetting the old segments.
  Status reopenDir() REQUIRES(writeMu_);
  // Evicts the least recently used segment, preferring sealed ones to the
  // active one. False if there is none.
  bool evictOneSegment(bool countEvictions) REQUIRES(writeMu_);
  void dropSegment(uint32_t id, bool countEvictions) REQUIRES(writeMu_);
  // Drops key's entry if it still points at (segment, offset); a corrupt one
  // is counted (once, by whoever drops it).
  void dropEntry(uint64_t keyHash, uint32_t segment, uint64_t offset, bool corrupt);
  Status injectRead(const std::string& what) {
    return faults_ ? faults_->beforeRead(what) : Status::ok();
  }
  Status injectWrite(const std::string& what) {
    return faults_ ? faults_->beforeWrite(what) : Status::ok();
  }

  const std::string dir_;
  const uint64_t capacity_;
  const uint64_t segmentBytes_;
  const uint64_t datasetId_;
  const std::chrono::milliseconds ioDeadline_;
  const std::chrono::milliseconds probeInterval_;
  const std::shared_ptr<DiskFaults> faults_;

  Mutex writeMu_ ACQUIRED_BEFORE(mu_);
  int dirFd_ GUARDED_BY(writeMu_);  // changes only in reopenDir
  int lockFd_ GUARDED_BY(writeMu_);
  uint32_t activeSegment_ GUARDED_BY(writeMu_) = 0;  // 0: none
  uint32_t nextSegmentId_ GUARDED_BY(writeMu_) = 1;

  mutable Mutex mu_;
  std::unordered_map<uint64_t, IndexEntry> index_ GUARDED_BY(mu_);  // key.hash -> record
  std::map<uint32_t, Segment> segments_ GUARDED_BY(mu_);            // by id
  uint64_t bytesUsed_ GUARDED_BY(mu_) = 0;
  uint64_t tick_ GUARDED_BY(mu_) = 0;
  uint64_t evictions_ GUARDED_BY(mu_) = 0;
  uint64_t corruptions_ GUARDED_BY(mu_) = 0;
  uint64_t tornTails_ GUARDED_BY(mu_) = 0;

  DiskHealth health_;
  Mutex proberMu_;
  CondVar proberCv_;
  bool stopping_ GUARDED_BY(proberMu_) = false;
  std::thread prober_;
  // Last: destroyed (drained and joined) first, as its jobs use the members.
  std::unique_ptr<DiskIoPool> pool_;
};

}  // namespace epochfs::cache
