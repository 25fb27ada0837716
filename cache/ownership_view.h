// OwnershipView: which files this node owns in a cluster (implemented by the
// daemon over transport/'s placement, so cache/ never sees the cluster). The
// RAM tier asks it to sort chunks into its two classes: owned (this node's
// share) and guests (copies of other nodes' chunks). Must be cheap and
// thread-safe, and must never call back into a tier: tiers call it while
// holding their own locks.
#pragma once

#include <cstdint>

namespace epochfs::cache {

class OwnershipView {
 public:
  virtual ~OwnershipView() = default;
  // True when this node is among the live owners of `fileId` (always true
  // outside a cluster).
  virtual bool ownedHere(uint64_t fileId) const = 0;
};

}  // namespace epochfs::cache
