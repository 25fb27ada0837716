// RawPeer: a bare UCX client for the peer-security tests. It speaks the peer
// wire format (transport/wire_format.h) message by message, so a test can
// send nothing, garbage, a forged proof or a recorded handshake, and see
// exactly what the node answers. Single-threaded: every call drives the
// client's own UCX worker. Not a fake of anything in epochfs: the node under
// test is a real UcxCluster (in-process or a daemon).
#pragma once

#include <ucp/api/ucp.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace epochfs::transport::testing {

class RawPeer {
 public:
  struct Message {
    uint16_t id = 0;
    std::vector<uint8_t> header;
    std::vector<char> data;
    template <typename T>
    T as() const {
      T t{};
      std::memcpy(&t, header.data(), std::min(sizeof t, header.size()));
      return t;
    }
  };

  RawPeer();
  ~RawPeer();
  RawPeer(const RawPeer&) = delete;
  RawPeer& operator=(const RawPeer&) = delete;

  // A new connection to host:port (closing any previous one). True once the
  // endpoint exists; UCX completes the connection in the background.
  bool connect(const std::string& host, uint16_t port);
  // Sends one active message (header, optional data) and waits until UCX is done with it.
  bool send(uint16_t id, const void* header, size_t headerLen, const void* data = nullptr,
            size_t dataLen = 0);
  template <typename T>
  bool send(uint16_t id, const T& header) {
    return send(id, &header, sizeof header);
  }
  // Drives the worker until a message with `id` arrived (it is taken from
  // the inbox) or `timeout` passed.
  std::optional<Message> waitFor(uint16_t id, std::chrono::milliseconds timeout);
  // Drives the worker for `d`, collecting what arrives.
  void pump(std::chrono::milliseconds d);
  // Everything received and not taken yet.
  const std::vector<Message>& inbox() const { return inbox_; }
  // True once UCX reported an error on the endpoint (the node closed it).
  bool closed() const { return closed_; }

 private:
  static ucs_status_t onAm(void* arg, const void* header, size_t headerLen, void* data, size_t len,
                           const ucp_am_recv_param_t* param);
  static void onError(void* arg, ucp_ep_h ep, ucs_status_t status);
  void closeEp();

  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  ucp_ep_h ep_ = nullptr;
  bool closed_ = false;
  std::vector<Message> inbox_;
  // Rendezvous payloads being received: (message, done flag).
  struct Rndv {
    Message msg;
    bool done = false;
    bool failed = false;
  };
  std::vector<std::unique_ptr<Rndv>> rndv_;
  struct HandlerArg {
    RawPeer* self;
    uint16_t id;
  };
  std::vector<HandlerArg> handlerArgs_;
};

}  // namespace epochfs::transport::testing
