#include "transport/placement_builder.h"

#include <utility>

namespace epochfs::transport {

PlacementBuilder::PlacementBuilder(std::vector<FileBytes> files, unsigned replicas, Done done)
    : files_(std::move(files)), replicas_(replicas), done_(std::move(done)) {
  thread_ = std::thread([this] { run(); });
}

PlacementBuilder::~PlacementBuilder() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void PlacementBuilder::request(std::vector<Candidate> live, std::vector<uint64_t> capacityBytes,
                               uint64_t generation) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending_ = Request{std::move(live), std::move(capacityBytes), generation};
  }
  cv_.notify_one();
}

void PlacementBuilder::run() {
  for (;;) {
    Request r;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || pending_.has_value(); });
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
