// decodeAm(): the one place a received active message's bytes become a
// wire:: struct. It checks everything that needs no connection state: the AM
// id, the header length (exactly the struct's size), magic/version/integrity
// and member ids of a HELLO/CHALLENGE, and a REPLY's status code and data
// length. What does need state (who sent it, MACs, replay counters) stays
// with UcxCluster. Pure and allocation-free on success, so it can be fuzzed
// (tests/fuzz/wire_decoder_fuzzer.cc). Internal to transport/.
#pragma once

#include <cstddef>
#include <cstdint>
#include <variant>

#include "cache/status.h"
#include "transport/wire_format.h"

namespace epochfs::transport::wire {

// A reply's chunk is at most the largest chunk size (--chunk-size <= 64M).
inline constexpr uint64_t kMaxReplyBytes = uint64_t{64} << 20;
// Far above any real job; bounds what a HELLO may claim.
inline constexpr uint32_t kMaxMembers = uint32_t{1} << 20;

struct AmMessage {
  uint16_t id = 0;  // AmId; HELLO and CHALLENGE share Hello, PING and PONG share Ping
  std::variant<Hello, Proof, Welcome, Request, Reply, Ping> body;
};

// `header`/`headerLen`: the AM header as received; `dataLen`: the length of
// the AM data that came with it (only a REPLY carries data).
cache::Result<AmMessage> decodeAm(uint16_t id, const void* header, size_t headerLen,
                                  size_t dataLen);

// True for the messages a client sends to a server (HELLO, PROOF, REQUEST,
// PING): they arrive on an inbound connection.
bool isClientToServer(uint16_t id);

}  // namespace epochfs::transport::wire
