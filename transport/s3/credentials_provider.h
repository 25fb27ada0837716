// CredentialsProvider: the signer S3Client signs each request with, and the
// keys behind it kept current. Keys read from a file (CredentialsFile: the
// --s3-credentials-file, the shared credentials file or the config file)
// follow the file as the site's refresher rewrites it:
//   - signer() stats the file at most once per `checkInterval` (default 1 s)
//     and, when its identity (inode, size, mtime, ctime) changed, reads it
//     again and swaps the signer when the keys differ;
//   - reloadNow() reads it at once (S3Client calls it after a 403
//     ExpiredToken, whatever the stat says) and says whether the keys changed.
// A file that became unreadable or malformed keeps the old keys, with one
// warning until a read succeeds again. Keys from the environment (or given
// directly) have no file and never change: a new process is needed.
//
// Secrets: a log line names the file and profile, never a key.
// Thread-safe: signer() and reloadNow() from any thread; a request keeps the
// shared_ptr it got, so a swap never changes a signer in use. One thread at a
// time reads the file (readMu_); others go on with the current signer.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "cache/mutex.h"
#include "cache/thread_annotations.h"
#include "transport/s3/credential_chain.h"
#include "transport/s3/credentials.h"
#include "transport/s3/sigv4_signer.h"

namespace epochfs::transport::s3 {

class CredentialsProvider {
 public:
  // `reloadCounter` counts the times new keys are put in place; it outlives this.
  CredentialsProvider(Credentials initial, std::string region, CredentialsFile file,
                      std::chrono::milliseconds checkInterval,
                      std::atomic<uint64_t>& reloadCounter);
  CredentialsProvider(const CredentialsProvider&) = delete;
  CredentialsProvider& operator=(const CredentialsProvider&) = delete;

  // The current signer; may first check the file (see above).
  std::shared_ptr<const SigV4Signer> signer();
  // Reads the file now; true when the keys changed (the new signer is in
  // place). False without a file, on a failed read, or the same keys.
  bool reloadNow();
  bool hasFile() const { return file_.isSet(); }

 private:
  struct FileIdentity {
    uint64_t inode = 0, size = 0;
    int64_t mtimeNs = 0, ctimeNs = 0;
    bool exists = false;
    bool operator==(const FileIdentity&) const = default;
  };
  FileIdentity identity() const;
  // Reads the file (readMu_ held by the caller); true when the keys changed.
  bool reread(const FileIdentity& seen) REQUIRES(readMu_);

  const std::string region_;
  const CredentialsFile file_;
  const std::chrono::milliseconds checkInterval_;

  cache::Mutex mu_;  // the signer in use; held only to copy or swap it
  std::shared_ptr<const SigV4Signer> signer_ GUARDED_BY(mu_);

  cache::Mutex readMu_;  // one reader of the file at a time; before mu_
  Credentials keys_ GUARDED_BY(readMu_);
  FileIdentity seen_ GUARDED_BY(readMu_);
  bool warned_ GUARDED_BY(readMu_) = false;
  std::chrono::steady_clock::time_point nextCheck_ GUARDED_BY(readMu_);

  std::atomic<uint64_t>& reloads_;
};

}  // namespace epochfs::transport::s3
