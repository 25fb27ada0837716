// SegmentFile: one append-only segment file of the disk tier
// (`seg-NNNNNN.dat`, mode 0600) and the on-disk record format. Owns the file
// descriptor, closed on destruction; DiskTier shares a SegmentFile with
// in-flight readers through shared_ptr, so evicting a segment never closes a
// descriptor under a pread.
//
// A segment is a sequence of records: a RecordHeader followed by dataLength
// bytes of chunk data. There is no footer and no separate index; the index is
// rebuilt by walking the headers (recover()).
//
// Thread-safety: readRecord() may run concurrently with any method. append(),
// truncate(), recover() and unlink() must be serialized by the caller (the
// DiskTier writer lock), which also keeps the append offset.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "cache/chunk.h"
#include "cache/status.h"

namespace epochfs::cache {

// Fixed-size record header, in native byte order (the cache never leaves the
// node). headerChecksum is XXH3-64 of the header with that field set to zero.
struct RecordHeader {
  static constexpr uint32_t kMagic = 0x48435045;  // "EPCH" little-endian
  static constexpr uint16_t kVersion = 1;
  // Upper bound on dataLength accepted when scanning (rejects garbage).
  static constexpr uint64_t kMaxDataLength = 1ull << 30;

  uint32_t magic = 0;
  uint16_t version = 0;
  uint16_t reserved0 = 0;
  uint64_t headerChecksum = 0;
  uint64_t keyHash = 0;
  uint64_t keyFileId = 0;
  uint32_t keyChunkIndex = 0;
  uint32_t reserved1 = 0;
  uint64_t idFileId = 0;
  uint64_t idSize = 0;
  int64_t idMtimeNs = 0;
  int64_t idCtimeNs = 0;
  uint64_t idInode = 0;
  uint64_t dataLength = 0;
  uint64_t dataChecksum = 0;  // XXH3-64 of the data

  // A sealed header describing `c` (its stored checksum is kept, not redone).
  static RecordHeader forChunk(const Chunk& c);
  uint64_t computeChecksum() const;
  // Magic, version, header checksum and dataLength bound all check out.
  bool valid() const;
  // valid(), and the data length fits the file version it names: a chunk is
  // never longer than its file, and only an empty file has an empty chunk
  // (so a zeroed length or a record of "nothing" is damage, not data).
  bool plausible() const;
  ChunkKey key() const { return ChunkKey{keyHash, keyFileId, keyChunkIndex}; }
  FileIdentity identity() const;
};
static_assert(sizeof(RecordHeader) == 96, "on-disk layout");

class SegmentFile {
 public:
  static constexpr uint64_t kHeaderBytes = sizeof(RecordHeader);

  // Creates a new, empty segment file `id` in directory `dirFd` (O_EXCL).
  static Result<std::unique_ptr<SegmentFile>> create(int dirFd, uint32_t id);
  // Opens an existing segment file; refuses anything but a regular file owned
  // by the effective uid (never follows a symlink).
  static Result<std::unique_ptr<SegmentFile>> openExisting(int dirFd, uint32_t id);
  ~SegmentFile();
  SegmentFile(const SegmentFile&) = delete;
  SegmentFile& operator=(const SegmentFile&) = delete;

  // "seg-000042.dat" for 42; parseName() is its inverse (false if no match).
  static std::string nameFor(uint32_t id);
  static bool parseName(std::string_view name, uint32_t* id);

  uint32_t id() const { return id_; }
  const std::string& name() const { return name_; }

  struct Recovery {
    uint64_t size = 0;            // the file size after recovery
    uint64_t damagedRegions = 0;  // bad records skipped with valid records after them
    uint64_t tornTailBytes = 0;   // bytes cut off the end
  };
  // Walks the records from offset 0, calling fn(header, recordOffset) for each
  // whole record with a plausible header. At a bad or partial record it scans
  // forward, byte by byte, for the next plausible header (magic + header
  // checksum + a length that fits the file) and resumes there, so one damaged
  // header does not lose the records after it (the damaged region stays as
  // dead bytes until the segment is evicted). If no record follows, the file
  // is truncated after the last good record (a torn tail after a crash).
  Result<Recovery> recover(const std::function<void(const RecordHeader&, uint64_t)>& fn);

  // Writes header + data at `offset` (the current end). On failure the file is
  // truncated back to `offset`, so no partial record stays behind.
  Status append(uint64_t offset, const RecordHeader& header, const char* data, size_t len);

  // Reads the record at `offset` whose data is `len` bytes: the header into
  // *header and the data into `data`, in one preadv. Short reads are errors.
  Status readRecord(uint64_t offset, RecordHeader* header, char* data, size_t len) const;

  Status truncate(uint64_t size);
  // Removes the file's name from `dirFd`; open descriptors keep working.
  Status unlink(int dirFd);

 private:
  SegmentFile(int fd, uint32_t id);
  // The first offset >= from where a plausible record starts whose data ends
  // within fileSize; fileSize if there is none.
  Result<uint64_t> findNextRecord(uint64_t from, uint64_t fileSize) const;
  // Reads the header at `off` and checks that the whole record fits in fileSize.
  Result<bool> recordAt(uint64_t off, uint64_t fileSize, RecordHeader* h) const;

  const int fd_;
  const uint32_t id_;
  const std::string name_;
};

}  // namespace epochfs::cache
