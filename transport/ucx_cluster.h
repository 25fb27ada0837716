// UcxCluster: Cluster over UCX. Internal to transport/ (includes ucp.h).
//
// Threads and ownership:
// - One progress thread owns the UCX worker (UCS_THREAD_MODE_SINGLE), every
//   endpoint, the listener, the handshake state and the table of requests in
//   flight. It sleeps in epoll on the worker's event fd and an eventfd of its
//   own (ucp_worker_arm first), never busy-polls.
// - Callers of fetch() (FUSE and prefetch threads) hand it a Pending through
//   the op queue (opMu_), wake it by the eventfd and wait on the Pending's
//   condition variable until the reply, an error or the deadline. They verify
//   the reply's MAC and checksum themselves, off the progress thread.
// - ChunkServer's serve threads answer peers: ServeFn (may read the source),
//   sign, and hand the reply to the progress thread. Their queue is bounded.
// - Placement reads the live view under liveMu_ (shared).
// Lock order: peers() takes infoMu_ inside liveMu_ (shared); no other lock
// nests. Pending::mu, opMu_ are leaf locks.
#pragma once

#include <sys/socket.h>
#include <ucp/api/ucp.h>

#include <atomic>
#include <deque>
#include <future>
#include <map>
#include <thread>
#include <unordered_map>

#include "cache/mutex.h"
#include "cache/shared_mutex.h"
#include "transport/chunk_server.h"
#include "transport/cluster.h"
#include "transport/peer_auth.h"
#include "transport/placement.h"
#include "transport/placement_builder.h"
#include "transport/placement_table.h"
#include "transport/receive_buffer_pool.h"
#include "transport/wire_format.h"

namespace epochfs::transport {

class UcxCluster final : public Cluster {
 public:
  using Clock = std::chrono::steady_clock;

  UcxCluster(const ClusterConfig& config, ServeFn serve);
  ~UcxCluster() override;
  cache::Status init();

  bool ownedElsewhere(uint64_t fileId) const override;
  cache::Result<cache::ChunkRef> fetch(const std::string& relPath, const cache::FileIdentity& id,
                                       const cache::ChunkKey& key) override;
  std::vector<PeerInfo> peers() const override;
  std::vector<uint32_t> owners(uint64_t fileId) const override;
  Fit fit() const override;
  uint16_t listenPort() const override { return port_.load(); }
  const ClusterConfig& config() const override { return cfg_; }
  void setFiles(std::vector<FileBytes> files) override;
  cache::Result<cache::ChunkRef> fetchFromNode(uint32_t node, const cache::FileIdentity& id,
                                               uint32_t index) override;

 private:
  enum class State : int { kSelf, kDown, kConnecting, kUp, kSuspect, kRefused };

  struct Peer {
    Member member;
    sockaddr_storage addr{};
    socklen_t addrLen = 0;
    // Progress thread only.
    ucp_ep_h ep = nullptr;
    Nonce clientNonce{};
    PayloadMac mac;
    unsigned inFlight = 0;
    unsigned backoffMs = 250;
    Clock::time_point retryAt{};
    Clock::time_point connectStarted{};
    Clock::time_point nextPing{};
    uint64_t pingSeq = 0;
    // Suspect for bad payloads: not asked (nor pinged) before suspectUntil;
    // the next suspicion lasts nextSuspectFor (doubling, reset after a quiet minute).
    Clock::time_point suspectUntil{};
    Clock::time_point lastSuspected{};
    std::chrono::milliseconds nextSuspectFor{0};
    // Shared.
    std::atomic<int> state{static_cast<int>(State::kDown)};
    std::atomic<uint64_t> capacity{0};
    std::atomic<uint64_t> fetches{0}, bytesFetched{0}, fetchErrors{0}, timeouts{0};
    ChunkServer::Stats serving;  // what this node served to the peer
    std::atomic<uint64_t> authFailures{0}, connects{0};
    std::atomic<uint64_t> macFailures{0}, checksumFailures{0}, fetchRefused{0};
    std::atomic<uint64_t> suspectCount{0};
    std::atomic<int64_t> suspectUntilMs{0};  // suspectUntil for peers(), steady-clock ms
    // Guarded by the cluster's infoMu_ (which the analysis cannot name from
    // this struct): the last error, the times of recent bad replies, and
    // whether a suspicion is queued for the progress thread.
    std::string lastError;
    std::deque<Clock::time_point> badReplies;
    bool suspectQueued = false;
  };

  struct Inbound {
    ucp_ep_h ep = nullptr;
    uint64_t connId = 0;
    bool challenged = false;
    bool authed = false;
    uint32_t remote = 0;
    Clock::time_point accepted{};
    Nonce clientNonce{}, serverNonce{};
    PayloadMac mac;
    uint64_t lastCounter = 0;
  };

  struct Pending {
    cache::Mutex mu;
    cache::CondVar cv;  // done
    bool done GUARDED_BY(mu) = false;
    // Written before `done` is set and read after it is seen: setting and
    // seeing `done` under mu orders them (so not annotated).
    cache::Status status;
    wire::Reply reply;
    cache::ChunkBuffer data;
    PayloadMac mac;  // the session's, copied when sent
    // Set by the caller before queueing.
    uint32_t peer = 0;
    cache::ChunkKey key;
    cache::FileIdentity id;
    Clock::time_point deadline;
    uint64_t reqId = 0;  // progress thread
  };

  struct Op {
    std::shared_ptr<Pending> fetch;                 // a request to send, or
    uint64_t connId = 0;                            // a reply to send on an inbound connection, or
    int suspect = -1;                               // a peer to mark suspect (bad payloads), or
    std::shared_ptr<std::vector<FileBytes>> files;  // the files to place (setFiles)
    wire::Reply reply;
    cache::ChunkRef chunk;
  };

  struct AmArg {
    UcxCluster* self;
    uint16_t id;
  };

  // Progress thread.
  void progressMain(std::promise<cache::Status>* ready);
  cache::Status setUpWorker();
  void tearDownWorker();
  void drainOps();
  void handleTimers(Clock::time_point now);
  int nextTimeoutMs(Clock::time_point now) const;
  void connect(Peer& p);
  void closeEp(ucp_ep_h ep);
  void peerFailed(Peer& p, State next, const std::string& why);
  void markSuspect(Peer& p, Clock::time_point now);
  void setState(Peer& p, State s);
  void recomputeLive();
  // Makes placer_ over `files` (progress thread, or the constructor).
  void startPlacement(std::vector<FileBytes> files) EXCLUDES(liveMu_);
  // placer_, or null before there are files (progress thread).
  PlacementBuilder* placementStarted() const EXCLUDES(liveMu_);
  // Called by placer_ with the table built for live-set `generation`.
  void installTable(std::shared_ptr<const PlacementTable> table, uint64_t generation);
  void complete(const std::shared_ptr<Pending>& p, cache::Status s);
  void sendRequest(const std::shared_ptr<Pending>& p);
  void sendReply(Op& op);
  bool sendAm(ucp_ep_h ep, uint16_t id, const void* header, size_t headerLen,
              cache::ChunkRef chunk);
  Peer* peerByEp(ucp_ep_h ep);
  Inbound* inboundByEp(ucp_ep_h ep);
  void dropInbound(ucp_ep_h ep, const std::string& why);
  ucs_status_t onAm(uint16_t id, const void* header, size_t headerLen, void* data, size_t len,
                    const ucp_am_recv_param_t* param);
  void onHello(ucp_ep_h ep, const wire::Hello& h);
  void onChallenge(ucp_ep_h ep, const wire::Hello& h);
  void onProof(ucp_ep_h ep, const wire::Proof& m);
  void onWelcome(ucp_ep_h ep, const wire::Welcome& m);
  void onRequest(ucp_ep_h ep, const wire::Request& r);
  ucs_status_t onReply(ucp_ep_h ep, const wire::Reply& r, void* data, size_t len,
                       const ucp_am_recv_param_t* param);

  static void onConnRequest(ucp_conn_request_h req, void* arg);
  static void onEpError(void* arg, ucp_ep_h ep, ucs_status_t status);
  static ucs_status_t amTrampoline(void* arg, const void* header, size_t headerLen, void* data,
                                   size_t len, const ucp_am_recv_param_t* param);
  static void onSendDone(void* request, ucs_status_t status, void* user);
  static void onRecvDone(void* request, ucs_status_t status, size_t length, void* user);

  // Callers and serve threads.
  void post(Op op);
  cache::Result<cache::ChunkRef> fetchFrom(uint32_t node, const cache::FileIdentity& id,
                                           const cache::ChunkKey& key, Clock::time_point deadline);
  void setLastError(Peer& p, const std::string& why);
  // A reply from `p` failed its MAC or checksum: counts it toward suspicion.
  void noteBadReply(Peer& p, const std::string& why);

  const ClusterConfig cfg_;
  const wire::Integrity integrity_;
  std::vector<std::unique_ptr<Peer>> peers_;  // indexed by node id; [selfId] is this node
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

  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  ucp_listener_h listener_ = nullptr;
  int workerFd_ = -1, wakeFd_ = -1, epollFd_ = -1;
  std::array<AmArg, wire::kLastAm - wire::kFirstAm + 1> amArgs_{};
  std::unordered_map<ucp_ep_h, Inbound> inbound_;
  std::unordered_map<uint64_t, ucp_ep_h> inboundById_;
  uint64_t nextConnId_ = 1;
  uint64_t nextReqId_ = 1;
  std::unordered_map<uint64_t, std::shared_ptr<Pending>> pending_;
  std::vector<ucp_ep_h> errored_;
  std::vector<void*> closing_;
  std::thread progress_;

  cache::Mutex opMu_;
  std::deque<Op> ops_ GUARDED_BY(opMu_);
  std::atomic<bool> opsQueued_{false};  // ops_ is not empty (read without opMu_)
  // setFiles() posted files the progress thread has not placed yet (fit().ready false).
  std::atomic<bool> filesPending_{false};
  std::atomic<bool> sleeping_{false};  // the progress thread is in (or entering) epoll_wait

  std::unique_ptr<ChunkServer> server_;  // after peers_: its stats live there

  mutable cache::SharedMutex liveMu_;
  std::vector<Candidate> live_ GUARDED_BY(liveMu_);
  // Bounded-load placement over the files: null without them, and while the
  // table of the current live set is being built (plain rendezvous then).
  std::shared_ptr<const PlacementTable> table_ GUARDED_BY(liveMu_);
  uint64_t liveCapacity_ GUARDED_BY(liveMu_) = 0;
  // Every live member announced its capacity.
  bool liveCapacityKnown_ GUARDED_BY(liveMu_) = false;
  uint64_t datasetBytes_ GUARDED_BY(liveMu_) = 0;  // of the files placed
  // +1 per live-set change; names the table wanted.
  uint64_t liveGeneration_ GUARDED_BY(liveMu_) = 0;
  // Null until there are files (ClusterConfig::files or setFiles); set on the
  // progress thread, which alone reads it without the lock.
  std::unique_ptr<PlacementBuilder> placer_ GUARDED_BY(liveMu_);

  mutable cache::Mutex infoMu_;  // the Peer fields that say so
};

}  // namespace epochfs::transport
