// UcxCluster: Cluster over UCX. Internal to transport/ (includes ucp.h).
// It joins the concept parts, which know nothing of UCX:
// - PeerHealth (peer_health.h): each member's state, backoff, suspicion, pings;
// - LivePlacement (live_placement.h): the owners of a file among the live members;
// - RequestTable (request_table.h): the requests in flight and their deadlines;
// - ClientSession / ServerSession (peer_session.h): the handshake and session MACs;
// - OpQueue (op_queue.h): what other threads hand the progress thread;
// - ChunkServer (chunk_server.h): the serve threads.
// What is left here is UCX: the context, worker, listener and endpoints, the
// progress loop (ucx_cluster.cc), the active messages (ucx_cluster_protocol.cc)
// and the callers' side of a fetch (ucx_cluster_fetch.cc).
//
// Threads and ownership:
// - One progress thread owns the UCX worker (UCS_THREAD_MODE_SINGLE), every
//   endpoint, the listener, the sessions, the request table and drives
//   PeerHealth. It sleeps in epoll on the worker's event fd and the OpQueue's
//   eventfd (ucp_worker_arm first), never busy-polls.
// - Callers of fetch() (FUSE and prefetch threads) hand it a PendingFetch
//   through the OpQueue and wait on it until the reply, an error or the
//   deadline. They verify the reply's MAC and checksum themselves, off the
//   progress thread.
// - ChunkServer's serve threads answer peers: ServeFn (may read the source),
//   sign, and hand the reply to the progress thread. Their queue is bounded.
// No lock of this class's own: each part holds its own, and none nests.
#pragma once

#include <sys/socket.h>
#include <ucp/api/ucp.h>

#include <atomic>
#include <future>
#include <thread>
#include <unordered_map>

#include "transport/chunk_server.h"
#include "transport/cluster.h"
#include "transport/live_placement.h"
#include "transport/op_queue.h"
#include "transport/peer_health.h"
#include "transport/peer_session.h"
#include "transport/receive_buffer_pool.h"
#include "transport/request_table.h"
#include "transport/wire_format.h"

namespace epochfs::transport {

class UcxCluster final : public Cluster {
 public:
  using Clock = std::chrono::steady_clock;
  using State = PeerHealth::State;

  UcxCluster(const ClusterConfig& config, ServeFn serve);
  ~UcxCluster() override;
  cache::Status init();

  bool ownedElsewhere(uint64_t fileId) const override { return placement_->ownedElsewhere(fileId); }
  cache::Result<cache::ChunkRef> fetch(const std::string& relPath, const cache::FileIdentity& id,
                                       const cache::ChunkKey& key) override;
  std::vector<PeerInfo> peers() const override;
  std::vector<uint32_t> owners(uint64_t fileId) const override {
    return placement_->owners(fileId);
  }
  Fit fit() const override { return placement_->fit(); }
  uint16_t listenPort() const override { return port_.load(); }
  const ClusterConfig& config() const override { return cfg_; }
  void setFiles(std::vector<FileBytes> files) override;
  cache::Result<cache::ChunkRef> fetchFromNode(uint32_t node, const cache::FileIdentity& id,
                                               uint32_t index) override;

 private:
  // One other member: its address, this node's connection to it and what
  // went through it.
  struct Peer {
    Member member;
    sockaddr_storage addr{};
    socklen_t addrLen = 0;
    // Progress thread only.
    ucp_ep_h ep = nullptr;
    ClientSession session;
    // Any thread.
    std::atomic<uint64_t> fetches{0}, bytesFetched{0}, fetchErrors{0}, timeouts{0};
    ChunkServer::Stats serving;  // what this node served to the peer
    std::atomic<uint64_t> authFailures{0}, connects{0};
    std::atomic<uint64_t> macFailures{0}, checksumFailures{0}, fetchRefused{0};
  };

  // One connection a peer made to this node (progress thread only).
  struct Inbound {
    ucp_ep_h ep = nullptr;
    uint64_t connId = 0;
    Clock::time_point accepted{};
    ServerSession session;
  };

  struct AmArg {
    UcxCluster* self;
    uint16_t id;
  };

  // Progress thread (ucx_cluster.cc).
  void progressMain(std::promise<cache::Status>* ready);
  cache::Status setUpWorker();
  void tearDownWorker();
  void drainOps();
  void handleTimers(Clock::time_point now);
  int nextTimeoutMs(Clock::time_point now) const;
  void connect(Peer& p, Clock::time_point now);
  void closeEp(ucp_ep_h ep);
  // Closes the connection to `p`, fails its requests, and tells PeerHealth.
  void peerFailed(Peer& p, State next, const std::string& why);
  void recomputeLive();
  Peer* peerByEp(ucp_ep_h ep);
  Inbound* inboundByEp(ucp_ep_h ep);
  void dropInbound(ucp_ep_h ep, const std::string& why);
  static void onConnRequest(ucp_conn_request_h req, void* arg);
  static void onEpError(void* arg, ucp_ep_h ep, ucs_status_t status);

  // The active messages (ucx_cluster_protocol.cc), progress thread.
  void sendRequest(const std::shared_ptr<PendingFetch>& p);
  void sendReply(ClusterOp& op);
  bool sendAm(ucp_ep_h ep, uint16_t id, const void* header, size_t headerLen,
              cache::ChunkRef chunk);
  ucs_status_t onAm(uint16_t id, const void* header, size_t headerLen, void* data, size_t len,
                    const ucp_am_recv_param_t* param);
  void onHello(ucp_ep_h ep, const wire::Hello& h);
  void onChallenge(ucp_ep_h ep, const wire::Hello& h);
  void onProof(ucp_ep_h ep, const wire::Proof& m);
  void onWelcome(ucp_ep_h ep, const wire::Welcome& m);
  void onRequest(ucp_ep_h ep, const wire::Request& r);
  ucs_status_t onReply(ucp_ep_h ep, const wire::Reply& r, void* data, size_t len,
                       const ucp_am_recv_param_t* param);
  static ucs_status_t amTrampoline(void* arg, const void* header, size_t headerLen, void* data,
                                   size_t len, const ucp_am_recv_param_t* param);
  static void onSendDone(void* request, ucs_status_t status, void* user);
  static void onRecvDone(void* request, ucs_status_t status, size_t length, void* user);

  // Callers and serve threads (ucx_cluster_fetch.cc).
  cache::Result<cache::ChunkRef> fetchFrom(uint32_t node, const cache::FileIdentity& id,
                                           const cache::ChunkKey& key, Clock::time_point deadline);
  // A reply from `p` failed its MAC or checksum: counts it toward suspicion.
  void noteBadReply(Peer& p, const std::string& why);

  const ClusterConfig cfg_;
  const SessionParams session_;
  std::vector<std::unique_ptr<Peer>> peers_;  // indexed by node id; [selfId] is this node
  std::unique_ptr<PeerHealth> health_;
  std::unique_ptr<LivePlacement> placement_;
  RequestTable requests_;  // progress thread
  OpQueue ops_;
  std::atomic<uint16_t> port_{0};
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> macCounter_{1};  // MAC nonces of everything this node signs
  // Length of the largest reply received (the chunk size, or the largest file
  // below it): fetchFrom takes a receive buffer of min(that, what is left of
  // the file) from receivePool_ before queueing, so the progress thread
  // receives straight into it (no resize, no zero-fill, no page faults there).
  // The largest, not the last: with files of random sizes the last reply is
  // short for every file larger than the one before it. Until a full chunk has
  // come, a longer reply swaps in a pooled buffer of its size (onReply).
  std::atomic<uint32_t> replySizeHint_{0};
  const std::shared_ptr<ReceiveBufferPool> receivePool_;

  // Progress thread only.
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  ucp_listener_h listener_ = nullptr;
  int workerFd_ = -1, epollFd_ = -1;
  std::array<AmArg, wire::kLastAm - wire::kFirstAm + 1> amArgs_{};
  std::unordered_map<ucp_ep_h, Inbound> inbound_;
  std::unordered_map<uint64_t, ucp_ep_h> inboundById_;
  uint64_t nextConnId_ = 1;
  uint64_t pingSeq_ = 0;
  std::vector<ucp_ep_h> errored_;
  std::vector<void*> closing_;
  std::thread progress_;

  std::unique_ptr<ChunkServer> server_;  // after peers_: its stats live there
};

}  // namespace epochfs::transport
