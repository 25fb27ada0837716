#include "prefetch/fetch_workers.h"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace epochfs::prefetch {

FetchWorkers::FetchWorkers(unsigned threads, cache::ChunkCache& cache, FetchBudget& budget,
                           WindowScheduler& scheduler, PositionSource& position, Hooks hooks)
    : cache_(cache),
      budget_(budget),
      scheduler_(scheduler),
      position_(position),
      hooks_(std::move(hooks)) {
  for (unsigned i = 0; i < std::max(1u, threads); ++i) threads_.emplace_back([this] { loop(); });
}

FetchWorkers::~FetchWorkers() {
  {
    cache::MutexLock lock(mu_);
    stopping_ = true;
  }
  cv_.notifyAll();
  for (auto& t : threads_) t.join();
}

void FetchWorkers::enqueue(FetchTask task) {
  {
    cache::MutexLock lock(mu_);
    task.seq = nextSeq_++;
    tasks_.push(std::move(task));
  }
  cv_.notifyOne();
}

void FetchWorkers::loop() {
  while (true) {
    FetchTask t;
    {
      // Blocks without a timeout: an idle worker costs nothing. (A 100 ms
      // timed wait woke each of the 32 default workers 10 times a second: 8
      // idle lab daemons spent 4 % of the machine on it.)
      cache::MutexLock lock(mu_);
      cv_.wait(mu_, [this]() REQUIRES(mu_) { return stopping_ || !tasks_.empty(); });
      if (stopping_) return;  // queued tasks are dropped
      t = tasks_.top();
      tasks_.pop();
    }
    if (t.file) {
      runReadAhead(t);
      budget_.release(cache_.chunkSize());
      t.file.reset();
    } else {
      runEntry(t);
      const uint64_t bytes = t.stream->plan().at(t.pos).length;
      budget_.release(bytes);
      if (t.staged) scheduler_.stagedDone(bytes);
      t.stream.reset();
    }
    if (hooks_.onReleased) hooks_.onReleased();
  }
}

void FetchWorkers::runReadAhead(const FetchTask& t) {
  auto r = cache_.get(t.file->relPath, t.file->identity, t.chunk);
  if (r.isOk()) readAheadChunks_.fetch_add(1, std::memory_order_relaxed);
}

void FetchWorkers::runEntry(const FetchTask& t) {
  PlanStream& s = *t.stream;
  if (s.expired() || s.isConsumed(t.pos)) return;
  const PlanEntry& e = s.plan().at(t.pos);
  const ChunkSpan span = chunkSpan(e, cache_.chunkSize());
  const bool keep = !t.staged && pusher_.load() != nullptr && position_.mayPush(t.pos);
  std::vector<cache::ChunkRef> chunks;
  for (uint32_t index = span.first; index < span.end; ++index) {
    auto r = t.staged ? cache_.stage(e.relPath, e.identity, index)
                      : cache_.get(e.relPath, e.identity, index);
    if (!r.isOk()) {
      spdlog::debug("prefetch {}: {}", e.relPath, r.status().toString());
      break;
    }
    if (keep) chunks.push_back(std::move(r).value());
  }
  if (t.staged && s.isConsumed(t.pos)) {
    // The reader got there first (a demand read): a staged copy now would
    // never be read, so it must not hold staging room.
    for (uint32_t index = span.first; index < span.end; ++index) {
      hooks_.retire(cache_.keyFor(e.identity.fileId, index));
    }
  }
  s.countFetched(e.length);
  s.markPrefetched(t.pos);
  if (keep) maybePush(s, t.pos, chunks);
}

void FetchWorkers::maybePush(PlanStream& s, uint32_t pos,
                             const std::vector<cache::ChunkRef>& chunks) {
  PagePusher* pusher = pusher_.load();
  const PlanEntry& e = s.plan().at(pos);
  if (pusher == nullptr || !isWholeFile(e) || e.length == 0 || s.isConsumed(pos)) return;
  const ChunkSpan span = chunkSpan(e, cache_.chunkSize());
  if (chunks.size() != span.end - span.first) return;  // a chunk failed
  switch (pusher->push(e.identity, chunks)) {
    case PagePusher::Outcome::kPushed:
      pushedFiles_.fetch_add(1, std::memory_order_relaxed);
      pushedBytes_.fetch_add(e.identity.size, std::memory_order_relaxed);
      position_.onPushed(s, pos);
      break;
    case PagePusher::Outcome::kSkipped:
      break;
    case PagePusher::Outcome::kFailed:
      pushFailures_.fetch_add(1, std::memory_order_relaxed);
      break;
  }
}

}  // namespace epochfs::prefetch
