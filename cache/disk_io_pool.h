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
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

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
  Outcome run(std::function<void()> job, std::chrono::milliseconds deadline);

 private:
  void loop();

  const size_t maxQueued_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;  // guarded by mu_
  bool stopping_ = false;                    // guarded by mu_
  std::vector<std::thread> threads_;
};

}  // namespace epochfs::cache
