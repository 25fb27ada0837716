// NamespaceStore: a directory source's namespace kept beside its disk tier
// (DIR/namespace.img, in NamespaceImage's format), so that a remount with the
// same --cache-dir serves at once instead of walking the source; the daemon
// then checks each entry against the source at its first use (FuseServer's
// validateFirstUse; docs/SEMANTICS.md "A snapshot older than the mount").
// save() writes a temporary file and renames it over the last one, so a
// crash leaves the old image or the new one (and decode refuses a torn one).
// Thread-safety: stateless; save() may run while the namespace serves.
#pragma once

#include <cstdint>
#include <string>

#include "cache/status.h"
#include "fusefs/dataset_namespace.h"

namespace epochfs::fusefs {

class NamespaceStore {
 public:
  explicit NamespaceStore(std::string dir) : dir_(std::move(dir)) {}

  cache::Status save(const DatasetNamespace& ns) const;
  // The kept namespace; NotFound when there is none. `keptAt`: when it was
  // written (seconds since the epoch).
  cache::Result<DatasetNamespace> load(int64_t* keptAt) const;
  std::string path() const { return dir_ + "/namespace.img"; }

 private:
  std::string dir_;
};

}  // namespace epochfs::fusefs
