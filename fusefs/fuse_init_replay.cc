#include "fusefs/fuse_init_replay.h"

#include <fcntl.h>
#include <sys/uio.h>
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
// fuse_init_in as of protocol 7.36 (major, minor, max_readahead, flags,
// flags2, unused[11]) and the head of fuse_init_out (major, minor).
struct InitIn {
  uint32_t major, minor, maxReadahead, flags, flags2, unused[11];
};
struct InitOutHead {
  uint32_t major, minor;
};
static_assert(sizeof(InitIn) == 64);
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

namespace {

ssize_t captureReply(int, iovec* iov, int count, void* userdata) {
  auto* reply = static_cast<std::string*>(userdata);
  ssize_t n = 0;
  for (int i = 0; i < count; ++i) {
    reply->append(static_cast<const char*>(iov[i].iov_base), iov[i].iov_len);
    n += static_cast<ssize_t>(iov[i].iov_len);
  }
  return n;
}

ssize_t readNothing(int, void*, size_t, void*) { return 0; }

}  // namespace

uint32_t FuseInitReplay::libfuseMinor(uint32_t kernelMinor) {
  std::string reply;
  char name[] = "epochfs-protocol-probe";
  char* argv[] = {name, nullptr};
  fuse_args args = FUSE_ARGS_INIT(1, argv);
  fuse_lowlevel_ops ops{};
  fuse_session* se = fuse_session_new(&args, &ops, sizeof ops, &reply);
  fuse_opt_free_args(&args);  // fuse_session_new copied what it needs
  if (se == nullptr) return 0;
  fuse_custom_io io{};
  io.writev = captureReply;
  io.read = readNothing;
  const int fd = open("/dev/null", O_RDWR | O_CLOEXEC);  // the session closes it
  if (fd < 0 || fuse_session_custom_io(se, &io, fd) != 0) {
    if (fd >= 0) close(fd);
    fuse_session_destroy(se);
    return 0;
  }
  InHeader hdr{};
  InitIn init{};
  hdr.len = sizeof hdr + sizeof init;
  hdr.opcode = kOpInit;
  hdr.unique = 2;
  init.major = 7;
  init.minor = kernelMinor;
  init.maxReadahead = 128 * 1024;
  std::string msg(sizeof hdr + sizeof init, '\0');
  std::memcpy(msg.data(), &hdr, sizeof hdr);
  std::memcpy(msg.data() + sizeof hdr, &init, sizeof init);
  fuse_buf buf{};
  buf.mem = msg.data();
  buf.size = msg.size();
  fuse_session_process_buf(se, &buf);
  fuse_session_destroy(se);
  OutHeader out;
  InitOutHead head;
  if (reply.size() < sizeof out + sizeof head) return 0;
  std::memcpy(&out, reply.data(), sizeof out);
  std::memcpy(&head, reply.data() + sizeof out, sizeof head);
  return out.error == 0 && head.major == 7 ? head.minor : 0;
}

}  // namespace epochfs::fusefs
