// NamespaceHandover: a worker's namespace for its supervisor, and back
// (docs/ARCHITECTURE.md "Processes"). publish() encodes the live namespace
// (fusefs/namespace_image.h; for an s3:// source with the listing's ETags,
// which reads need for If-Match) into a sealed memfd; adopt() decodes the one
// a restarted worker got, checks it is the namespace the mount showed (the
// fingerprint the supervisor passed), and gives an s3:// source its ETags, so
// the worker serves without walking or listing the source again.
// Thread-safety: stateless; publish() may run while the namespace serves.
#pragma once

#include <string>

#include "cache/status.h"
#include "fusefs/daemon/s3_dataset.h"
#include "fusefs/dataset_namespace.h"

namespace epochfs::fusefs {

class NamespaceHandover {
 public:
  // A sealed memfd (close-on-exec) holding `ns`; `s3`: null for a directory source.
  static cache::Result<int> publish(const DatasetNamespace& ns, S3Dataset* s3);
  // The namespace in memfd `fd` (closed here) if its fingerprint is
  // `expectedFingerprint` (hex, as Daemon::namespaceFingerprint()); an s3://
  // source adopts the image's ETags. Any error: the caller snapshots instead.
  static cache::Result<DatasetNamespace> adopt(int fd, const std::string& expectedFingerprint,
                                               S3Dataset* s3);
};

}  // namespace epochfs::fusefs
