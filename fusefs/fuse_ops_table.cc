#include "fusefs/fuse_ops_table.h"

#include <cerrno>

#include "fusefs/libfuse_reply.h"

namespace epochfs::fusefs {

namespace {

FuseServer* self(fuse_req_t req) { return static_cast<FuseServer*>(fuse_req_userdata(req)); }

// Calls `handler` of the request's FuseServer with a LibfuseReply for `req`
// (on the stack: no allocation) and the request's arguments.
template <typename... Params, typename... Args>
void serve(void (FuseServer::*handler)(FuseReply&, Params...), fuse_req_t req, Args... args) {
  LibfuseReply reply(req);
  (self(req)->*handler)(reply, args...);
}

void replyReadOnly(fuse_req_t req) { fuse_reply_err(req, EROFS); }

}  // namespace

const fuse_lowlevel_ops& fuseServerOps() {
  static const fuse_lowlevel_ops ops = [] {
    fuse_lowlevel_ops o{};
    o.init = [](void* ud, fuse_conn_info* c) { static_cast<FuseServer*>(ud)->onInit(c); };
    o.lookup = [](fuse_req_t r, fuse_ino_t p, const char* n) {
      serve(&FuseServer::onLookup, r, p, n);
    };
    o.forget = [](fuse_req_t r, fuse_ino_t, uint64_t) { fuse_reply_none(r); };
    o.forget_multi = [](fuse_req_t r, size_t, fuse_forget_data*) { fuse_reply_none(r); };
    o.getattr = [](fuse_req_t r, fuse_ino_t i, fuse_file_info* f) {
      serve(&FuseServer::onGetattr, r, i, f);
    };
    o.readlink = [](fuse_req_t r, fuse_ino_t i) { serve(&FuseServer::onReadlink, r, i); };
    o.open = [](fuse_req_t r, fuse_ino_t i, fuse_file_info* f) {
      serve(&FuseServer::onOpen, r, i, f);
    };
    o.release = [](fuse_req_t r, fuse_ino_t i, fuse_file_info* f) {
      serve(&FuseServer::onRelease, r, i, f);
    };
    o.opendir = [](fuse_req_t r, fuse_ino_t i, fuse_file_info* f) {
      serve(&FuseServer::onOpendir, r, i, f);
    };
    o.releasedir = [](fuse_req_t r, fuse_ino_t, fuse_file_info*) { fuse_reply_err(r, 0); };
    o.read = [](fuse_req_t r, fuse_ino_t i, size_t s, off_t off, fuse_file_info* f) {
      serve(&FuseServer::onRead, r, i, s, off, f);
    };
    o.readdir = [](fuse_req_t r, fuse_ino_t i, size_t s, off_t off, fuse_file_info*) {
      serve(&FuseServer::onReaddir, r, i, s, off, false);
    };
    o.readdirplus = [](fuse_req_t r, fuse_ino_t i, size_t s, off_t off, fuse_file_info*) {
      serve(&FuseServer::onReaddir, r, i, s, off, true);
    };
    o.statfs = [](fuse_req_t r, fuse_ino_t i) { serve(&FuseServer::onStatfs, r, i); };
    o.getxattr = [](fuse_req_t r, fuse_ino_t i, const char* n, size_t s) {
      serve(&FuseServer::onGetxattr, r, i, n, s);
    };
    o.listxattr = [](fuse_req_t r, fuse_ino_t i, size_t s) {
      serve(&FuseServer::onListxattr, r, i, s);
    };
    // No flush handler: libfuse answers ENOSYS once and the kernel stops
    // sending FLUSH on every close() (a round trip per file otherwise).
    o.fsyncdir = [](fuse_req_t r, fuse_ino_t, int, fuse_file_info*) { fuse_reply_err(r, 0); };
    o.fsync = [](fuse_req_t r, fuse_ino_t, int, fuse_file_info*) { fuse_reply_err(r, 0); };
    // Read-only: everything that would change the tree gets EROFS.
    o.setattr = [](fuse_req_t r, fuse_ino_t, struct stat*, int, fuse_file_info*) {
      replyReadOnly(r);
    };
    o.mknod = [](fuse_req_t r, fuse_ino_t, const char*, mode_t, dev_t) { replyReadOnly(r); };
    o.mkdir = [](fuse_req_t r, fuse_ino_t, const char*, mode_t) { replyReadOnly(r); };
    o.unlink = [](fuse_req_t r, fuse_ino_t, const char*) { replyReadOnly(r); };
    o.rmdir = [](fuse_req_t r, fuse_ino_t, const char*) { replyReadOnly(r); };
    o.symlink = [](fuse_req_t r, const char*, fuse_ino_t, const char*) { replyReadOnly(r); };
    o.rename = [](fuse_req_t r, fuse_ino_t, const char*, fuse_ino_t, const char*, unsigned) {
      replyReadOnly(r);
    };
    o.link = [](fuse_req_t r, fuse_ino_t, fuse_ino_t, const char*) { replyReadOnly(r); };
    o.write = [](fuse_req_t r, fuse_ino_t, const char*, size_t, off_t, fuse_file_info*) {
      replyReadOnly(r);
    };
    o.create = [](fuse_req_t r, fuse_ino_t, const char*, mode_t, fuse_file_info*) {
      replyReadOnly(r);
    };
    o.setxattr = [](fuse_req_t r, fuse_ino_t, const char*, const char*, size_t, int) {
      replyReadOnly(r);
    };
    o.removexattr = [](fuse_req_t r, fuse_ino_t, const char*) { replyReadOnly(r); };
    o.fallocate = [](fuse_req_t r, fuse_ino_t, int, off_t, off_t, fuse_file_info*) {
      replyReadOnly(r);
    };
    return o;
  }();
  return ops;
}

}  // namespace epochfs::fusefs
