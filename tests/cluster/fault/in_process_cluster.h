// In-process UcxCluster nodes over real UCX (UCX_TLS=tcp on loopback) for
// the peer fault tests: each node serves deterministic bytes per (file, chunk)
// and counts what it served.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "cache/chunk.h"
#include "tests/loopback_port.h"
#include "transport/cluster.h"

namespace epochfs::transport::testing {

using namespace std::chrono_literals;

inline constexpr const char* kSecret = "the-job-secret-0123";

using test_support::freeLoopbackPort;

inline std::vector<char> bytesFor(uint64_t fileId, uint32_t index, size_t n) {
  std::vector<char> v(n);
  uint64_t x = fileId * 31 + index;
  for (size_t i = 0; i < n; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    v[i] = static_cast<char>(x >> 56);
  }
  return v;
}

inline cache::FileIdentity identityOf(uint64_t fileId, uint64_t size) {
  return cache::FileIdentity{fileId, size, 1000, 2000, fileId % 977};
}

struct Node {
  std::unique_ptr<Cluster> cluster;
  std::atomic<int> served{0};
};

inline std::vector<Member> loopbackMembers(int n) {
  std::vector<Member> m;
  for (int i = 0; i < n; ++i) m.push_back(Member{uint32_t(i), "127.0.0.1", freeLoopbackPort()});
  return m;
}

// `tune` adjusts the config before the start (fault hook, suspect timing...).
// The node serves only files whose identity is identityOf(fileId, size).
inline std::unique_ptr<Node> startNode(const std::vector<Member>& m, uint32_t self,
                                       const std::function<void(ClusterConfig&)>& tune = nullptr) {
  setenv("UCX_TLS", "tcp", 0);
  auto node = std::make_unique<Node>();
  ClusterConfig c;
  c.members = m;
  c.selfId = self;
  c.listenHost = m[self].host;
  c.listenPort = m[self].port;
  c.secret = kSecret;
  c.capacityBytes = 1 << 30;
  if (tune) tune(c);
  Node* raw = node.get();
  auto r = Cluster::start(
      c, [raw](const cache::FileIdentity& id, uint32_t index) -> cache::Result<cache::ChunkRef> {
        if (!(id == identityOf(id.fileId, id.size))) return cache::Status::stale("another version");
        raw->served.fetch_add(1);
        return cache::makeChunk(cache::ChunkKey::make(1, id.fileId, index), id,
                                bytesFor(id.fileId, index, id.size));
      });
  EXPECT_TRUE(r.isOk()) << r.status().toString();
  if (r.isOk()) node->cluster = std::move(r).value();
  return node;
}

inline bool waitFor(const std::function<bool()>& cond, std::chrono::milliseconds t) {
  const auto until = std::chrono::steady_clock::now() + t;
  while (std::chrono::steady_clock::now() < until) {
    if (cond()) return true;
    std::this_thread::sleep_for(10ms);
  }
  return cond();
}

inline size_t liveCount(const Cluster& c) {
  size_t live = 0;
  for (const auto& p : c.peers()) live += p.live;
  return live;
}

}  // namespace epochfs::transport::testing
