// MountTable: the mounts of /proc/self/mountinfo (proc(5)), one parser for
// the daemon, the supervisor, the memory limit, epochbench and the C++ tests:
// each mount's id, device, root, mount point (octal escapes such as \040
// decoded), per-mount options, fstype, source and super options. Lines that
// do not parse are skipped. Its Python twin: tools/python/epochfs/mount_table.py.
// Thread-safety: stateless; read() opens the file anew at each call.
#pragma once

#include <istream>
#include <string>
#include <vector>

namespace epochfs::fusefs {

struct MountEntry {
  int mountId = 0;     // field 1, unique per mount (reused after unmount)
  std::string device;  // "major:minor" (the backing_dev_info's name in /sys/class/bdi)
  std::string root;    // the directory of the filesystem that is mounted
  std::string mountPoint;
  std::string mountOptions;  // per-mount, comma-separated ("ro,nosuid,nodev,relatime")
  std::string fstype;        // "fuse.epochfs", "cgroup2", ...
  std::string source;
  std::string superOptions;  // comma-separated
};

class MountTable {
 public:
  static std::vector<MountEntry> read(const std::string& path = "/proc/self/mountinfo");
  static std::vector<MountEntry> parse(std::istream& in);
  // "\040" -> " ": how mountinfo escapes space, tab, newline and backslash.
  static std::string unescape(const std::string& s);
  // Whether the comma-separated `list` holds `item`.
  static bool hasOption(const std::string& list, const std::string& item);
};

}  // namespace epochfs::fusefs
