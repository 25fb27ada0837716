#include "tests/cluster/fault/raw_peer.h"

#include <netdb.h>
#include <sys/socket.h>

#include <stdexcept>
#include <thread>

#include "transport/wire_format.h"

namespace epochfs::transport::testing {

using Clock = std::chrono::steady_clock;

RawPeer::RawPeer() {
  ucp_config_t* conf = nullptr;
  if (ucp_config_read(nullptr, nullptr, &conf) != UCS_OK)
    throw std::runtime_error("ucp_config_read");
  ucp_params_t p{};
  p.field_mask = UCP_PARAM_FIELD_FEATURES;
  p.features = UCP_FEATURE_AM;
  const ucs_status_t st = ucp_init(&p, conf, &context_);
  ucp_config_release(conf);
  if (st != UCS_OK) throw std::runtime_error("ucp_init");
  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_SINGLE;
  if (ucp_worker_create(context_, &wp, &worker_) != UCS_OK) throw std::runtime_error("worker");
  handlerArgs_.reserve(wire::kLastAm - wire::kFirstAm + 1);
  for (uint16_t id = wire::kFirstAm; id <= wire::kLastAm; ++id) {
    handlerArgs_.push_back(HandlerArg{this, id});
    ucp_am_handler_param_t hp{};
    hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                    UCP_AM_HANDLER_PARAM_FIELD_ARG;
    hp.id = id;
    hp.cb = &RawPeer::onAm;
    hp.arg = &handlerArgs_.back();
    if (ucp_worker_set_am_recv_handler(worker_, &hp) != UCS_OK)
      throw std::runtime_error("am handler");
  }
}

RawPeer::~RawPeer() {
  closeEp();
  // Let receives in flight finish or fail before the worker goes.
  pump(std::chrono::milliseconds(50));
  rndv_.clear();
  if (worker_ != nullptr) ucp_worker_destroy(worker_);
  if (context_ != nullptr) ucp_cleanup(context_);
}

void RawPeer::closeEp() {
  if (ep_ == nullptr) return;
  ucp_request_param_t rp{};
  rp.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  rp.flags = UCP_EP_CLOSE_FLAG_FORCE;
  void* r = ucp_ep_close_nbx(ep_, &rp);
  const auto until = Clock::now() + std::chrono::seconds(2);
  while (UCS_PTR_IS_PTR(r) && ucp_request_check_status(r) == UCS_INPROGRESS &&
         Clock::now() < until) {
    ucp_worker_progress(worker_);
  }
  if (UCS_PTR_IS_PTR(r)) ucp_request_free(r);
  ep_ = nullptr;
}

bool RawPeer::connect(const std::string& host, uint16_t port) {
  closeEp();
  closed_ = false;
  inbox_.clear();
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res) != 0) return false;
  ucp_ep_params_t ep{};
  ep.field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR |
                  UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
  ep.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
  ep.sockaddr.addr = res->ai_addr;
  ep.sockaddr.addrlen = res->ai_addrlen;
  ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  ep.err_handler.cb = &RawPeer::onError;
  ep.err_handler.arg = this;
  const ucs_status_t st = ucp_ep_create(worker_, &ep, &ep_);
  freeaddrinfo(res);
  if (st != UCS_OK) ep_ = nullptr;
  return st == UCS_OK;
}

bool RawPeer::send(uint16_t id, const void* header, size_t headerLen, const void* data,
                   size_t dataLen) {
  if (ep_ == nullptr) return false;
  ucp_request_param_t rp{};
  rp.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  rp.flags = UCP_AM_SEND_FLAG_REPLY;
  void* r = ucp_am_send_nbx(ep_, id, header, headerLen, data, dataLen, &rp);
  if (r == nullptr) return true;
  if (UCS_PTR_IS_ERR(r)) return false;
  const auto until = Clock::now() + std::chrono::seconds(5);
  while (ucp_request_check_status(r) == UCS_INPROGRESS && Clock::now() < until) {
    ucp_worker_progress(worker_);
  }
  const ucs_status_t st = ucp_request_check_status(r);
  if (st == UCS_INPROGRESS) ucp_request_cancel(worker_, r);
  ucp_request_free(r);
  return st == UCS_OK;
}

ucs_status_t RawPeer::onAm(void* arg, const void* header, size_t headerLen, void* data, size_t len,
                           const ucp_am_recv_param_t* param) {
  auto* a = static_cast<HandlerArg*>(arg);
  RawPeer* self = a->self;
  Message m;
  m.id = a->id;
  m.header.assign(static_cast<const uint8_t*>(header),
                  static_cast<const uint8_t*>(header) + headerLen);
  if (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) {
    auto r = std::make_unique<Rndv>();
    r->msg = std::move(m);
    r->msg.data.resize(len);
    ucp_request_param_t rp{};
    rp.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    rp.cb.recv_am = [](void* req, ucs_status_t st, size_t, void* user) {
      auto* rv = static_cast<Rndv*>(user);
      rv->done = true;
      rv->failed = st != UCS_OK;
      ucp_request_free(req);
    };
    rp.user_data = r.get();
    void* req = ucp_am_recv_data_nbx(self->worker_, data, r->msg.data.data(), len, &rp);
    if (req == nullptr) {
      r->done = true;
    } else if (UCS_PTR_IS_ERR(req)) {
      r->done = r->failed = true;
    }
    self->rndv_.push_back(std::move(r));
    return UCS_OK;
  }
  if (len > 0) m.data.assign(static_cast<const char*>(data), static_cast<const char*>(data) + len);
  self->inbox_.push_back(std::move(m));
  return UCS_OK;
}

void RawPeer::onError(void* arg, ucp_ep_h, ucs_status_t) {
  static_cast<RawPeer*>(arg)->closed_ = true;
}

void RawPeer::pump(std::chrono::milliseconds d) {
  const auto until = Clock::now() + d;
  do {
    while (ucp_worker_progress(worker_) != 0) {
    }
    for (auto it = rndv_.begin(); it != rndv_.end();) {
      if ((*it)->done) {
        if (!(*it)->failed) inbox_.push_back(std::move((*it)->msg));
        it = rndv_.erase(it);
      } else {
        ++it;
      }
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  } while (Clock::now() < until);
}

std::optional<RawPeer::Message> RawPeer::waitFor(uint16_t id, std::chrono::milliseconds timeout) {
  const auto until = Clock::now() + timeout;
  for (;;) {
    for (auto it = inbox_.begin(); it != inbox_.end(); ++it) {
      if (it->id == id) {
        Message m = std::move(*it);
        inbox_.erase(it);
        return m;
      }
    }
    if (Clock::now() >= until) return std::nullopt;
    pump(std::chrono::milliseconds(5));
  }
}

}  // namespace epochfs::transport::testing
