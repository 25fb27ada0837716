#include "cache/disk_io_pool.h"

#include <memory>

namespace epochfs::cache {

namespace {

struct Completion {
  Mutex mu;
  CondVar cv;
  bool done GUARDED_BY(mu) = false;
};

}  // namespace

DiskIoPool::DiskIoPool(int threads, size_t maxQueued) : maxQueued_(maxQueued) {
  threads_.reserve(static_cast<size_t>(threads));
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { loop(); });
}

DiskIoPool::~DiskIoPool() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  cv_.notifyAll();
  for (auto& t : threads_) t.join();
}

void DiskIoPool::loop() {
  for (;;) {
    std::function<void()> job;
    {
      MutexLock lock(mu_);
      cv_.wait(mu_, [&]() REQUIRES(mu_) { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping and drained
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    job();
  }
}

DiskIoPool::Outcome DiskIoPool::run(std::function<void()> job, std::chrono::milliseconds deadline) {
  auto completion = std::make_shared<Completion>();
  {
    MutexLock lock(mu_);
    if (stopping_ || queue_.size() >= maxQueued_) return Outcome::kBusy;
    queue_.emplace_back([completion, job = std::move(job)] {
      job();
      {
        MutexLock l(completion->mu);
        completion->done = true;
      }
      completion->cv.notifyOne();
    });
  }
  cv_.notifyOne();
  MutexLock lock(completion->mu);
  return completion->cv.waitFor(completion->mu, deadline,
                                [&]() REQUIRES(completion->mu) { return completion->done; })
             ? Outcome::kDone
             : Outcome::kTimedOut;
}

}  // namespace epochfs::cache
