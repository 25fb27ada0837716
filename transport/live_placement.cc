// LivePlacement: the live set's owners of each file (live_placement.h).
#include "transport/live_placement.h"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace epochfs::transport {

LivePlacement::LivePlacement(uint32_t selfId, unsigned replicas, std::function<void()> onChange)
    : selfId_(selfId), replicas_(replicas), onChange_(std::move(onChange)) {}

LivePlacement::~LivePlacement() {
  std::unique_ptr<PlacementBuilder> placer;
  {
    cache::WriterLock lock(mu_);
    placer = std::move(placer_);
  }
  placer.reset();  // joins the builder: its callback takes mu_
}

bool LivePlacement::startPlacement(std::vector<FileBytes> files) {
  {
    cache::ReaderLock lock(mu_);
    if (placer_ != nullptr) return false;
  }
  uint64_t bytes = 0;
  for (const auto& f : files) bytes += f.bytes;
  auto placer = std::make_unique<PlacementBuilder>(
      std::move(files), replicas_,
      [this](std::shared_ptr<const PlacementTable> t, uint64_t generation) {
        installTable(std::move(t), generation);
      });
  cache::WriterLock lock(mu_);
  datasetBytes_ = bytes;
  placer_ = std::move(placer);
  return true;
}

void LivePlacement::setLive(const std::vector<LiveMember>& members) {
  std::vector<Candidate> live;
  std::vector<uint64_t> capacities;
  bool allKnown = true;
  uint64_t liveCapacity = 0;
  for (const auto& m : members) {
    live.push_back(Candidate{m.id, static_cast<double>(m.capacityBytes)});
    capacities.push_back(m.capacityBytes);
    liveCapacity += m.capacityBytes;
    if (m.capacityBytes == 0) allKnown = false;
  }
  for (auto& c : live) c.weight = allKnown ? c.weight / 1073741824.0 : 1.0;
  PlacementBuilder* placer = nullptr;
  uint64_t generation = 0;
  std::vector<Candidate> forTable;
  {
    cache::WriterLock lock(mu_);
    placer = placer_.get();  // only this thread sets it
    if (placer != nullptr) forTable = live;
    live_ = std::move(live);
    liveCapacity_ = liveCapacity;
    liveCapacityKnown_ = allKnown;
    generation = ++generation_;
    // The old table names members that left or misses ones that came: plain
    // rendezvous until the new one is built (placement_builder.h).
    table_.reset();
  }
  if (placer != nullptr) {
    placer->request(std::move(forTable), std::move(capacities), generation);
  } else if (onChange_) {
    onChange_();
  }
}

void LivePlacement::installTable(std::shared_ptr<const PlacementTable> table, uint64_t generation) {
  size_t live = 0;
  uint64_t capacity = 0, datasetBytes = 0;
  {
    cache::WriterLock lock(mu_);
    if (generation != generation_) return;  // the live set changed again: a newer one comes
    live = live_.size();
    capacity = liveCapacity_;
    datasetBytes = datasetBytes_;
    table_ = table;
  }
  if (!table->fits() && live > 1) {
    spdlog::warn(
        "cluster: the dataset ({} MiB x {} replicas) does not fit {:.0f} % of the live "
        "members' capacity ({} MiB): owned chunks will be evicted and re-read",
        datasetBytes >> 20, replicas_, PlacementTable::kFill * 100, capacity >> 20);
  }
  if (onChange_) onChange_();
}

bool LivePlacement::ownedElsewhere(uint64_t fileId) const {
  cache::ReaderLock lock(mu_);
  if (live_.size() <= 1) return false;
  if (table_ != nullptr) {
    if (const uint32_t* o = table_->ownersOf(fileId)) {
      return std::find(o, o + table_->replicas(), selfId_) == o + table_->replicas();
    }
  }
  auto o = rendezvousOwners(fileId, live_, replicas_);
  return std::find(o.begin(), o.end(), selfId_) == o.end();
}

std::vector<uint32_t> LivePlacement::owners(uint64_t fileId) const {
  cache::ReaderLock lock(mu_);
  if (table_ != nullptr && table_->contains(fileId)) return table_->owners(fileId);
  return rendezvousOwners(fileId, live_, replicas_);
}

Cluster::Fit LivePlacement::fit() const {
  cache::ReaderLock lock(mu_);
  Cluster::Fit f;
  f.replicas = replicas_;
  f.liveCapacityBytes = liveCapacity_;
  f.datasetBytes = datasetBytes_;
  f.ready = !filesPending_.load() && (placer_ == nullptr || table_ != nullptr);
  // Known without waiting for the table.
  if (placer_ != nullptr && live_.size() > 1) {
    f.fits = liveCapacityKnown_ && PlacementTable::holds(datasetBytes_, liveCapacity_, replicas_);
  }
  return f;
}

uint64_t LivePlacement::ownedBytes(uint32_t id) const {
  cache::ReaderLock lock(mu_);
  return table_ != nullptr ? table_->ownedBytes(id) : 0;
}

}  // namespace epochfs::transport
