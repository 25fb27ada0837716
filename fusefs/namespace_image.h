// NamespaceImage: a DatasetNamespace as bytes, and back, exactly (the same
// nodes in the same inode order, names, children, symlink targets, file ids,
// every NodeAttr field the namespace serves including `gone`, the counts and
// the fingerprint). A
// supervised worker hands its namespace to the supervisor in this form so that
// a restarted worker serves without walking or listing the source again
// (docs/ARCHITECTURE.md "Processes"); the format is meant to be reused to send
// a namespace between nodes and to keep it on disk.
//
// Layout (little-endian, fixed-width integers):
//   header (40 bytes): magic "EPOCHNS\0" | u32 version | u32 flags |
//     u64 node count | u64 payload size | u64 XXH3-64 of header + payload,
//     taken with this field zero
//   payload: u64 files, dirs, bytes, fingerprint; then per node in inode
//     order: u32 parent (0 for the root), u32 child count, u32 name length,
//     name, u32 target length, target, u64 file id, u32 mode, uid, gid, nlink,
//     u64 size, sourceIno, rdev, i64 atime, mtime, ctime (ns), u8 gone, and
//     with flag kExplicitChildren the children's u32 inode numbers;
//     then, with flag kHasVersions, u64 count and per entry u64 file id,
//     u8 kind, u32 parts, 16 bytes (an object store's ETags, opaque here).
// Names are stored once (a path is its parent's path + "/" + name). A
// snapshot's inodes are numbered breadth-first, so a node's children are the
// next `child count` unassigned inodes; a namespace a refresh grew
// (DatasetNamespace::graft) is not, and lists its children
// (kExplicitChildren). Either way every node comes after its parent, and
// decode checks that each child is claimed once and names its parent.
// Decode is defensive (fuzzed: tests/fuzz/namespace_image_fuzzer.cc): any
// malformed input is a kCorruption Status, and no allocation exceeds what the
// input's size can hold.
// Thread-safety: stateless; encode() reads attributes under the namespace's
// own locks, so it may run while the namespace serves.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cache/status.h"
#include "fusefs/dataset_namespace.h"

namespace epochfs::fusefs {

// One file's version as the object store listed it (transport/s3/etag.h),
// carried as opaque fields.
struct ImageVersion {
  uint64_t fileId = 0;
  uint8_t kind = 0;
  uint32_t parts = 0;
  std::array<uint8_t, 16> bytes{};
  bool operator==(const ImageVersion&) const = default;
};

struct DecodedNamespace {
  DatasetNamespace ns;
  std::optional<std::vector<ImageVersion>> versions;  // present when encoded with them
};

class NamespaceImage {
 public:
  static constexpr char kMagic[8] = {'E', 'P', 'O', 'C', 'H', 'N', 'S', '\0'};
  static constexpr uint32_t kVersion = 1;
  static constexpr uint32_t kHasVersions = 1;       // flags
  static constexpr uint32_t kExplicitChildren = 2;  // flags
  static constexpr size_t kHeaderSize = 40;

  static std::string encode(const DatasetNamespace& ns,
                            const std::vector<ImageVersion>* versions = nullptr);
  // The same image written to `fd` from its current offset, which must be 0
  // (the checksum is patched in at offset 32), in pieces of about 1 MiB.
  static cache::Status encodeTo(int fd, const DatasetNamespace& ns,
                                const std::vector<ImageVersion>* versions = nullptr);
  static cache::Result<DecodedNamespace> decode(std::string_view bytes);
  // The image in file `fd` (from offset 0 to its end), read in pieces of
  // about 1 MiB (pread: the descriptor's offset is left alone), never whole;
  // the checksum is checked at the end.
  static cache::Result<DecodedNamespace> decodeFile(int fd);

  // Recomputes the checksum of an image in place (tests build malformed
  // images that pass the checksum to reach the structural checks).
  static void reseal(std::string& bytes);

  // A sealed memfd (F_SEAL_SHRINK|GROW|WRITE|SEAL) holding `bytes`, close-on-exec.
  static cache::Result<int> toSealedMemfd(std::string_view bytes);
  // The contents of a memfd from toSealedMemfd(); refuses one that is not
  // sealed against writes. pread() only: the file offset, shared with the
  // supervisor's copy of the descriptor, is left alone.
  static cache::Result<std::string> readSealedMemfd(int fd);
  // Refuses a memfd that is not sealed against writes (as readSealedMemfd).
  static cache::Status checkSealed(int fd);

 private:
  class Reader;
  static cache::Result<DecodedNamespace> decodeBody(uint32_t flags, uint64_t nodeCount, Reader& r);
};

}  // namespace epochfs::fusefs
