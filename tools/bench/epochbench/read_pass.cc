#include "tools/bench/epochbench/read_pass.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <numeric>
#include <random>
#include <thread>

namespace epochfs::bench {
namespace {

// Reads `path` whole; returns its size, or -errno.
int64_t readWholeFile(const char* path, char* buffer) {
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -errno;
  int64_t total = 0;
  for (;;) {
    ssize_t n = ::read(fd, buffer, kReadBufferBytes);
    if (n > 0) {
      total += n;
    } else if (n == 0) {
      break;
    } else if (errno != EINTR) {
      total = -errno;
      break;
    }
  }
  ::close(fd);
  return total;
}

}  // namespace

std::vector<uint32_t> shuffledOrder(size_t n, uint64_t seed) {
  std::vector<uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0u);
  std::mt19937_64 rng(seed);
  std::shuffle(order.begin(), order.end(), rng);
  return order;
}

PassResult runReadPass(const std::vector<std::string>& paths, int threads, uint64_t shuffle_seed) {
  std::vector<std::string> ordered;
  ordered.reserve(paths.size());
  for (uint32_t i : shuffledOrder(paths.size(), shuffle_seed)) ordered.push_back(paths[i]);
  return runOrderedPass(ordered, threads);
}

PassResult runOrderedPass(const std::vector<std::string>& ordered, int threads,
                          std::chrono::microseconds compute,
                          std::optional<std::chrono::steady_clock::time_point> start) {
  std::atomic<size_t> next{0};
  std::atomic<int64_t> files{0}, errors{0};
  std::atomic<uint64_t> bytes{0};
  std::mutex error_mu;
  PassResult result;  // first_error guarded by error_mu until the threads are joined

  auto reader = [&] {
    // Sleeps end within 1 us of their due time instead of the default 50 us
    // slack, which would add ~1% to a 4 ms compute step.
    if (compute.count() > 0) ::prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    // One 1 MiB buffer per worker, as a DataLoader worker reuses its own.
    auto buffer = std::make_unique<char[]>(kReadBufferBytes);
    int64_t my_files = 0, my_errors = 0;
    uint64_t my_bytes = 0;
    for (size_t i = next++; i < ordered.size(); i = next++) {
      const std::string& path = ordered[i];
      int64_t n = readWholeFile(path.c_str(), buffer.get());
      if (n >= 0) {
        ++my_files;
        my_bytes += static_cast<uint64_t>(n);
      } else {
        ++my_errors;
        std::lock_guard lock(error_mu);
        if (result.first_error.empty()) result.first_error = path + ": " + std::strerror(-n);
      }
      if (compute.count() > 0) std::this_thread::sleep_for(compute);
    }
    files += my_files;
    errors += my_errors;
    bytes += my_bytes;
  };

  auto begin = start.value_or(std::chrono::steady_clock::now());
  std::vector<std::thread> pool;
  for (int t = 0; t < std::max(threads, 1); ++t) pool.emplace_back(reader);
  for (auto& t : pool) t.join();
  auto stop = std::chrono::steady_clock::now();

  result.files = files;
  result.errors = errors;
  result.bytes = bytes;
  result.seconds = std::chrono::duration<double>(stop - begin).count();
  return result;
}

PassResult runComputeOnlyPass(size_t samples, int threads, std::chrono::microseconds compute) {
  std::atomic<size_t> next{0};
  auto worker = [&] {
    ::prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);  // as the readers of runOrderedPass
    for (size_t i = next++; i < samples; i = next++) std::this_thread::sleep_for(compute);
  };
  auto begin = std::chrono::steady_clock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < std::max(threads, 1); ++t) pool.emplace_back(worker);
  for (auto& t : pool) t.join();
  PassResult result;
  result.files = static_cast<int64_t>(samples);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  return result;
}

ScanResult scanTree(const std::string& root) {
  ScanResult result;
  auto begin = std::chrono::steady_clock::now();
  std::vector<std::string> pending = {root};
  while (!pending.empty()) {
    std::string dir = std::move(pending.back());
    pending.pop_back();
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) {
      ++result.errors;
      continue;
    }
    ++result.dirs;
    while (const dirent* e = ::readdir(d)) {
      if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
      struct stat st;
      if (::fstatat(::dirfd(d), e->d_name, &st, 0) != 0) {
        ++result.errors;
      } else if (S_ISDIR(st.st_mode)) {
        pending.push_back(dir + "/" + e->d_name);
      } else {
        ++result.files;
      }
    }
    ::closedir(d);
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  return result;
}

}  // namespace epochfs::bench
