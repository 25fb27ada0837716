// PeerHealth: how this node sees each member of the job (self, down,
// connecting, up, suspect, refused), when to reconnect, probe or give up on
// one, and so which members are live (counted in placement). No UCX: the
// progress thread tells it what happened (a connection started, a handshake
// done, a connection lost or refused, a request deadline missed, a pong, bad
// payloads) and asks it which timers are due; UcxCluster turns those into
// endpoints and messages. The 1,024-member simulation
// (tools/bench/peerbench/membership_sim.cc) drives the same class over an
// in-process fabric.
//
// Rules (docs/CLUSTER.md "Failure behaviour"): a lost connection retries after
// a backoff doubling 250 ms to 2 s (5 s after a refused handshake), each
// stretched by up to `retryJitter` so N−1 members do not retry in step; a
// connection not through its handshake in `connectTimeout` is lost; an up
// member not heard from (a reply or a pong) for about `probeInterval` is
// pinged, and one that misses that ping's `probeTimeout` or a request's
// deadline is suspect until it answers a ping (every `pingInterval`);
// one whose replies fail their MAC or checksum `suspectAfter` times within
// `failureWindow` is suspect and not asked for `suspectFor`, doubling per
// repeat up to `maxSuspectFor` (reset after a quiet minute), then pinged.
// Live: self and up. `onLiveChange` is called (on the calling thread, no lock
// held) whenever a member enters or leaves the live set.
//
// Threading: the events, due() and nextTimer() on one thread (the progress
// thread); state(), capacity(), liveMembers(), info(), noteBadReply() and
// setLastError() from any thread (atomics, and mu_ for the text and the
// bad-reply window).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cache/mutex.h"
#include "transport/cluster.h"
#include "transport/placement.h"

namespace epochfs::transport {

class PeerHealth {
 public:
  using Clock = std::chrono::steady_clock;
  enum class State : int { kSelf, kDown, kConnecting, kUp, kSuspect, kRefused };

  struct Options {
    std::chrono::milliseconds connectTimeout{5000};
    std::chrono::milliseconds pingInterval{500};
    std::chrono::milliseconds firstBackoff{250}, maxBackoff{2000};
    std::chrono::milliseconds refusedRetry{5000};
    double retryJitter = 0.5;  // a retry waits backoff × [1, 1 + retryJitter)
    // 0: up members are never probed (only requests reveal a frozen one).
    // Each member's probe falls at 0.75–1.25 × this after it was last heard
    // (its own phase), on the 250 ms ticks the progress loop wakes at anyway.
    std::chrono::milliseconds probeInterval{5000};
    std::chrono::milliseconds probeTimeout{2000};  // the request deadline
    unsigned suspectAfter = 3;
    std::chrono::milliseconds failureWindow{10000};
    std::chrono::milliseconds suspectFor{5000};
    std::chrono::milliseconds maxSuspectFor{60000};
    static Options from(const ClusterConfig& config);
  };

  // The timers due now: members to connect to, connections whose handshake
  // timed out (lose them), members to ping (suspects; up members due a
  // probe), up members whose probe went unanswered (call missedProbe()).
  struct Due {
    std::vector<uint32_t> connect, handshakeTimedOut, ping, probeMissed;
  };

  using LiveMember = transport::LiveMember;

  // What `epochctl peers` shows of a member's health.
  struct Info {
    State state = State::kDown;
    uint64_t capacityBytes = 0;
    uint64_t suspectCount = 0;
    uint64_t suspectForMs = 0;  // while suspect: until it is pinged again
    std::string lastError;
  };

  PeerHealth(std::vector<Member> members, uint32_t selfId, uint64_t selfCapacity, Options options,
             std::function<void()> onLiveChange);
  PeerHealth(const PeerHealth&) = delete;
  PeerHealth& operator=(const PeerHealth&) = delete;

  // ---- events (progress thread) ----
  void connecting(uint32_t id, Clock::time_point now);
  // Its handshake completed: up, or suspect while a suspicion still runs
  // (reconnecting does not end one). Returns the state entered.
  State connected(uint32_t id, Clock::time_point now);
  // What it announced in its handshake (placement's weight).
  void setCapacity(uint32_t id, uint64_t bytes) { members_[id]->capacity.store(bytes); }
  // The connection failed or was lost (`next` down), or its handshake was
  // refused (`next` refused); `why` becomes its last error when not empty.
  void lost(uint32_t id, State next, const std::string& why, Clock::time_point now);
  // A request to it missed its deadline: an up member turns suspect until it answers a ping.
  void missedDeadline(uint32_t id, Clock::time_point now);
  // Its probe went unanswered (Due::probeMissed): the same.
  void missedProbe(uint32_t id, Clock::time_point now);
  // It answered a ping: a suspect whose suspicion has run out is up again.
  void answered(uint32_t id, Clock::time_point now);
  // A reply came from it: no probe needed for a while.
  void heard(uint32_t id, Clock::time_point now) { members_[id]->lastHeard = now; }
  // noteBadReply() asked for it: suspect for bad payloads.
  void suspectBadPayloads(uint32_t id, Clock::time_point now);

  Due due(Clock::time_point now);
  // The earliest timer, no later than `bound`.
  Clock::time_point nextTimer(Clock::time_point bound) const;

  // ---- any thread ----
  State state(uint32_t id) const {
    return static_cast<State>(members_[id]->state.load(std::memory_order_acquire));
  }
  bool live(uint32_t id) const;
  uint64_t capacity(uint32_t id) const { return members_[id]->capacity.load(); }
  std::vector<LiveMember> liveMembers() const;
  size_t size() const { return members_.size(); }
  const Member& member(uint32_t id) const { return members_[id]->member; }
  Info info(uint32_t id, Clock::time_point now) const;
  // A reply from `id` failed its MAC or checksum. True when that makes
  // `suspectAfter` within the window and no suspicion is queued yet: the
  // caller then has the progress thread call suspectBadPayloads().
  bool noteBadReply(uint32_t id, const std::string& why, Clock::time_point now);
  void setLastError(uint32_t id, const std::string& why);

  static const char* stateName(State s);

 private:
  struct Entry {
    Member member;
    // Progress thread only.
    std::chrono::milliseconds backoff{0};
    Clock::time_point retryAt{}, connectStarted{}, nextPing{};
    Clock::time_point suspectUntil{}, lastSuspected{};
    std::chrono::milliseconds nextSuspectFor{0};
    Clock::time_point lastHeard{};            // up: the last reply or pong
    Clock::time_point probeSent{};            // up: the unanswered probe's time, or {}
    std::chrono::milliseconds probeAfter{0};  // its phase: 0.75–1.25 × probeInterval
    // Any thread.
    std::atomic<int> state{static_cast<int>(State::kDown)};
    std::atomic<uint64_t> capacity{0};
    std::atomic<uint64_t> suspectCount{0};
    std::atomic<int64_t> suspectUntilMs{0};  // suspectUntil, steady-clock ms, for info()
  };
  // What other threads write too: the last error, the times of recent bad
  // replies, whether a suspicion is queued.
  struct Reported {
    std::string lastError;
    std::vector<Clock::time_point> badReplies;  // oldest first, at most suspectAfter
    bool suspectQueued = false;
  };

  void setState(Entry& e, State s);
  // An up member missed `what` (a request deadline, a probe): suspect until it answers a ping.
  void unanswered(Entry& e, const char* what, Clock::time_point now);
  // When an up member's probe is due, or its unanswered probe times out.
  Clock::time_point probeTimer(const Entry& e) const;

  const Options opt_;
  std::vector<std::unique_ptr<Entry>> members_;  // indexed by id
  std::minstd_rand jitter_;                      // progress thread
  const std::function<void()> onLiveChange_;
  mutable cache::Mutex mu_;
  std::vector<Reported> reported_ GUARDED_BY(mu_);  // indexed by id
};

}  // namespace epochfs::transport
