#include "cache/segment_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "cache/checksum.h"

namespace epochfs::cache {

namespace {

constexpr std::string_view kPrefix = "seg-";
constexpr std::string_view kSuffix = ".dat";

// preadv/pwritev until done; returns 0 or an errno (EIO for a short read).
int fullIo(bool write, int fd, struct iovec* iov, int iovcnt, uint64_t offset) {
  while (iovcnt > 0) {
    ssize_t n = write ? ::pwritev(fd, iov, iovcnt, static_cast<off_t>(offset))
                      : ::preadv(fd, iov, iovcnt, static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n == 0) {
      bool empty = true;
      for (int i = 0; i < iovcnt; ++i) empty = empty && iov[i].iov_len == 0;
      return empty ? 0 : (write ? ENOSPC : EIO);
    }
    offset += static_cast<uint64_t>(n);
    size_t left = static_cast<size_t>(n);
    while (iovcnt > 0 && left >= iov->iov_len) {
      left -= iov->iov_len;
      ++iov;
      --iovcnt;
    }
    if (iovcnt > 0) {
      iov->iov_base = static_cast<char*>(iov->iov_base) + left;
      iov->iov_len -= left;
    }
  }
  return 0;
}

}  // namespace

RecordHeader RecordHeader::forChunk(const Chunk& c) {
  RecordHeader h;
  h.magic = kMagic;
  h.version = kVersion;
  h.keyHash = c.key.hash;
  h.keyFileId = c.key.fileId;
  h.keyChunkIndex = c.key.chunkIndex;
  h.idFileId = c.identity.fileId;
  h.idSize = c.identity.size;
  h.idMtimeNs = c.identity.mtimeNs;
  h.idCtimeNs = c.identity.ctimeNs;
  h.idInode = c.identity.inode;
  h.dataLength = c.size();
  h.dataChecksum = c.checksum;
  h.headerChecksum = h.computeChecksum();
  return h;
}

uint64_t RecordHeader::computeChecksum() const {
  RecordHeader copy = *this;
  copy.headerChecksum = 0;
  return checksum(&copy, sizeof copy);
}

bool RecordHeader::valid() const {
  return magic == kMagic && version == kVersion && headerChecksum == computeChecksum() &&
         dataLength <= kMaxDataLength;
}

bool RecordHeader::plausible() const {
  return valid() && dataLength <= idSize && (dataLength > 0 || idSize == 0);
}

FileIdentity RecordHeader::identity() const {
  return FileIdentity{idFileId, idSize, idMtimeNs, idCtimeNs, idInode};
}

SegmentFile::SegmentFile(int fd, uint32_t id) : fd_(fd), id_(id), name_(nameFor(id)) {}

SegmentFile::~SegmentFile() { ::close(fd_); }

std::string SegmentFile::nameFor(uint32_t id) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "seg-%06u.dat", id);
  return buf;
}

bool SegmentFile::parseName(std::string_view name, uint32_t* id) {
  if (name.size() <= kPrefix.size() + kSuffix.size() || !name.starts_with(kPrefix) ||
      !name.ends_with(kSuffix)) {
    return false;
  }
  std::string_view digits =
      name.substr(kPrefix.size(), name.size() - kPrefix.size() - kSuffix.size());
  if (digits.size() < 6 || digits.size() > 10) return false;
  uint64_t v = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  if (v == 0 || v > UINT32_MAX || nameFor(static_cast<uint32_t>(v)) != name) return false;
  *id = static_cast<uint32_t>(v);
  return true;
}

Result<std::unique_ptr<SegmentFile>> SegmentFile::create(int dirFd, uint32_t id) {
  std::string name = nameFor(id);
  int fd = ::openat(dirFd, name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return Status::fromErrno(errno, "create segment " + name);
  return std::unique_ptr<SegmentFile>(new SegmentFile(fd, id));
}

Result<std::unique_ptr<SegmentFile>> SegmentFile::openExisting(int dirFd, uint32_t id) {
  std::string name = nameFor(id);
  int fd = ::openat(dirFd, name.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return Status::fromErrno(errno, "open segment " + name);
  auto file = std::unique_ptr<SegmentFile>(new SegmentFile(fd, id));
  struct stat st;
  if (::fstat(fd, &st) != 0) return Status::fromErrno(errno, "stat segment " + name);
  if (!S_ISREG(st.st_mode)) return Status::invalidArgument(name + " is not a regular file");
  if (st.st_uid != ::geteuid()) {
    return Status::permissionDenied(name + " is owned by uid " + std::to_string(st.st_uid));
  }
  return file;
}

Result<bool> SegmentFile::recordAt(uint64_t off, uint64_t fileSize, RecordHeader* h) const {
  struct iovec iov = {h, sizeof *h};
  int err = fullIo(false, fd_, &iov, 1, off);
  if (err == EIO && off + kHeaderBytes > fileSize) return false;  // a short header
  if (err != 0) return Status::fromErrno(err, "read segment " + name_);
  return h->plausible() && h->dataLength <= fileSize - off - kHeaderBytes;
}

Result<uint64_t> SegmentFile::findNextRecord(uint64_t from, uint64_t fileSize) const {
  constexpr uint64_t kBlock = 1 << 20;
  std::vector<char> buf(kBlock + kHeaderBytes);
  for (uint64_t base = from; base + kHeaderBytes <= fileSize; base += kBlock) {
    const uint64_t want = std::min<uint64_t>(buf.size(), fileSize - base);
    struct iovec iov = {buf.data(), want};
    int err = fullIo(false, fd_, &iov, 1, base);
    if (err != 0) return Status::fromErrno(err, "read segment " + name_);
    for (uint64_t i = 0; i < kBlock && i + kHeaderBytes <= want; ++i) {
      if (std::memcmp(buf.data() + i, &RecordHeader::kMagic, sizeof RecordHeader::kMagic) != 0) {
        continue;
      }
      RecordHeader h;
      std::memcpy(&h, buf.data() + i, sizeof h);
      if (h.plausible() && h.dataLength <= fileSize - (base + i) - kHeaderBytes) return base + i;
    }
  }
  return fileSize;
}

Result<SegmentFile::Recovery> SegmentFile::recover(
    const std::function<void(const RecordHeader&, uint64_t)>& fn) {
  struct stat st;
  if (::fstat(fd_, &st) != 0) return Status::fromErrno(errno, "stat segment " + name_);
  const uint64_t fileSize = static_cast<uint64_t>(st.st_size);
  Recovery r;
  uint64_t off = 0, end = 0;  // end: just after the last good record
  while (off + kHeaderBytes <= fileSize) {
    RecordHeader h;
    Result<bool> whole = recordAt(off, fileSize, &h);
    if (!whole) return whole.status();
    if (*whole) {
      fn(h, off);
      off += kHeaderBytes + h.dataLength;
      end = off;
      continue;
    }
    Result<uint64_t> next = findNextRecord(off + 1, fileSize);
    if (!next) return next.status();
    if (*next >= fileSize) break;  // nothing valid after it: a torn tail
    ++r.damagedRegions;
    off = *next;
  }
  if (end < fileSize) {
    Status s = truncate(end);
    if (!s.isOk()) return s;
    r.tornTailBytes = fileSize - end;
  }
  r.size = end;
  return r;
}

Status SegmentFile::append(uint64_t offset, const RecordHeader& header, const char* data,
                           size_t len) {
  struct iovec iov[2] = {{const_cast<RecordHeader*>(&header), sizeof header},
                         {const_cast<char*>(data), len}};
  int err = fullIo(true, fd_, iov, 2, offset);
  if (err == 0) return Status::ok();
  Status s = Status::fromErrno(err, "write segment " + name_);
  (void)truncate(offset);  // best effort: drop the partial record
  return s;
}

Status SegmentFile::readRecord(uint64_t offset, RecordHeader* header, char* data,
                               size_t len) const {
  struct iovec iov[2] = {{header, sizeof *header}, {data, len}};
  int err = fullIo(false, fd_, iov, 2, offset);
  if (err != 0) return Status::fromErrno(err, "read segment " + name_);
  return Status::ok();
}

Status SegmentFile::truncate(uint64_t size) {
  while (::ftruncate(fd_, static_cast<off_t>(size)) != 0) {
    if (errno != EINTR) return Status::fromErrno(errno, "truncate segment " + name_);
  }
  return Status::ok();
}

Status SegmentFile::unlink(int dirFd) {
  if (::unlinkat(dirFd, name_.c_str(), 0) != 0 && errno != ENOENT) {
    return Status::fromErrno(errno, "unlink segment " + name_);
  }
  return Status::ok();
}

}  // namespace epochfs::cache
