// S3Dataset: an s3://BUCKET/PREFIX source wired for the daemon — the S3
// client (transport/s3/s3_client.h), the cache's Source over it
// (transport/s3/s3_source.h), and the namespace from a listing
// (fusefs/object_tree.h): ListObjectsV2 of the prefix, the keys turned into
// files and directories, the skipped keys counted, and the listing's ETags
// handed to the source. snapshot() runs at mount and at each `epochctl
// refresh`. Nothing is downloaded here: only LIST requests.
// Thread-safe: snapshot() calls are serialized; status() from any thread.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "cache/mutex.h"
#include "cache/status.h"
#include "fusefs/daemon/mount_options.h"
#include "fusefs/dataset_namespace.h"
#include "fusefs/object_tree.h"
#include "transport/s3/credential_chain.h"
#include "transport/s3/credentials.h"
#include "transport/s3/s3_client.h"
#include "transport/s3/s3_source.h"

namespace epochfs::fusefs {

class S3Dataset {
 public:
  // Checks the options (endpoint URL, bucket name) and makes the client; no
  // request yet. `credentials`: nullopt for unsigned requests; `file`: where
  // they came from, read again when it changes or the keys expire.
  static cache::Result<std::unique_ptr<S3Dataset>> open(
      const S3MountOptions& options, std::optional<transport::s3::Credentials> credentials,
      std::string credentialsOrigin, transport::s3::CredentialsFile file = {});

  // Lists the prefix and builds the namespace; the source's ETags follow
  // the new listing. An empty listing is an error (a mistyped prefix).
  cache::Result<DatasetNamespace> snapshot();

  cache::Source& source() { return *source_; }
  // The identity of the dataset for its cache id: endpoint, bucket, prefix.
  std::string datasetKey() const;
  // For `status` (never a credential): endpoint, bucket, prefix, region,
  // addressing, signed, requests, retries, skipped keys.
  nlohmann::json status() const;
  // The client's live counters, for the metrics (stats.s3.*).
  const transport::s3::S3ClientCounters& counters() const { return client_->counters(); }

 private:
  S3Dataset() = default;

  S3MountOptions options_;
  std::string endpointUrl_;  // as requests go (the AWS default filled in)
  std::string credentialsOrigin_;
  bool signed_ = false;
  std::unique_ptr<transport::s3::S3Client> client_;
  std::unique_ptr<transport::s3::S3Source> source_;
  cache::Mutex snapshotMu_;  // one snapshot at a time
  mutable cache::Mutex skipsMu_;
  ObjectTreeSkips skips_ GUARDED_BY(skipsMu_);
  std::atomic<uint64_t> listings_{0};
  uid_t uid_ = 0;
  gid_t gid_ = 0;

 public:
  // A restarted worker's hand-over (fusefs/daemon/namespace_handover.h): the
  // current listing's ETags, and adopting the handed-over ones instead of a
  // listing (no request).
  std::shared_ptr<const transport::s3::S3Source::Versions> versions() const;
  void adoptVersions(transport::s3::S3Source::Versions versions);
};

}  // namespace epochfs::fusefs
