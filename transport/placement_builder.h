// PlacementBuilder: builds PlacementTables on a thread of its own. A table
// over a large dataset takes long (`placement-bench`: about 0.5 s for a
// million files and 1,024 nodes, 4 s for 10 million, here), and the live set
// changes on the UCX progress thread, which must not stall for that. request() replaces any
// request not yet started; one build runs at a time; the latest request is
// always built; `done` is called on the builder thread with each table and
// the generation it was requested for.
// Thread-safety: request() from any thread; the destructor stops and joins
// (a build in progress finishes first).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "cache/mutex.h"
#include "transport/placement_table.h"

namespace epochfs::transport {

class PlacementBuilder {
 public:
  using Done = std::function<void(std::shared_ptr<const PlacementTable>, uint64_t generation)>;

  PlacementBuilder(std::vector<FileBytes> files, unsigned replicas, Done done);
  ~PlacementBuilder();
  PlacementBuilder(const PlacementBuilder&) = delete;
  PlacementBuilder& operator=(const PlacementBuilder&) = delete;

  void request(std::vector<Candidate> live, std::vector<uint64_t> capacityBytes,
               uint64_t generation);

 private:
  struct Request {
    std::vector<Candidate> live;
    std::vector<uint64_t> capacityBytes;
    uint64_t generation = 0;
  };
  void run();

  const std::vector<FileBytes> files_;
  const unsigned replicas_;
  const Done done_;
  cache::Mutex mu_;
  cache::CondVar cv_;  // a request, or stop
  std::optional<Request> pending_ GUARDED_BY(mu_);
  bool stop_ GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: starts once everything above exists
};

}  // namespace epochfs::transport
