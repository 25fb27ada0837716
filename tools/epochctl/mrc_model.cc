#include "tools/epochctl/mrc_model.h"

#include <algorithm>
#include <map>
#include <queue>
#include <stdexcept>

namespace epochfs::ctl {

namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Fenwick tree of signed byte counts over positions 0..n-1.
class Fenwick {
 public:
  explicit Fenwick(size_t n) : t_(n + 1, 0) {}
  void add(size_t i, int64_t v) {
    for (++i; i < t_.size(); i += i & (~i + 1)) t_[i] += v;
  }
  int64_t prefix(size_t i) const {  // sum of [0, i)
    int64_t s = 0;
    for (; i > 0; i -= i & (~i + 1)) s += t_[i];
    return s;
  }

 private:
  std::vector<int64_t> t_;
};

}  // namespace

MrcModel::MrcModel(uint32_t chunkSize, std::vector<uint64_t> fileSizes, RamTierShape shape)
    : shape_(shape), chunkSize_(chunkSize), fileSizes_(std::move(fileSizes)) {
  if (chunkSize_ == 0) throw std::invalid_argument("chunk size 0");
  uint64_t items = 0;
  for (uint32_t f = 0; f < fileSizes_.size(); ++f) {
    itemBase_.push_back(static_cast<uint32_t>(items));
    const uint64_t n = (fileSizes_[f] + chunkSize_ - 1) / chunkSize_;
    for (uint64_t i = 0; i < n; ++i) {
      itemBytes_.push_back(
          static_cast<uint32_t>(std::min<uint64_t>(chunkSize_, fileSizes_[f] - i * chunkSize_)));
      itemFile_.push_back(f);
    }
    items += n;
    if (items >= kNever) throw std::length_error("too many chunks for the model");
  }
}

unsigned MrcModel::shardsFor(uint64_t capacity) const {
  unsigned n = 1;
  while (n < shape_.maxShards && capacity / (n * 2ull) >= shape_.minShardBytes) n *= 2;
  return n;
}

void MrcModel::addEpoch(const std::vector<Entry>& entries) {
  const uint32_t firstEntry = static_cast<uint32_t>(entryFile_.size());
  epochStarts_.push_back(firstEntry);
  const bool warm = epochStarts_.size() > 1;
  for (const Entry& e : entries) {
    if (e.file >= fileSizes_.size()) throw std::out_of_range("entry names an unknown file");
    entryFile_.push_back(e.file);
    entryFirst_.push_back(static_cast<uint32_t>(accItem_.size()));
    const uint64_t size = fileSizes_[e.file];
    const uint64_t end = std::min(size, e.offset + e.length);
    if (e.offset >= end) continue;
    for (uint64_t c = e.offset / chunkSize_; c <= (end - 1) / chunkSize_; ++c) {
      const uint32_t item = itemBase_[e.file] + static_cast<uint32_t>(c);
      accItem_.push_back(item);
      accWarm_.push_back(warm ? 1 : 0);
      accessedBytes_ += itemBytes_[item];
      if (warm) warmBytes_ += itemBytes_[item];
    }
    if (accItem_.size() >= kNever) throw std::length_error("trace too long for the model");
  }
  // Next entry of the same file within this epoch.
  entrySameFileNext_.resize(entryFile_.size(), kNever);
  std::vector<uint32_t> seen(fileSizes_.size(), kNever);
  for (uint32_t e = static_cast<uint32_t>(entryFile_.size()); e-- > firstEntry;) {
    entrySameFileNext_[e] = seen[entryFile_[e]];
    seen[entryFile_[e]] = e;
  }
}

uint64_t MrcModel::uniqueBytes() const {
  std::vector<uint8_t> used(itemBytes_.size(), 0);
  uint64_t n = 0;
  for (uint32_t x : accItem_) {
    if (!used[x]) used[x] = 1, n += itemBytes_[x];
  }
  return n;
}

void MrcModel::setChunkShard(uint32_t file, uint32_t chunk, uint8_t shard) {
  if (file >= fileSizes_.size() || chunk >= fileChunks(file)) {
    throw std::out_of_range("shard for an unknown chunk");
  }
  if (itemShard_.empty()) itemShard_.assign(itemBytes_.size(), kNoShard);
  itemShard_[itemBase_[file] + chunk] = shard;
}

uint32_t MrcModel::fileChunks(uint32_t file) const {
  const uint32_t end =
      file + 1 < itemBase_.size() ? itemBase_[file + 1] : static_cast<uint32_t>(itemBytes_.size());
  return end - itemBase_[file];
}

uint32_t MrcModel::shardOf(uint32_t item, unsigned shards) const {
  if (shards == 1) return 0;
  if (!itemShard_.empty() && itemShard_[item] != kNoShard) return itemShard_[item] & (shards - 1);
  return static_cast<uint32_t>((splitmix64(item) >> 40) & (shards - 1));
}

MrcModel::Ratios MrcModel::ratios(const std::vector<uint8_t>& hit) const {
  uint64_t all = 0, warm = 0;
  for (size_t t = 0; t < hit.size(); ++t) {
    if (!hit[t]) continue;
    all += itemBytes_[accItem_[t]];
    if (accWarm_[t]) warm += itemBytes_[accItem_[t]];
  }
  Ratios r;
  r.all = accessedBytes_ ? static_cast<double>(all) / static_cast<double>(accessedBytes_) : 0;
  r.warm = warmBytes_ ? static_cast<double>(warm) / static_cast<double>(warmBytes_) : 0;
  return r;
}

std::vector<uint64_t> MrcModel::stackDistances(unsigned shards) const {
  const size_t n = accItem_.size();
  std::vector<uint64_t> dist(n, UINT64_MAX);
  std::vector<std::vector<uint32_t>> byShard(shards);
  for (uint32_t t = 0; t < n; ++t) byShard[shardOf(accItem_[t], shards)].push_back(t);
  std::vector<uint32_t> last(itemBytes_.size(), kNever);  // local time of the latest use
  for (const auto& seq : byShard) {
    Fenwick bit(seq.size());
    for (uint32_t j = 0; j < seq.size(); ++j) {
      const uint32_t x = accItem_[seq[j]];
      const int64_t size = itemBytes_[x];
      if (last[x] != kNever) {
        dist[seq[j]] = static_cast<uint64_t>(size + bit.prefix(j) - bit.prefix(last[x] + 1));
        bit.add(last[x], -size);
      }
      bit.add(j, size);
      last[x] = j;
    }
  }
  return dist;
}

MrcModel::Ratios MrcModel::lru(const std::vector<uint64_t>& dist, uint64_t capacity,
                               unsigned shards) const {
  std::vector<uint8_t> hit(accItem_.size(), 0);
  for (size_t t = 0; t < hit.size(); ++t) {
    const uint32_t s = shardOf(accItem_[t], shards);
    const uint64_t cap = capacity / shards + (s < capacity % shards ? 1 : 0);
    hit[t] = dist[t] <= cap;
  }
  return ratios(hit);
}

MrcModel::Ratios MrcModel::orderAware(uint64_t capacity, unsigned shards) const {
  const int kVictimScan = shape_.victimScan;
  const uint32_t items = static_cast<uint32_t>(itemBytes_.size());
  // A doubly linked LRU list per shard; node items+s is shard s's sentinel
  // (next: most recent, prev: coldest).
  std::vector<uint32_t> prev(items + shards), next(items + shards);
  for (uint32_t s = 0; s < shards; ++s) prev[items + s] = next[items + s] = items + s;
  std::vector<uint8_t> resident(items, 0);
  std::vector<uint64_t> bytes(shards, 0), cap(shards);
  for (uint32_t s = 0; s < shards; ++s)
    cap[s] = capacity / shards + (s < capacity % shards ? 1 : 0);
  std::vector<uint32_t> nextPos(fileSizes_.size(), kNever);
  auto unlink = [&](uint32_t x) {
    next[prev[x]] = next[x];
    prev[next[x]] = prev[x];
  };
  auto pushFront = [&](uint32_t x, uint32_t head) {
    prev[x] = head;
    next[x] = next[head];
    prev[next[head]] = x;
    next[head] = x;
  };
  auto pushBack = [&](uint32_t x, uint32_t head) {
    next[x] = head;
    prev[x] = prev[head];
    next[prev[head]] = x;
    prev[head] = x;
  };
  auto use = [&](uint32_t x) { return nextPos[itemFile_[x]]; };
  std::vector<uint8_t> hit(accItem_.size(), 0);
  const uint32_t entries = static_cast<uint32_t>(entryFile_.size());
  for (size_t ep = 0; ep < epochStarts_.size(); ++ep) {
    const uint32_t first = epochStarts_[ep];
    const uint32_t last = ep + 1 < epochStarts_.size() ? epochStarts_[ep + 1] : entries;
    // A newly registered order: next uses come from this epoch only.
    std::fill(nextPos.begin(), nextPos.end(), kNever);
    for (uint32_t e = last; e-- > first;) nextPos[entryFile_[e]] = e;
    for (uint32_t e = first; e < last; ++e) {
      const uint32_t a0 = entryFirst_[e];
      const uint32_t a1 =
          e + 1 < entries ? entryFirst_[e + 1] : static_cast<uint32_t>(accItem_.size());
      for (uint32_t t = a0; t < a1; ++t) {
        const uint32_t x = accItem_[t];
        const uint32_t s = shardOf(x, shards);
        const uint32_t head = items + s;
        if (resident[x]) {
          hit[t] = 1;
          unlink(x);
          pushFront(x, head);
          continue;
        }
        const uint64_t n = itemBytes_[x];
        if (n > cap[s]) continue;
        const uint32_t incoming = use(x);
        bool admit = true;
        while (bytes[s] + n > cap[s] && prev[head] != head) {
          uint32_t victim = prev[head];
          uint32_t farthest = use(victim);
          uint32_t c = prev[victim];
          for (int i = 1; i < kVictimScan && c != head && farthest != kNever; ++i, c = prev[c]) {
            if (use(c) > farthest) farthest = use(c), victim = c;
          }
          if (incoming > farthest) {
            admit = false;
            break;
          }
          unlink(victim);
          resident[victim] = 0;
          bytes[s] -= itemBytes_[victim];
        }
        if (!admit) continue;
        resident[x] = 1;
        bytes[s] += n;
        pushFront(x, head);
      }
      // The entry is consumed: its file's next use moves on, its chunks go cold.
      nextPos[entryFile_[e]] = entrySameFileNext_[e];
      for (uint32_t t = a0; t < a1; ++t) {
        const uint32_t x = accItem_[t];
        if (!resident[x]) continue;
        unlink(x);
        pushBack(x, items + shardOf(x, shards));
      }
    }
  }
  return ratios(hit);
}

MrcModel::Ratios MrcModel::belady(uint64_t capacity) const {
  const size_t n = accItem_.size();
  std::vector<uint32_t> nextUse(n, kNever);
  {
    std::vector<uint32_t> seen(itemBytes_.size(), kNever);
    for (size_t t = n; t-- > 0;) {
      nextUse[t] = seen[accItem_[t]];
      seen[accItem_[t]] = static_cast<uint32_t>(t);
    }
  }
  std::vector<uint8_t> resident(itemBytes_.size(), 0), hit(n, 0);
  std::vector<uint32_t> key(itemBytes_.size(), kNever);
  std::priority_queue<std::pair<uint32_t, uint32_t>> heap;  // (next use, item), farthest on top
  uint64_t bytes = 0;
  for (size_t t = 0; t < n; ++t) {
    const uint32_t x = accItem_[t];
    if (resident[x]) {
      hit[t] = 1;
      key[x] = nextUse[t];
      heap.push({key[x], x});
      continue;
    }
    const uint64_t size = itemBytes_[x];
    if (nextUse[t] == kNever || size > capacity) continue;  // never again: do not admit
    while (bytes + size > capacity) {
      while (!heap.empty() &&
             (!resident[heap.top().second] || key[heap.top().second] != heap.top().first)) {
        heap.pop();
      }
      if (heap.empty() || heap.top().first < nextUse[t]) break;  // all needed sooner
      const uint32_t v = heap.top().second;
      heap.pop();
      resident[v] = 0;
      bytes -= itemBytes_[v];
    }
    if (bytes + size > capacity) continue;
    resident[x] = 1;
    bytes += size;
    key[x] = nextUse[t];
    heap.push({key[x], x});
  }
  return ratios(hit);
}

std::vector<MrcModel::Point> MrcModel::run(const std::vector<uint64_t>& cacheSizes) const {
  std::map<unsigned, std::vector<uint64_t>> distances;
  std::vector<Point> out;
  for (uint64_t c : cacheSizes) {
    Point p;
    p.cacheBytes = c;
    p.shards = shardsFor(c);
    auto it = distances.find(p.shards);
    if (it == distances.end()) it = distances.emplace(p.shards, stackDistances(p.shards)).first;
    p.lru = lru(it->second, c, p.shards);
    p.orderAware = orderAware(c, p.shards);
    p.belady = belady(c);
    out.push_back(p);
  }
  return out;
}

}  // namespace epochfs::ctl
