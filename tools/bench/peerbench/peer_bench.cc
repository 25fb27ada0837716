// peer-bench: transport-level benchmark of the peer fetch path.
//
// Two processes on loopback: the bench forks an owner, which starts a real
// UcxCluster (node 1) holding --chunks chunks of one file warm in RAM (its
// ServeFn hands out the same shared ChunkRefs a RAM-tier hit of
// ChunkCache::getForPeer does: no copy, no source read), and the requester
// (node 0, this process) fetches them through UcxCluster::fetch (handshake,
// payload MAC unless --integrity checksum, XXH3 verify on receipt) with K
// threads, one request in flight each. No FUSE, no cache on the requester.
// UCX_TLS is taken from the environment (default tcp), the same in both.
//
// Prints one JSON line per K: {"inflight":K,"fetches":n,"bytes":b,"seconds":s,"mib_s":x}.
//
//   peer-bench [--chunks 64] [--chunk-size 1048576] [--inflight 1,4,8] [--seconds 3]
//              [--integrity mac|checksum] [--short-last]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cache/chunk.h"
#include "cache/chunk_key.h"
#include "transport/cluster.h"
#include "transport/placement.h"

namespace {

using namespace epochfs;
using Clock = std::chrono::steady_clock;

constexpr uint64_t kDatasetId = 1;
constexpr const char* kSecret = "peer-bench-secret-0123456789";

struct Options {
  unsigned chunks = 64;
  size_t chunkSize = 1 << 20;
  std::vector<unsigned> inflight{1, 4, 8};
  double seconds = 3;
  bool mac = true;
  bool shortLast = false;  // the file's last chunk is half a chunk (replies of two lengths)
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "peer-bench: %s\nusage: peer-bench [--chunks N] [--chunk-size BYTES] "
               "[--inflight K1,K2,..] [--seconds S] [--integrity mac|checksum] [--short-last]\n",
               why);
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(("missing value of " + a).c_str());
      return argv[++i];
    };
    if (a == "--chunks") {
      o.chunks = std::stoul(value());
    } else if (a == "--chunk-size") {
      o.chunkSize = std::stoul(value());
    } else if (a == "--seconds") {
      o.seconds = std::stod(value());
    } else if (a == "--inflight") {
      o.inflight.clear();
      std::string v = value();
      for (size_t pos = 0; pos <= v.size();) {
        size_t comma = v.find(',', pos);
        if (comma == std::string::npos) comma = v.size();
        o.inflight.push_back(std::stoul(v.substr(pos, comma - pos)));
        pos = comma + 1;
      }
    } else if (a == "--short-last") {
      o.shortLast = true;
    } else if (a == "--integrity") {
      std::string v = value();
      if (v != "mac" && v != "checksum") usage("--integrity is mac or checksum");
      o.mac = v == "mac";
    } else {
      usage(("unknown argument " + a).c_str());
    }
  }
  if (o.chunks == 0 || o.chunkSize == 0 || o.seconds <= 0 || o.inflight.empty()) {
    usage("sizes, counts and --seconds must be positive");
  }
  for (unsigned k : o.inflight) {
    if (k == 0 || k > 256) usage("--inflight values are 1..256");
  }
  return o;
}

uint16_t freeLoopbackPort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

std::vector<char> bytesFor(uint32_t index, size_t n) {
  std::vector<char> v(n);
  uint64_t x = 0x9e3779b97f4a7c15ull * (index + 1);
  for (size_t i = 0; i < n; i += 8) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    std::memcpy(&v[i], &x, std::min<size_t>(8, n - i));
  }
  return v;
}

transport::ClusterConfig configFor(const std::vector<transport::Member>& m, uint32_t self,
                                   const Options& o) {
  transport::ClusterConfig c;
  c.members = m;
  c.selfId = self;
  c.listenHost = m[self].host;
  c.listenPort = m[self].port;
  c.secret = kSecret;
  c.macPayloads = o.mac;
  c.capacityBytes = 1ull << 30;
  c.deadline = std::chrono::milliseconds(10000);
  return c;
}

// The owner: serves chunk i of `id` from RAM until its parent goes away.
int ownerMain(const std::vector<transport::Member>& m, const Options& o,
              const cache::FileIdentity& id, int readyFd) {
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  std::vector<cache::ChunkRef> chunks;
  for (uint32_t i = 0; i < o.chunks; ++i) {
    const size_t off = size_t(i) * o.chunkSize;
    chunks.push_back(cache::makeChunk(cache::ChunkKey::make(kDatasetId, id.fileId, i), id,
                                      bytesFor(i, std::min(o.chunkSize, id.size - off))));
  }
  auto r = transport::Cluster::start(
      configFor(m, 1, o),
      [&](const cache::FileIdentity& asked, uint32_t index) -> cache::Result<cache::ChunkRef> {
        if (!(asked == id)) return cache::Status::stale("another version");
        if (index >= chunks.size()) return cache::Status::notFound("no such chunk");
        return chunks[index];
      });
  if (!r.isOk()) {
    std::fprintf(stderr, "peer-bench owner: %s\n", r.status().toString().c_str());
    return 1;
  }
  char c = 'r';
  if (write(readyFd, &c, 1) != 1) return 1;
  // Until the requester closes the pipe.
  while (read(readyFd, &c, 1) > 0) {
  }
  return 0;
}

bool waitLive(const transport::Cluster& c, std::chrono::seconds t) {
  const auto until = Clock::now() + t;
  while (Clock::now() < until) {
    for (const auto& p : c.peers()) {
      if (p.id == 1 && p.live) return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

struct Result {
  uint64_t fetches = 0, bytes = 0, errors = 0;
  double seconds = 0;
  std::string firstError;
};

// K threads fetch chunks (thread t: t, t+K, ... round the file) for `seconds`.
Result measure(transport::Cluster& c, const cache::FileIdentity& id, const Options& o, unsigned k,
               double seconds) {
  std::atomic<uint64_t> fetches{0}, bytes{0}, errors{0};
  std::atomic<bool> stop{false};
  std::string firstError;
  std::mutex errMu;
  std::vector<std::thread> threads;
  const auto start = Clock::now();
  for (unsigned t = 0; t < k; ++t) {
    threads.emplace_back([&, t] {
      for (uint64_t n = t; !stop.load(std::memory_order_relaxed); n += k) {
        const uint32_t index = n % o.chunks;
        auto r = c.fetch("peer-bench.bin", id, cache::ChunkKey::make(kDatasetId, id.fileId, index));
        if (r.isOk()) {
          fetches.fetch_add(1, std::memory_order_relaxed);
          bytes.fetch_add(r.value()->size(), std::memory_order_relaxed);
        } else {
          errors.fetch_add(1, std::memory_order_relaxed);
          std::lock_guard<std::mutex> lock(errMu);
          if (firstError.empty()) firstError = r.status().toString();
        }
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (auto& t : threads) t.join();
  Result res;
  res.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  res.fetches = fetches;
  res.bytes = bytes;
  res.errors = errors;
  res.firstError = firstError;
  return res;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  setenv("UCX_TLS", "tcp", 0);
  std::vector<transport::Member> m{{0, "127.0.0.1", freeLoopbackPort()},
                                   {1, "127.0.0.1", freeLoopbackPort()}};
  const uint64_t size = uint64_t(o.chunks) * o.chunkSize - (o.shortLast ? o.chunkSize / 2 : 0);

  // A file that placement gives to node 1 (both members live with equal
  // capacities, as configured): the owner serves it, fetch() asks node 1.
  cache::FileIdentity id{0, size, 1000, 2000, 7};
  for (uint64_t f = 0x5eed0001;; ++f) {
    if (transport::rendezvousOwners(f, {{0, 1.0}, {1, 1.0}}, 1).front() == 1) {
      id.fileId = f;
      break;
    }
  }
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) return 1;
  const pid_t child = fork();
  if (child < 0) return 1;
  if (child == 0) {
    close(fds[0]);
    _exit(ownerMain(m, o, id, fds[1]));
  }
  close(fds[1]);
  char ready = 0;
  if (read(fds[0], &ready, 1) != 1) {
    std::fprintf(stderr, "peer-bench: the owner did not start\n");
    return 1;
  }
  auto started = transport::Cluster::start(configFor(m, 0, o), [](const cache::FileIdentity&,
                                                                  uint32_t) {
    return cache::Result<cache::ChunkRef>(cache::Status::notFound("the requester holds nothing"));
  });
  if (!started.isOk()) {
    std::fprintf(stderr, "peer-bench: %s\n", started.status().toString().c_str());
    return 1;
  }
  auto cluster = std::move(started).value();
  if (!waitLive(*cluster, std::chrono::seconds(20)) ||
      cluster->owners(id.fileId) != std::vector<uint32_t>{1}) {
    std::fprintf(stderr, "peer-bench: the owner did not come up (or does not own the file)\n");
    for (const auto& p : cluster->peers()) {
      std::fprintf(stderr, "  node %u %s: %s (live %d) %s\n", p.id, p.address.c_str(),
                   p.state.c_str(), p.live, p.lastError.c_str());
    }
    return 1;
  }

  // Warm-up: every chunk once, each byte-checked.
  for (uint32_t i = 0; i < o.chunks; ++i) {
    auto r = cluster->fetch("peer-bench.bin", id, cache::ChunkKey::make(kDatasetId, id.fileId, i));
    if (!r.isOk()) {
      std::fprintf(stderr, "peer-bench: warm-up fetch %u: %s\n", i, r.status().toString().c_str());
      return 1;
    }
    const size_t want = std::min<uint64_t>(o.chunkSize, size - uint64_t(i) * o.chunkSize);
    if (r.value()->size() != want || r.value()->data != bytesFor(i, want)) {
      std::fprintf(stderr, "peer-bench: chunk %u has wrong bytes\n", i);
      return 1;
    }
  }
  int rc = 0;
  for (unsigned k : o.inflight) {
    Result r = measure(*cluster, id, o, k, o.seconds);
    const double mib = r.bytes / 1048576.0 / r.seconds;
    std::printf(
        "{\"inflight\":%u,\"fetches\":%llu,\"bytes\":%llu,\"errors\":%llu,\"seconds\":%.3f,"
        "\"mib_s\":%.1f,\"integrity\":\"%s\",\"tls\":\"%s\",\"chunk_size\":%zu}\n",
        k, (unsigned long long)r.fetches, (unsigned long long)r.bytes, (unsigned long long)r.errors,
        r.seconds, mib, o.mac ? "mac" : "checksum", std::getenv("UCX_TLS"), o.chunkSize);
    std::fflush(stdout);
    if (r.errors > 0) {
      std::fprintf(stderr, "peer-bench: %llu fetches failed, first: %s\n",
                   (unsigned long long)r.errors, r.firstError.c_str());
      rc = 1;
    }
  }
  cluster.reset();
  close(fds[0]);
  int status = 0;
  waitpid(child, &status, 0);
  return rc;
}
