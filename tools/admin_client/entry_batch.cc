#include "tools/admin_client/entry_batch.h"

#include <utility>

namespace epochfs::admin {

EntryBatch::Added EntryBatch::add(const nlohmann::json& entry) {
  // Escaped as it will be sent, plus a comma.
  const size_t size =
      entry.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).size() + 1;
  if (size > kBudgetBytes) return Added::kTooLarge;
  if (bytes_ + size > kBudgetBytes) return Added::kFull;
  entries_.push_back(entry);
  bytes_ += size;
  return Added::kYes;
}

nlohmann::json EntryBatch::take() {
  bytes_ = 0;
  return std::exchange(entries_, nlohmann::json::array());
}

}  // namespace epochfs::admin
