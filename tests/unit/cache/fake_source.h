// LatencySource: an in-memory Source for the cache and prefetch tests. Holds a small
// dataset (relative path -> bytes + FileIdentity), sleeps a configurable time
// in every read (a slow shared file system), counts reads per path and in
// total, records the largest number of reads in progress at once, and fails
// reads of chosen paths on demand.
// Thread-safety: every method may be called from any thread concurrently.
#pragma once

#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "cache/file_identity.h"
#include "cache/source.h"
#include "cache/status.h"

namespace epochfs::cache::testing {

class LatencySource : public Source {
 public:
  explicit LatencySource(std::chrono::microseconds latency = std::chrono::microseconds(0))
      : latencyUs_(latency.count()) {}

  // Adds (or replaces) a file; returns its identity (fileId from the path).
  FileIdentity addFile(const std::string& relPath, std::string bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    auto& f = files_[relPath];
    if (!f) f = std::make_unique<File>();
    f->bytes = std::move(bytes);
    f->identity.fileId = cache::fileIdForPath(relPath);
    f->identity.size = f->bytes.size();
    f->identity.mtimeNs = f->identity.ctimeNs = 1'000'000'000;
    f->identity.inode = ++nextInode_;
    return f->identity;
  }
  // A file of `size` bytes whose content depends on the path and offset.
  FileIdentity addFile(const std::string& relPath, size_t size) {
    std::string bytes(size, '\0');
    const uint64_t seed = cache::fileIdForPath(relPath);
    for (size_t i = 0; i < size; ++i) bytes[i] = static_cast<char>((seed >> (i % 57)) + i);
    return addFile(relPath, std::move(bytes));
  }

  void setLatency(std::chrono::microseconds latency) { latencyUs_.store(latency.count()); }
  // Reads of `relPath` fail with `status` until clearError.
  void injectError(const std::string& relPath, Status status) {
    std::lock_guard<std::mutex> lock(mu_);
    errors_[relPath] = std::move(status);
  }
  void clearError(const std::string& relPath) {
    std::lock_guard<std::mutex> lock(mu_);
    errors_.erase(relPath);
  }

  // Reads (successful or not) of `relPath`, and of all paths, since the last reset.
  uint64_t readsOf(const std::string& relPath) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = files_.find(relPath);
    return it == files_.end() ? 0 : it->second->reads.load();
  }
  uint64_t totalReads() const { return totalReads_.load(); }
  int concurrentReads() const { return current_.load(); }
  int maxConcurrentReads() const { return maxConcurrent_.load(); }
  void resetCounters() {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [path, f] : files_) f->reads.store(0);
    totalReads_.store(0);
    maxConcurrent_.store(current_.load());
  }

  Result<size_t> read(const std::string& relPath, const FileIdentity& expected, uint64_t offset,
                      char* buf, size_t len) override {
    File* f = nullptr;
    std::optional<Status> error;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = files_.find(relPath);
      if (it != files_.end()) f = it->second.get();
      auto e = errors_.find(relPath);
      if (e != errors_.end()) error = e->second;
    }
    totalReads_.fetch_add(1);
    if (f != nullptr) f->reads.fetch_add(1);
    const int now = current_.fetch_add(1) + 1;
    int seen = maxConcurrent_.load();
    while (seen < now && !maxConcurrent_.compare_exchange_weak(seen, now)) {
    }
    const int64_t us = latencyUs_.load();
    if (us > 0) std::this_thread::sleep_for(std::chrono::microseconds(us));
    current_.fetch_sub(1);

    if (error) return *error;
    if (f == nullptr) return Status::notFound(relPath);
    std::lock_guard<std::mutex> lock(mu_);  // bytes may be replaced by addFile
    if (!(f->identity == expected)) return Status::stale(relPath + " changed");
    if (offset >= f->bytes.size()) return size_t{0};
    const size_t n = std::min<size_t>(len, f->bytes.size() - offset);
    std::memcpy(buf, f->bytes.data() + offset, n);
    return n;
  }

  Result<struct ::stat> lstat(const std::string& relPath) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = files_.find(relPath);
    if (it == files_.end()) return Status::notFound(relPath);
    struct ::stat st {};
    st.st_mode = S_IFREG | 0444;
    st.st_size = static_cast<off_t>(it->second->identity.size);
    st.st_ino = it->second->identity.inode;
    st.st_mtim.tv_sec = it->second->identity.mtimeNs / 1'000'000'000;
    st.st_ctim.tv_sec = it->second->identity.ctimeNs / 1'000'000'000;
    return st;
  }

 private:
  struct File {
    std::string bytes;
    FileIdentity identity;
    std::atomic<uint64_t> reads{0};
  };

  mutable std::mutex mu_;  // guards files_ (the map and each File's bytes/identity), errors_
  std::map<std::string, std::unique_ptr<File>> files_;  // File addresses are stable
  std::map<std::string, Status> errors_;
  uint64_t nextInode_ = 0;
  std::atomic<int64_t> latencyUs_;
  std::atomic<uint64_t> totalReads_{0};
  std::atomic<int> current_{0};
  std::atomic<int> maxConcurrent_{0};
};

}  // namespace epochfs::cache::testing
