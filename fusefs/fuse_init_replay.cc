#include "fusefs/fuse_init_replay.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace epochfs::fusefs {

namespace {

// The wire headers of include/uapi/linux/fuse.h (libfuse 3.14 does not export
// them, nor FUSE_NOTIFY_RESEND, added in kernel 6.9).
struct InHeader {
  uint32_t len, opcode;
  uint64_t unique, nodeid;
  uint32_t uid, gid, pid;
  uint16_t totalExtlen, padding;
};
struct OutHeader {
  uint32_t len;
  int32_t error;
  uint64_t unique;
};
static_assert(sizeof(InHeader) == 40 && sizeof(OutHeader) == 16);
constexpr uint32_t kOpInit = 26;
constexpr int32_t kNotifyResend = 7;
// Even (not an interrupt reply) and without the resend bit (1 << 63); the
// kernel's ids count up from 2 and never get here.
constexpr uint64_t kReplayUnique = 0x7ffffffffffffffeULL;

}  // namespace

cache::Result<std::string> FuseInitReplay::receive(fuse_session* se) {
  fuse_buf buf{};
  const int n = fuse_session_receive_buf(se, &buf);
  if (n <= 0) {
    free(buf.mem);
    return cache::Status::ioError("no FUSE_INIT from the kernel");
  }
  std::string message(static_cast<const char*>(buf.mem), static_cast<size_t>(n));
  fuse_session_process_buf(se, &buf);
  free(buf.mem);
  return message;
}

cache::Status FuseInitReplay::replay(fuse_session* se, const std::string& message) {
  InHeader hdr;
  if (message.size() < sizeof hdr) return cache::Status::invalidArgument("no FUSE_INIT to replay");
  std::memcpy(&hdr, message.data(), sizeof hdr);
  if (hdr.len != message.size() || hdr.opcode != kOpInit) {
    return cache::Status::invalidArgument("malformed FUSE_INIT message");
  }
  std::string msg = message;
  hdr.unique = kReplayUnique;
  std::memcpy(msg.data(), &hdr, sizeof hdr);
  fuse_buf buf{};
  buf.mem = msg.data();
  buf.size = msg.size();
  fuse_session_process_buf(se, &buf);  // its reply goes nowhere (ENOENT)
  return cache::Status::ok();
}

bool FuseInitReplay::requeueUnanswered(fuse_session* se) {
  const OutHeader resend{sizeof(OutHeader), kNotifyResend, 0};
  return write(fuse_session_fd(se), &resend, sizeof resend) == sizeof resend;
}

}  // namespace epochfs::fusefs
