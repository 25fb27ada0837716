// DiskIoPool: a few threads that run the disk tier's blocking I/O, so that a
// reader waits for the disk at most a deadline. A stalled disk keeps a pool
// thread in pread/pwrite (it cannot be interrupted); the reader stops waiting
// at the deadline and goes to the source, and the job finishes (or not) on
// its own. The queue is bounded: when it is full a job is refused at once.
//
// Thread-safety: run() may be called from any thread. The destructor stops
// accepting jobs, lets queued and running jobs finish, and joins the threads;
// so a job may use its owner as long as the owner destroys the pool first.
#pragma once

#include <chrono>
#include <cstddef>
#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "cache/mutex.h"

namespace epochfs::cache {

class DiskIoPool {
 public:
  enum class Outcome {
    kDone,      // the job ran and returned within the deadline
    kTimedOut,  // still queued or running; it will run to completion later
    kBusy,      // the queue was full (or the pool stopping): the job was not run
  };

  DiskIoPool(int threads, size_t maxQueued);
  ~DiskIoPool();
  DiskIoPool(const DiskIoPool&) = delete;
  DiskIoPool& operator=(const DiskIoPool&) = delete;

  // Runs `job` on a pool thread and waits up to `deadline` for it. The job
  // must own what it touches (it may outlive this call).
  Outcome run(std::function<void()> job, std::chrono::milliseconds deadline) EXCLUDES(mu_);

 private:
  void loop() EXCLUDES(mu_);

  const size_t maxQueued_;
  Mutex mu_;
  CondVar cv_;
  std::deque<std::function<void()>> queue_ GUARDED_BY(mu_);
  bool stopping_ GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;  // set by the constructor, joined by the destructor
};

}  // namespace epochfs::cache
