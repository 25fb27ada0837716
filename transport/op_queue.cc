// OpQueue: the progress thread's inbox and wake-up (op_queue.h).
#include "transport/op_queue.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>

namespace epochfs::transport {

OpQueue::OpQueue() : fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}

OpQueue::~OpQueue() {
  if (fd_ >= 0) close(fd_);
}

cache::Status OpQueue::status() const {
  return fd_ >= 0 ? cache::Status::ok() : cache::Status::ioError("eventfd failed");
}

void OpQueue::post(ClusterOp op) {
  {
    cache::MutexLock lock(mu_);
    ops_.push_back(std::move(op));
  }
  queued_.store(true);
  if (sleeping_.load()) wake();
}

void OpQueue::wake() {
  uint64_t one = 1;
  if (fd_ >= 0) (void)!write(fd_, &one, sizeof one);
}

std::deque<ClusterOp> OpQueue::take() {
  std::deque<ClusterOp> ops;
  cache::MutexLock lock(mu_);
  ops.swap(ops_);
  queued_.store(false);
  return ops;
}

bool OpQueue::trySleep() {
  sleeping_.store(true);
  if (!queued_.load()) return true;
  sleeping_.store(false);
  return false;
}

void OpQueue::awake(bool signalled) {
  sleeping_.store(false);
  if (!signalled) return;
  uint64_t v;
  (void)!read(fd_, &v, sizeof v);
}

}  // namespace epochfs::transport
