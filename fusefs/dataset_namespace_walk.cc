// DatasetNamespace::snapshot(): the parallel walk of a source directory.
#include <dirent.h>
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <thread>

#include "fusefs/dataset_namespace.h"

namespace epochfs::fusefs {

using cache::Result;
using cache::Status;

// Walks the tree with a pool of threads: each takes a directory, lists and
// stats its entries without the lock, then appends them in one locked step
// (so a directory's entries are one contiguous range of nodes) and queues
// the subdirectories.
class DatasetNamespace::Walker {
 public:
  Walker(DatasetNamespace& ns, int rootFd, const WalkOptions& options)
      : ns_(ns), rootFd_(rootFd), options_(options) {}

  Status run(unsigned threads) EXCLUDES(mu_) {
    struct stat st;
    if (fstat(rootFd_, &st) != 0) return Status::fromErrno(errno, "stat source root");
    Result<Node> root = ns_.makeNode("", attrFromStat(st), "");
    if (!root.isOk()) return root.status();
    {
      cache::MutexLock lock(mu_);  // uncontended: no thread yet
      ns_.nodes_->at(0) = *root;
      count_ = 1;
      queue_.push_back(1);
      pending_ = 1;
    }
    std::vector<std::thread> pool;
    for (unsigned i = 0; i < threads; ++i) pool.emplace_back([this] { work(); });
    for (auto& t : pool) t.join();
    cache::MutexLock lock(mu_);
    return error_;
  }

  // After run().
  size_t count() const EXCLUDES(mu_) {
    cache::MutexLock lock(mu_);
    return count_;
  }

 private:
  struct Entry {
    std::string name;
    NodeAttr attr;
    std::string target;
  };

  void work() {
    for (;;) {
      uint32_t dir;
      std::string dirPath;
      {
        cache::MutexLock lock(mu_);
        cv_.wait(mu_, [&]() REQUIRES(mu_) { return !queue_.empty() || pending_ == 0; });
        if (queue_.empty()) return;
        dir = queue_.front();
        queue_.pop_front();
        dirPath = ns_.path(dir);  // its nodes are written (mu_ held)
      }
      std::vector<Entry> entries;
      if (options_.directoryDelay.count() > 0) std::this_thread::sleep_for(options_.directoryDelay);
      Status s = list(dirPath, entries);
      cache::MutexLock lock(mu_);
      if (s.isOk() && error_.isOk()) s = append(dir, entries);
      if (!s.isOk() && error_.isOk()) error_ = s;
      if (--pending_ == 0) cv_.notifyAll();
    }
  }

  Status list(const std::string& dirPath, std::vector<Entry>& out) {
    int fd = openat(rootFd_, dirPath.empty() ? "." : dirPath.c_str(),
                    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return Status::fromErrno(errno, "cannot list source directory '" + dirPath + "'");
    DIR* d = fdopendir(fd);
    if (d == nullptr) {
      close(fd);
      return Status::fromErrno(errno, "fdopendir " + dirPath);
    }
    while (struct dirent* de = readdir(d)) {
      std::string_view n = de->d_name;
      if (n == "." || n == "..") continue;
      Entry e;
      e.name = de->d_name;
      struct stat st;
      if (fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
        spdlog::warn("snapshot: skipping {}/{}: {}", dirPath, e.name, strerror(errno));
        continue;
      }
      e.attr = attrFromStat(st);
      if (S_ISLNK(st.st_mode)) {
        std::string buf(static_cast<size_t>(std::max<off_t>(st.st_size, 255)) + 1, '\0');
        ssize_t n2 = readlinkat(fd, de->d_name, buf.data(), buf.size());
        if (n2 < 0) {
          spdlog::warn("snapshot: skipping symlink {}/{}: {}", dirPath, e.name, strerror(errno));
          continue;
        }
        buf.resize(static_cast<size_t>(n2));
        e.target = std::move(buf);
      }
      out.push_back(std::move(e));
    }
    closedir(d);
    std::sort(out.begin(), out.end(),
              [](const Entry& a, const Entry& b) { return a.name < b.name; });
    return Status::ok();
  }

  Status append(uint32_t dir, const std::vector<Entry>& entries) REQUIRES(mu_) {
    if (count_ + entries.size() >= UINT32_MAX)
      return Status::tooLarge("more than 4 billion entries");
    const auto first = static_cast<uint32_t>(count_ + 1);
    for (const Entry& e : entries) {
      Result<Node> made = ns_.makeNode(e.name, e.attr, e.target);
      if (!made.isOk()) return made.status();
      made->parent = dir;
      ns_.nodes_->at(count_) = *made;
      ++count_;
      if (S_ISDIR(e.attr.mode)) {
        queue_.push_back(static_cast<uint32_t>(count_));
        ++pending_;
      }
    }
    if (!entries.empty()) {
      (*ns_.nodes_)[dir - 1].value = uint64_t{entries.size()} << 32 | first;
    }
    if (options_.progress != nullptr) options_.progress->store(count_, std::memory_order_relaxed);
    if (!queue_.empty()) cv_.notifyAll();
    return Status::ok();
  }

  DatasetNamespace& ns_;
  int rootFd_;
  const WalkOptions options_;
  mutable cache::Mutex mu_;  // guards everything below and ns_'s nodes and names during the walk
  cache::CondVar cv_;        // with mu_: a directory queued, or none pending
  std::deque<uint32_t> queue_ GUARDED_BY(mu_);
  size_t pending_ GUARDED_BY(mu_) = 0;  // directories queued or being listed
  size_t count_ GUARDED_BY(mu_) = 0;    // nodes made
  Status error_ GUARDED_BY(mu_);
};

Result<DatasetNamespace> DatasetNamespace::snapshot(int rootFd, unsigned threads) {
  WalkOptions options;
  options.threads = threads;
  return snapshot(rootFd, options);
}

Result<DatasetNamespace> DatasetNamespace::snapshot(int rootFd, const WalkOptions& options) {
  DatasetNamespace ns;
  size_t count = 0;
  {
    Walker walker(ns, rootFd, options);
    Status s = walker.run(std::max(1u, options.threads));
    if (!s.isOk()) return s;
    count = walker.count();
  }
  ns.renumberCanonically(count);
  ns.countEntries();
  ns.fingerprint_ = ns.computeFingerprint(/*withVersions=*/false);
  return ns;
}

}  // namespace epochfs::fusefs
