#include "fusefs/kernel_page_pusher.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>

namespace epochfs::fusefs {

KernelPagePusher::KernelPagePusher(FuseServer& fuse, const DatasetNamespace& ns,
                                   const FileIndex& files)
    : fuse_(fuse), ns_(ns), files_(files) {}

void KernelPagePusher::close() {
  cache::WriterLock lock(mu_);
  closed_ = true;
}

prefetch::PagePusher::Outcome KernelPagePusher::push(const cache::FileIdentity& id,
                                                     const std::vector<cache::ChunkRef>& chunks) {
  cache::ReaderLock lock(mu_);
  fuse_session* se = fuse_.session();
  if (closed_ || se == nullptr) return Outcome::kSkipped;
  const DatasetNamespace::Ino ino = files_.find(id.fileId);
  if (ino == 0) return Outcome::kSkipped;
  if (!(ns_.identity(ino) == id)) return Outcome::kSkipped;  // changed in the source
  // A changed file's old pages may still be in the kernel (the first open
  // after the change would drop them, and with it what we push now): drop
  // them first, so the next open keeps the new pages.
  if (fuse_.takeStalePages(ino)) fuse_lowlevel_notify_inval_inode(se, ino, 0, 0);
  uint64_t offset = 0;
  for (const cache::ChunkRef& c : chunks) {
    if (c->size() == 0) break;
    fuse_bufvec bv = FUSE_BUFVEC_INIT(c->size());
    bv.buf[0].mem = const_cast<char*>(c->data.data());
    const int rc = fuse_lowlevel_notify_store(se, ino, static_cast<off_t>(offset), &bv,
                                              static_cast<fuse_buf_copy_flags>(0));
    if (rc == -ENOENT) return Outcome::kSkipped;  // the kernel has no inode for it
    if (rc != 0) {
      spdlog::debug("push {}: notify_store: {}", ns_.path(ino), std::strerror(-rc));
      return Outcome::kFailed;
    }
    offset += c->size();
  }
  // Changed while we pushed (--revalidate): the invalidation the change
  // queued may have run before our store, so drop the pages again.
  if (!(ns_.identity(ino) == id)) {
    fuse_lowlevel_notify_inval_inode(se, ino, 0, 0);
    return Outcome::kSkipped;
  }
  return Outcome::kPushed;
}

}  // namespace epochfs::fusefs
