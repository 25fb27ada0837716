// SupervisorLink: the worker's side of the supervisor protocol
// (docs/ARCHITECTURE.md "Processes"). The supervisor starts each worker with
// the environment variables below; the worker reports over a SOCK_SEQPACKET
// socket: "mount" + a mount's /dev/fuse descriptor (SCM_RIGHTS), its
// mountpoint and the kernel's FUSE_INIT message, once mounted (the first
// mount, and each that joins later); "unmounted" + a mountpoint that went
// away while others still serve; "namespace" + its namespace as a sealed
// memfd (SCM_RIGHTS; fusefs/namespace_image.h) before "ready" and after each
// refresh that changed it; "ready" + its namespace fingerprint once serving;
// "error" + a one-line reason if start-up fails.
// Thread-safety: not thread-safe; used by main() only.
#pragma once

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace epochfs::fusefs {

// Exit codes a worker uses to tell the supervisor what to do next.
inline constexpr int kWorkerExitRestart = 75;           // upgrade: start the binary again
inline constexpr int kWorkerExitNamespaceChanged = 76;  // source changed: cannot resume
// Environment of a worker.
inline constexpr const char* kEnvChannel = "EPOCHFS_SUPERVISOR_FD";
// Restarts only: every mount the supervisor holds (encodeHeldMounts).
inline constexpr const char* kEnvMounts = "EPOCHFS_MOUNTS";
inline constexpr const char* kEnvFingerprint = "EPOCHFS_NAMESPACE_FP";  // restarts only
// Restarts only: the canonical mountpoint, read by parseMountOptions instead
// of resolving the path (a stat() of the mount would wait for this worker).
inline constexpr const char* kEnvResumeMountpoint = "EPOCHFS_RESUME_MOUNTPOINT";
// Restarts only: a sealed memfd with the namespace the last worker served
// (fusefs/namespace_image.h), so the new one neither walks nor lists the source.
inline constexpr const char* kEnvNamespaceFd = "EPOCHFS_NAMESPACE_FD";
// A pipe carrying what the worker must not get through its environment (an
// S3 mount's credentials): the supervisor writes it for every worker it starts.
inline constexpr const char* kEnvHandoff = "EPOCHFS_HANDOFF_FD";

// One mount's kernel connection, as the supervisor keeps it for the next worker.
struct HeldMount {
  std::string mountpoint;
  int fd = -1;              // its /dev/fuse descriptor
  std::string initMessage;  // the kernel's FUSE_INIT, replayed by the next worker
  uid_t owner = 0;          // who owns the mount (--owner; docs/ADMIN.md)
  bool allowOther = false;  // mounted with allow_other
  std::string order;        // its --order (torch-distributed:...), or empty
};
// One mount: "FD:HEX(MOUNTPOINT):HEX(INIT):OWNER:ALLOW_OTHER:HEX(ORDER)" (the
// last two may be missing: a supervisor of an older release); nullopt when
// malformed. FD is the sender's number (the descriptor itself travels apart).
std::string encodeHeldMount(const HeldMount& m);
std::optional<HeldMount> decodeHeldMount(const std::string& item);
// Every mount, joined by ','; decode drops malformed entries and closed descriptors.
std::string encodeHeldMounts(const std::vector<HeldMount>& mounts);
std::vector<HeldMount> decodeHeldMounts(const std::string& text);

class SupervisorLink {
 public:
  // The link of a worker started by a supervisor, or null in a plain process.
  // Consumes (unsets) the environment variables.
  static std::unique_ptr<SupervisorLink> fromEnvironment();
  ~SupervisorLink();

  bool restarted() const { return !resume_.empty(); }
  // A restart: the mounts to serve (their descriptors are this process's).
  const std::vector<HeldMount>& resume() const { return resume_; }
  const std::string& expectedFingerprint() const { return fingerprint_; }  // "" if none
  // The bytes on the hand-off pipe ("" without one); reads it once and closes it.
  std::string takeHandoff();
  // The namespace image's memfd (-1: none); the caller owns it from then on.
  int takeNamespaceFd();

  // Also called from an admin thread (a join), as sendNamespace.
  void sendMount(const HeldMount& m);
  void sendUnmounted(const std::string& mountpoint);
  // `memfd`: a sealed namespace image; the link does not close it. Also
  // called from an admin thread (refresh): one sendmsg per message.
  void sendNamespace(int memfd);
  void sendReady(const std::string& fingerprint);
  void sendError(const std::string& reason);

 private:
  SupervisorLink() = default;
  void send(const std::string& message, int fd = -1);

  int channel_ = -1;
  std::vector<HeldMount> resume_;
  int handoffFd_ = -1;
  int namespaceFd_ = -1;
  std::string fingerprint_;
};

std::string toHex(const std::string& bytes);
std::string fromHex(const std::string& hex);  // "" if malformed

}  // namespace epochfs::fusefs
