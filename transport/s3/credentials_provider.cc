#include "transport/s3/credentials_provider.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

namespace epochfs::transport::s3 {

CredentialsProvider::CredentialsProvider(Credentials initial, std::string region,
                                         CredentialsFile file,
                                         std::chrono::milliseconds checkInterval,
                                         std::atomic<uint64_t>& reloadCounter)
    : region_(std::move(region)),
      file_(std::move(file)),
      checkInterval_(checkInterval),
      reloads_(reloadCounter) {
  cache::MutexLock readLock(readMu_);
  signer_ = std::make_shared<const SigV4Signer>(initial, region_);
  keys_ = std::move(initial);
  // The file as it is now: the keys just resolved came from it.
  if (file_.isSet()) seen_ = identity();
  nextCheck_ = std::chrono::steady_clock::now() + checkInterval_;
}

CredentialsProvider::FileIdentity CredentialsProvider::identity() const {
  struct stat st;
  FileIdentity id;
  if (::stat(file_.path.c_str(), &st) != 0) return id;
  id.exists = true;
  id.inode = st.st_ino;
  id.size = static_cast<uint64_t>(st.st_size);
  id.mtimeNs = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  id.ctimeNs = static_cast<int64_t>(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec;
  return id;
}

std::shared_ptr<const SigV4Signer> CredentialsProvider::signer() {
  // tryLock: while one thread checks the file, the others sign with the
  // keys in place rather than wait for it.
  if (file_.isSet() && readMu_.tryLock()) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= nextCheck_) {
      nextCheck_ = now + checkInterval_;
      const FileIdentity id = identity();
      if (!(id == seen_)) reread(id);
    }
    readMu_.unlock();
  }
  cache::MutexLock lock(mu_);
  return signer_;
}

bool CredentialsProvider::reloadNow() {
  if (!file_.isSet()) return false;
  cache::MutexLock readLock(readMu_);
  return reread(identity());
}

bool CredentialsProvider::reread(const FileIdentity& id) {
  seen_ = id;
  auto keys = rereadCredentials(file_);
  if (!keys.isOk()) {
    if (!warned_) {
      // The message names the file and the problem (a line number at most), never a key.
      spdlog::warn("s3: cannot read the credentials again from {}, keeping the keys in use: {}",
                   file_.describe(), keys.status().message());
      warned_ = true;
    }
    return false;
  }
  warned_ = false;
  if (keys->accessKeyId == keys_.accessKeyId && keys->secretAccessKey == keys_.secretAccessKey &&
      keys->sessionToken == keys_.sessionToken) {
    return false;
  }
  auto next = std::make_shared<const SigV4Signer>(*keys, region_);
  keys_ = std::move(keys).value();
  {
    cache::MutexLock lock(mu_);
    signer_ = std::move(next);
  }
  reloads_.fetch_add(1, std::memory_order_relaxed);
  spdlog::info("s3: new credentials read from {}", file_.describe());
  return true;
}

}  // namespace epochfs::transport::s3
