// TorchOrderFollower: the zero-change mode (--order torch-distributed:...).
// It reproduces torch's DistributedSampler order over ImageFolder's sample
// list for the ranks on this node, so an unchanged training script gets
// prefetch and order-aware eviction. The epoch is not told: it is detected
// from the first reads (the candidate epoch whose order puts those files
// earliest wins), and a new epoch is detected when samples already read in
// the current one are read again.
// Thread-safety: onRead() may be called from any thread (it only enqueues);
// the work happens on the follower's own thread.
#pragma once

#include <concurrentqueue/concurrentqueue.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

#include "prefetch/access_plan.h"
#include "prefetch/prefetcher.h"

namespace epochfs::prefetch {

// `samples[i]` is dataset index i (ImageFolder order); nullopt for a sample
// that cannot be cached (e.g. a symlink leaving the dataset).
using TorchSamples = std::vector<std::optional<PlanEntry>>;

struct TorchOrderSpec {
  uint64_t seed = 0;
  int world = 1;
  std::vector<int> ranks{0};  // the ranks reading on this node
  bool dropLast = false;
  int64_t maxEpochSearch = 200;  // candidate epochs considered when detecting
};

class TorchOrderFollower {
 public:
  static constexpr size_t kDetectReads = 16;

  // Its plans are `job`'s (AccessPlan::job: the mount it follows).
  TorchOrderFollower(const TorchOrderSpec& spec, std::shared_ptr<const TorchSamples> samples,
                     Prefetcher& prefetcher, uint32_t job = 0);
  ~TorchOrderFollower();

  void onRead(uint64_t fileId) { reads_.enqueue(fileId); }
  // -1 until detected.
  int64_t epoch() const { return epoch_.load(); }

  // The epoch whose rank orders put `sampleIndexes` earliest (public for tests).
  int64_t detectEpoch(const std::vector<int64_t>& sampleIndexes, int64_t preferred) const;

 private:
  void run();
  // `alreadyRead`: samples of this epoch read before it was detected; they
  // are left out of the plan's first half (they must not be fetched again).
  void startEpoch(int64_t epoch, const std::vector<int64_t>& alreadyRead);
  // Appends the samples of every read still queued to `reads`.
  void drainInto(std::vector<int64_t>& reads);
  std::vector<int64_t> rankOrder(int64_t epoch, int rank) const;

  TorchOrderSpec spec_;
  std::shared_ptr<const TorchSamples> samplesOwner_;
  const TorchSamples& samples_;
  uint32_t job_;
  std::unordered_map<uint64_t, int64_t> sampleOf_;  // fileId -> dataset index
  Prefetcher& prefetcher_;
  moodycamel::ConcurrentQueue<uint64_t> reads_;
  std::atomic<int64_t> epoch_{-1};
  std::vector<uint8_t> readThisEpoch_;  // follower thread only
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace epochfs::prefetch
