// EntryBatch: the entries of one request (the "entries" of order_append, the
// "paths" of warm_add, evict, ...) collected so that the request stays under
// the protocol's message cap, with room left for its envelope.
// Thread-safety: none; one owner.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>

#include "fusefs/admin_protocol.h"

namespace epochfs::admin {

class EntryBatch {
 public:
  // What the entries may take: the cap less room for the envelope and a margin.
  static constexpr size_t kBudgetBytes = kMaxMessageBytes - 1024;

  enum class Added {
    kYes,       // taken
    kFull,      // no room left: send take(), then add it again
    kTooLarge,  // it alone does not fit a request
  };
  // Adds a copy of `entry` when the answer is kYes.
  Added add(const nlohmann::json& entry);
  // The entries so far, as a JSON array; the batch starts empty again.
  nlohmann::json take();
  bool empty() const { return entries_.empty(); }

 private:
  nlohmann::json entries_ = nlohmann::json::array();
  size_t bytes_ = 0;
};

}  // namespace epochfs::admin
