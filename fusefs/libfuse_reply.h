// LibfuseReply: FuseReply over libfuse, for one request the session read from
// /dev/fuse: each method is the matching fuse_reply_* / fuse_add_direntry*
// call on that request. Built on the stack by the ops table
// (fuse_ops_table.cc) around each FuseServer callback; no allocation.
// Thread-safety: one object per request, used by the thread serving it.
#pragma once

#include "fusefs/fuse_reply.h"

namespace epochfs::fusefs {

class LibfuseReply final : public FuseReply {
 public:
  explicit LibfuseReply(fuse_req_t req) : req_(req) {}

  int err(int errnum) override;
  int entry(const fuse_entry_param& e) override;
  int attr(const struct stat& st, double timeoutSeconds) override;
  int readlink(const char* target) override;
  int open(const fuse_file_info& fi) override;
  int buf(const char* data, size_t size) override;
  int iov(const iovec* pieces, int count) override;
  int statfs(const struct statvfs& sv) override;
  int xattr(size_t size) override;
  size_t addDirentry(char* out, size_t room, const char* name, const struct stat& st,
                     off_t nextOffset) override;
  size_t addDirentryPlus(char* out, size_t room, const char* name, const fuse_entry_param& e,
                         off_t nextOffset) override;

 private:
  fuse_req_t req_;
};

}  // namespace epochfs::fusefs
