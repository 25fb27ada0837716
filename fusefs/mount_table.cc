#include "fusefs/mount_table.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace epochfs::fusefs {

std::vector<MountEntry> MountTable::read(const std::string& path) {
  std::ifstream in(path);
  return parse(in);
}

std::vector<MountEntry> MountTable::parse(std::istream& in) {
  std::vector<MountEntry> out;
  std::string line;
  while (std::getline(in, line)) {
    // id parent major:minor root mountpoint options [optional...] - fstype source superoptions
    std::istringstream words(line);
    std::vector<std::string> f;
    std::string w;
    while (words >> w) f.push_back(w);
    const auto dash = std::find(f.begin(), f.end(), "-");
    if (f.size() < 6 || dash == f.end() || dash - f.begin() < 6 || f.end() - dash < 4) continue;
    MountEntry e;
    e.mountId = std::atoi(f[0].c_str());
    e.device = f[2];
    e.root = unescape(f[3]);
    e.mountPoint = unescape(f[4]);
    e.mountOptions = f[5];
    e.fstype = *(dash + 1);
    e.source = unescape(*(dash + 2));
    e.superOptions = *(dash + 3);
    out.push_back(std::move(e));
  }
  return out;
}

std::string MountTable::unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    const bool octal = s[i] == '\\' && i + 3 < s.size() && s[i + 1] >= '0' && s[i + 1] <= '3' &&
                       s[i + 2] >= '0' && s[i + 2] <= '7' && s[i + 3] >= '0' && s[i + 3] <= '7';
    if (octal) {
      out.push_back(static_cast<char>(std::strtol(s.substr(i + 1, 3).c_str(), nullptr, 8)));
      i += 3;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

bool MountTable::hasOption(const std::string& list, const std::string& item) {
  std::stringstream ss(list);
  std::string each;
  while (std::getline(ss, each, ',')) {
    if (each == item) return true;
  }
  return false;
}

}  // namespace epochfs::fusefs
