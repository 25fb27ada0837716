#include "cache/peer_staging.h"

namespace epochfs::cache {

PeerStaging::PeerStaging(uint64_t capacityBytes, std::chrono::milliseconds staleAfter)
    : capacity_(capacityBytes), staleAfter_(staleAfter) {}

ChunkRef PeerStaging::lookup(const ChunkKey& key, const FileIdentity& id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(key.hash);
  if (it == entries_.end()) return nullptr;
  if (!(it->second.chunk->identity == id)) return nullptr;  // another version: never served
  return it->second.chunk;
}

bool PeerStaging::insert(const ChunkRef& chunk) {
  if (!chunk || chunk->size() > capacity_) return false;
  std::lock_guard<std::mutex> lock(mu_);
  auto old = entries_.find(chunk->key.hash);
  if (old != entries_.end()) {
    used_ -= old->second.chunk->size();
    oldestFirst_.erase(old->second.age);
    entries_.erase(old);
  }
  const Clock::time_point now = Clock::now();
  while (used_ + chunk->size() > capacity_ && !oldestFirst_.empty()) {
    auto victim = entries_.find(oldestFirst_.front());
    if (now - victim->second.staged < staleAfter_) {
      refused_.fetch_add(1, std::memory_order_relaxed);
      return false;  // everything staged is still to be read soon
    }
    used_ -= victim->second.chunk->size();
    entries_.erase(victim);
    oldestFirst_.pop_front();
    ++evictions_;
  }
  oldestFirst_.push_back(chunk->key.hash);
  entries_.emplace(chunk->key.hash, Entry{chunk, std::prev(oldestFirst_.end()), now});
  used_ += chunk->size();
  admitted_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

bool PeerStaging::contains(const ChunkKey& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.count(key.hash) != 0;
}

void PeerStaging::erase(const ChunkKey& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(key.hash);
  if (it == entries_.end()) return;
  used_ -= it->second.chunk->size();
  oldestFirst_.erase(it->second.age);
  entries_.erase(it);
  consumed_.fetch_add(1, std::memory_order_relaxed);
}

bool PeerStaging::hasRoom(uint64_t bytes) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (used_ + bytes <= capacity_) return true;
  if (oldestFirst_.empty()) return false;
  return Clock::now() - entries_.at(oldestFirst_.front()).staged >= staleAfter_;
}

uint64_t PeerStaging::bytesUsed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return used_;
}

TierUsage PeerStaging::usage() const {
  std::lock_guard<std::mutex> lock(mu_);
  TierUsage u;
  u.bytesUsed = used_;
  u.capacityBytes = capacity_;
  u.chunks = entries_.size();
  u.evictions = evictions_;
  return u;
}

}  // namespace epochfs::cache
