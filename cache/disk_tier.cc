#include "cache/disk_tier.h"

#include <dirent.h>
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <limits>
#include <utility>

#include "cache/disk_probe.h"
#include "cache/owned_dir.h"
#include "cache/segment_file.h"

namespace epochfs::cache {

namespace {

constexpr uint64_t kHeaderBytes = SegmentFile::kHeaderBytes;

uint64_t adaptiveSegmentBytes(const DiskTierOptions& o) {
  return std::min(o.segmentBytes,
                  std::max(DiskTier::kMinAdaptiveSegmentBytes, o.capacityBytes / 16));
}

}  // namespace

Result<std::unique_ptr<DiskTier>> DiskTier::open(const DiskTierOptions& options) {
  if (options.dir.empty()) return Status::invalidArgument("disk tier: no directory");
  if (options.capacityBytes == 0) return Status::invalidArgument("disk tier: zero capacity");
  if (options.segmentBytes <= kHeaderBytes) {
    return Status::invalidArgument("disk tier: segment size " +
                                   std::to_string(options.segmentBytes) + " is too small");
  }
  Result<int> dirFd = OwnedDir::open(options.dir);
  if (!dirFd) return dirFd.status();
  Result<int> lockFd = OwnedDir::lock(*dirFd, options.dir);
  if (!lockFd) {
    ::close(*dirFd);
    return lockFd.status();
  }
  // From here the object owns (and closes) both descriptors.
  std::unique_ptr<DiskTier> tier(new DiskTier(options, *dirFd, *lockFd));
  Status s = tier->recoverSegments();
  if (!s.isOk()) return s;
  return tier;
}

DiskTier::DiskTier(const DiskTierOptions& options, int dirFd, int lockFd)
    : dir_(options.dir),
      capacity_(options.capacityBytes),
      segmentBytes_(adaptiveSegmentBytes(options)),
      datasetId_(options.datasetId),
      ioDeadline_(options.ioDeadline),
      probeInterval_(options.probeInterval),
      faults_(options.faults),
      dirFd_(dirFd),
      lockFd_(lockFd),
      health_(std::max(1, options.errorsBeforeUnhealthy)),
      pool_(options.ioThreads > 0 ? std::make_unique<DiskIoPool>(options.ioThreads, 1024)
                                  : nullptr) {
  prober_ = std::thread([this] { proberLoop(); });
}

DiskTier::~DiskTier() {
  {
    MutexLock lock(proberMu_);
    stopping_ = true;
  }
  proberCv_.notifyAll();
  prober_.join();
  pool_.reset();  // lets queued and stalled I/O finish; its jobs use `this`
  {
    // Segment descriptors close with their last reference; none outlive us.
    MutexLock lock(mu_);
    segments_.clear();
  }
  ::close(lockFd_);  // releases the flock
  ::close(dirFd_);
}

Status DiskTier::recoverSegments() {
  // For all of it: the prober may replace dirFd_ (reopenDir) meanwhile.
  MutexLock writeLock(writeMu_);
  std::vector<uint32_t> ids;
  {
    int fd = ::dup(dirFd_);
    if (fd < 0) return Status::fromErrno(errno, "read cache directory " + dir_);
    DIR* d = ::fdopendir(fd);
    if (d == nullptr) {
      ::close(fd);
      return Status::fromErrno(errno, "read cache directory " + dir_);
    }
    ::rewinddir(d);
    while (struct dirent* ent = ::readdir(d)) {
      uint32_t id;
      if (SegmentFile::parseName(ent->d_name, &id)) ids.push_back(id);
    }
    ::closedir(d);
  }
  std::sort(ids.begin(), ids.end());

  for (uint32_t id : ids) {
    nextSegmentId_ = std::max(nextSegmentId_, id + 1);
    auto opened = SegmentFile::openExisting(dirFd_, id);
    if (!opened) {
      spdlog::warn("disk tier {}: skipping {}: {}", dir_, SegmentFile::nameFor(id),
                   opened.status().toString());
      continue;
    }
    std::shared_ptr<SegmentFile> file = std::move(*opened);
    std::vector<std::pair<uint64_t, IndexEntry>> found;
    auto rec = file->recover([&](const RecordHeader& h, uint64_t offset) {
      found.emplace_back(h.keyHash, IndexEntry{id, static_cast<uint32_t>(h.dataLength), offset,
                                               h.dataChecksum, h.identity()});
    });
    if (!rec) {
      spdlog::warn("disk tier {}: skipping {}: {}", dir_, file->name(), rec.status().toString());
      continue;
    }
    if (rec->damagedRegions > 0) {
      spdlog::warn("disk tier {}: {}: {} damaged region(s) skipped, {} records kept", dir_,
                   file->name(), rec->damagedRegions, found.size());
    }
    if (rec->tornTailBytes > 0) {
      spdlog::warn("disk tier {}: {}: cut a torn tail of {} bytes", dir_, file->name(),
                   rec->tornTailBytes);
    }
    MutexLock lock(mu_);
    corruptions_ += rec->damagedRegions;
    if (rec->tornTailBytes > 0) ++tornTails_;
    if (rec->size == 0) {
      (void)file->unlink(dirFd_);  // ours and empty
      continue;
    }
    Segment& seg = segments_[id];
    seg.file = std::move(file);
    seg.size = rec->size;
    seg.lastAccess = ++tick_;  // oldest segments are evicted first
    seg.keys.reserve(found.size());
    for (auto& [hash, entry] : found) {
      index_[hash] = entry;  // a later record of the same key wins
      seg.keys.push_back(hash);
    }
    bytesUsed_ += rec->size;
  }
  {
    MutexLock lock(mu_);
    if (!segments_.empty() && segments_.rbegin()->second.size < segmentBytes_) {
      activeSegment_ = segments_.rbegin()->first;  // keep appending to the newest
    }
  }
  for (;;) {  // the capacity may have shrunk since the last run
    {
      MutexLock lock(mu_);
      if (bytesUsed_ <= capacity_) break;
    }
    evictOneSegment(true);
  }
  TierUsage u = usage();
  spdlog::info("disk tier {} (dataset {:016x}): {} chunks in {} segments, {} of {} bytes", dir_,
               datasetId_, u.chunks, segmentCount(), u.bytesUsed, u.capacityBytes);
  return Status::ok();
}

ChunkRef DiskTier::lookup(const ChunkKey& key, const FileIdentity& id) {
  if (!contains(key)) return nullptr;  // a miss costs no I/O and no hand-off
  if (!healthy()) {
    health_.noteSkipped();
    return nullptr;
  }
  if (!pool_) return lookupNow(key, id);
  auto result = std::make_shared<ChunkRef>();
  auto outcome = pool_->run([this, key, id, result] { *result = lookupNow(key, id); }, ioDeadline_);
  if (outcome == DiskIoPool::Outcome::kDone) return *result;
  health_.noteTimeout(outcome == DiskIoPool::Outcome::kBusy
                          ? "disk I/O queue full"
                          : "a read took longer than " + std::to_string(ioDeadline_.count()) +
                                " ms");
  return nullptr;
}

ChunkRef DiskTier::lookupNow(const ChunkKey& key, const FileIdentity& id) {
  IndexEntry e;
  std::shared_ptr<SegmentFile> file;
  {
    MutexLock lock(mu_);
    auto it = index_.find(key.hash);
    if (it == index_.end()) return nullptr;
    auto seg = segments_.find(it->second.segment);
    if (!(it->second.identity == id) || seg == segments_.end()) {
      index_.erase(it);
      return nullptr;
    }
    e = it->second;
    seg->second.lastAccess = ++tick_;
    file = seg->second.file;
  }
  auto chunk = std::make_shared<Chunk>();
  chunk->data.resize(e.length);
  RecordHeader h;
  Status s = injectRead("read segment " + file->name());
  if (s.isOk()) s = file->readRecord(e.offset, &h, chunk->data.data(), e.length);
  if (!s.isOk()) {
    spdlog::warn("disk tier {}: {}", dir_, s.toString());
    health_.noteReadError(s.toString());
    dropEntry(key.hash, e.segment, e.offset, false);
    return nullptr;
  }
  health_.noteReadSuccess();
  chunk->key = h.key();
  chunk->identity = h.identity();
  chunk->checksum = h.dataChecksum;
  if (!h.plausible() || h.keyHash != key.hash || h.dataLength != e.length ||
      h.dataChecksum != e.checksum || !(chunk->identity == id) || !chunk->verify()) {
    spdlog::warn("disk tier {}: corrupt record in {} at offset {}; dropped", dir_, file->name(),
                 e.offset);
    dropEntry(key.hash, e.segment, e.offset, true);
    return nullptr;
  }
  return chunk;
}

bool DiskTier::insert(const ChunkRef& chunk) {
  if (!chunk) return false;
  const uint64_t recordBytes = kHeaderBytes + chunk->size();
  if (recordBytes > segmentBytes_ || recordBytes > capacity_ ||
      chunk->size() > RecordHeader::kMaxDataLength) {
    return false;
  }
  if (!healthy()) {
    health_.noteSkipped();
    return false;
  }
  if (!pool_) return insertNow(chunk);
  auto admitted = std::make_shared<std::atomic<bool>>(false);
  auto outcome =
      pool_->run([this, chunk, admitted] { admitted->store(insertNow(chunk)); }, ioDeadline_);
  if (outcome == DiskIoPool::Outcome::kDone) return admitted->load();
  health_.noteTimeout(outcome == DiskIoPool::Outcome::kBusy
                          ? "disk I/O queue full"
                          : "a write took longer than " + std::to_string(ioDeadline_.count()) +
                                " ms");
  return false;
}

bool DiskTier::insertNow(const ChunkRef& chunk) {
  if (!healthy()) return false;  // went unhealthy while this job was queued
  const uint64_t n = chunk->size();
  const uint64_t recordBytes = kHeaderBytes + n;
  const RecordHeader header = RecordHeader::forChunk(*chunk);

  MutexLock writeLock(writeMu_);
  for (;;) {  // make room within the capacity
    {
      MutexLock lock(mu_);
      if (bytesUsed_ + recordBytes <= capacity_) break;
    }
    if (!evictOneSegment(true)) break;
  }
  std::shared_ptr<SegmentFile> file;
  uint64_t offset = 0;
  {
    MutexLock lock(mu_);
    auto it = segments_.find(activeSegment_);
    if (it != segments_.end() && it->second.size + recordBytes <= segmentBytes_) {
      file = it->second.file;
      offset = it->second.size;
    }
  }
  if (!file) {  // seal the active segment and start a new one
    activeSegment_ = 0;
    Status injected = injectWrite("create segment");
    auto created = injected.isOk() ? SegmentFile::create(dirFd_, nextSegmentId_++)
                                   : Result<std::unique_ptr<SegmentFile>>(injected);
    if (!created) {
      spdlog::warn("disk tier {}: {}", dir_, created.status().toString());
      health_.noteWriteError(created.status().toString());
      return false;
    }
    file = std::move(*created);
    MutexLock lock(mu_);
    Segment& seg = segments_[file->id()];
    seg.file = file;
    seg.lastAccess = ++tick_;
    activeSegment_ = file->id();
  }
  Status s = injectWrite("write segment " + file->name());
  if (s.isOk()) s = file->append(offset, header, chunk->data.data(), n);
  if (!s.isOk()) {
    spdlog::warn("disk tier {}: {}", dir_, s.toString());
    health_.noteWriteError(s.toString());
    return false;
  }
  health_.noteWriteSuccess();
  MutexLock lock(mu_);
  Segment& seg = segments_.at(activeSegment_);
  seg.size += recordBytes;
  seg.lastAccess = ++tick_;
  seg.keys.push_back(header.keyHash);
  bytesUsed_ += recordBytes;
  index_[header.keyHash] = IndexEntry{activeSegment_, static_cast<uint32_t>(n), offset,
                                      header.dataChecksum, chunk->identity};
  return true;
}

bool DiskTier::evictOneSegment(bool countEvictions) {
  uint32_t victim = 0;
  {
    MutexLock lock(mu_);
    uint64_t oldest = std::numeric_limits<uint64_t>::max();
    for (const auto& [id, seg] : segments_) {
      if (id != activeSegment_ && seg.lastAccess < oldest) {
        oldest = seg.lastAccess;
        victim = id;
      }
    }
    if (victim == 0 && segments_.count(activeSegment_) != 0) victim = activeSegment_;
  }
  if (victim == 0) return false;
  if (victim == activeSegment_) activeSegment_ = 0;
  dropSegment(victim, countEvictions);
  return true;
}

void DiskTier::dropSegment(uint32_t id, bool countEvictions) {
  std::shared_ptr<SegmentFile> file;
  {
    MutexLock lock(mu_);
    auto it = segments_.find(id);
    if (it == segments_.end()) return;
    for (uint64_t hash : it->second.keys) {
      auto e = index_.find(hash);
      if (e != index_.end() && e->second.segment == id) {
        index_.erase(e);
        if (countEvictions) ++evictions_;
      }
    }
    bytesUsed_ -= it->second.size;
    file = std::move(it->second.file);
    segments_.erase(it);
  }
  // Readers still holding `file` keep reading the unlinked inode.
  Status s = file->unlink(dirFd_);
  if (!s.isOk()) spdlog::warn("disk tier {}: {}", dir_, s.toString());
}

void DiskTier::dropEntry(uint64_t keyHash, uint32_t segment, uint64_t offset, bool corrupt) {
  MutexLock lock(mu_);
  auto it = index_.find(keyHash);
  if (it == index_.end() || it->second.segment != segment || it->second.offset != offset) return;
  index_.erase(it);
  if (corrupt) ++corruptions_;
}

bool DiskTier::contains(const ChunkKey& key) const {
  MutexLock lock(mu_);
  return index_.count(key.hash) != 0;
}

void DiskTier::erase(const ChunkKey& key) {
  MutexLock lock(mu_);
  index_.erase(key.hash);
}

void DiskTier::eraseCorrupt(const ChunkKey& key) {
  MutexLock lock(mu_);
  if (index_.erase(key.hash) != 0) ++corruptions_;
}

uint64_t DiskTier::tornTails() const {
  MutexLock lock(mu_);
  return tornTails_;
}

TierUsage DiskTier::usage() const {
  MutexLock lock(mu_);
  TierUsage u;
  u.bytesUsed = bytesUsed_;
  u.capacityBytes = capacity_;
  u.chunks = index_.size();
  u.evictions = evictions_;
  u.corruptions = corruptions_;
  return u;
}

void DiskTier::clear() {
  MutexLock writeLock(writeMu_);
  activeSegment_ = 0;
  std::vector<uint32_t> ids;
  {
    MutexLock lock(mu_);
    for (const auto& [id, seg] : segments_) ids.push_back(id);
  }
  for (uint32_t id : ids) dropSegment(id, false);
}

uint64_t DiskTier::segmentCount() const {
  MutexLock lock(mu_);
  return segments_.size();
}

// ---- health: the prober ------------------------------------------------------

void DiskTier::proberLoop() {
  MutexLock lock(proberMu_);
  while (!proberCv_.waitFor(proberMu_, probeInterval_,
                            [&]() REQUIRES(proberMu_) { return stopping_; })) {
    lock.unlock();
    checkHealth();
    lock.lock();
  }
}

void DiskTier::checkHealth() {
  MutexLock writeLock(writeMu_);
  struct stat st;
  const bool removed = ::fstat(dirFd_, &st) == 0 && st.st_nlink == 0;
  if (removed) health_.markUnhealthy("cache directory " + dir_ + " was removed");
  if (healthy()) return;
  Status s = removed ? reopenDir() : Status::ok();
  if (s.isOk()) s = DiskProbe::run(dirFd_, faults_.get(), ioDeadline_);
  const bool firstFailure = health_.stats().probeFailures == 0;
  health_.noteProbe(s.isOk());
  if (s.isOk()) {
    health_.markHealthy();
  } else if (firstFailure) {
    spdlog::warn("disk tier {}: probe failed: {} (probing every {} ms)", dir_, s.toString(),
                 probeInterval_.count());
  } else {
    spdlog::debug("disk tier {}: probe failed: {}", dir_, s.toString());
  }
}

Status DiskTier::reopenDir() {
  // The segment files went with the directory: forget them (their open
  // descriptors were the last thing holding their space).
  activeSegment_ = 0;
  std::vector<uint32_t> ids;
  {
    MutexLock lock(mu_);
    for (const auto& [id, seg] : segments_) ids.push_back(id);
  }
  for (uint32_t id : ids) dropSegment(id, false);
  Result<int> fd = OwnedDir::open(dir_);
  if (!fd) return fd.status();
  Result<int> lockFd = OwnedDir::lock(*fd, dir_);
  if (!lockFd) {
    ::close(*fd);
    return lockFd.status();
  }
  ::close(lockFd_);
  ::close(dirFd_);
  dirFd_ = *fd;
  lockFd_ = *lockFd;
  spdlog::warn("disk tier {}: the directory was removed; recreated it ({} segments forgotten)",
               dir_, ids.size());
  return Status::ok();
}

}  // namespace epochfs::cache
