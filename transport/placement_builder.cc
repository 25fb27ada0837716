#include "transport/placement_builder.h"

#include <utility>

namespace epochfs::transport {

PlacementBuilder::PlacementBuilder(std::vector<FileBytes> files, unsigned replicas, Done done)
    : files_(std::move(files)), replicas_(replicas), done_(std::move(done)) {
  thread_ = std::thread([this] { run(); });
}

PlacementBuilder::~PlacementBuilder() {
  {
    cache::MutexLock lock(mu_);
    stop_ = true;
  }
  cv_.notifyAll();
  thread_.join();
}

void PlacementBuilder::request(std::vector<Candidate> live, std::vector<uint64_t> capacityBytes,
                               uint64_t generation) {
  {
    cache::MutexLock lock(mu_);
    pending_ = Request{std::move(live), std::move(capacityBytes), generation};
  }
  cv_.notifyOne();
}

void PlacementBuilder::run() {
  for (;;) {
    Request r;
    {
      cache::MutexLock lock(mu_);
      cv_.wait(mu_, [&]() REQUIRES(mu_) { return stop_ || pending_.has_value(); });
      if (stop_) return;
      r = std::move(*pending_);
      pending_.reset();
    }
    auto table = std::make_shared<const PlacementTable>(
        PlacementTable::build(files_, r.live, r.capacityBytes, replicas_));
    done_(std::move(table), r.generation);
  }
}

}  // namespace epochfs::transport
