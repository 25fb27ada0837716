#include "transport/membership.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace epochfs::transport {

using cache::Result;
using cache::Status;

namespace {

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

// Splits on commas that are not inside brackets.
std::vector<std::string> splitTopLevel(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  int depth = 0;
  for (char c : s) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (c == ',' && depth == 0) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur.push_back(c);
    }
  }
  out.push_back(cur);
  return out;
}

Result<std::vector<std::string>> expandOne(const std::string& item) {
  const size_t open = item.find('[');
  if (open == std::string::npos) {
    if (item.find(']') != std::string::npos) return Status::invalidArgument("stray ']' in " + item);
    return std::vector<std::string>{item};
  }
  const size_t close = item.find(']', open);
  if (close == std::string::npos) return Status::invalidArgument("unclosed '[' in " + item);
  const std::string prefix = item.substr(0, open);
  const std::string ranges = item.substr(open + 1, close - open - 1);
  auto rest = expandOne(item.substr(close + 1));
  if (!rest.isOk()) return rest.status();
  std::vector<std::string> out;
  std::stringstream ss(ranges);
  std::string range;
  while (std::getline(ss, range, ',')) {
    const size_t dash = range.find('-');
    const std::string lo = range.substr(0, dash);
    const std::string hi = dash == std::string::npos ? lo : range.substr(dash + 1);
    if (lo.empty() || hi.empty() || lo.find_first_not_of("0123456789") != std::string::npos ||
        hi.find_first_not_of("0123456789") != std::string::npos || lo.size() > 9 || hi.size() > 9) {
      return Status::invalidArgument("malformed range '" + range + "' in " + item);
    }
    const long a = std::stol(lo), b = std::stol(hi);
    if (b < a || b - a > 100000) return Status::invalidArgument("bad range '" + range + "'");
    const size_t width = lo.size();  // zero padding as written ("01-10")
    for (long v = a; v <= b; ++v) {
      std::string num = std::to_string(v);
      if (num.size() < width) num.insert(0, width - num.size(), '0');
      for (const auto& r : *rest) out.push_back(prefix + num + r);
    }
  }
  return out;
}

}  // namespace

Result<Member> parseHostPort(const std::string& raw, uint16_t defaultPort) {
  const std::string text = trim(raw);
  if (text.empty()) return Status::invalidArgument("empty address");
  Member m;
  m.port = defaultPort;
  std::string portText;
  if (text[0] == '[') {
    const size_t close = text.find(']');
    if (close == std::string::npos) return Status::invalidArgument("bad address '" + text + "'");
    m.host = text.substr(1, close - 1);
    if (close + 1 < text.size()) {
      if (text[close + 1] != ':') return Status::invalidArgument("bad address '" + text + "'");
      portText = text.substr(close + 2);
    }
  } else {
    const size_t colon = text.rfind(':');
    m.host = text.substr(0, colon);
    if (colon != std::string::npos) portText = text.substr(colon + 1);
  }
  if (m.host.empty()) return Status::invalidArgument("no host in '" + text + "'");
  if (!portText.empty()) {
    if (portText.find_first_not_of("0123456789") != std::string::npos || portText.size() > 5 ||
        std::stoul(portText) > 65535) {
      return Status::invalidArgument("bad port in '" + text + "'");
    }
    m.port = static_cast<uint16_t>(std::stoul(portText));
  }
  return m;
}

Result<std::vector<Member>> parseHostfileText(const std::string& text, uint16_t defaultPort) {
  std::vector<Member> out;
  std::stringstream ss(text);
  std::string line;
  while (std::getline(ss, line)) {
    const size_t hash = line.find('#');
    if (hash != std::string::npos) line.resize(hash);
    line = trim(line);
    if (line.empty()) continue;
    // MPI-style "host slots=N": the host is the first word.
    line = line.substr(0, line.find_first_of(" \t"));
    auto m = parseHostPort(line, defaultPort);
    if (!m.isOk()) return m.status();
    m->id = static_cast<uint32_t>(out.size());
    out.push_back(*m);
  }
  return out;
}

Result<std::vector<std::string>> expandSlurmNodelist(const std::string& list) {
  std::vector<std::string> out;
  for (const auto& raw : splitTopLevel(trim(list))) {
    const std::string item = trim(raw);
    if (item.empty()) continue;
    auto e = expandOne(item);
    if (!e.isOk()) return e.status();
    out.insert(out.end(), e->begin(), e->end());
  }
  if (out.empty()) return Status::invalidArgument("empty node list");
  return out;
}

Result<Membership> resolveMembership(const MembershipSpec& spec) {
  const int sources = (!spec.peers.empty()) + (!spec.hostfile.empty()) + (spec.slurm ? 1 : 0);
  if (sources != 1) {
    return Status::invalidArgument("give exactly one of --peers, --hostfile, --slurm");
  }
  Membership mb;
  std::optional<Member> listen;
  if (!spec.listen.empty()) {
    auto l = parseHostPort(spec.listen, spec.defaultPort);
    if (!l.isOk()) return Status::invalidArgument("--listen: " + l.status().message());
    listen = *l;
  }
  std::optional<uint32_t> self = spec.nodeId;
  if (spec.slurm) {
    const char* list = std::getenv("SLURM_JOB_NODELIST");
    if (list == nullptr) list = std::getenv("SLURM_NODELIST");
    if (list == nullptr) return Status::invalidArgument("--slurm: SLURM_JOB_NODELIST is not set");
    auto hosts = expandSlurmNodelist(list);
    if (!hosts.isOk())
      return Status::invalidArgument("SLURM_JOB_NODELIST: " + hosts.status().message());
    const uint16_t port = listen ? listen->port : spec.defaultPort;
    for (const auto& h : *hosts) {
      mb.members.push_back(Member{static_cast<uint32_t>(mb.members.size()), h, port});
    }
    if (!self) {
      const char* id = std::getenv("SLURM_NODEID");
      if (id == nullptr) return Status::invalidArgument("--slurm: SLURM_NODEID is not set");
      self = static_cast<uint32_t>(std::strtoul(id, nullptr, 10));
    }
    if (!listen) listen = Member{0, "0.0.0.0", port};
  } else {
    std::string text = spec.peers;
    if (!spec.hostfile.empty()) {
      std::ifstream f(spec.hostfile);
      if (!f) return Status::invalidArgument("cannot read hostfile " + spec.hostfile);
      std::stringstream ss;
      ss << f.rdbuf();
      text = ss.str();
    } else {
      for (char& c : text) {
        if (c == ',') c = '\n';
      }
    }
    auto members = parseHostfileText(text, spec.defaultPort);
    if (!members.isOk()) return members.status();
    mb.members = std::move(members).value();
    if (!self && listen) {
      for (const auto& m : mb.members) {
        if (m.host == listen->host && m.port == listen->port) self = m.id;
      }
      if (!self) {
        return Status::invalidArgument("--listen " + listen->address() +
                                       " is not one of the members (give --node-id N)");
      }
    }
    if (!self) return Status::invalidArgument("give --listen ADDR:PORT or --node-id N");
  }
  if (mb.members.empty()) return Status::invalidArgument("no members");
  if (*self >= mb.members.size()) {
    return Status::invalidArgument("node id " + std::to_string(*self) + " is not below " +
                                   std::to_string(mb.members.size()) + " members");
  }
  mb.selfId = *self;
  if (!listen) listen = mb.members[mb.selfId];
  mb.listenHost = listen->host;
  mb.listenPort = listen->port;
  return mb;
}

}  // namespace epochfs::transport
