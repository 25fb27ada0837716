// UcxCluster: construction, the UCX context, worker and listener, and
// teardown. The progress loop and endpoints: ucx_cluster_loop.cc; the active
// messages: ucx_cluster_protocol.cc; the callers' side: ucx_cluster_fetch.cc.
#include "transport/ucx_cluster.h"

#include <netdb.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
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
      session_{config.secret, config.selfId, static_cast<uint32_t>(config.members.size()),
               config.capacityBytes,
               config.macPayloads ? wire::Integrity::kMac : wire::Integrity::kChecksum},
      requests_(config.members.size(), config.maxInFlightPerPeer),
      receivePool_(ReceiveBufferPool::create(config.receivePoolBytes)) {
  for (const auto& m : cfg_.members) {
    auto p = std::make_unique<Peer>();
    p->member = m;
    peers_.push_back(std::move(p));
  }
  health_ =
      std::make_unique<PeerHealth>(cfg_.members, cfg_.selfId, cfg_.capacityBytes,
                                   PeerHealth::Options::from(cfg_), [this] { recomputeLive(); });
  placement_ = std::make_unique<LivePlacement>(cfg_.selfId, cfg_.replicas, cfg_.onPlacementChange);
  for (uint16_t i = 0; i < amArgs_.size(); ++i)
    amArgs_[i] = AmArg{this, uint16_t(wire::kFirstAm + i)};
  std::vector<ChunkServer::Stats*> stats;
  for (auto& p : peers_) stats.push_back(p->member.id == cfg_.selfId ? nullptr : &p->serving);
  server_ = std::make_unique<ChunkServer>(cfg_, std::move(serve), macCounter_, std::move(stats),
                                          [this](ChunkServer::Reply r) {
                                            ClusterOp op;
                                            op.connId = r.connId;
                                            op.reply = r.header;
                                            op.chunk = std::move(r.chunk);
                                            ops_.post(std::move(op));
                                          });
  if (!cfg_.files.empty()) placement_->startPlacement(cfg_.files);
  recomputeLive();
}

void UcxCluster::recomputeLive() { placement_->setLive(health_->liveMembers()); }

void UcxCluster::setFiles(std::vector<FileBytes> files) {
  placement_->setFilesPending(true);
  ClusterOp op;
  op.files = std::make_shared<std::vector<FileBytes>>(std::move(files));
  ops_.post(std::move(op));
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
  if (Status s = ops_.status(); !s.isOk()) return s;
  epollFd_ = epoll_create1(EPOLL_CLOEXEC);
  if (epollFd_ < 0) return Status::fromErrno(errno, "epoll_create1");

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
  ops_.wake();
  if (progress_.joinable()) progress_.join();
  server_->stop();
  // After the progress thread (which asks it for tables): joins the builder.
  placement_.reset();
  if (context_ != nullptr) ucp_cleanup(context_);
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
  for (int fd : {workerFd_, ops_.fd()}) {
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

}  // namespace epochfs::transport
