// PeriodicThread: one thread that runs a function once a period until
// stopped; stop() wakes it at once (no sleep to wait out) and joins it. The
// daemon's background duties (memory_pressure_watcher.h,
// allocator_trimmer.h) each own one.
// Thread-safety: start()/stop() from one thread; stop() is idempotent.
#pragma once

#include <chrono>
#include <functional>
#include <thread>

#include "cache/mutex.h"

namespace epochfs::fusefs {

class PeriodicThread {
 public:
  PeriodicThread() = default;
  ~PeriodicThread() { stop(); }
  PeriodicThread(const PeriodicThread&) = delete;
  PeriodicThread& operator=(const PeriodicThread&) = delete;

  // Runs `tick` now and then every `period` (after the previous tick ends).
  void start(std::chrono::milliseconds period, std::function<void()> tick);
  void stop();

 private:
  cache::Mutex mu_;
  cache::CondVar cv_;  // with mu_: stopping_ set
  bool stopping_ GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace epochfs::fusefs
