#include "fusefs/admin/admin_auth.h"

#include <algorithm>
#include <fstream>
#include <sstream>

namespace epochfs::fusefs {

AdminAuth::AdminAuth(const DatasetNamespace& ns, uid_t owner, std::optional<gid_t> adminGroup)
    : ns_(ns), owner_(owner), adminGroup_(adminGroup) {}

const std::vector<gid_t>& AdminAuth::groupsOf(AdminSession& s) {
  if (s.groups) return *s.groups;
  std::vector<gid_t> groups;
  std::ifstream in("/proc/" + std::to_string(s.caller.pid) + "/status");
  std::string line;
  bool uidMatches = false;
  std::vector<gid_t> listed;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string key;
    fields >> key;
    if (key == "Uid:") {
      unsigned long real = 0, effective = 0;
      fields >> real >> effective;
      uidMatches = effective == s.caller.uid;
    } else if (key == "Groups:") {
      unsigned long g;
      while (fields >> g) listed.push_back(static_cast<gid_t>(g));
    }
  }
  if (uidMatches) groups = std::move(listed);
  s.groups = std::move(groups);
  return *s.groups;
}

bool AdminAuth::inGroup(AdminSession& s, gid_t g) const {
  if (s.caller.gid == g) return true;
  const auto& groups = groupsOf(s);
  return std::find(groups.begin(), groups.end(), g) != groups.end();
}

bool AdminAuth::permits(AdminSession& s, const NodeAttr& a, unsigned mask) const {
  if (isRoot(s)) return true;
  unsigned bits;
  if (s.caller.uid == a.uid) {
    bits = (a.mode >> 6) & 7;
  } else if (inGroup(s, a.gid)) {
    bits = (a.mode >> 3) & 7;
  } else {
    bits = a.mode & 7;
  }
  return (bits & mask) == mask;
}

void AdminAuth::requireReader(AdminSession& s) const {
  if (isRoot(s) || s.caller.uid == owner_) return;
  if (!permits(s, ns_.attr(DatasetNamespace::kRootIno), 4)) {
    throw AdminError::permissionDenied("uid " + std::to_string(s.caller.uid) +
                                       " may not read the mount root");
  }
}

bool AdminAuth::isAdmin(AdminSession& s) const {
  return isRoot(s) || s.caller.uid == owner_ || (adminGroup_ && inGroup(s, *adminGroup_));
}

void AdminAuth::requireAdmin(AdminSession& s) const {
  if (!isAdmin(s)) {
    throw AdminError::permissionDenied(
        "uid " + std::to_string(s.caller.uid) +
        " is not the daemon's owner, root or a member of --admin-group");
  }
}

void AdminAuth::requireMountOwner(AdminSession& s) const {
  if (s.caller.uid == s.mount.owner || isAdmin(s)) return;
  throw AdminError::permissionDenied(
      "uid " + std::to_string(s.caller.uid) + " is not this mount's owner (uid " +
      std::to_string(s.mount.owner) + "), the daemon's owner, root or a member of --admin-group");
}

bool AdminAuth::mayReach(AdminSession& s, DatasetNamespace::Ino ino) const {
  if (isRoot(s)) return true;
  while (ino != DatasetNamespace::kRootIno) {
    ino = ns_.parentOf(ino);
    if (!permits(s, ns_.attr(ino), 1)) return false;
  }
  return true;
}

bool AdminAuth::mayRead(AdminSession& s, DatasetNamespace::Ino ino) const {
  return isRoot(s) || (permits(s, ns_.attr(ino), 4) && mayReach(s, ino));
}

bool AdminAuth::mayDescend(AdminSession& s, DatasetNamespace::Ino dir) const {
  return permits(s, ns_.attr(dir), 4 | 1);
}

}  // namespace epochfs::fusefs
