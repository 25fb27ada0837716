#include "fusefs/daemon/periodic_thread.h"

namespace epochfs::fusefs {

void PeriodicThread::start(std::chrono::milliseconds period, std::function<void()> tick) {
  thread_ = std::thread([this, period, tick = std::move(tick)] {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stopping_) {
      lock.unlock();
      tick();
      lock.lock();
      cv_.wait_for(lock, period, [this] { return stopping_; });
    }
  });
}

void PeriodicThread::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

}  // namespace epochfs::fusefs
