// CallGate: holds one call of a fake (an advisor, a view, a peer) so that a
// test can act while the call is in progress: arm() it, and the next call
// that pass()es blocks until release(); waitHeld() returns once one does.
// waitsForHeldCall() checks that an operation (ending a Lease) waits for the
// held call.
// Thread-safety: every method may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace epochfs::cache::testing {

class CallGate {
 public:
  void arm() { armed_.store(true); }
  // Called by the fake: blocks the first call after arm() until release().
  void pass() const {
    if (!armed_.exchange(false)) return;
    std::unique_lock<std::mutex> lock(mu_);
    held_ = true;
    cv_.notify_all();
    cv_.wait(lock, [&] { return released_; });
  }
  bool waitHeld(std::chrono::seconds timeout = std::chrono::seconds(10)) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return held_; });
  }
  void release() {
    std::lock_guard<std::mutex> lock(mu_);
    released_ = true;
    cv_.notify_all();
  }

 private:
  mutable std::atomic<bool> armed_{false};
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  mutable bool held_ = false;
  bool released_ = false;
};

// Once `gate` holds a call, runs `op` on another thread; true when `op`
// returned only after the call was let go. The grace period before the
// release is the time an `op` that does not wait would need to return.
// Releases the gate.
inline bool waitsForHeldCall(CallGate& gate, const std::function<void()>& op) {
  if (!gate.waitHeld()) return false;
  std::atomic<bool> done{false};
  std::thread t([&] {
    op();
    done.store(true);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const bool early = done.load();
  gate.release();
  t.join();
  return !early && done.load();
}

}  // namespace epochfs::cache::testing
