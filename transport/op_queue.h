// OpQueue: what other threads hand the progress thread (a request to send, a
// reply to send, a peer to suspect, the files to place), and the eventfd
// that wakes it from epoll. No UCX.
//
// The wake-up protocol: post() writes the eventfd only while the consumer
// sleeps or is about to. The consumer calls trySleep() before epoll_wait and
// awake() after it; trySleep() refuses when something was posted meanwhile.
// Both sides store their flag then load the other's (seq_cst), so one of
// them sees the other: no wake-up is lost and an awake consumer costs a
// poster no system call.
//
// Threading: post() and wake() from any thread; take(), trySleep() and
// awake() on the one consumer thread.
#pragma once

#include <atomic>
#include <deque>
#include <memory>
#include <vector>

#include "cache/chunk.h"
#include "cache/mutex.h"
#include "cache/status.h"
#include "transport/placement_table.h"
#include "transport/request_table.h"
#include "transport/wire_format.h"

namespace epochfs::transport {

struct ClusterOp {
  std::shared_ptr<PendingFetch> fetch;            // a request to send, or
  uint64_t connId = 0;                            // a reply to send on an inbound connection, or
  int suspect = -1;                               // a peer to mark suspect (bad payloads), or
  std::shared_ptr<std::vector<FileBytes>> files;  // the files to place (setFiles)
  wire::Reply reply;
  cache::ChunkRef chunk;
};

class OpQueue {
 public:
  OpQueue();
  ~OpQueue();
  OpQueue(const OpQueue&) = delete;
  OpQueue& operator=(const OpQueue&) = delete;

  // The eventfd's error, if it could not be made.
  cache::Status status() const;
  int fd() const { return fd_; }

  void post(ClusterOp op);
  // Wakes the consumer whether or not anything is queued (to stop it).
  void wake();
  std::deque<ClusterOp> take();
  // True: sleep now (the eventfd will be written for a post). False: ops
  // came meanwhile; take them instead.
  bool trySleep();
  // After epoll_wait returned: reads the eventfd if `signalled`.
  void awake(bool signalled);

 private:
  int fd_ = -1;
  cache::Mutex mu_;
  std::deque<ClusterOp> ops_ GUARDED_BY(mu_);
  std::atomic<bool> queued_{false};    // ops_ is not empty (read without mu_)
  std::atomic<bool> sleeping_{false};  // the consumer is in (or entering) epoll_wait
};

}  // namespace epochfs::transport
