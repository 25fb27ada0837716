// ChunkServer: the serving side of the peer protocol, off the progress
// thread. The progress thread submits authenticated requests; a fixed set of
// serve threads answers each through ServeFn (a RAM-tier hit hands out the
// cached ChunkRef itself; a miss may read the source), fills and signs the
// reply and hands it to `send` (UcxCluster posts it to the progress thread,
// which sends the chunk's bytes from that same buffer, no copy, keeping the
// ChunkRef alive until UCX completes the send). Internal to transport/.
//
// Thread-safety: submit() from any thread; the queue is bounded
// (ClusterConfig::maxQueuedServes). The destructor stops and joins the threads.
#pragma once

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "cache/mutex.h"
#include "transport/cluster.h"
#include "transport/peer_auth.h"
#include "transport/wire_format.h"

namespace epochfs::transport {

class ChunkServer {
 public:
  using Clock = std::chrono::steady_clock;

  struct Task {
    uint64_t connId = 0;  // the inbound connection to answer on
    uint32_t remote = 0;  // the asking node
    wire::Request req;
    Clock::time_point arrived;
    PayloadMac mac;  // the connection's session key (copied by the progress thread)
  };
  struct Reply {
    uint64_t connId = 0;
    wire::Reply header;
    cache::ChunkRef chunk;  // null for a refusal or an error
  };
  // What this node served to one asking node (PeerInfo).
  struct Stats {
    std::atomic<uint64_t> served{0}, bytesServed{0}, serveErrors{0}, serveRefused{0};
    std::atomic<uint64_t> faultsInjected{0};
  };
  using SendFn = std::function<void(Reply)>;

  // `macCounter` numbers everything this node signs (shared with the
  // requests it sends: a nonce never repeats); `statsByNode[id]` counts what
  // node `id` asked (null for this node).
  ChunkServer(const ClusterConfig& config, ServeFn serve, std::atomic<uint64_t>& macCounter,
              std::vector<Stats*> statsByNode, SendFn send);
  ~ChunkServer();
  ChunkServer(const ChunkServer&) = delete;
  ChunkServer& operator=(const ChunkServer&) = delete;

  void start();
  // False when the queue is full: the caller answers "unavailable" at once.
  bool submit(Task task);
  // Stops and joins the serve threads; queued tasks are dropped (their askers time out
  // or see the connection close).
  void stop();

 private:
  void serveMain();
  Reply answer(const Task& t);
  // TEST-ONLY (config.fault): the chunk to send instead of `chunk`, corrupted,
  // with the reply's checksum and tag set as the fault mode says.
  cache::ChunkRef injectFault(const cache::ChunkRef& chunk, wire::Reply& reply,
                              const PayloadMac& mac, Stats& asker);

  const ClusterConfig& cfg_;
  const ServeFn serve_;
  const bool signing_;
  std::atomic<uint64_t>& macCounter_;
  const std::vector<Stats*> stats_;
  const SendFn send_;
  std::atomic<uint64_t> chunksServed_{0};  // for the fault hook's EVERY

  cache::Mutex mu_;
  cache::CondVar cv_;  // a task queued, or stop
  bool stop_ GUARDED_BY(mu_) = false;
  std::deque<Task> queue_ GUARDED_BY(mu_);
  std::vector<std::thread> threads_;
};

}  // namespace epochfs::transport
