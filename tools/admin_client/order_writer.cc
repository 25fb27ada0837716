#include "tools/admin_client/order_writer.h"

#include <string>
#include <utility>

#include "fusefs/admin_protocol.h"

namespace epochfs::admin {

namespace {

Status asStatus(const Result<nlohmann::json>& reply) {
  if (!reply) return reply.error();
  return okStatus();
}

}  // namespace

Status OrderWriter::begin(int64_t epoch, int rank, uint64_t start) {
  batch_.take();
  return asStatus(
      client_.call({{"cmd", kCmdOrderBegin}, {"epoch", epoch}, {"rank", rank}, {"start", start}},
                   timeoutSeconds_));
}

Status OrderWriter::append(const nlohmann::json& entry) {
  switch (batch_.add(entry)) {
    case EntryBatch::Added::kYes:
      return okStatus();
    case EntryBatch::Added::kTooLarge: {
      const std::string shown =
          entry.is_string() ? entry.get<std::string>()
                            : entry.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      return Error{ErrorKind::kProtocol, "entry too long: " + shown.substr(0, 80), {}};
    }
    case EntryBatch::Added::kFull:
      break;
  }
  if (Status sent = flush(); !sent) return sent;
  batch_.add(entry);  // fits an empty batch: not kTooLarge
  return okStatus();
}

Status OrderWriter::flush() {
  if (batch_.empty()) return okStatus();
  return asStatus(
      client_.call({{"cmd", kCmdOrderAppend}, {"entries", batch_.take()}}, timeoutSeconds_));
}

Result<nlohmann::json> OrderWriter::commit(double timeoutSeconds) {
  if (Status sent = flush(); !sent) return sent.error();
  return client_.call({{"cmd", kCmdOrderCommit}}, timeoutSeconds);
}

}  // namespace epochfs::admin
