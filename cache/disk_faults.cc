#include "cache/disk_faults.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

namespace epochfs::cache {

namespace {

constexpr auto kReloadEvery = std::chrono::milliseconds(50);

// "eio" -> EIO etc.; -1 if unknown.
int errnoNamed(const std::string& v) {
  if (v == "ok" || v == "0") return 0;
  if (v == "eio") return EIO;
  if (v == "enospc") return ENOSPC;
  if (v == "erofs") return EROFS;
  if (v == "enoent") return ENOENT;
  return -1;
}

}  // namespace

DiskFaults::DiskFaults(std::string controlFile) : controlFile_(std::move(controlFile)) {}

std::shared_ptr<DiskFaults> DiskFaults::fromEnvironment() {
  const char* path = std::getenv(kEnvVar);
  if (path == nullptr || *path == '\0') return nullptr;
  spdlog::warn("{} is set: disk-tier fault injection from {} (test only)", kEnvVar, path);
  return std::make_shared<DiskFaults>(path);
}

void DiskFaults::set(int readErrno, int writeErrno, std::chrono::milliseconds stall) {
  readErrno_.store(readErrno, std::memory_order_relaxed);
  writeErrno_.store(writeErrno, std::memory_order_relaxed);
  stallMs_.store(stall.count(), std::memory_order_relaxed);
}

bool DiskFaults::parse(const std::string& text) {
  std::istringstream in(text);
  int r = 0, w = 0;
  int64_t stall = 0;
  std::string tok;
  while (in >> tok) {
    auto eq = tok.find('=');
    if (eq == std::string::npos) return false;
    std::string k = tok.substr(0, eq), v = tok.substr(eq + 1);
    if (k == "read" || k == "write") {
      int e = errnoNamed(v);
      if (e < 0) return false;
      (k == "read" ? r : w) = e;
    } else if (k == "stall_ms") {
      char* end = nullptr;
      long long ms = std::strtoll(v.c_str(), &end, 10);
      if (end == v.c_str() || *end != '\0' || ms < 0 || ms > 600000) return false;
      stall = ms;
    } else {
      return false;
    }
  }
  set(r, w, std::chrono::milliseconds(stall));
  return true;
}

void DiskFaults::reloadIfChanged() {
  if (controlFile_.empty()) return;
  MutexLock lock(reloadMu_);
  const auto now = std::chrono::steady_clock::now();
  if (now - lastCheck_ < kReloadEvery) return;
  lastCheck_ = now;
  struct stat st;
  const bool exists = ::stat(controlFile_.c_str(), &st) == 0;
  if (!exists) {
    if (lastExisted_) clear();
    lastExisted_ = false;
    return;
  }
  if (lastExisted_ && st.st_mtim.tv_sec == lastMtime_.tv_sec &&
      st.st_mtim.tv_nsec == lastMtime_.tv_nsec && st.st_size == lastSize_) {
    return;
  }
  std::ifstream f(controlFile_);
  std::stringstream text;
  text << f.rdbuf();
  if (!parse(text.str())) {
    spdlog::error("{}: cannot parse '{}'; faults unchanged", controlFile_, text.str());
  } else {
    spdlog::warn("disk faults now: '{}'", text.str());
  }
  lastExisted_ = true;
  lastMtime_ = st.st_mtim;
  lastSize_ = st.st_size;
}

Status DiskFaults::inject(bool write, const std::string& what) {
  reloadIfChanged();
  const int64_t stall = stallMs_.load(std::memory_order_relaxed);
  if (stall > 0) std::this_thread::sleep_for(std::chrono::milliseconds(stall));
  const int err = (write ? writeErrno_ : readErrno_).load(std::memory_order_relaxed);
  if (err != 0) return Status::fromErrno(err, what + " (injected)");
  return Status::ok();
}

}  // namespace epochfs::cache
