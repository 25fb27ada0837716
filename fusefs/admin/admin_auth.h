// AdminAuth: who may do what over the admin socket, decided from the caller's
// SO_PEERCRED credentials and the snapshot's modes — never from the socket
// file's mode alone.
//
// - Read-only commands (status, stats, ls, peers, plans, metrics): any caller
//   who may read the mount root (its mode/uid/gid against the caller's uid,
//   gid and supplementary groups), plus root and the daemon's owner.
// - Mutating commands of the whole daemon (evict, refresh, upgrade): root,
//   the daemon's owner and members of --admin-group.
// - Mutating commands of one mount (order, warm, unmount), on the mount whose
//   socket the request came through: its owner too (AdminMount::owner).
// - warm and order name files: the caller must be able to read each one (read
//   on the file, search on every directory above it), root excepted.
//
// Supplementary groups come from /proc/PID/status ("Groups:") of the peer
// pid, used only when that process's effective uid still matches the
// SO_PEERCRED uid (a pid reused by another user yields no groups).
// Thread-safety: const methods; the per-session group cache lives in the
// AdminSession (one connection = one thread).
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "fusefs/admin/admin_server.h"
#include "fusefs/dataset_namespace.h"

namespace epochfs::fusefs {

class AdminAuth {
 public:
  AdminAuth(const DatasetNamespace& ns, uid_t owner, std::optional<gid_t> adminGroup);

  // Throw AdminError::permissionDenied when the caller may not.
  void requireReader(AdminSession& s) const;
  void requireAdmin(AdminSession& s) const;
  // The session's mount's owner, or an admin.
  void requireMountOwner(AdminSession& s) const;

  bool isAdmin(AdminSession& s) const;
  // Read permission on `ino` and search permission on every directory above it.
  bool mayRead(AdminSession& s, DatasetNamespace::Ino ino) const;
  // Search permission on every directory above `ino` (its name is reachable).
  bool mayReach(AdminSession& s, DatasetNamespace::Ino ino) const;
  // Read and search permission on directory `dir` itself (may list/descend).
  bool mayDescend(AdminSession& s, DatasetNamespace::Ino dir) const;
  // True for root: no per-file checks at all.
  static bool isRoot(const AdminSession& s) { return s.caller.uid == 0; }

  // The caller's supplementary groups (cached in the session).
  static const std::vector<gid_t>& groupsOf(AdminSession& s);

 private:
  // mask: 4 read, 2 write, 1 execute/search.
  bool permits(AdminSession& s, const NodeAttr& a, unsigned mask) const;
  bool inGroup(AdminSession& s, gid_t g) const;

  const DatasetNamespace& ns_;
  uid_t owner_;
  std::optional<gid_t> adminGroup_;
};

}  // namespace epochfs::fusefs
