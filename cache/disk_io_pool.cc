#include "cache/disk_io_pool.h"

#include <memory>

namespace epochfs::cache {

namespace {

struct Completion {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
};

}  // namespace

DiskIoPool::DiskIoPool(int threads, size_t maxQueued) : maxQueued_(maxQueued) {
  threads_.reserve(static_cast<size_t>(threads));
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { loop(); });
}

DiskIoPool::~DiskIoPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void DiskIoPool::loop() {
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
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
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ || queue_.size() >= maxQueued_) return Outcome::kBusy;
    queue_.emplace_back([completion, job = std::move(job)] {
      job();
      {
        std::lock_guard<std::mutex> l(completion->mu);
        completion->done = true;
      }
      completion->cv.notify_one();
    });
  }
  cv_.notify_one();
  std::unique_lock<std::mutex> lock(completion->mu);
  return completion->cv.wait_for(lock, deadline, [&] { return completion->done; })
             ? Outcome::kDone
             : Outcome::kTimedOut;
}

}  // namespace epochfs::cache
