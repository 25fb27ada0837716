// DaemonRegistry: how a mount finds the daemon that already serves its
// dataset (docs/ARCHITECTURE.md "One daemon, several mounts"). Two files per
// dataset identity, in the user's admin-socket directory (AdminServer::
// defaultPath: /run/epochfs for root, else $XDG_RUNTIME_DIR/epochfs):
//   shared-KEY.lock  flock'ed by an epochfs command while it joins a daemon
//                    or founds one, so that two mounts started at the same
//                    moment make one daemon (the second waits, then joins);
//   shared-KEY.json  {"socket", "pid", "shape"} of the live daemon: written
//                    by its worker before it reports ready, removed when the
//                    daemon ends (a stale one, whose socket no longer
//                    answers, is written over by the next founder).
// KEY is a SHA-256 over the user, the mount namespace, the source and, for an
// object store, the credentials (so user B never reads through user A's
// keys); a secret never appears in clear. Mounts of one key share a daemon
// only when their shapes (the options every mount of a daemon shares) match.
// Thread-safety: an object is used by one thread; the files are the lock.
#pragma once

#include <sys/types.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "cache/status.h"
#include "fusefs/daemon/mount_options.h"
#include "transport/s3/credentials.h"

namespace epochfs::fusefs {

class DaemonRegistry {
 public:
  struct Entry {
    std::string socket;  // the daemon's admin socket
    pid_t pid = 0;       // the worker (or single-process daemon) that wrote it
    nlohmann::json shape;
  };

  // The registry of the dataset `options` name, read with `credentials`
  // (an s3:// source; null: unsigned or not an object store).
  static cache::Result<DaemonRegistry> forDataset(const MountOptions& options,
                                                  const transport::s3::Credentials* credentials);
  DaemonRegistry(DaemonRegistry&& other) noexcept;
  DaemonRegistry& operator=(DaemonRegistry&&) = delete;
  ~DaemonRegistry();

  // Blocks until this process holds the start lock (close-on-exec). A child
  // forked while it is held shares it: unlockStart() there closes only the
  // child's descriptor, and the lock stays the parent's until its
  // unlockStart() (or exit).
  cache::Status lockStart();
  void unlockStart();
  // Hands the held lock's descriptor to the caller (-1: none), who closes it
  // to let go of the lock (a -f mount's supervisor, once its worker serves).
  int takeLock();

  // The live daemon's entry; nullopt if none, or its process is gone.
  std::optional<Entry> read() const;
  // Writes `e` unless another live daemon's entry is there (false then).
  cache::Result<bool> publish(const Entry& e) const;
  // Asks the daemon of `e` to mount `mountpoint` too (the admin `join`),
  // following `order` (--order torch-distributed:..., or empty) for it.
  static cache::Status join(const Entry& e, const std::string& mountpoint, bool allowOther,
                            std::optional<uid_t> owner, const std::string& order);
  // Removes the entry if it still names `socket`.
  void withdraw(const std::string& socket) const;

  const std::string& key() const { return key_; }

 private:
  DaemonRegistry(std::string dir, std::string key) : dir_(std::move(dir)), key_(std::move(key)) {}
  std::string entryPath() const;

  std::string dir_;
  std::string key_;
  int lockFd_ = -1;
};

// The options every mount of one daemon shares (tiers, budgets, prefetch,
// cluster...): a mount joins only a daemon of the same shape. Mountpoint,
// --allow-other, --nonempty, --owner and --order are each mount's own; a
// joining mount's --log-level and --log-file are not used (the daemon logs
// where it does).
nlohmann::json daemonShape(const MountOptions& options);
// Why a mount with `options` neither joins a daemon nor lets others join
// its own ("" if it may): --own-daemon, --push-page-cache. (A -f
// mount never joins, as its process must stay, but others may join it.)
std::string whyNotShared(const MountOptions& options);
// The first option whose value differs ("" if none), for the one line a
// mount that runs its own daemon prints.
std::string shapeDifference(const nlohmann::json& mine, const nlohmann::json& theirs);

}  // namespace epochfs::fusefs
