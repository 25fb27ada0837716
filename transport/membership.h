// Membership: who the job's daemons are, from --peers, --hostfile or --slurm
// (pure parsing; no network). The member list is the same on every node and
// a member's id is its position in it (a hostfile's line among non-comment
// lines), so every node computes the same placement.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cache/status.h"
#include "transport/cluster.h"

namespace epochfs::transport {

inline constexpr uint16_t kDefaultPort = 7711;

struct MembershipSpec {
  std::string peers;     // "host:port,host:port" (every member, same order on all nodes)
  std::string hostfile;  // one host[:port] per line, '#' comments
  bool slurm = false;    // SLURM_JOB_NODELIST + SLURM_NODEID
  std::string listen;    // "ADDR:PORT"; default: this node's entry (slurm: 0.0.0.0:port)
  std::optional<uint32_t> nodeId;
  uint16_t defaultPort = kDefaultPort;
};

struct Membership {
  std::vector<Member> members;
  uint32_t selfId = 0;
  std::string listenHost;
  uint16_t listenPort = 0;
};

// True when `spec` asks for a cluster at all.
inline bool wantsCluster(const MembershipSpec& s) {
  return !s.peers.empty() || !s.hostfile.empty() || s.slurm;
}

cache::Result<Membership> resolveMembership(const MembershipSpec& spec);

// "host", "host:port", "[v6]:port" -> member (id left 0).
cache::Result<Member> parseHostPort(const std::string& text, uint16_t defaultPort);
// Hostfile lines (comments and blanks skipped) -> members with ids.
cache::Result<std::vector<Member>> parseHostfileText(const std::string& text, uint16_t defaultPort);
// SLURM_JOB_NODELIST as `scontrol show hostnames` expands it:
// "n[01-03,7],gpu[1-2]-ib,login" -> n01 n02 n03 n07 gpu1-ib gpu2-ib login.
cache::Result<std::vector<std::string>> expandSlurmNodelist(const std::string& list);

}  // namespace epochfs::transport
