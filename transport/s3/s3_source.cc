#include "transport/s3/s3_source.h"

#include <algorithm>

namespace epochfs::transport::s3 {

using cache::Result;
using cache::Status;

S3Source::S3Source(S3Client& client, std::string prefix)
    : client_(client), prefix_(std::move(prefix)), versions_(std::make_shared<Versions>()) {}

void S3Source::setVersions(Versions v) {
  std::stable_sort(v.begin(), v.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  v.erase(std::unique(v.begin(), v.end(),
                      [](const auto& a, const auto& b) { return a.first == b.first; }),
          v.end());
  v.shrink_to_fit();
  auto table = std::make_shared<const Versions>(std::move(v));
  cache::MutexLock lock(mu_);
  versions_ = std::move(table);
}

size_t S3Source::versionCount() const { return versions()->size(); }

std::shared_ptr<const S3Source::Versions> S3Source::versions() const {
  cache::MutexLock lock(mu_);
  return versions_;
}

const ETag* S3Source::find(const Versions& v, uint64_t fileId) {
  auto it = std::lower_bound(v.begin(), v.end(), fileId,
                             [](const auto& e, uint64_t id) { return e.first < id; });
  return it != v.end() && it->first == fileId ? &it->second : nullptr;
}

Result<size_t> S3Source::read(const std::string& relPath, const cache::FileIdentity& expected,
                              uint64_t offset, char* buf, size_t len) {
  const auto table = versions();
  const ETag* etag = find(*table, expected.fileId);
  if (etag == nullptr || etag->identityHash() != expected.inode) {
    return Status::stale(relPath + ": not the version listed (run epochctl refresh)");
  }
  if (offset >= expected.size || len == 0) return size_t{0};
  const size_t want = static_cast<size_t>(std::min<uint64_t>(len, expected.size - offset));
  auto got = client_.getRange(prefix_ + relPath, offset, buf, want, *etag);
  if (!got.isOk()) return got.status();
  // Shorter than listed: the object changed and the server sent no ETag to
  // compare (an opaque ETag is not sent in If-Match).
  if (*got != want) return Status::stale(relPath + ": shorter than when it was listed");
  return got;
}

Result<struct ::stat> S3Source::lstat(const std::string& relPath) {
  return Status::invalidArgument(relPath + ": an object store has no lstat (no --revalidate)");
}

}  // namespace epochfs::transport::s3
