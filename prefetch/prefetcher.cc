#include "prefetch/prefetcher.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

namespace epochfs::prefetch {

namespace {

int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

struct Prefetcher::Stream {
  explicit Stream(std::shared_ptr<const AccessPlan> p)
      : plan(std::move(p)), state(new std::atomic<uint8_t>[plan->size()]) {
    for (size_t i = 0; i < plan->size(); ++i) state[i].store(0, std::memory_order_relaxed);
    issued = plan->start();
    sweptTo.store(plan->start());
    const int64_t now = nowNs();
    lastProgressNs.store(now);
    rateSinceNs = now;
  }
  uint64_t progress() const { return plan->start() + consumed.load(std::memory_order_relaxed); }
  bool isConsumed(uint64_t pos) const {
    return (state[pos].load(std::memory_order_relaxed) & kConsumed) != 0;
  }

  // kOpened, kPushed: page-cache push with position from opens.
  static constexpr uint8_t kConsumed = 1, kPrefetched = 2, kOpened = 4, kPushed = 8;

  std::shared_ptr<const AccessPlan> plan;
  std::unique_ptr<std::atomic<uint8_t>[]> state;  // k* bits per entry
  std::atomic<uint64_t> consumed{0};
  std::atomic<uint64_t> highest{0};  // highest consumed position + 1
  std::atomic<int64_t> lastProgressNs{0};
  std::atomic<uint64_t> stalls{0}, hits{0}, prefetchedFiles{0}, prefetchedBytes{0};
  std::atomic<uint64_t> ahead{0};  // entries prefetched and not yet consumed
  std::atomic<double> filesPerSecond{0};
  std::atomic<bool> expired{false};
  std::atomic<uint64_t> sweptTo{0};  // sentinel mode: pushed entries before it are consumed
  // Scheduler thread only.
  uint64_t issued = 0;  // next position to prefetch
  int64_t rateSinceNs = 0;
  uint64_t rateSinceConsumed = 0;
};

Prefetcher::Prefetcher(const PrefetchOptions& options, cache::ChunkCache& cache)
    : options_(options),
      cache_(cache),
      streams_(std::make_shared<Streams>()),
      wakeEvery_(std::max<uint64_t>(1, options.windowFiles / 32)) {
  scheduler_ = std::thread([this] { schedulerLoop(); });
  for (unsigned i = 0; i < std::max(1u, options_.workers); ++i) {
    workers_.emplace_back([this] { workerLoop(); });
  }
}

Prefetcher::~Prefetcher() {
  stopping_.store(true);
  schedCv_.notify_all();
  scheduler_.join();
  for (auto& w : workers_) w.join();
}

std::shared_ptr<const Prefetcher::Streams> Prefetcher::streams() const {
  std::lock_guard<std::mutex> lock(streamsMu_);
  return streams_;
}

void Prefetcher::setPlan(std::shared_ptr<const AccessPlan> plan) {
  auto stream = std::make_shared<Stream>(std::move(plan));
  {
    std::lock_guard<std::mutex> lock(streamsMu_);
    auto next = std::make_shared<Streams>();
    for (const auto& s : *streams_) {
      if (s->plan->rank() != stream->plan->rank()) {
        next->push_back(s);
      } else {
        s->expired.store(true);  // its queued prefetch tasks are dropped, not fetched
      }
    }
    next->push_back(stream);
    streams_ = std::move(next);
    live_.store(true);
  }
  offPlanStreak_.store(0);
  spdlog::info("prefetch: plan for rank {} epoch {}: {} entries from position {}",
               stream->plan->rank(), stream->plan->epoch(), stream->plan->size(),
               stream->plan->start());
  schedCv_.notify_all();
}

void Prefetcher::clear() {
  std::lock_guard<std::mutex> lock(streamsMu_);
  for (const auto& s : *streams_) s->expired.store(true);
  streams_ = std::make_shared<Streams>();
  live_.store(false);
}

void Prefetcher::expire(const char* why) {
  spdlog::info("prefetch: plans expired ({})", why);
  clear();
}

void Prefetcher::retire(const cache::ChunkKey& key) {
  // A guest (another node's chunk) whose next use lies beyond the window
  // leaves at once: until then it would only hold room. Everything else
  // becomes the first to go of its class. (Ownership first: it is cheaper
  // than the next-use scan, and owned chunks are only demoted anyway.)
  if (cache_.ownedElsewhere(key.fileId) && nextUse(key) > options_.windowFiles) {
    cache_.ram().release(key);
  } else {
    cache_.ram().demote(key);
  }
}

void Prefetcher::demote(const PlanEntry& e) {
  const uint32_t cs = cache_.chunkSize();
  const uint64_t end = std::min(e.identity.size, e.offset + e.length);
  for (uint64_t off = e.offset - e.offset % cs; off < end; off += cs) {
    const cache::ChunkKey key = cache_.keyFor(e.identity.fileId, static_cast<uint32_t>(off / cs));
    retire(key);
  }
}

namespace {

// A whole-file entry: what an open names, and what can be pushed.
bool wholeFile(const PlanEntry& e) { return e.offset == 0 && e.length >= e.identity.size; }

}  // namespace

std::shared_ptr<Prefetcher::Stream> Prefetcher::nearestEntry(
    uint64_t fileId, const std::function<bool(const Stream&, uint32_t)>& eligible, uint32_t* pos,
    bool* planned) const {
  // One access is one entry of one stream: the plans of other ranks (or the
  // next epoch, in the zero-change mode's two-epoch plans) may name the same
  // file, and must not see it consumed. The entry nearest its stream's
  // position is the one being read.
  auto all = streams();
  std::shared_ptr<Stream> best;
  uint64_t bestDistance = UINT64_MAX;
  for (const auto& s : *all) {
    const auto* positions = s->plan->positionsOf(fileId);
    if (positions == nullptr) continue;
    *planned = true;
    for (uint32_t p : *positions) {
      if (p < s->plan->start() || s->isConsumed(p) || !eligible(*s, p)) continue;
      const uint64_t progress = s->progress();
      const uint64_t distance = p > progress ? p - progress : 0;
      if (distance < bestDistance) best = s, *pos = p, bestDistance = distance;
      break;
    }
  }
  return best;
}

void Prefetcher::consume(Stream& s, uint32_t pos) {
  const uint8_t before = s.state[pos].fetch_or(Stream::kConsumed);
  if ((before & Stream::kConsumed) != 0) return;
  if (before & Stream::kPrefetched) s.ahead.fetch_sub(1, std::memory_order_relaxed);
  demote(s.plan->at(pos));
  const uint64_t consumed = s.consumed.fetch_add(1, std::memory_order_relaxed) + 1;
  uint64_t h = s.highest.load(std::memory_order_relaxed);
  while (h < pos + 1u && !s.highest.compare_exchange_weak(h, pos + 1u)) {
  }
  // The window moved by one entry. Waking the scheduler for each costs two
  // context switches per file; a batch of wakeEvery_ keeps the lead within
  // a few percent of its bound (and the scheduler's 20 ms tick catches up).
  if (consumed % wakeEvery_ == 0) schedCv_.notify_one();
}

void Prefetcher::sweepPushed(Stream& s, uint32_t pos) {
  const uint64_t every = options_.pushSentinelEvery;
  if (every == 0 || pusher_.load() == nullptr) return;
  const uint64_t slack = 2 * every;
  const uint64_t target = pos + 1 > slack ? pos + 1 - slack : 0;
  uint64_t from = s.sweptTo.load();
  do {
    if (from >= target) return;
  } while (!s.sweptTo.compare_exchange_weak(from, target));
  // [from, target) is ours alone: entries pushed there are read from the
  // page cache by now (or were skipped by the loader).
  for (uint64_t p = from; p < target; ++p) {
    if (s.state[p].load(std::memory_order_relaxed) & Stream::kPushed) {
      consume(s, static_cast<uint32_t>(p));
    }
  }
}

void Prefetcher::countDeviation(bool planned) {
  if (planned) {
    offPlanStreak_.store(0, std::memory_order_relaxed);
  } else if (offPlanStreak_.fetch_add(1, std::memory_order_relaxed) + 1 >=
             options_.deviationReads) {
    expire("readers left the plan");
  }
}

void Prefetcher::onOpen(uint64_t fileId) {
  if (!options_.positionFromOpens) return;
  if (observer_) observer_(fileId);
  if (!live_.load(std::memory_order_relaxed)) return;
  uint32_t pos = 0;
  bool planned = false;
  std::shared_ptr<Stream> s = nearestEntry(
      fileId,
      [&](const Stream& st, uint32_t p) {
        return wholeFile(st.plan->at(p)) &&
               (st.state[p].load(std::memory_order_relaxed) & Stream::kOpened) == 0;
      },
      &pos, &planned);
  if (s != nullptr) {
    s->lastProgressNs.store(nowNs(), std::memory_order_relaxed);
    const uint8_t before = s->state[pos].fetch_or(Stream::kOpened);
    // Pushed: the reads are served by the page cache and will not come. (An
    // empty file is never read either.) Otherwise its reads consume it, or
    // the push, if it lands before them (maybePush).
    if ((before & Stream::kPushed) != 0 || s->plan->at(pos).length == 0) {
      s->hits.fetch_add(1, std::memory_order_relaxed);
      consume(*s, pos);
    }
  }
  countDeviation(planned);
}

void Prefetcher::onRead(uint64_t fileId, uint64_t offset, uint64_t size,
                        cache::ChunkCache::Tier from) {
  const bool byOpens = options_.positionFromOpens;
  if (observer_ && offset == 0 && !byOpens) observer_(fileId);
  if (!live_.load(std::memory_order_relaxed)) return;
  bool planned = false;
  uint32_t pos = 0;
  // The first not yet consumed entry of this file whose range the read ends
  // in. With opens tracked, a whole-file entry must have been opened: a read
  // of a file whose pushed entry an open already consumed (the kernel dropped
  // the pages) must not consume another stream's or epoch's entry.
  std::shared_ptr<Stream> s = nearestEntry(
      fileId,
      [&](const Stream& st, uint32_t p) {
        const PlanEntry& e = st.plan->at(p);
        if (offset + size <= e.offset || offset >= e.offset + std::max<uint64_t>(e.length, 1)) {
          return false;
        }
        return !byOpens || !wholeFile(e) ||
               (st.state[p].load(std::memory_order_relaxed) & Stream::kOpened) != 0;
      },
      &pos, &planned);
  if (s != nullptr) {
    const PlanEntry& e = s->plan->at(pos);
    // Waiting on the network or the source is a stall; RAM, staging, disk are hits.
    if (from >= cache::ChunkCache::Tier::kPeer) {
      s->stalls.fetch_add(1, std::memory_order_relaxed);
    } else {
      s->hits.fetch_add(1, std::memory_order_relaxed);
    }
    s->lastProgressNs.store(nowNs(), std::memory_order_relaxed);
    if (offset + size >= e.offset + e.length) {
      consume(*s, pos);
      sweepPushed(*s, pos);
    }
  }
  // With opens tracked they count deviation: pushed files send no reads.
  if (!byOpens) countDeviation(planned);
}

void Prefetcher::maybePush(Stream& s, uint32_t pos, const std::vector<cache::ChunkRef>& chunks) {
  PagePusher* pusher = pusher_.load();
  const PlanEntry& e = s.plan->at(pos);
  if (pusher == nullptr || !wholeFile(e) || e.length == 0 || s.isConsumed(pos)) return;
  const uint32_t every = options_.pushSentinelEvery;
  if (every > 0 && pos % every == every - 1) return;  // a sentinel: its read must come
  const uint32_t cs = cache_.chunkSize();
  if (chunks.size() != (e.identity.size + cs - 1) / cs) return;  // a chunk failed
  switch (pusher->push(e.identity, chunks)) {
    case PagePusher::Outcome::kPushed: {
      pushedFiles_.fetch_add(1, std::memory_order_relaxed);
      pushedBytes_.fetch_add(e.identity.size, std::memory_order_relaxed);
      // Opened before the push landed: its remaining reads may be served by
      // the page cache and never come, so the push consumes it.
      if (s.state[pos].fetch_or(Stream::kPushed) & Stream::kOpened) consume(s, pos);
      break;
    }
    case PagePusher::Outcome::kSkipped:
      break;
    case PagePusher::Outcome::kFailed:
      pushFailures_.fetch_add(1, std::memory_order_relaxed);
      break;
  }
}

uint64_t Prefetcher::nextUse(const cache::ChunkKey& key) const {
  auto all = streams();
  uint64_t best = kNever;
  for (const auto& s : *all) {
    const auto* positions = s->plan->positionsOf(key.fileId);
    if (positions == nullptr) continue;
    const uint64_t progress = s->progress();
    for (uint32_t pos : *positions) {
      if (pos < s->plan->start() || s->isConsumed(pos)) continue;
      // Distance from the stream's progress, so streams compare fairly.
      best = std::min<uint64_t>(best, pos > progress ? pos - progress : 0);
      break;
    }
  }
  return best;
}

bool Prefetcher::tryReserve(uint64_t bytes) {
  uint64_t cur = inflightBytes_.load();
  do {
    if (cur > 0 && cur + bytes > options_.memoryBytes) return false;
  } while (!inflightBytes_.compare_exchange_weak(cur, cur + bytes));
  inflightTasks_.fetch_add(1);
  uint64_t peak = peakInflightBytes_.load(std::memory_order_relaxed);
  while (peak < cur + bytes && !peakInflightBytes_.compare_exchange_weak(peak, cur + bytes)) {
  }
  return true;
}

void Prefetcher::release(uint64_t bytes) {
  inflightBytes_.fetch_sub(bytes);
  inflightTasks_.fetch_sub(1);
}

void Prefetcher::schedule(Stream& s, const std::shared_ptr<Stream>& ref, size_t streams) {
  const uint64_t base = std::max(s.progress(), s.highest.load(std::memory_order_relaxed));
  s.issued = std::max(s.issued, s.progress());
  const uint64_t target = std::min<uint64_t>(s.plan->size(), base + options_.windowFiles);
  // Staged guests' guaranteed room (the prefetch memory; guests also get what
  // the own share leaves free); 0 outside a cluster.
  const uint64_t stagingArea = cache_.clustered() ? cache_.ram().guestExtraBytes() : 0;
  while (s.issued < target) {
    const PlanEntry& e = s.plan->at(s.issued);
    if (s.isConsumed(s.issued)) {
      ++s.issued;
      continue;
    }
    if (options_.maxLeadBytes > 0 && s.issued > base &&
        s.plan->bytesBetween(base, s.issued + 1) > options_.maxLeadBytes) {
      leadWaits_.fetch_add(1, std::memory_order_relaxed);
      break;  // far enough ahead
    }
    // Staged guests (peer prefetch): half of this stream's slice of the
    // staging room. The other half is for what several loader workers have
    // read past without the stream's position getting there yet (staged, not
    // yet read).
    if (stagingArea > 0 && s.issued > base) {
      const uint64_t slice = stagingArea / std::max<size_t>(1, streams);
      if (s.plan->bytesBetween(base, s.issued + 1) > slice / 2) break;
    }
    // Another node's file is fetched only when the RAM tier has staging room
    // for it: a fetched chunk that had to be refused would be network wasted.
    // (An entry larger than the whole area goes through the RAM tier as a
    // plain guest.)
    const bool staged =
        stagingArea > 0 && cache_.ownedElsewhere(e.identity.fileId) && e.length <= stagingArea;
    // Blocked on the budget or the staging area: the worker whose fetch frees
    // room wakes the scheduler. The flag is set before the second check, so
    // a release between the two is never missed.
    auto stagingFull = [&] {
      return staged && cache_.ram().stagingRoom() < stagingInflight_.load() + e.length;
    };
    if (stagingFull()) {
      wakeOnRelease_.store(true);
      if (stagingFull()) break;
    }
    if (!tryReserve(e.length)) {
      wakeOnRelease_.store(true);
      if (!tryReserve(e.length)) {
        budgetWaits_.fetch_add(1, std::memory_order_relaxed);
        break;  // budget full: resumes when a fetch completes
      }
    }
    if (staged) stagingInflight_.fetch_add(e.length);
    Task t;
    t.stream = ref;
    t.pos = static_cast<uint32_t>(s.issued);
    t.staged = staged;
    tasks_.enqueue(std::move(t));
    ++s.issued;
  }
}

void Prefetcher::schedulerLoop() {
  while (!stopping_.load()) {
    {
      std::unique_lock<std::mutex> lock(schedMu_);
      schedCv_.wait_for(lock, std::chrono::milliseconds(20));
    }
    auto all = streams();
    const int64_t now = nowNs();
    for (const auto& s : *all) {
      if (s->expired.load()) continue;
      // Consumption rate, for the lead in seconds (EWMA over ~1 s windows).
      if (now - s->rateSinceNs > 1000000000) {
        const uint64_t c = s->consumed.load();
        const double rate = static_cast<double>(c - s->rateSinceConsumed) * 1e9 /
                            static_cast<double>(now - s->rateSinceNs);
        const double old = s->filesPerSecond.load();
        s->filesPerSecond.store(old == 0 ? rate : 0.7 * old + 0.3 * rate);
        s->rateSinceNs = now;
        s->rateSinceConsumed = c;
      }
      if (now - s->lastProgressNs.load() > static_cast<int64_t>(options_.expirySeconds * 1e9)) {
        // This plan only: other ranks' readers may still be following theirs.
        spdlog::info("prefetch: plan for rank {} epoch {} expired (no progress)", s->plan->rank(),
                     s->plan->epoch());
        std::lock_guard<std::mutex> lock(streamsMu_);
        auto next = std::make_shared<Streams>();
        for (const auto& o : *streams_) {
          if (o != s) next->push_back(o);
        }
        s->expired.store(true);
        live_.store(!next->empty());
        streams_ = std::move(next);
        continue;
      }
      schedule(*s, s, all->size());
    }
  }
}

void Prefetcher::readAhead(const std::string& relPath, const cache::FileIdentity& id,
                           uint32_t firstChunk, uint32_t count) {
  auto file = std::make_shared<const ReadAheadFile>(ReadAheadFile{relPath, id});
  const uint64_t cs = cache_.chunkSize();
  for (uint32_t c = firstChunk; c < firstChunk + count; ++c) {
    if (uint64_t{c} * cs >= id.size) break;
    if (cache_.ram().contains(cache_.keyFor(id.fileId, c))) continue;
    if (!tryReserve(cs)) {
      const uint64_t fileChunks = (id.size + cs - 1) / cs;
      readAheadSkipped_.fetch_add(std::min<uint64_t>(firstChunk + count, fileChunks) - c,
                                  std::memory_order_relaxed);
      break;
    }
    Task t;
    t.file = file;
    t.chunk = c;
    tasks_.enqueue(std::move(t));
  }
}

void Prefetcher::runReadAhead(const Task& t) {
  auto r = cache_.get(t.file->relPath, t.file->identity, t.chunk);
  if (r.isOk()) readAheadChunks_.fetch_add(1, std::memory_order_relaxed);
  release(cache_.chunkSize());
}

void Prefetcher::workerLoop() {
  Task t;
  while (!stopping_.load()) {
    if (!tasks_.wait_dequeue_timed(t, std::chrono::milliseconds(100))) continue;
    if (t.file) {
      runReadAhead(t);
      t.file.reset();
      continue;
    }
    const PlanEntry& e = t.stream->plan->at(t.pos);
    if (!t.stream->expired.load() && !t.stream->isConsumed(t.pos)) {
      const uint32_t cs = cache_.chunkSize();
      const uint64_t end = std::min(e.identity.size, e.offset + e.length);
      // Another node's file is staged (peer prefetch): a guest of the RAM
      // tier that waits for its read and never displaces the own share.
      const bool viaStaging = t.staged;
      const bool keep = !viaStaging && pusher_.load() != nullptr;  // to push them
      std::vector<cache::ChunkRef> chunks;
      for (uint64_t off = e.offset - e.offset % cs; off < end; off += cs) {
        const uint32_t index = static_cast<uint32_t>(off / cs);
        auto r = viaStaging ? cache_.stage(e.relPath, e.identity, index)
                            : cache_.get(e.relPath, e.identity, index);
        if (!r.isOk()) {
          spdlog::debug("prefetch {}: {}", e.relPath, r.status().toString());
          break;
        }
        if (keep) chunks.push_back(std::move(r).value());
      }
      if (viaStaging && t.stream->isConsumed(t.pos)) {
        // The reader got there first (a demand read): a staged copy now would
        // never be read, so it must not hold staging room.
        for (uint64_t off = e.offset - e.offset % cs; off < end; off += cs) {
          retire(cache_.keyFor(e.identity.fileId, static_cast<uint32_t>(off / cs)));
        }
      }
      t.stream->prefetchedFiles.fetch_add(1, std::memory_order_relaxed);
      t.stream->prefetchedBytes.fetch_add(e.length, std::memory_order_relaxed);
      if ((t.stream->state[t.pos].fetch_or(Stream::kPrefetched) & Stream::kConsumed) == 0) {
        t.stream->ahead.fetch_add(1, std::memory_order_relaxed);
      }
      if (keep) maybePush(*t.stream, t.pos, chunks);
    }
    release(e.length);
    if (t.staged) stagingInflight_.fetch_sub(e.length);
    t.stream.reset();
    if (wakeOnRelease_.exchange(false)) schedCv_.notify_one();
  }
}

std::vector<StreamStats> Prefetcher::stats() const {
  std::vector<StreamStats> out;
  auto all = streams();
  for (const auto& s : *all) {
    StreamStats st;
    st.epoch = s->plan->epoch();
    st.rank = s->plan->rank();
    st.length = s->plan->size();
    st.start = s->plan->start();
    st.consumed = s->consumed.load();
    st.position = s->progress();
    st.leadFiles = s->ahead.load();
    const double rate = s->filesPerSecond.load();
    st.leadSeconds = rate > 0 ? static_cast<double>(st.leadFiles) / rate : 0;
    st.stalls = s->stalls.load();
    st.hits = s->hits.load();
    st.prefetchedFiles = s->prefetchedFiles.load();
    st.prefetchedBytes = s->prefetchedBytes.load();
    st.expired = s->expired.load();
    out.push_back(st);
  }
  return out;
}

}  // namespace epochfs::prefetch
