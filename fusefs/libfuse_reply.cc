#include "fusefs/libfuse_reply.h"

namespace epochfs::fusefs {

int LibfuseReply::err(int errnum) { return fuse_reply_err(req_, errnum); }

int LibfuseReply::entry(const fuse_entry_param& e) { return fuse_reply_entry(req_, &e); }

int LibfuseReply::attr(const struct stat& st, double timeoutSeconds) {
  return fuse_reply_attr(req_, &st, timeoutSeconds);
}

int LibfuseReply::readlink(const char* target) { return fuse_reply_readlink(req_, target); }

int LibfuseReply::open(const fuse_file_info& fi) { return fuse_reply_open(req_, &fi); }

int LibfuseReply::buf(const char* data, size_t size) { return fuse_reply_buf(req_, data, size); }

int LibfuseReply::iov(const iovec* pieces, int count) {
  return fuse_reply_iov(req_, pieces, count);
}

int LibfuseReply::statfs(const struct statvfs& sv) { return fuse_reply_statfs(req_, &sv); }

int LibfuseReply::xattr(size_t size) { return fuse_reply_xattr(req_, size); }

size_t LibfuseReply::addDirentry(char* out, size_t room, const char* name, const struct stat& st,
                                 off_t nextOffset) {
  return fuse_add_direntry(req_, out, room, name, &st, nextOffset);
}

size_t LibfuseReply::addDirentryPlus(char* out, size_t room, const char* name,
                                     const fuse_entry_param& e, off_t nextOffset) {
  return fuse_add_direntry_plus(req_, out, room, name, &e, nextOffset);
}

}  // namespace epochfs::fusefs
