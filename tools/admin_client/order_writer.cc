#include "tools/admin_client/order_writer.h"

#include <string>
#include <utility>

#include "fusefs/admin_protocol.h"

namespace epochfs::admin {

namespace {

// Room left in an order_append message for the envelope and a safety margin.
constexpr size_t kBatchBytes = kMaxMessageBytes - 1024;

Status asStatus(const Result<nlohmann::json>& reply) {
  if (!reply) return reply.error();
  return okStatus();
}

}  // namespace

Status OrderWriter::begin(int64_t epoch, int rank, uint64_t start) {
  batch_ = nlohmann::json::array();
  batchBytes_ = 0;
  return asStatus(
      client_.call({{"cmd", kCmdOrderBegin}, {"epoch", epoch}, {"rank", rank}, {"start", start}},
                   timeoutSeconds_));
}

Status OrderWriter::append(nlohmann::json entry) {
  // Quoted and escaped as it will be sent, plus a comma.
  const std::string text = entry.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  const size_t size = text.size() + 1;
  if (size > kBatchBytes) {
    const std::string shown = entry.is_string() ? entry.get<std::string>() : text;
    return Error{ErrorKind::kProtocol, "entry too long: " + shown.substr(0, 80), {}};
  }
  if (batchBytes_ + size > kBatchBytes) {
    if (Status sent = flush(); !sent) return sent;
  }
  batch_.push_back(std::move(entry));
  batchBytes_ += size;
  return okStatus();
}

Status OrderWriter::flush() {
  if (batch_.empty()) return okStatus();
  auto reply = client_.call({{"cmd", kCmdOrderAppend}, {"entries", batch_}}, timeoutSeconds_);
  batch_ = nlohmann::json::array();
  batchBytes_ = 0;
  return asStatus(reply);
}

Result<nlohmann::json> OrderWriter::commit(double timeoutSeconds) {
  if (Status sent = flush(); !sent) return sent.error();
  return client_.call({{"cmd", kCmdOrderCommit}}, timeoutSeconds);
}

}  // namespace epochfs::admin
