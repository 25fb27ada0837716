// UcxCluster: setup, the progress loop, connections and endpoints. Peer
// state and timers: ucx_cluster_peers.cc; the AM protocol (handshake,
// requests, replies): ucx_cluster_protocol.cc; serving: chunk_server.cc.
#include "transport/ucx_cluster.h"

#include <netdb.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace epochfs::transport {

using cache::Result;
using cache::Status;

namespace {

Status resolve(const std::string& host, uint16_t port, sockaddr_storage* out, socklen_t* len) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  const int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &res);
  if (rc != 0 || res == nullptr) {
    return Status::invalidArgument("cannot resolve " + host + ": " + gai_strerror(rc));
  }
  std::memcpy(out, res->ai_addr, res->ai_addrlen);
  *len = res->ai_addrlen;
  freeaddrinfo(res);
  return Status::ok();
}

}  // namespace

Result<std::unique_ptr<Cluster>> Cluster::start(const ClusterConfig& config, ServeFn serve) {
  if (config.members.empty() || config.selfId >= config.members.size()) {
    return Status::invalidArgument("cluster: self is not a member");
  }
  if (config.secret.empty()) return Status::invalidArgument("cluster: a shared secret is required");
  if (config.replicas < 1) return Status::invalidArgument("cluster: --replicas must be >= 1");
  auto c = std::make_unique<UcxCluster>(config, std::move(serve));
  Status s = c->init();
  if (!s.isOk()) return s;
  return std::unique_ptr<Cluster>(std::move(c));
}

UcxCluster::UcxCluster(const ClusterConfig& config, ServeFn serve)
    : cfg_(config),
      integrity_(config.macPayloads ? wire::Integrity::kMac : wire::Integrity::kChecksum),
      receivePool_(ReceiveBufferPool::create(config.receivePoolBytes)) {
  for (const auto& m : cfg_.members) {
    auto p = std::make_unique<Peer>();
    p->member = m;
    if (m.id == cfg_.selfId) {
      p->state = static_cast<int>(State::kSelf);
      p->capacity = cfg_.capacityBytes;
    }
    peers_.push_back(std::move(p));
  }
  for (uint16_t i = 0; i < amArgs_.size(); ++i)
    amArgs_[i] = AmArg{this, uint16_t(wire::kFirstAm + i)};
  std::vector<ChunkServer::Stats*> stats;
  for (auto& p : peers_) stats.push_back(p->member.id == cfg_.selfId ? nullptr : &p->serving);
  server_ = std::make_unique<ChunkServer>(cfg_, std::move(serve), macCounter_, std::move(stats),
                                          [this](ChunkServer::Reply r) {
                                            Op op;
                                            op.connId = r.connId;
                                            op.reply = r.header;
                                            op.chunk = std::move(r.chunk);
                                            post(std::move(op));
                                          });
  if (!cfg_.files.empty()) startPlacement(cfg_.files);
  recomputeLive();
}

void UcxCluster::startPlacement(std::vector<FileBytes> files) {
  uint64_t bytes = 0;
  for (const auto& f : files) bytes += f.bytes;
  auto placer = std::make_unique<PlacementBuilder>(
      std::move(files), cfg_.replicas,
      [this](std::shared_ptr<const PlacementTable> t, uint64_t generation) {
        installTable(std::move(t), generation);
      });
  cache::WriterLock lock(liveMu_);  // fit() reads both
  datasetBytes_ = bytes;
  placer_ = std::move(placer);
}

PlacementBuilder* UcxCluster::placementStarted() const {
  cache::ReaderLock lock(liveMu_);
  return placer_.get();
}

void UcxCluster::setFiles(std::vector<FileBytes> files) {
  filesPending_.store(true);
  Op op;
  op.files = std::make_shared<std::vector<FileBytes>>(std::move(files));
  post(std::move(op));
}

Status UcxCluster::init() {
  for (auto& p : peers_) {
    if (p->member.id == cfg_.selfId) continue;
    Status s = resolve(p->member.host, p->member.port, &p->addr, &p->addrLen);
    if (!s.isOk()) return s;
  }
  // A restarted daemon must be able to listen on its port again at once
  // (TIME-WAIT connections of its previous life). A UCT setting: environment only.
  setenv("UCX_TCP_CM_REUSEADDR", "y", 0);
  ucp_config_t* uconf = nullptr;
  if (ucp_config_read(nullptr, nullptr, &uconf) != UCS_OK)
    return Status::ioError("ucp_config_read failed");
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
  params.features = UCP_FEATURE_AM | UCP_FEATURE_WAKEUP;
  params.mt_workers_shared = 0;
  ucs_status_t st = ucp_init(&params, uconf, &context_);
  ucp_config_release(uconf);
  if (st != UCS_OK) return Status::ioError(std::string("ucp_init: ") + ucs_status_string(st));
  wakeFd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  epollFd_ = epoll_create1(EPOLL_CLOEXEC);
  if (wakeFd_ < 0 || epollFd_ < 0) return Status::fromErrno(errno, "eventfd/epoll");

  // Logged before the threads start: spdlog's registry is then created on
  // this thread (its lazy creation inside uninstrumented libspdlog would look
  // like a race to TSan when the progress thread logs first).
  spdlog::debug("cluster: node {} starting", cfg_.selfId);
  std::promise<Status> ready;
  auto fut = ready.get_future();
  progress_ = std::thread([this, &ready] { progressMain(&ready); });
  Status s = fut.get();
  if (!s.isOk()) {
    progress_.join();
    return s;
  }
  server_->start();
  spdlog::info("cluster: node {} of {} listening on {}:{} (replicas {}, integrity {})", cfg_.selfId,
               cfg_.members.size(), cfg_.listenHost, port_.load(), cfg_.replicas,
               cfg_.macPayloads ? "mac" : "checksum");
  if (cfg_.fault.active()) {
    spdlog::error("cluster: TEST FAULT HOOK ACTIVE ({}={}): this node corrupts chunks it serves",
                  kPeerFaultEnv, cfg_.fault.describe());
  }
  return Status::ok();
}

UcxCluster::~UcxCluster() {
  stop_ = true;
  if (wakeFd_ >= 0) {
    uint64_t one = 1;
    (void)!write(wakeFd_, &one, sizeof one);
  }
  if (progress_.joinable()) progress_.join();
  server_->stop();
  // After the progress thread (which requests tables) and before the members
  // its callback uses go.
  placer_.reset();
  if (context_ != nullptr) ucp_cleanup(context_);
  if (wakeFd_ >= 0) close(wakeFd_);
  if (epollFd_ >= 0) close(epollFd_);
}

Status UcxCluster::setUpWorker() {
  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE | UCP_WORKER_PARAM_FIELD_EVENTS;
  wp.thread_mode = UCS_THREAD_MODE_SINGLE;
  wp.events = UCP_WAKEUP_RX | UCP_WAKEUP_TX;
  ucs_status_t st = ucp_worker_create(context_, &wp, &worker_);
  if (st != UCS_OK)
    return Status::ioError(std::string("ucp_worker_create: ") + ucs_status_string(st));
  ucp_worker_attr_t wa{};
  wa.field_mask = UCP_WORKER_ATTR_FIELD_MAX_AM_HEADER;
  if (ucp_worker_query(worker_, &wa) == UCS_OK && wa.max_am_header < sizeof(wire::Hello)) {
    return Status::unavailable("UCX AM header limit too small: " +
                               std::to_string(wa.max_am_header));
  }
  if (ucp_worker_get_efd(worker_, &workerFd_) != UCS_OK)
    return Status::ioError("ucp_worker_get_efd");
  for (int fd : {workerFd_, wakeFd_}) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    if (epoll_ctl(epollFd_, EPOLL_CTL_ADD, fd, &ev) != 0)
      return Status::fromErrno(errno, "epoll_ctl");
  }
  for (auto& a : amArgs_) {
    ucp_am_handler_param_t hp{};
    hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                    UCP_AM_HANDLER_PARAM_FIELD_ARG;
    hp.id = a.id;
    hp.cb = &UcxCluster::amTrampoline;
    hp.arg = &a;
    if (ucp_worker_set_am_recv_handler(worker_, &hp) != UCS_OK)
      return Status::ioError("AM handler");
  }
  sockaddr_storage addr{};
  socklen_t len = 0;
  Status s = resolve(cfg_.listenHost, cfg_.listenPort, &addr, &len);
  if (!s.isOk()) return s;
  ucp_listener_params_t lp{};
  lp.field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
  lp.sockaddr.addr = reinterpret_cast<const sockaddr*>(&addr);
  lp.sockaddr.addrlen = len;
  lp.conn_handler.cb = &UcxCluster::onConnRequest;
  lp.conn_handler.arg = this;
  st = ucp_listener_create(worker_, &lp, &listener_);
  if (st != UCS_OK) {
    return Status::unavailable("cannot listen on " + cfg_.listenHost + ":" +
                               std::to_string(cfg_.listenPort) + ": " + ucs_status_string(st));
  }
  ucp_listener_attr_t la{};
  la.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR;
  if (ucp_listener_query(listener_, &la) == UCS_OK) {
    const auto* sa = reinterpret_cast<const sockaddr*>(&la.sockaddr);
    port_ = ntohs(sa->sa_family == AF_INET6 ? reinterpret_cast<const sockaddr_in6*>(sa)->sin6_port
                                            : reinterpret_cast<const sockaddr_in*>(sa)->sin_port);
  }
  return Status::ok();
}

void UcxCluster::progressMain(std::promise<Status>* ready) {
  Status s = setUpWorker();
  if (!s.isOk()) {
    tearDownWorker();
    ready->set_value(s);
    return;
  }
  ready->set_value(Status::ok());
  for (auto& p : peers_) {
    if (p->member.id != cfg_.selfId) connect(*p);
  }
  while (!stop_) {
    while (ucp_worker_progress(worker_) != 0) {
    }
    for (ucp_ep_h ep : std::exchange(errored_, {})) {
      if (Peer* p = peerByEp(ep)) {
        peerFailed(*p, State::kDown, "connection lost");
      } else {
        dropInbound(ep, "");
      }
    }
    drainOps();
    const auto now = Clock::now();
    handleTimers(now);
    std::erase_if(closing_, [](void* r) {
      if (ucp_request_check_status(r) == UCS_INPROGRESS) return false;
      ucp_request_free(r);
      return true;
    });
    if (ucp_worker_arm(worker_) == UCS_ERR_BUSY) continue;
    // post() writes the eventfd only while this thread sleeps (or is about
    // to): both sides store then load (seq_cst), so one sees the other.
    sleeping_.store(true);
    if (opsQueued_.load()) {
      sleeping_.store(false);
      continue;
    }
    epoll_event evs[2];
    const int n = epoll_wait(epollFd_, evs, 2, closing_.empty() ? nextTimeoutMs(now) : 1);
    sleeping_.store(false);
    for (int i = 0; i < n; ++i) {
      if (evs[i].data.fd == wakeFd_) {
        uint64_t v;
        (void)!read(wakeFd_, &v, sizeof v);
      }
    }
  }
  tearDownWorker();
}

void UcxCluster::tearDownWorker() {
  for (auto& [id, p] : pending_) {
    cache::MutexLock lock(p->mu);
    p->status = Status::unavailable("cluster stopping");
    p->done = true;
    p->cv.notifyAll();
  }
  pending_.clear();
  if (worker_ != nullptr) {
    for (auto& p : peers_) {
      if (p->ep != nullptr) closeEp(std::exchange(p->ep, nullptr));
    }
    for (auto& [ep, in] : inbound_) closeEp(ep);
    inbound_.clear();
    if (listener_ != nullptr) ucp_listener_destroy(listener_);
    const auto until = Clock::now() + std::chrono::seconds(1);
    while (!closing_.empty() && Clock::now() < until) {
      ucp_worker_progress(worker_);
      std::erase_if(closing_, [](void* r) {
        if (ucp_request_check_status(r) == UCS_INPROGRESS) return false;
        ucp_request_free(r);
        return true;
      });
    }
    ucp_worker_destroy(worker_);
    worker_ = nullptr;
  }
}

void UcxCluster::post(Op op) {
  {
    cache::MutexLock lock(opMu_);
    ops_.push_back(std::move(op));
  }
  opsQueued_.store(true);
  if (!sleeping_.load()) return;
  uint64_t one = 1;
  (void)!write(wakeFd_, &one, sizeof one);
}

void UcxCluster::drainOps() {
  std::deque<Op> ops;
  {
    cache::MutexLock lock(opMu_);
    ops.swap(ops_);
    opsQueued_.store(false);
  }
  for (auto& op : ops) {
    if (op.fetch) {
      sendRequest(op.fetch);
    } else if (op.suspect >= 0) {
      markSuspect(*peers_[static_cast<size_t>(op.suspect)], Clock::now());
    } else if (op.files) {
      if (placementStarted()) continue;  // once
      startPlacement(std::move(*op.files));
      recomputeLive();  // asks the new placer for the current live set's table
      filesPending_.store(false);
    } else {
      sendReply(op);
    }
  }
}

void UcxCluster::connect(Peer& p) {
  ucp_ep_params_t ep{};
  ep.field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR |
                  UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
  ep.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
  ep.sockaddr.addr = reinterpret_cast<const sockaddr*>(&p.addr);
  ep.sockaddr.addrlen = p.addrLen;
  ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  ep.err_handler.cb = &UcxCluster::onEpError;
  ep.err_handler.arg = this;
  p.connectStarted = Clock::now();
  ucs_status_t st = ucp_ep_create(worker_, &ep, &p.ep);
  if (st != UCS_OK) {
    p.ep = nullptr;
    peerFailed(p, State::kDown, std::string("ucp_ep_create: ") + ucs_status_string(st));
    return;
  }
  setState(p, State::kConnecting);
  wire::Hello h;
  h.integrity = static_cast<uint8_t>(integrity_);
  h.nodeId = cfg_.selfId;
  h.memberCount = static_cast<uint32_t>(cfg_.members.size());
  h.capacity = cfg_.capacityBytes;
  p.clientNonce = randomNonce();
  h.nonce = p.clientNonce;
  if (!sendAm(p.ep, wire::kHello, &h, sizeof h, nullptr)) {
    peerFailed(p, State::kDown, "cannot send hello");
  }
}

void UcxCluster::closeEp(ucp_ep_h ep) {
  ucp_request_param_t rp{};
  rp.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  rp.flags = UCP_EP_CLOSE_FLAG_FORCE;
  void* r = ucp_ep_close_nbx(ep, &rp);
  if (UCS_PTR_IS_PTR(r)) closing_.push_back(r);
}

void UcxCluster::complete(const std::shared_ptr<Pending>& p, Status s) {
  if (p->reqId != 0 && pending_.erase(p->reqId) > 0) {
    Peer& peer = *peers_[p->peer];
    if (peer.inFlight > 0) --peer.inFlight;
  }
  cache::MutexLock lock(p->mu);
  if (p->done) return;
  p->status = std::move(s);
  p->done = true;
  p->cv.notifyAll();
}

UcxCluster::Peer* UcxCluster::peerByEp(ucp_ep_h ep) {
  for (auto& p : peers_) {
    if (p->ep == ep && ep != nullptr) return p.get();
  }
  return nullptr;
}

UcxCluster::Inbound* UcxCluster::inboundByEp(ucp_ep_h ep) {
  auto it = inbound_.find(ep);
  return it == inbound_.end() ? nullptr : &it->second;
}

void UcxCluster::dropInbound(ucp_ep_h ep, const std::string& why) {
  auto it = inbound_.find(ep);
  if (it == inbound_.end()) return;
  if (!why.empty())
    spdlog::warn("cluster: dropping a connection from node {}: {}", it->second.remote, why);
  inboundById_.erase(it->second.connId);
  inbound_.erase(it);
  closeEp(ep);
}

void UcxCluster::onConnRequest(ucp_conn_request_h req, void* arg) {
  auto* self = static_cast<UcxCluster*>(arg);
  ucp_ep_params_t ep{};
  ep.field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                  UCP_EP_PARAM_FIELD_ERR_HANDLER;
  ep.conn_request = req;
  ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  ep.err_handler.cb = &UcxCluster::onEpError;
  ep.err_handler.arg = self;
  ucp_ep_h h = nullptr;
  if (ucp_ep_create(self->worker_, &ep, &h) != UCS_OK) return;
  Inbound in;
  in.ep = h;
  in.connId = self->nextConnId_++;
  in.accepted = Clock::now();
  self->inboundById_[in.connId] = h;
  self->inbound_[h] = in;
}

void UcxCluster::onEpError(void* arg, ucp_ep_h ep, ucs_status_t status) {
  auto* self = static_cast<UcxCluster*>(arg);
  spdlog::debug("cluster: endpoint error: {}", ucs_status_string(status));
  self->errored_.push_back(ep);
}

}  // namespace epochfs::transport
