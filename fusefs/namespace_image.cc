#include "fusefs/namespace_image.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

#include "fusefs/namespace_image_layout.h"

namespace epochfs::fusefs {

using cache::Result;
using cache::Status;

// Reads little-endian fields; any read past the end sets failed() and
// returns zeros, so a caller checks once per record. Over a string, or over
// a file read (pread) in pieces of about 1 MiB as they are asked for, each
// piece hashed: the whole image is never held. A view bytes() returns is
// valid until the next read.
class NamespaceImage::Reader {
 public:
  explicit Reader(std::string_view in) : view_(in), total_(in.size()) {}
  Reader(int fd, uint64_t at, uint64_t size, XXH3_state_t* hash)
      : fd_(fd), next_(at), total_(size), unread_(size), hash_(hash) {}
  bool failed() const { return failed_; }
  const Status& readError() const { return readError_; }
  uint64_t remaining() const { return total_ - consumed_; }
  uint8_t u8() { return static_cast<uint8_t>(take(1)); }
  uint32_t u32() { return static_cast<uint32_t>(take(4)); }
  uint64_t u64() { return take(8); }
  std::string_view bytes(size_t n) {
    if (failed_ || n > remaining() || (view_.size() - pos_ < n && !refill(n))) {
      failed_ = true;
      return {};
    }
    std::string_view s = view_.substr(pos_, n);
    pos_ += n;
    consumed_ += n;
    return s;
  }
  std::string_view str() { return bytes(u32()); }

 private:
  static constexpr size_t kPiece = 1 << 20;
  uint64_t take(size_t n) {
    std::string_view b = bytes(n);
    uint64_t v = 0;
    for (size_t i = 0; i < b.size(); ++i) v |= uint64_t{static_cast<uint8_t>(b[i])} << (8 * i);
    return v;
  }
  // Keeps the unread bytes and reads on until `n` are there (a piece or more).
  bool refill(size_t n) {
    if (fd_ < 0) return false;
    buf_.erase(0, pos_);
    pos_ = 0;
    const size_t old = buf_.size();
    const size_t add = static_cast<size_t>(std::min<uint64_t>(unread_, std::max(n, kPiece)));
    buf_.resize(old + add);
    size_t done = 0;
    while (done < add) {
      const ssize_t r =
          ::pread(fd_, buf_.data() + old + done, add - done, static_cast<off_t>(next_));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) {
        readError_ = Status::fromErrno(r < 0 ? errno : EIO, "namespace image: read");
        return false;
      }
      done += static_cast<size_t>(r);
      next_ += static_cast<uint64_t>(r);
    }
    XXH3_64bits_update(hash_, buf_.data() + old, add);
    unread_ -= add;
    view_ = buf_;
    return view_.size() >= n;
  }

  int fd_ = -1;
  uint64_t next_ = 0;  // file offset of the next piece
  std::string buf_;    // file mode: the piece being read
  std::string_view view_;
  size_t pos_ = 0;
  uint64_t total_ = 0, consumed_ = 0, unread_ = 0;
  XXH3_state_t* hash_ = nullptr;
  bool failed_ = false;
  Status readError_;
};

namespace {

using namespace image_layout;  // NOLINT: the format's own constants

uint64_t checksumOf(std::string_view image) {
  XXH3_state_t* st = XXH3_createState();
  XXH3_64bits_reset(st);
  XXH3_64bits_update(st, image.data(), kChecksumAt);
  const uint64_t zero = 0;
  XXH3_64bits_update(st, &zero, sizeof zero);
  XXH3_64bits_update(st, image.data() + kChecksumAt + 8, image.size() - kChecksumAt - 8);
  const uint64_t h = XXH3_64bits_digest(st);
  XXH3_freeState(st);
  return h;
}

bool validName(std::string_view n) {
  return !n.empty() && n != "." && n != ".." && n.find('/') == std::string_view::npos &&
         n.find('\0') == std::string_view::npos;
}

Status corrupt(const std::string& what) { return Status::corruption("namespace image: " + what); }

}  // namespace

void NamespaceImage::reseal(std::string& bytes) {
  if (bytes.size() < kHeaderSize) return;
  const uint64_t h = checksumOf(bytes);
  for (int i = 0; i < 8; ++i) bytes[kChecksumAt + i] = static_cast<char>(h >> (8 * i));
}

namespace {

struct Header {
  uint32_t version = 0, flags = 0;
  uint64_t nodeCount = 0, payloadSize = 0, checksum = 0;
};

// `h`: the header's kHeaderSize bytes; `payload`: the bytes that follow it.
Result<Header> parseHeader(std::string_view h, uint64_t payload) {
  Header hd;
  auto field = [&](size_t at, size_t n) {
    uint64_t v = 0;
    for (size_t i = 0; i < n; ++i) v |= uint64_t{static_cast<uint8_t>(h[at + i])} << (8 * i);
    return v;
  };
  hd.version = static_cast<uint32_t>(field(8, 4));
  hd.flags = static_cast<uint32_t>(field(12, 4));
  hd.nodeCount = field(16, 8);
  hd.payloadSize = field(24, 8);
  hd.checksum = field(kChecksumAt, 8);
  if (std::memcmp(h.data(), NamespaceImage::kMagic, sizeof NamespaceImage::kMagic) != 0) {
    return corrupt("bad magic");
  }
  if (hd.version != NamespaceImage::kVersion) {
    return corrupt("format version " + std::to_string(hd.version) +
                   ", this epochfs reads version " + std::to_string(NamespaceImage::kVersion));
  }
  if (hd.payloadSize != payload) {
    return corrupt("payload of " + std::to_string(payload) + " bytes, the header says " +
                   std::to_string(hd.payloadSize));
  }
  if ((hd.flags & ~(NamespaceImage::kHasVersions | NamespaceImage::kExplicitChildren)) != 0) {
    return corrupt("unknown flags");
  }
  return hd;
}

}  // namespace

Result<DecodedNamespace> NamespaceImage::decode(std::string_view bytes) {
  if (bytes.size() < kHeaderSize) return corrupt("truncated header");
  // First, over everything: any flipped byte is a checksum error.
  const uint64_t checksum = Reader(bytes.substr(kChecksumAt, 8)).u64();
  if (checksumOf(bytes) != checksum) return corrupt("checksum mismatch (truncated or corrupt)");
  auto hd = parseHeader(bytes.substr(0, kHeaderSize), bytes.size() - kHeaderSize);
  if (!hd.isOk()) return hd.status();
  Reader r(bytes.substr(kHeaderSize));
  return decodeBody(hd->flags, hd->nodeCount, r);
}

Result<DecodedNamespace> NamespaceImage::decodeFile(int fd) {
  struct stat st;
  if (fstat(fd, &st) != 0) return Status::fromErrno(errno, "namespace image: fstat");
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size < kHeaderSize) return corrupt("truncated header");
  std::string header(kHeaderSize, '\0');
  if (::pread(fd, header.data(), kHeaderSize, 0) != static_cast<ssize_t>(kHeaderSize)) {
    return Status::fromErrno(errno, "namespace image: read");
  }
  auto hd = parseHeader(header, size - kHeaderSize);
  if (!hd.isOk()) return hd.status();
  // The checksum is checked at the end, over every piece as it was read:
  // decoding is defensive on its own (any malformed input is an error).
  std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> hash(XXH3_createState(),
                                                                &XXH3_freeState);
  XXH3_64bits_reset(hash.get());
  std::fill(header.begin() + kChecksumAt, header.begin() + kChecksumAt + 8, '\0');
  XXH3_64bits_update(hash.get(), header.data(), header.size());
  Reader r(fd, kHeaderSize, size - kHeaderSize, hash.get());
  auto decoded = decodeBody(hd->flags, hd->nodeCount, r);
  if (!r.readError().isOk()) return r.readError();
  if (!decoded.isOk()) return decoded;
  if (XXH3_64bits_digest(hash.get()) != hd->checksum) {
    return corrupt("checksum mismatch (truncated or corrupt)");
  }
  return decoded;
}

Result<DecodedNamespace> NamespaceImage::decodeBody(uint32_t flags, uint64_t nodeCount, Reader& r) {
  const bool explicitChildren = (flags & kExplicitChildren) != 0;
  if (nodeCount == 0 || nodeCount >= UINT32_MAX ||
      nodeCount > (r.remaining() - std::min<uint64_t>(r.remaining(), 32)) / kNodeFixedBytes) {
    return corrupt("node count " + std::to_string(nodeCount) + " does not fit the payload");
  }
  DatasetNamespace ns;
  ns.grafted_ = explicitChildren;
  ns.files_ = r.u64();
  ns.dirs_ = r.u64();
  ns.bytes_ = r.u64();
  ns.fingerprint_ = r.u64();
  // The children of each node are the next unassigned inodes (breadth-first),
  // or listed (kExplicitChildren): each after its parent, claimed once. A
  // listed set that is not one range is kept as a graft's list is.
  std::vector<uint32_t> expectedParent(nodeCount + 1, 0);
  std::vector<uint32_t> kidList;
  std::string name, target;
  uint64_t next = 2;
  for (uint64_t i = 0; i < nodeCount; ++i) {
    const uint32_t ino = static_cast<uint32_t>(i + 1);
    const uint32_t parent = r.u32();
    const uint32_t kids = r.u32();
    // Copied: the next read may refill the reader's piece.
    name.assign(r.str());
    target.assign(r.str());
    (void)r.u64();  // the file id: a hash of the path, recomputed
    NodeAttr a;
    a.mode = r.u32();
    a.uid = r.u32();
    a.gid = r.u32();
    a.nlink = r.u32();
    a.size = r.u64();
    a.sourceIno = r.u64();
    a.rdev = r.u64();
    a.atimeNs = static_cast<int64_t>(r.u64());
    a.mtimeNs = static_cast<int64_t>(r.u64());
    a.ctimeNs = static_cast<int64_t>(r.u64());
    const uint8_t gone = r.u8();
    if (r.failed()) return corrupt("truncated at node " + std::to_string(ino));
    if (gone > 1) return corrupt("bad gone flag at node " + std::to_string(ino));
    a.gone = gone == 1;
    if (ino == DatasetNamespace::kRootIno) {
      if (parent != 0 || !name.empty()) return corrupt("bad root node");
      if (!S_ISDIR(a.mode)) return corrupt("the root is not a directory");
    } else {
      // A gone entry a graft replaced (one of the same name took its place)
      // is in no child list: it keeps naming its parent, an earlier directory.
      const bool replaced = explicitChildren && expectedParent[ino] == 0 && a.gone && parent >= 1 &&
                            parent < ino && S_ISDIR(ns.node(parent).mode);
      if (replaced) expectedParent[ino] = parent;
      if ((explicitChildren ? expectedParent[ino] == 0 : ino >= next)) {
        return corrupt("node " + std::to_string(ino) + " has no parent");
      }
      if (parent != expectedParent[ino]) {
        return corrupt("node " + std::to_string(ino) + " names parent " + std::to_string(parent) +
                       ", its place says " + std::to_string(expectedParent[ino]));
      }
      if (!validName(name)) return corrupt("bad name at node " + std::to_string(ino));
    }
    if (!S_ISLNK(a.mode) && !target.empty()) {
      return corrupt("non-symlink node " + std::to_string(ino) + " has a target");
    }
    Result<DatasetNamespace::Node> made = ns.makeNode(name, a, target);
    if (!made.isOk())
      return corrupt("node " + std::to_string(ino) + ": " + made.status().message());
    made->parent = parent;
    if (kids > 0) {
      if (!S_ISDIR(a.mode))
        return corrupt("non-directory node " + std::to_string(ino) + " has children");
      if (kids > nodeCount - ino) {
        return corrupt("node " + std::to_string(ino) + "'s children are out of range");
      }
      if (!explicitChildren && kids > nodeCount + 1 - next) {
        return corrupt("node " + std::to_string(ino) + "'s children are out of range");
      }
      kidList.clear();
      for (uint32_t k = 0; k < kids; ++k) {
        const uint64_t kid = explicitChildren ? r.u32() : next++;
        if (r.failed()) return corrupt("truncated at node " + std::to_string(ino));
        if (kid <= ino || kid > nodeCount || expectedParent[kid] != 0) {
          return corrupt("node " + std::to_string(ino) + " lists a bad child " +
                         std::to_string(kid));
        }
        kidList.push_back(static_cast<uint32_t>(kid));
        expectedParent[kid] = ino;
      }
      bool range = true;
      for (uint32_t k = 1; k < kids && range; ++k) range = kidList[k] == kidList[0] + k;
      if (range) {
        made->value = uint64_t{kids} << 32 | kidList.front();  // one range
      } else {
        auto list = std::make_unique<std::vector<uint32_t>>(kidList);
        ns.growth_->makeChildLists().at(i).store(list.get(), std::memory_order_relaxed);
        ns.growth_->kept.push_back(std::move(list));
      }
    }
    ns.nodes_->at(i) = *made;
  }
  ns.growth_->count.store(nodeCount, std::memory_order_release);
  ns.snapshotCount_ = nodeCount;
  for (DatasetNamespace::Ino dir = 1; dir <= nodeCount; ++dir) {
    const DatasetNamespace::ChildList kids = ns.children(dir);
    for (size_t k = 1; k < kids.size(); ++k) {
      if (!(ns.name(kids[k - 1]) < ns.name(kids[k]))) {
        return corrupt("children of node " + std::to_string(dir) + " not sorted by name");
      }
    }
  }
  std::optional<std::vector<ImageVersion>> versions;
  if ((flags & kHasVersions) != 0) {
    const uint64_t count = r.u64();
    if (r.failed() || count > r.remaining() / kVersionBytes) {
      return corrupt("version count does not fit the payload");
    }
    versions.emplace();
    versions->reserve(count);
    for (uint64_t i = 0; i < count; ++i) {
      ImageVersion v;
      v.fileId = r.u64();
      v.kind = r.u8();
      v.parts = r.u32();
      const std::string_view b = r.bytes(v.bytes.size());
      if (r.failed()) return corrupt("truncated versions");
      std::memcpy(v.bytes.data(), b.data(), v.bytes.size());
      if (v.kind > kMaxVersionKind) return corrupt("bad version kind");
      versions->push_back(v);
    }
  }
  if (r.remaining() != 0) return corrupt("trailing bytes");
  return DecodedNamespace{std::move(ns), std::move(versions)};
}

Result<int> NamespaceImage::toSealedMemfd(std::string_view bytes) {
  const int fd = memfd_create("epochfs-namespace", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return Status::fromErrno(errno, "memfd_create");
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      close(fd);
      return Status::fromErrno(err, "write namespace image");
    }
    done += static_cast<size_t>(n);
  }
  if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) != 0) {
    const int err = errno;
    close(fd);
    return Status::fromErrno(err, "seal namespace image");
  }
  return fd;
}

Status NamespaceImage::checkSealed(int fd) {
  const int seals = fcntl(fd, F_GET_SEALS);
  constexpr int kNeeded = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE;
  if (seals < 0) return Status::fromErrno(errno, "namespace image: not a memfd");
  if ((seals & kNeeded) != kNeeded) return corrupt("the memfd is not sealed");
  return Status::ok();
}

Result<std::string> NamespaceImage::readSealedMemfd(int fd) {
  if (Status s = checkSealed(fd); !s.isOk()) return s;
  struct stat st;
  if (fstat(fd, &st) != 0) return Status::fromErrno(errno, "namespace image: fstat");
  std::string out(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (done < out.size()) {
    const ssize_t n = pread(fd, out.data() + done, out.size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Status::fromErrno(n < 0 ? errno : EIO, "namespace image: read");
    done += static_cast<size_t>(n);
  }
  return out;
}

}  // namespace epochfs::fusefs
