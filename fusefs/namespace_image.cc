#include "fusefs/namespace_image.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <cstring>
#include <memory>

namespace epochfs::fusefs {

using cache::Result;
using cache::Status;

namespace {

// Bytes of a node record without its name and target.
constexpr size_t kNodeFixedBytes = 4 + 4 + 4 + 4 + 8 + 4 * 4 + 3 * 8 + 3 * 8 + 1;
constexpr size_t kVersionBytes = 8 + 1 + 4 + 16;
constexpr size_t kChecksumAt = 32;
constexpr uint8_t kMaxVersionKind = 2;  // transport/s3/etag.h ETag::Kind

class Writer {
 public:
  explicit Writer(std::string& out) : out_(out) {}
  void u8(uint8_t v) { out_.push_back(static_cast<char>(v)); }
  void u32(uint32_t v) {
    for (int i = 0; i < 4; ++i) out_.push_back(static_cast<char>(v >> (8 * i)));
  }
  void u64(uint64_t v) {
    for (int i = 0; i < 8; ++i) out_.push_back(static_cast<char>(v >> (8 * i)));
  }
  void str(std::string_view s) {
    u32(static_cast<uint32_t>(s.size()));
    out_.append(s);
  }

 private:
  std::string& out_;
};

// Reads little-endian fields; any read past the end sets failed() and
// returns zeros, so a caller checks once per record.
class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  bool failed() const { return failed_; }
  size_t remaining() const { return in_.size() - pos_; }
  uint8_t u8() { return static_cast<uint8_t>(take(1)); }
  uint32_t u32() { return static_cast<uint32_t>(take(4)); }
  uint64_t u64() { return take(8); }
  std::string_view bytes(size_t n) {
    if (failed_ || n > remaining()) {
      failed_ = true;
      return {};
    }
    std::string_view s = in_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  std::string_view str() { return bytes(u32()); }

 private:
  uint64_t take(size_t n) {
    std::string_view b = bytes(n);
    uint64_t v = 0;
    for (size_t i = 0; i < b.size(); ++i) v |= uint64_t{static_cast<uint8_t>(b[i])} << (8 * i);
    return v;
  }
  std::string_view in_;
  size_t pos_ = 0;
  bool failed_ = false;
};

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

namespace {

// Where encode() puts the image: appended in pieces, the checksum patched in
// at the end (it covers the header, which comes first).
class ImageOut {
 public:
  virtual ~ImageOut() = default;
  virtual Status append(std::string_view bytes) = 0;
  virtual Status patch(size_t at, std::string_view bytes) = 0;
};

class StringOut : public ImageOut {
 public:
  explicit StringOut(std::string& s) : s_(s) {}
  Status append(std::string_view b) override {
    s_.append(b);
    return Status::ok();
  }
  Status patch(size_t at, std::string_view b) override {
    s_.replace(at, b.size(), b);
    return Status::ok();
  }

 private:
  std::string& s_;
};

class FdOut : public ImageOut {
 public:
  explicit FdOut(int fd) : fd_(fd) {}
  Status append(std::string_view b) override { return writeAt(b, -1); }
  Status patch(size_t at, std::string_view b) override {
    return writeAt(b, static_cast<off_t>(at));
  }

 private:
  Status writeAt(std::string_view b, off_t at) {
    size_t done = 0;
    while (done < b.size()) {
      const ssize_t n =
          at < 0 ? ::write(fd_, b.data() + done, b.size() - done)
                 : ::pwrite(fd_, b.data() + done, b.size() - done, at + static_cast<off_t>(done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return Status::fromErrno(n < 0 ? errno : EIO, "write namespace image");
      done += static_cast<size_t>(n);
    }
    return Status::ok();
  }
  int fd_;
};

// The payload's size, from the nodes' name, target and child counts.
uint64_t payloadSize(const DatasetNamespace& ns, size_t count, bool explicitChildren,
                     const std::vector<ImageVersion>* versions) {
  uint64_t n = 4 * 8;
  for (DatasetNamespace::Ino ino = 1; ino <= count; ++ino) {
    n += kNodeFixedBytes + ns.name(ino).size() + ns.symlinkTarget(ino).size();
    if (explicitChildren) n += 4 * uint64_t{ns.children(ino).size()};
  }
  if (versions != nullptr) n += 8 + versions->size() * kVersionBytes;
  return n;
}

// Writes the image in pieces of about 1 MiB: no copy of the whole image is
// ever held (a 10-million-file image is over a gigabyte).
Status encodeInto(const DatasetNamespace& ns, const std::vector<ImageVersion>* versions,
                  ImageOut& out) {
  const auto noGraft = ns.holdGrowth();  // the nodes and child lists stay as counted here
  const size_t count = ns.nodeCount();
  const bool explicitChildren = !ns.numberedBreadthFirst();
  std::string buf;
  buf.reserve((1 << 20) + 4096);
  Writer w(buf);
  buf.append(NamespaceImage::kMagic, sizeof NamespaceImage::kMagic);
  w.u32(NamespaceImage::kVersion);
  w.u32((versions != nullptr ? NamespaceImage::kHasVersions : 0) |
        (explicitChildren ? NamespaceImage::kExplicitChildren : 0));
  w.u64(count);
  w.u64(payloadSize(ns, count, explicitChildren, versions));
  w.u64(0);  // checksum, patched in at the end
  XXH3_state_t* hash = XXH3_createState();
  XXH3_64bits_reset(hash);
  XXH3_64bits_update(hash, buf.data(), buf.size());  // with the checksum field zero
  auto flush = [&]() -> Status {
    XXH3_64bits_update(hash, buf.data(), buf.size());
    Status s = out.append(buf);
    buf.clear();
    return s;
  };
  Status s = out.append(buf);
  buf.clear();
  w.u64(ns.fileCount());
  w.u64(ns.dirCount());
  w.u64(ns.totalBytes());
  w.u64(ns.fingerprint());
  for (DatasetNamespace::Ino ino = 1; ino <= count && s.isOk(); ++ino) {
    const NodeAttr a = ns.attr(ino);
    const DatasetNamespace::ChildList kids = ns.children(ino);
    w.u32(ino == DatasetNamespace::kRootIno ? 0 : static_cast<uint32_t>(ns.parentOf(ino)));
    w.u32(static_cast<uint32_t>(kids.size()));
    w.str(ns.name(ino));
    w.str(ns.symlinkTarget(ino));
    w.u64(ns.fileId(ino));
    w.u32(a.mode);
    w.u32(a.uid);
    w.u32(a.gid);
    w.u32(a.nlink);
    w.u64(a.size);
    w.u64(a.sourceIno);
    w.u64(a.rdev);
    w.u64(static_cast<uint64_t>(a.atimeNs));
    w.u64(static_cast<uint64_t>(a.mtimeNs));
    w.u64(static_cast<uint64_t>(a.ctimeNs));
    w.u8(a.gone ? 1 : 0);
    if (explicitChildren) {
      for (uint32_t kid : kids) w.u32(kid);
    }
    if (buf.size() >= (1 << 20)) s = flush();
  }
  if (s.isOk() && versions != nullptr) {
    w.u64(versions->size());
    for (const ImageVersion& v : *versions) {
      w.u64(v.fileId);
      w.u8(v.kind);
      w.u32(v.parts);
      buf.append(reinterpret_cast<const char*>(v.bytes.data()), v.bytes.size());
      if (buf.size() >= (1 << 20) && !(s = flush()).isOk()) break;
    }
  }
  if (s.isOk()) s = flush();
  const uint64_t h = XXH3_64bits_digest(hash);
  XXH3_freeState(hash);
  if (!s.isOk()) return s;
  Writer(buf).u64(h);
  return out.patch(kChecksumAt, buf);
}

}  // namespace

std::string NamespaceImage::encode(const DatasetNamespace& ns,
                                   const std::vector<ImageVersion>* versions) {
  std::string out;
  StringOut sink(out);
  (void)encodeInto(ns, versions, sink);  // a string takes every byte
  return out;
}

Status NamespaceImage::encodeTo(int fd, const DatasetNamespace& ns,
                                const std::vector<ImageVersion>* versions) {
  FdOut sink(fd);
  return encodeInto(ns, versions, sink);
}

void NamespaceImage::reseal(std::string& bytes) {
  if (bytes.size() < kHeaderSize) return;
  const uint64_t h = checksumOf(bytes);
  for (int i = 0; i < 8; ++i) bytes[kChecksumAt + i] = static_cast<char>(h >> (8 * i));
}

Result<DecodedNamespace> NamespaceImage::decode(std::string_view bytes) {
  if (bytes.size() < kHeaderSize) return corrupt("truncated header");
  Reader h(bytes.substr(sizeof kMagic, kHeaderSize - sizeof kMagic));
  const uint32_t version = h.u32();
  const uint32_t flags = h.u32();
  const uint64_t nodeCount = h.u64();
  const uint64_t payloadSize = h.u64();
  const uint64_t checksum = h.u64();
  // First, over everything: any flipped byte is a checksum error.
  if (checksumOf(bytes) != checksum) return corrupt("checksum mismatch (truncated or corrupt)");
  if (std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0) return corrupt("bad magic");
  if (version != kVersion) {
    return corrupt("format version " + std::to_string(version) + ", this epochfs reads version " +
                   std::to_string(kVersion));
  }
  if (payloadSize != bytes.size() - kHeaderSize) {
    return corrupt("payload of " + std::to_string(bytes.size() - kHeaderSize) +
                   " bytes, the header says " + std::to_string(payloadSize));
  }
  if ((flags & ~(kHasVersions | kExplicitChildren)) != 0) return corrupt("unknown flags");
  const bool explicitChildren = (flags & kExplicitChildren) != 0;
  Reader r(bytes.substr(kHeaderSize));
  if (nodeCount == 0 || nodeCount >= UINT32_MAX ||
      nodeCount > (r.remaining() - std::min<size_t>(r.remaining(), 32)) / kNodeFixedBytes) {
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
  uint64_t next = 2;
  for (uint64_t i = 0; i < nodeCount; ++i) {
    const uint32_t ino = static_cast<uint32_t>(i + 1);
    const uint32_t parent = r.u32();
    const uint32_t kids = r.u32();
    const std::string_view name = r.str();
    const std::string_view target = r.str();
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
        ns.growth_->childLists.at(i).store(list.get(), std::memory_order_relaxed);
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

Result<std::string> NamespaceImage::readSealedMemfd(int fd) {
  const int seals = fcntl(fd, F_GET_SEALS);
  constexpr int kNeeded = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE;
  if (seals < 0) return Status::fromErrno(errno, "namespace image: not a memfd");
  if ((seals & kNeeded) != kNeeded) return corrupt("the memfd is not sealed");
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
