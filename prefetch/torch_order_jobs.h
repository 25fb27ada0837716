// TorchOrderJobs: the zero-change orders of one daemon, one TorchOrderFollower
// per job (the mount whose --order torch-distributed:... it follows), so
// mounts of one dataset each follow their own sampler (seed, world, ranks).
// The dataset's sample list (ImageFolder's order) is made once, on a thread
// of its own at the first follow(), and shared by every follower; a follow()
// before it is ready starts its follower when it is.
// Thread-safety: every method may be called from any thread; onRead() (every
// file read from its start) takes a mutex only while some job follows an
// order, to find its job's follower.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "cache/mutex.h"
#include "prefetch/torch_order_follower.h"

namespace epochfs::prefetch {

class TorchOrderJobs {
 public:
  // Lists the dataset's samples (once); nullopt: it cannot, nothing is followed.
  using ListSamples = std::function<std::optional<TorchSamples>()>;

  TorchOrderJobs(Prefetcher& prefetcher, ListSamples list);
  ~TorchOrderJobs();  // the listing thread, then every follower, end

  // `job` follows `spec` (replacing what it followed).
  void follow(uint32_t job, const TorchOrderSpec& spec);
  // `job` follows nothing any more (its mount went away).
  void end(uint32_t job);
  void onRead(uint64_t fileId, uint32_t job);
  // The epoch `job`'s follower detected (-1: not yet); nullopt: `job`
  // follows no zero-change order.
  std::optional<int64_t> epoch(uint32_t job) const;
  bool any() const;
  // The samples are listed: a follow() starts its follower at once, and
  // reads reach it (reads before are not seen).
  bool listed() const;

 private:
  void list();  // the listing thread
  void startLocked(uint32_t job, const TorchOrderSpec& spec) REQUIRES(mu_);

  Prefetcher& prefetcher_;
  ListSamples list_;
  mutable cache::Mutex mu_;
  std::shared_ptr<const TorchSamples> samples_ GUARDED_BY(mu_);  // null until listed
  bool listingStarted_ GUARDED_BY(mu_) = false;
  bool listingFailed_ GUARDED_BY(mu_) = false;
  // Waiting for samples_.
  std::vector<std::pair<uint32_t, TorchOrderSpec>> pending_ GUARDED_BY(mu_);
  std::map<uint32_t, std::unique_ptr<TorchOrderFollower>> followers_ GUARDED_BY(mu_);
  std::atomic<bool> following_{false};  // !followers_.empty(), read without mu_
  // Started once under mu_ (listingStarted_), joined by the destructor.
  std::thread listing_;
};

}  // namespace epochfs::prefetch
