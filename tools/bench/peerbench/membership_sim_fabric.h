// The in-process fabric of membership-sim (membership_sim.cc): N nodes, each
// with its own PeerHealth over all N members, driven by one discrete-event
// loop on a virtual clock (steady_clock::time_point{} + simulated ns), as
// 3FS's UnitTestFabric runs a cluster in one process. No UCX and no CPU cost
// per message: each one-way message takes `latencyNs`.
//
// It does with PeerHealth what UcxCluster's progress thread does: a node
// connects to each member PeerHealth::due() names (connecting(), then HELLO,
// CHALLENGE, PROOF, WELCOME → connected()), loses one whose handshake timed
// out, pings its suspects and probes its up members (PONG → answered(), none
// → missedProbe()), and wakes at nextTimer(),
// bounded to 250 ms. Without a handshake in flight it skips the wakes
// before nextTimer() (due() would find nothing) and, with no timer at all,
// sleeps until an event; any event that sets a timer re-arms it. Each node's view of a member is
// its own outbound connection, as in UcxCluster.
//
// Requests: all nodes together send `requestRate` × N a second (Poisson),
// each from a uniform node to a uniform member of its live set. One to a
// live member is answered in 2 × latency and changes nothing; one to a
// frozen member is answered only if it thaws in time, else its deadline
// (`deadlineNs`) passes: missedDeadline(). One to a killed member fails by
// the endpoint error (no deadline).
//
// Faults: kill() (the process dies: after one latency every node with an
// endpoint to it gets the endpoint error → lost(down); connecting to it is
// refused after a round trip), restart() (a fresh process and PeerHealth),
// freeze() (SIGSTOP or a partition: no error, messages to it wait) and
// thaw() (it then reads what waited, in order).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <queue>
#include <random>
#include <vector>

#include "transport/peer_health.h"

namespace epochfs::membersim {

using transport::PeerHealth;

constexpr int64_t kMs = 1'000'000;  // ns
constexpr int64_t kSec = 1'000'000'000;

struct FabricOptions {
  uint32_t members = 1024;
  int64_t latencyNs = 20'000;
  double requestRate = 200;  // per node per second
  int64_t deadlineNs = 2 * kSec;
  uint64_t seed = 1;
  int64_t probeIntervalMs = 5000;  // PeerHealth::Options::probeInterval (0: no probes)
};

struct Counters {
  uint64_t handshakeMsgs = 0, pings = 0, pongs = 0, requests = 0, deadlineMisses = 0;
  uint64_t probeMisses = 0;  // probes of up members that went unanswered
  uint64_t connects = 0, refused = 0, endpointErrors = 0, handshakeTimeouts = 0;
  uint64_t liveChanges = 0;  // onLiveChange calls (each one a placement rebuild request)
  uint64_t events = 0;
};

class Fabric {
 public:
  explicit Fabric(FabricOptions o);
  ~Fabric();

  // Runs events up to `limit` or until `done()` (checked after each event)
  // holds; returns the time it stopped.
  int64_t run(int64_t limit, const std::function<bool()>& done = {});
  int64_t now() const { return now_; }

  void kill(uint32_t id);
  void restart(uint32_t id);
  void freeze(uint32_t id);
  void thaw(uint32_t id);

  // Follow one member: when each other node takes it out of its live set and
  // back in (-1: not yet). watch() resets both.
  void watch(uint32_t id);
  const std::vector<int64_t>& leftAt() const { return leftAt_; }
  const std::vector<int64_t>& backAt() const { return backAt_; }
  uint32_t watchedLiveAt() const { return watchedLiveAt_; }  // live nodes that count it live
  // Live nodes whose live set holds every member.
  uint32_t fullNodes() const { return fullNodes_; }
  bool seesAll(uint32_t id) const { return nodes_[id].live == n_; }

  const Counters& counters() const { return c_; }
  uint64_t peerHealthHeapBytes() const { return phHeap_; }
  uint32_t size() const { return n_; }

 private:
  enum Kind : uint8_t {
    kHello,
    kChallenge,
    kProof,
    kWelcome,
    kRefused,
    kEpError,
    kPing,
    kPong,
    kDeadline,
    kWake
  };
  struct Ev {
    int64_t t;
    uint64_t seq;
    int64_t aux;  // kDeadline: when the request was sent
    uint32_t dst, src, attempt, dstInc, srcInc;
    Kind kind;
  };
  struct Later {
    bool operator()(const Ev& a, const Ev& b) const {
      return a.t != b.t ? a.t > b.t : a.seq > b.seq;
    }
  };
  struct Node {
    std::unique_ptr<PeerHealth> ph;
    std::vector<uint32_t> attempt;  // per member: the current outbound connection
    std::vector<Ev> held;           // messages that wait while frozen
    uint32_t inc = 0, live = 1, connecting = 0;
    bool dead = false, frozen = false;
    int64_t wakeAt = -1, thawedAt = -1;
  };

  static PeerHealth::Clock::time_point tp(int64_t t) {
    return PeerHealth::Clock::time_point{} + std::chrono::nanoseconds(t);
  }
  std::unique_ptr<PeerHealth> makeHealth(uint32_t id);
  void push(Kind k, int64_t t, uint32_t dst, uint32_t src, uint32_t attempt, int64_t aux = 0);
  void send(Kind k, uint32_t dst, uint32_t src, uint32_t attempt) {
    push(k, now_ + o_.latencyNs, dst, src, attempt);
  }
  void deliver(const Ev& e);
  void wake(uint32_t i);
  void rearm(uint32_t i);
  void request();
  void startConnect(uint32_t i, uint32_t j);
  // Calls f on node i's PeerHealth about member j and books what changed.
  template <class F>
  void apply(uint32_t i, uint32_t j, F&& f);
  bool hasEp(uint32_t i, uint32_t j) const;

  const FabricOptions o_;
  const uint32_t n_;
  std::vector<transport::Member> members_;
  std::vector<Node> nodes_;
  std::priority_queue<Ev, std::vector<Ev>, Later> q_;
  uint64_t seq_ = 0;
  int64_t now_ = 0, nextRequest_ = 0;
  std::mt19937_64 rng_;
  std::exponential_distribution<double> gap_;
  Counters c_;
  uint64_t phHeap_ = 0;
  uint32_t fullNodes_ = 0, watched_ = UINT32_MAX, watchedLiveAt_ = 0;
  std::vector<int64_t> leftAt_, backAt_;
};

// Heap bytes in use (mallinfo2: uordblks + hblkhd, so mmapped blocks count).
uint64_t heapInUse();

}  // namespace epochfs::membersim
