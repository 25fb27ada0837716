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

#include "cache/segment_file.h"

namespace epochfs::cache {

namespace {

constexpr const char* kLockName = "LOCK";
constexpr uint64_t kHeaderBytes = SegmentFile::kHeaderBytes;

uint64_t adaptiveSegmentBytes(const DiskTierOptions& o) {
  return std::min(o.segmentBytes,
                  std::max(DiskTier::kMinAdaptiveSegmentBytes, o.capacityBytes / 16));
}

// The pid another holder wrote into the lock file, or "unknown".
std::string lockHolder(int lockFd) {
  char buf[32] = {};
  ssize_t n = ::pread(lockFd, buf, sizeof buf - 1, 0);
  if (n <= 0) return "unknown";
  long pid = std::strtol(buf, nullptr, 10);
  return pid > 0 ? std::to_string(pid) : "unknown";
}

// Opens (creating 0700 if missing) the directory and checks that it is ours.
Result<int> openOwnedDir(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return Status::fromErrno(errno, "create cache directory " + dir);
  }
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOTDIR || errno == ELOOP) {
      return Status::invalidArgument("cache directory " + dir + " is not a directory");
    }
    return Status::fromErrno(errno, "open cache directory " + dir);
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    Status s = Status::fromErrno(errno, "stat cache directory " + dir);
    ::close(fd);
    return s;
  }
  if (st.st_uid != ::geteuid()) {
    ::close(fd);
    return Status::permissionDenied("cache directory " + dir + " is owned by uid " +
                                    std::to_string(st.st_uid) + ", not by this process (uid " +
                                    std::to_string(::geteuid()) + ")");
  }
  if ((st.st_mode & 077) != 0) {
    spdlog::warn("cache directory {} is accessible to other users (mode {:o})", dir,
                 st.st_mode & 0777);
  }
  return fd;
}

// Takes the directory's LOCK (flock, released by the kernel if we die).
Result<int> lockDir(int dirFd, const std::string& dir) {
  int fd = ::openat(dirFd, kLockName, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return Status::fromErrno(errno, "open " + dir + "/" + kLockName);
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    Status s = err == EWOULDBLOCK ? Status::unavailable("cache directory " + dir +
                                                        " is in use by another epochfs (pid " +
                                                        lockHolder(fd) + ")")
                                  : Status::fromErrno(err, "lock " + dir + "/" + kLockName);
    ::close(fd);
    return s;
  }
  std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd, 0) != 0 ||
      ::pwrite(fd, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
    spdlog::warn("cannot write pid into {}/{}", dir, kLockName);  // the lock still holds
  }
  return fd;
}

}  // namespace

Result<std::unique_ptr<DiskTier>> DiskTier::open(const DiskTierOptions& options) {
  if (options.dir.empty()) return Status::invalidArgument("disk tier: no directory");
  if (options.capacityBytes == 0) return Status::invalidArgument("disk tier: zero capacity");
  if (options.segmentBytes <= kHeaderBytes) {
    return Status::invalidArgument("disk tier: segment size " +
                                   std::to_string(options.segmentBytes) + " is too small");
  }
  Result<int> dirFd = openOwnedDir(options.dir);
  if (!dirFd) return dirFd.status();
  Result<int> lockFd = lockDir(*dirFd, options.dir);
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
      dirFd_(dirFd),
      lockFd_(lockFd) {}

DiskTier::~DiskTier() {
  {
    // Segment descriptors close with their last reference; none outlive us.
    std::lock_guard<std::mutex> lock(mu_);
    segments_.clear();
  }
  ::close(lockFd_);  // releases the flock
  ::close(dirFd_);
}

Status DiskTier::recoverSegments() {
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

  std::lock_guard<std::mutex> writeLock(writeMu_);
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
    auto size = file->recover([&](const RecordHeader& h, uint64_t offset) {
      found.emplace_back(h.keyHash, IndexEntry{id, static_cast<uint32_t>(h.dataLength), offset,
                                               h.dataChecksum, h.identity()});
    });
    if (!size) {
      spdlog::warn("disk tier {}: skipping {}: {}", dir_, file->name(), size.status().toString());
      continue;
    }
    if (*size == 0) {
      (void)file->unlink(dirFd_);  // ours and empty
      continue;
    }
    std::lock_guard<std::mutex> lock(mu_);
    Segment& seg = segments_[id];
    seg.file = std::move(file);
    seg.size = *size;
    seg.lastAccess = ++tick_;  // oldest segments are evicted first
    seg.keys.reserve(found.size());
    for (auto& [hash, entry] : found) {
      index_[hash] = entry;  // a later record of the same key wins
      seg.keys.push_back(hash);
    }
    bytesUsed_ += *size;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!segments_.empty() && segments_.rbegin()->second.size < segmentBytes_) {
      activeSegment_ = segments_.rbegin()->first;  // keep appending to the newest
    }
  }
  for (;;) {  // the capacity may have shrunk since the last run
    {
      std::lock_guard<std::mutex> lock(mu_);
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
  IndexEntry e;
  std::shared_ptr<SegmentFile> file;
  {
    std::lock_guard<std::mutex> lock(mu_);
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
  Status s = file->readRecord(e.offset, &h, chunk->data.data(), e.length);
  if (!s.isOk()) {
    spdlog::warn("disk tier {}: {}", dir_, s.toString());
    dropEntry(key.hash, e.segment, e.offset, false);
    return nullptr;
  }
  chunk->key = h.key();
  chunk->identity = h.identity();
  chunk->checksum = h.dataChecksum;
  if (!h.valid() || h.keyHash != key.hash || h.dataLength != e.length ||
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
  const uint64_t n = chunk->size();
  const uint64_t recordBytes = kHeaderBytes + n;
  if (recordBytes > segmentBytes_ || recordBytes > capacity_ || n > RecordHeader::kMaxDataLength ||
      !healthy()) {
    return false;
  }
  const RecordHeader header = RecordHeader::forChunk(*chunk);

  std::lock_guard<std::mutex> writeLock(writeMu_);
  for (;;) {  // make room within the capacity
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (bytesUsed_ + recordBytes <= capacity_) break;
    }
    if (!evictOneSegment(true)) break;
  }
  std::shared_ptr<SegmentFile> file;
  uint64_t offset = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = segments_.find(activeSegment_);
    if (it != segments_.end() && it->second.size + recordBytes <= segmentBytes_) {
      file = it->second.file;
      offset = it->second.size;
    }
  }
  if (!file) {  // seal the active segment and start a new one
    activeSegment_ = 0;
    auto created = SegmentFile::create(dirFd_, nextSegmentId_++);
    if (!created) {
      noteWriteError(created.status());
      return false;
    }
    file = std::move(*created);
    std::lock_guard<std::mutex> lock(mu_);
    Segment& seg = segments_[file->id()];
    seg.file = file;
    seg.lastAccess = ++tick_;
    activeSegment_ = file->id();
  }
  Status s = file->append(offset, header, chunk->data.data(), n);
  if (!s.isOk()) {
    noteWriteError(s);
    return false;
  }
  consecutiveWriteErrors_ = 0;
  std::lock_guard<std::mutex> lock(mu_);
  Segment& seg = segments_.at(activeSegment_);
  seg.size += recordBytes;
  seg.lastAccess = ++tick_;
  seg.keys.push_back(header.keyHash);
  bytesUsed_ += recordBytes;
  index_[header.keyHash] = IndexEntry{activeSegment_, static_cast<uint32_t>(n), offset,
                                      header.dataChecksum, chunk->identity};
  return true;
}

void DiskTier::noteWriteError(const Status& s) {
  ++consecutiveWriteErrors_;
  spdlog::warn("disk tier {}: {}", dir_, s.toString());
  if (consecutiveWriteErrors_ >= kMaxConsecutiveWriteErrors && healthy()) {
    healthy_.store(false, std::memory_order_relaxed);
    spdlog::error("disk tier {}: {} write errors in a row; no longer admitting chunks", dir_,
                  consecutiveWriteErrors_);
  }
}

bool DiskTier::evictOneSegment(bool countEvictions) {
  uint32_t victim = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
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
    std::lock_guard<std::mutex> lock(mu_);
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
  std::lock_guard<std::mutex> lock(mu_);
  auto it = index_.find(keyHash);
  if (it == index_.end() || it->second.segment != segment || it->second.offset != offset) return;
  index_.erase(it);
  if (corrupt) ++corruptions_;
}

bool DiskTier::contains(const ChunkKey& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  return index_.count(key.hash) != 0;
}

void DiskTier::erase(const ChunkKey& key) {
  std::lock_guard<std::mutex> lock(mu_);
  index_.erase(key.hash);
}

TierUsage DiskTier::usage() const {
  std::lock_guard<std::mutex> lock(mu_);
  TierUsage u;
  u.bytesUsed = bytesUsed_;
  u.capacityBytes = capacity_;
  u.chunks = index_.size();
  u.evictions = evictions_;
  u.corruptions = corruptions_;
  return u;
}

void DiskTier::clear() {
  std::lock_guard<std::mutex> writeLock(writeMu_);
  activeSegment_ = 0;
  std::vector<uint32_t> ids;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [id, seg] : segments_) ids.push_back(id);
  }
  for (uint32_t id : ids) dropSegment(id, false);
}

uint64_t DiskTier::segmentCount() const {
  std::lock_guard<std::mutex> lock(mu_);
  return segments_.size();
}

}  // namespace epochfs::cache
