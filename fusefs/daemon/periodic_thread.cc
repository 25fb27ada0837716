#include "fusefs/daemon/periodic_thread.h"

namespace epochfs::fusefs {

void PeriodicThread::start(std::chrono::milliseconds period, std::function<void()> tick) {
  thread_ = std::thread([this, period, tick = std::move(tick)] {
    cache::MutexLock lock(mu_);
    while (!stopping_) {
      lock.unlock();
      tick();
      lock.lock();
      cv_.waitFor(mu_, period, [this]() REQUIRES(mu_) { return stopping_; });
    }
  });
}

void PeriodicThread::stop() {
  {
    cache::MutexLock lock(mu_);
    stopping_ = true;
  }
  cv_.notifyAll();
  if (thread_.joinable()) thread_.join();
}

}  // namespace epochfs::fusefs
