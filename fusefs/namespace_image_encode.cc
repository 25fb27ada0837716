// NamespaceImage::encode(), encodeTo(): a namespace written out in pieces
// (namespace_image.h has the format).
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>

#include "fusefs/namespace_image.h"
#include "fusefs/namespace_image_layout.h"

namespace epochfs::fusefs {

using cache::Status;
using namespace image_layout;  // NOLINT: the format's own constants

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

}  // namespace epochfs::fusefs
