// UcxCluster: the progress loop (ucx_cluster.h "Threads"): UCX progress, the
// ops other threads queued, the timers (request deadlines, PeerHealth's
// reconnects, handshake timeouts, pings and probes), and the endpoints it
// opens and closes. All on the progress thread.
#include <spdlog/spdlog.h>
#include <sys/epoll.h>

#include <algorithm>

#include "transport/ucx_cluster.h"

namespace epochfs::transport {

using cache::Status;

void UcxCluster::progressMain(std::promise<Status>* ready) {
  Status s = setUpWorker();
  if (!s.isOk()) {
    tearDownWorker();
    ready->set_value(s);
    return;
  }
  ready->set_value(Status::ok());
  for (auto& p : peers_) {
    if (p->member.id != cfg_.selfId) connect(*p, Clock::now());
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
    if (!ops_.trySleep()) continue;
    epoll_event evs[2];
    const int n = epoll_wait(epollFd_, evs, 2, closing_.empty() ? nextTimeoutMs(now) : 1);
    bool woken = false;
    for (int i = 0; i < n; ++i) woken = woken || evs[i].data.fd == ops_.fd();
    ops_.awake(woken);
  }
  tearDownWorker();
}

void UcxCluster::tearDownWorker() {
  requests_.failAll(Status::unavailable("cluster stopping"));
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

void UcxCluster::drainOps() {
  for (auto& op : ops_.take()) {
    if (op.fetch) {
      sendRequest(op.fetch);
    } else if (op.suspect >= 0) {
      health_->suspectBadPayloads(static_cast<uint32_t>(op.suspect), Clock::now());
    } else if (op.files) {
      // Once; then the new placer's table for the current live set.
      if (placement_->startPlacement(std::move(*op.files))) recomputeLive();
      placement_->setFilesPending(false);
    } else {
      sendReply(op);
    }
  }
}

void UcxCluster::handleTimers(Clock::time_point now) {
  for (auto& p : requests_.expired(now)) {
    Peer& peer = *peers_[p->peer];
    peer.timeouts.fetch_add(1, std::memory_order_relaxed);
    requests_.complete(p,
                       Status::timedOut("peer " + peer.member.address() + " missed the deadline"));
    // A peer that misses a deadline leaves placement until it answers a ping.
    health_->missedDeadline(p->peer, now);
  }
  // An inbound connection that never authenticates is closed: nothing is
  // held for a client that sends nothing or garbage.
  std::vector<ucp_ep_h> unauthed;
  for (const auto& [ep, in] : inbound_) {
    if (!in.session.authed() && now - in.accepted > cfg_.handshakeTimeout) unauthed.push_back(ep);
  }
  for (ucp_ep_h ep : unauthed) dropInbound(ep, "no authentication within the handshake timeout");
  const PeerHealth::Due due = health_->due(now);
  for (uint32_t id : due.connect) {
    if (peers_[id]->ep == nullptr) connect(*peers_[id], now);
  }
  for (uint32_t id : due.handshakeTimedOut)
    peerFailed(*peers_[id], State::kDown, "handshake timed out");
  for (uint32_t id : due.probeMissed) health_->missedProbe(id, now);
  for (uint32_t id : due.ping) {
    Peer& p = *peers_[id];
    if (p.ep == nullptr) continue;
    wire::Ping ping{++pingSeq_};
    if (!sendAm(p.ep, wire::kPing, &ping, sizeof ping, nullptr)) {
      peerFailed(p, State::kDown, "cannot send ping");
    }
  }
}

int UcxCluster::nextTimeoutMs(Clock::time_point now) const {
  // 250 ms at most: also paces the handshake timeouts.
  auto next = requests_.nextDeadline(health_->nextTimer(now + std::chrono::milliseconds(250)));
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(next - now).count();
  return static_cast<int>(std::clamp<long>(ms + 1, 0, 250));
}

void UcxCluster::peerFailed(Peer& p, State next, const std::string& why) {
  if (p.ep != nullptr) closeEp(std::exchange(p.ep, nullptr));
  requests_.failPeer(p.member.id, Status::unavailable("peer " + p.member.address() + ": " + why));
  p.session.reset();
  health_->lost(p.member.id, next, why, Clock::now());
}

void UcxCluster::connect(Peer& p, Clock::time_point now) {
  ucp_ep_params_t ep{};
  ep.field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR |
                  UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
  ep.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
  ep.sockaddr.addr = reinterpret_cast<const sockaddr*>(&p.addr);
  ep.sockaddr.addrlen = p.addrLen;
  ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  ep.err_handler.cb = &UcxCluster::onEpError;
  ep.err_handler.arg = this;
  ucs_status_t st = ucp_ep_create(worker_, &ep, &p.ep);
  if (st != UCS_OK) {
    p.ep = nullptr;
    peerFailed(p, State::kDown, std::string("ucp_ep_create: ") + ucs_status_string(st));
    return;
  }
  health_->connecting(p.member.id, now);
  const wire::Hello h = p.session.hello(session_);
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
    spdlog::warn("cluster: dropping a connection from node {}: {}", it->second.session.remote(),
                 why);
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
