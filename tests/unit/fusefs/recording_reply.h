// RecordingReply: the fake kernel side of FuseServer's unit tests. A
// FuseReply that keeps the one reply a request got (its kind, errno, entry,
// attributes, bytes) and counts reply calls, so a test can check that every
// request got exactly one; parseDirents reads readdir replies back in the
// kernel's format (<linux/fuse.h>).
// Thread-safety: none; one object per request, on the test's thread.
#pragma once

#include <gtest/gtest.h>
#include <linux/fuse.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include "fusefs/fuse_reply.h"

namespace epochfs::fusefs::testing {

// The reply one request got. `replies` counts every reply method called:
// exactly one is the FUSE contract.
class RecordingReply final : public FuseReply {
 public:
  enum class Kind { kNone, kErr, kEntry, kAttr, kReadlink, kOpen, kBuf, kIov, kStatfs, kXattr };

  int err(int errnum) override { return keep(Kind::kErr, errnum_, errnum); }
  int entry(const fuse_entry_param& e) override { return keep(Kind::kEntry, entry_, e); }
  int attr(const struct stat& st, double timeoutSeconds) override {
    timeout_ = timeoutSeconds;
    return keep(Kind::kAttr, attr_, st);
  }
  int readlink(const char* target) override {
    return keep(Kind::kReadlink, data_, std::string(target));
  }
  int open(const fuse_file_info& fi) override { return keep(Kind::kOpen, open_, fi); }
  int buf(const char* data, size_t size) override {
    return keep(Kind::kBuf, data_, size > 0 ? std::string(data, size) : std::string());
  }
  int iov(const iovec* pieces, int count) override {
    std::string joined;
    for (int i = 0; i < count; ++i) {
      joined.append(static_cast<const char*>(pieces[i].iov_base), pieces[i].iov_len);
    }
    iovCount_ = count;
    return keep(Kind::kIov, data_, joined);
  }
  int statfs(const struct statvfs& sv) override { return keep(Kind::kStatfs, statfs_, sv); }
  int xattr(size_t size) override { return keep(Kind::kXattr, xattrSize_, size); }
  // The kernel's format, packed by libfuse itself (3.14 does not use the
  // request in these two).
  size_t addDirentry(char* out, size_t room, const char* name, const struct stat& st,
                     off_t nextOffset) override {
    return fuse_add_direntry(nullptr, out, room, name, &st, nextOffset);
  }
  size_t addDirentryPlus(char* out, size_t room, const char* name, const fuse_entry_param& e,
                         off_t nextOffset) override {
    return fuse_add_direntry_plus(nullptr, out, room, name, &e, nextOffset);
  }

  int replies() const { return replies_; }
  Kind kind() const { return kind_; }
  int errnum() const { return errnum_; }
  const fuse_entry_param& entry() const { return entry_; }
  const struct stat& attr() const { return attr_; }
  double timeout() const { return timeout_; }
  const std::string& data() const { return data_; }  // buf, iov (joined), readlink
  int iovCount() const { return iovCount_; }
  const fuse_file_info& opened() const { return open_; }
  const struct statvfs& statfs() const { return statfs_; }
  size_t xattrSize() const { return xattrSize_; }

 private:
  template <typename T>
  int keep(Kind k, T& field, const T& value) {
    ++replies_;
    kind_ = k;
    field = value;
    return 0;
  }

  int replies_ = 0;
  Kind kind_ = Kind::kNone;
  int errnum_ = 0;
  fuse_entry_param entry_{};
  struct stat attr_ {};
  double timeout_ = 0;
  std::string data_;
  int iovCount_ = 0;
  fuse_file_info open_{};
  struct statvfs statfs_ {};
  size_t xattrSize_ = 0;
};

// One readdir entry parsed back from a buf() reply.
struct Dirent {
  std::string name;
  uint64_t ino = 0;
  uint64_t off = 0;
  uint32_t type = 0;
  fuse_entry_out entry{};  // readdirplus only
};

inline std::vector<Dirent> parseDirents(const std::string& bytes, bool plus) {
  std::vector<Dirent> out;
  const size_t header = plus ? offsetof(fuse_direntplus, dirent) : 0;
  size_t pos = 0;
  while (pos < bytes.size()) {
    Dirent d;
    fuse_dirent raw;
    if (pos + header + FUSE_NAME_OFFSET > bytes.size()) break;
    if (plus) std::memcpy(&d.entry, bytes.data() + pos, sizeof d.entry);
    std::memcpy(&raw, bytes.data() + pos + header, FUSE_NAME_OFFSET);
    if (pos + header + FUSE_NAME_OFFSET + raw.namelen > bytes.size()) break;
    d.name.assign(bytes.data() + pos + header + FUSE_NAME_OFFSET, raw.namelen);
    d.ino = raw.ino;
    d.off = raw.off;
    d.type = raw.type;
    out.push_back(d);
    pos += header + FUSE_DIRENT_ALIGN(FUSE_NAME_OFFSET + raw.namelen);
  }
  EXPECT_EQ(pos, bytes.size()) << "a partial entry, or padding past the end";
  return out;
}

inline std::vector<std::string> namesOf(const std::vector<Dirent>& ds) {
  std::vector<std::string> names;
  for (const auto& d : ds) names.push_back(d.name);
  return names;
}

}  // namespace epochfs::fusefs::testing
