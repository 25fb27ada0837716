// S3Source: the cache's Source for an object store (issue #33). A read of
// `relPath` is one ranged GET of the object PREFIX + relPath, with If-Match:
// the ETag the listing gave, so an object replaced behind the mount fails as
// kStale (S3's 412), never as another version's bytes. The ETags are kept
// here, compact (transport/s3/etag.h: 24 bytes and the file id, sorted by file
// id), and replaced whole by each listing (mount, `epochctl refresh`); a
// file's FileIdentity carries ETag::identityHash() in its version slot
// (`inode`), so a read for an identity the current listing does not hold is
// kStale before any request.
// Thread-safe: reads run on many threads; setVersions() swaps the table under
// a mutex while reads keep the one they started with.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cache/mutex.h"
#include "cache/source.h"
#include "transport/s3/etag.h"
#include "transport/s3/s3_client.h"

namespace epochfs::transport::s3 {

class S3Source : public cache::Source {
 public:
  using Versions = std::vector<std::pair<uint64_t, ETag>>;  // (file id, ETag)

  // `client` must outlive this source; `prefix` is "" or ends in '/'.
  S3Source(S3Client& client, std::string prefix);

  // The listing's ETags (any order; a duplicate file id keeps the first).
  void setVersions(Versions versions);
  size_t versionCount() const;
  // The current listing's ETags (a namespace hand-over keeps them).
  std::shared_ptr<const Versions> currentVersions() const { return versions(); }

  cache::Result<size_t> read(const std::string& relPath, const cache::FileIdentity& expected,
                             uint64_t offset, char* buf, size_t len) override;
  // Objects have no lstat: --revalidate is refused for an s3:// source.
  cache::Result<struct ::stat> lstat(const std::string& relPath) override;

  const std::string& prefix() const { return prefix_; }

 private:
  std::shared_ptr<const Versions> versions() const;
  // The ETag of file `fileId`, or nullptr.
  static const ETag* find(const Versions& v, uint64_t fileId);

  S3Client& client_;
  const std::string prefix_;
  mutable cache::Mutex mu_;
  std::shared_ptr<const Versions> versions_ GUARDED_BY(mu_);  // the pointer, not the table
};

}  // namespace epochfs::transport::s3
