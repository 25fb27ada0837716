// RequestTable: the chunk requests this node has in flight to its peers, by
// request id: their deadlines, how many each peer has, and their completion
// (which wakes the caller waiting in fetch()). No UCX.
//
// Threading: the table is the progress thread's alone (no lock). A
// PendingFetch is shared with the one caller that waits on it: its `done`
// (under its mu) orders the result fields written before it is set.
#pragma once

#include <chrono>
#include <memory>
#include <unordered_map>
#include <vector>

#include "cache/chunk.h"
#include "cache/mutex.h"
#include "cache/status.h"
#include "transport/peer_auth.h"
#include "transport/wire_format.h"

namespace epochfs::transport {

struct PendingFetch {
  using Clock = std::chrono::steady_clock;

  // Set by the caller before it is queued.
  uint32_t peer = 0;
  cache::ChunkKey key;
  cache::FileIdentity id;
  Clock::time_point deadline;
  cache::ChunkBuffer data;  // the receive buffer (resized to the reply)
  // Set by the progress thread.
  uint64_t reqId = 0;  // 0 until it is in a table
  PayloadMac mac;      // the session's, copied when sent
  // Written before `done` is set and read after it is seen: setting and
  // seeing `done` under mu orders them (so not annotated).
  cache::Status status;
  wire::Reply reply;

  // Waits until it is done or `until` passes; false on the latter.
  bool waitUntil(Clock::time_point until);

 private:
  friend class RequestTable;
  cache::Mutex mu;
  cache::CondVar cv;  // done
  bool done GUARDED_BY(mu) = false;
};

class RequestTable {
 public:
  using Clock = std::chrono::steady_clock;

  RequestTable(size_t members, unsigned maxInFlightPerPeer);

  // Whether the peer has as many requests in flight as it may.
  bool full(uint32_t peer) const { return inFlight_[peer] >= maxInFlightPerPeer_; }
  // Gives `p` the next request id and holds it until complete().
  uint64_t add(const std::shared_ptr<PendingFetch>& p);
  // The request `reqId`, or null (completed, timed out, never sent).
  std::shared_ptr<PendingFetch> find(uint64_t reqId) const;
  // Ends `p` with `s` (once; later calls are ignored) and wakes its caller;
  // also for a request that never entered the table.
  void complete(const std::shared_ptr<PendingFetch>& p, cache::Status s);
  // The requests whose deadline is at or before `now`.
  std::vector<std::shared_ptr<PendingFetch>> expired(Clock::time_point now) const;
  // Ends every request to `peer` (or all) with `s`.
  void failPeer(uint32_t peer, const cache::Status& s);
  void failAll(const cache::Status& s);
  // The earliest deadline, no later than `bound`.
  Clock::time_point nextDeadline(Clock::time_point bound) const;
  unsigned inFlight(uint32_t peer) const { return inFlight_[peer]; }
  size_t size() const { return pending_.size(); }

 private:
  const unsigned maxInFlightPerPeer_;
  std::vector<unsigned> inFlight_;  // by peer id
  uint64_t nextReqId_ = 1;
  std::unordered_map<uint64_t, std::shared_ptr<PendingFetch>> pending_;
};

}  // namespace epochfs::transport
