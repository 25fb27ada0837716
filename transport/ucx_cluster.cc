// UcxCluster: setup, the progress loop, connections and timers. The AM
// protocol (handshake, requests, replies) is in ucx_cluster_protocol.cc.
#include "transport/ucx_cluster.h"

#include <netdb.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include <spdlog/spdlog.h>

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

const char* stateName(int s) {
  static const char* kNames[] = {"self", "down", "connecting", "up", "suspect", "refused"};
  return s >= 0 && s < 6 ? kNames[s] : "?";
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
      serve_(std::move(serve)),
      integrity_(config.macPayloads ? wire::Integrity::kMac : wire::Integrity::kChecksum) {
  for (const auto& m : cfg_.members) {
    auto p = std::make_unique<Peer>();
    p->member = m;
    if (m.id == cfg_.selfId) {
      p->state = static_cast<int>(State::kSelf);
      p->capacity = cfg_.capacityBytes;
    }
    peers_.push_back(std::move(p));
  }
  for (uint16_t i = 0; i < amArgs_.size(); ++i) amArgs_[i] = AmArg{this, uint16_t(wire::kFirstAm + i)};
  recomputeLive();
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
  if (ucp_config_read(nullptr, nullptr, &uconf) != UCS_OK) return Status::ioError("ucp_config_read failed");
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
  for (unsigned i = 0; i < std::max(1u, cfg_.serveThreads); ++i) {
    servers_.emplace_back([this] { serveMain(); });
  }
  spdlog::info("cluster: node {} of {} listening on {}:{} (replicas {}, integrity {})",
               cfg_.selfId, cfg_.members.size(), cfg_.listenHost, port_.load(), cfg_.replicas,
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
  serveCv_.notify_all();
  for (auto& t : servers_) t.join();
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
  if (st != UCS_OK) return Status::ioError(std::string("ucp_worker_create: ") + ucs_status_string(st));
  ucp_worker_attr_t wa{};
  wa.field_mask = UCP_WORKER_ATTR_FIELD_MAX_AM_HEADER;
  if (ucp_worker_query(worker_, &wa) == UCS_OK && wa.max_am_header < sizeof(wire::Hello)) {
    return Status::unavailable("UCX AM header limit too small: " + std::to_string(wa.max_am_header));
  }
  if (ucp_worker_get_efd(worker_, &workerFd_) != UCS_OK) return Status::ioError("ucp_worker_get_efd");
  for (int fd : {workerFd_, wakeFd_}) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    if (epoll_ctl(epollFd_, EPOLL_CTL_ADD, fd, &ev) != 0) return Status::fromErrno(errno, "epoll_ctl");
  }
  for (auto& a : amArgs_) {
    ucp_am_handler_param_t hp{};
    hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                    UCP_AM_HANDLER_PARAM_FIELD_ARG;
    hp.id = a.id;
    hp.cb = &UcxCluster::amTrampoline;
    hp.arg = &a;
    if (ucp_worker_set_am_recv_handler(worker_, &hp) != UCS_OK) return Status::ioError("AM handler");
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
    epoll_event evs[2];
    const int n = epoll_wait(epollFd_, evs, 2, closing_.empty() ? nextTimeoutMs(now) : 1);
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
    std::lock_guard<std::mutex> lock(p->mu);
    p->status = Status::unavailable("cluster stopping");
    p->done = true;
    p->cv.notify_all();
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
    std::lock_guard<std::mutex> lock(opMu_);
    ops_.push_back(std::move(op));
  }
  uint64_t one = 1;
  (void)!write(wakeFd_, &one, sizeof one);
}

void UcxCluster::drainOps() {
  std::deque<Op> ops;
  {
    std::lock_guard<std::mutex> lock(opMu_);
    ops.swap(ops_);
  }
  for (auto& op : ops) {
    if (op.fetch) {
      sendRequest(op.fetch);
    } else if (op.suspect >= 0) {
      markSuspect(*peers_[static_cast<size_t>(op.suspect)], Clock::now());
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

void UcxCluster::setState(Peer& p, State s) {
  const int old = p.state.exchange(static_cast<int>(s));
  if (old == static_cast<int>(s)) return;
  spdlog::log(s == State::kUp ? spdlog::level::info : spdlog::level::debug,
              "cluster: peer {} ({}) {} -> {}", p.member.id, p.member.address(), stateName(old),
              stateName(static_cast<int>(s)));
  if (old == static_cast<int>(State::kUp) || s == State::kUp) recomputeLive();
}

void UcxCluster::peerFailed(Peer& p, State next, const std::string& why) {
  if (!why.empty()) setLastError(p, why);
  if (p.state.load() == static_cast<int>(State::kUp)) {
    spdlog::warn("cluster: peer {} ({}) lost: {}", p.member.id, p.member.address(), why);
  }
  if (p.ep != nullptr) closeEp(std::exchange(p.ep, nullptr));
  std::vector<std::shared_ptr<Pending>> mine;
  for (auto& [id, pend] : pending_) {
    if (pend->peer == p.member.id) mine.push_back(pend);
  }
  for (auto& pend : mine) complete(pend, Status::unavailable("peer " + p.member.address() + ": " + why));
  p.inFlight = 0;
  p.mac = PayloadMac();
  setState(p, next);
  p.retryAt = Clock::now() + std::chrono::milliseconds(next == State::kRefused ? 5000 : p.backoffMs);
  p.backoffMs = std::min(p.backoffMs * 2, 2000u);
}

void UcxCluster::markSuspect(Peer& p, Clock::time_point now) {
  {
    std::lock_guard<std::mutex> lock(infoMu_);
    p.suspectQueued = false;
    p.badReplies.clear();
  }
  const auto s = static_cast<State>(p.state.load());
  if (s == State::kSelf || s == State::kRefused) return;
  // Repeat offenders wait longer; a quiet minute since the last suspicion resets it.
  if (p.nextSuspectFor.count() == 0 ||
      now - p.lastSuspected > p.nextSuspectFor + std::chrono::seconds(60)) {
    p.nextSuspectFor = cfg_.suspectFor;
  } else {
    p.nextSuspectFor = std::min(p.nextSuspectFor * 2, cfg_.maxSuspectFor);
  }
  p.lastSuspected = now;
  p.suspectUntil = now + p.nextSuspectFor;
  p.suspectUntilMs = std::chrono::duration_cast<std::chrono::milliseconds>(
                         p.suspectUntil.time_since_epoch()).count();
  p.nextPing = p.suspectUntil;
  p.suspectCount.fetch_add(1, std::memory_order_relaxed);
  spdlog::warn("cluster: peer {} ({}) sent {} bad payloads within {} ms; suspect, not asked for {} ms",
               p.member.id, p.member.address(), cfg_.suspectAfter, cfg_.failureWindow.count(),
               p.nextSuspectFor.count());
  setLastError(p, "suspect: repeated bad payloads (MAC or checksum)");
  if (s == State::kUp) setState(p, State::kSuspect);
}

void UcxCluster::noteBadReply(Peer& p, const std::string& why) {
  const auto now = Clock::now();
  bool suspect = false;
  {
    std::lock_guard<std::mutex> lock(infoMu_);
    p.lastError = why;
    p.badReplies.push_back(now);
    while (!p.badReplies.empty() && now - p.badReplies.front() > cfg_.failureWindow) {
      p.badReplies.pop_front();
    }
    if (p.badReplies.size() >= std::max(1u, cfg_.suspectAfter) && !p.suspectQueued) {
      p.suspectQueued = suspect = true;
    }
  }
  if (suspect) {
    Op op;
    op.suspect = static_cast<int>(p.member.id);
    post(std::move(op));
  }
}

void UcxCluster::recomputeLive() {
  std::vector<Candidate> live;
  bool allKnown = true;
  for (const auto& p : peers_) {
    const int s = p->state.load();
    if (s != static_cast<int>(State::kSelf) && s != static_cast<int>(State::kUp)) continue;
    live.push_back(Candidate{p->member.id, static_cast<double>(p->capacity.load())});
    if (p->capacity.load() == 0) allKnown = false;
  }
  // Weighted by capacity when every live member announced one, else equal.
  for (auto& c : live) c.weight = allKnown ? c.weight / 1073741824.0 : 1.0;
  std::unique_lock<std::shared_mutex> lock(liveMu_);
  live_ = std::move(live);
}

void UcxCluster::complete(const std::shared_ptr<Pending>& p, Status s) {
  if (p->reqId != 0 && pending_.erase(p->reqId) > 0) {
    Peer& peer = *peers_[p->peer];
    if (peer.inFlight > 0) --peer.inFlight;
  }
  std::lock_guard<std::mutex> lock(p->mu);
  if (p->done) return;
  p->status = std::move(s);
  p->done = true;
  p->cv.notify_all();
}

void UcxCluster::handleTimers(Clock::time_point now) {
  std::vector<std::shared_ptr<Pending>> expired;
  for (auto& [id, p] : pending_) {
    if (p->deadline <= now) expired.push_back(p);
  }
  for (auto& p : expired) {
    Peer& peer = *peers_[p->peer];
    peer.timeouts.fetch_add(1, std::memory_order_relaxed);
    complete(p, Status::timedOut("peer " + peer.member.address() + " missed the deadline"));
    // A peer that misses a deadline leaves placement until it answers a ping.
    if (peer.state.load() == static_cast<int>(State::kUp)) {
      setLastError(peer, "missed a request deadline");
      spdlog::warn("cluster: peer {} ({}) missed a deadline; suspect until it answers",
                   peer.member.id, peer.member.address());
      peer.suspectUntil = now;
      peer.nextPing = now;
      setState(peer, State::kSuspect);
    }
  }
  // An inbound connection that never authenticates is closed: nothing is
  // held for a client that sends nothing or garbage.
  std::vector<ucp_ep_h> unauthed;
  for (const auto& [ep, in] : inbound_) {
    if (!in.authed && now - in.accepted > cfg_.handshakeTimeout) unauthed.push_back(ep);
  }
  for (ucp_ep_h ep : unauthed) dropInbound(ep, "no authentication within the handshake timeout");
  for (auto& pp : peers_) {
    Peer& p = *pp;
    const auto s = static_cast<State>(p.state.load());
    if ((s == State::kDown || s == State::kRefused) && p.ep == nullptr && now >= p.retryAt) {
      connect(p);
    } else if (s == State::kConnecting && now - p.connectStarted > std::chrono::seconds(5)) {
      peerFailed(p, State::kDown, "handshake timed out");
    } else if (s == State::kSuspect && now >= p.suspectUntil && now >= p.nextPing &&
               p.ep != nullptr) {
      wire::Ping ping{++p.pingSeq};
      p.nextPing = now + std::chrono::milliseconds(500);
      if (!sendAm(p.ep, wire::kPing, &ping, sizeof ping, nullptr)) {
        peerFailed(p, State::kDown, "cannot send ping");
      }
    }
  }
}

int UcxCluster::nextTimeoutMs(Clock::time_point now) const {
  auto next = now + std::chrono::milliseconds(250);  // also paces the handshake timeout
  for (const auto& [id, p] : pending_) next = std::min(next, p->deadline);
  for (const auto& p : peers_) {
    const auto s = static_cast<State>(p->state.load());
    if (s == State::kDown || s == State::kRefused) next = std::min(next, p->retryAt);
    if (s == State::kSuspect) next = std::min(next, std::max(p->nextPing, p->suspectUntil));
  }
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(next - now).count();
  return static_cast<int>(std::clamp<long>(ms + 1, 0, 250));
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
  if (!why.empty()) spdlog::warn("cluster: dropping a connection from node {}: {}", it->second.remote, why);
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

void UcxCluster::setLastError(Peer& p, const std::string& why) {
  std::lock_guard<std::mutex> lock(infoMu_);
  p.lastError = why;
}

bool UcxCluster::ownedElsewhere(uint64_t fileId) const {
  std::shared_lock<std::shared_mutex> lock(liveMu_);
  if (live_.size() <= 1) return false;
  auto o = rendezvousOwners(fileId, live_, cfg_.replicas);
  return std::find(o.begin(), o.end(), cfg_.selfId) == o.end();
}

std::vector<uint32_t> UcxCluster::owners(uint64_t fileId) const {
  std::shared_lock<std::shared_mutex> lock(liveMu_);
  return rendezvousOwners(fileId, live_, cfg_.replicas);
}

std::vector<PeerInfo> UcxCluster::peers() const {
  std::vector<PeerInfo> out;
  std::shared_lock<std::shared_mutex> live(liveMu_);
  std::lock_guard<std::mutex> lock(infoMu_);
  for (const auto& p : peers_) {
    PeerInfo i;
    i.id = p->member.id;
    i.address = p->member.address();
    const int s = p->state.load();
    i.state = stateName(s);
    i.live = s == static_cast<int>(State::kSelf) || s == static_cast<int>(State::kUp);
    i.capacityBytes = p->capacity.load();
    i.fetches = p->fetches.load();
    i.bytesFetched = p->bytesFetched.load();
    i.fetchErrors = p->fetchErrors.load();
    i.timeouts = p->timeouts.load();
    i.served = p->served.load();
    i.bytesServed = p->bytesServed.load();
    i.serveErrors = p->serveErrors.load();
    i.authFailures = p->authFailures.load();
    i.connects = p->connects.load();
    i.macFailures = p->macFailures.load();
    i.checksumFailures = p->checksumFailures.load();
    i.serveRefused = p->serveRefused.load();
    i.fetchRefused = p->fetchRefused.load();
    i.suspectCount = p->suspectCount.load();
    i.faultsInjected = p->faultsInjected.load();
    if (s == static_cast<int>(State::kSuspect)) {
      const int64_t nowMs = std::chrono::duration_cast<std::chrono::milliseconds>(
                                Clock::now().time_since_epoch()).count();
      i.suspectForMs = static_cast<uint64_t>(std::max<int64_t>(0, p->suspectUntilMs.load() - nowMs));
    }
    i.lastError = p->lastError;
    out.push_back(std::move(i));
  }
  return out;
}

}  // namespace epochfs::transport
