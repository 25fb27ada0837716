#include "fusefs/admin/warm_job.h"

#include <algorithm>

#include "cache/steady_clock.h"

namespace epochfs::fusefs {

WarmJob::WarmJob(const DatasetNamespace& ns, cache::ChunkCache& cache, WarmCounters& counters,
                 std::vector<DatasetNamespace::Ino> files, unsigned threads)
    : ns_(ns),
      cache_(cache),
      counters_(counters),
      files_(std::move(files)),
      threads_(std::max(1u, threads)) {
  for (auto ino : files_) bytesTotal_ += ns_.attr(ino).size;
}

WarmJob::~WarmJob() {
  cancel();
  for (auto& t : workers_) t.join();
}

void WarmJob::start() {
  startedAt_ = std::chrono::steady_clock::now();
  counters_.jobs.fetch_add(1, std::memory_order_relaxed);
  const unsigned n =
      static_cast<unsigned>(std::min<size_t>(threads_, std::max<size_t>(1, files_.size())));
  running_.store(n);
  for (unsigned i = 0; i < n; ++i) workers_.emplace_back([this] { work(); });
}

void WarmJob::work() {
  for (;;) {
    const size_t i = next_.fetch_add(1);
    if (i >= files_.size() || cancel_.load(std::memory_order_relaxed)) break;
    const auto ino = files_[i];
    const cache::FileIdentity id = ns_.identity(ino);
    const std::string& path = ns_.path(ino);
    const uint32_t chunks = cache_.chunkCount(id.size);
    bool failed = false;
    for (uint32_t c = 0; c < chunks && !cancel_.load(std::memory_order_relaxed); ++c) {
      auto r = cache_.get(path, id, c);
      if (!r.isOk()) {
        cache::MutexLock lock(errorMu_);
        if (firstError_.empty()) firstError_ = path + ": " + r.status().toString();
        failed = true;
        break;
      }
      const uint64_t n = (*r)->size();
      bytesDone_.fetch_add(n, std::memory_order_relaxed);
      counters_.bytes.fetch_add(n, std::memory_order_relaxed);
    }
    if (failed) {
      errors_.fetch_add(1, std::memory_order_relaxed);
      counters_.errors.fetch_add(1, std::memory_order_relaxed);
    }
    filesDone_.fetch_add(1, std::memory_order_relaxed);
    counters_.files.fetch_add(1, std::memory_order_relaxed);
  }
  if (running_.fetch_sub(1) == 1) finishedNs_.store(cache::steadyNowNs());
}

WarmJob::Progress WarmJob::progress() const {
  Progress p;
  p.filesTotal = files_.size();
  p.bytesTotal = bytesTotal_;
  p.filesDone = filesDone_.load();
  p.bytesDone = bytesDone_.load();
  p.errors = errors_.load();
  p.cancelled = cancel_.load();
  const int64_t finished = finishedNs_.load();
  p.done = workers_.empty() ? false : running_.load() == 0;
  const int64_t started =
      std::chrono::duration_cast<std::chrono::nanoseconds>(startedAt_.time_since_epoch()).count();
  p.seconds =
      static_cast<double>((p.done && finished ? finished : cache::steadyNowNs()) - started) / 1e9;
  cache::MutexLock lock(errorMu_);
  p.firstError = firstError_;
  return p;
}

}  // namespace epochfs::fusefs
