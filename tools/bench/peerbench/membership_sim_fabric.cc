// The in-process fabric of membership-sim (membership_sim_fabric.h).
#include "tools/bench/peerbench/membership_sim_fabric.h"

#include <malloc.h>

#include <algorithm>
#include <string>
#include <utility>

namespace epochfs::membersim {

using State = PeerHealth::State;

uint64_t heapInUse() {
  const struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd;
}

Fabric::Fabric(FabricOptions o)
    : o_(o),
      n_(o.members),
      rng_(o.seed),
      gap_(o.requestRate > 0 ? o.requestRate * o.members / 1e9 : 1.0) {
  members_.reserve(n_);
  for (uint32_t id = 0; id < n_; ++id) {
    members_.push_back(
        {id, "10.0." + std::to_string(id / 256) + "." + std::to_string(id % 256), 7711});
  }
  nodes_.resize(n_);
  // What N views of N members cost: the PeerHealth instances alone.
  const uint64_t before = heapInUse();
  for (uint32_t id = 0; id < n_; ++id) nodes_[id].ph = makeHealth(id);
  phHeap_ = heapInUse() - before;
  for (auto& nd : nodes_) nd.attempt.assign(n_, 0);
  leftAt_.assign(n_, -1);
  backAt_.assign(n_, -1);
  // Every node starts at once: its first wake connects to every member.
  for (uint32_t id = 0; id < n_; ++id) {
    nodes_[id].wakeAt = 0;
    push(kWake, 0, id, id, 0);
  }
  nextRequest_ = o_.requestRate > 0 ? static_cast<int64_t>(gap_(rng_)) : INT64_MAX;
}

Fabric::~Fabric() = default;

std::unique_ptr<PeerHealth> Fabric::makeHealth(uint32_t id) {
  PeerHealth::Options health;
  health.probeInterval = std::chrono::milliseconds(o_.probeIntervalMs);
  return std::make_unique<PeerHealth>(members_, id, 0, health, [this] { ++c_.liveChanges; });
}

void Fabric::push(Kind k, int64_t t, uint32_t dst, uint32_t src, uint32_t attempt, int64_t aux) {
  if (k <= kWelcome) ++c_.handshakeMsgs;
  q_.push(Ev{t, seq_++, aux, dst, src, attempt, nodes_[dst].inc, nodes_[src].inc, k});
}

bool Fabric::hasEp(uint32_t i, uint32_t j) const {
  const State s = nodes_[i].ph->state(j);
  return s == State::kConnecting || s == State::kUp || s == State::kSuspect;
}

template <class F>
void Fabric::apply(uint32_t i, uint32_t j, F&& f) {
  Node& nd = nodes_[i];
  const State before = nd.ph->state(j);
  f(*nd.ph);
  const State after = nd.ph->state(j);
  if (before == after) return;
  nd.connecting += (after == State::kConnecting) - (before == State::kConnecting);
  const bool wasLive = before == State::kUp, isLive = after == State::kUp;
  if (wasLive == isLive) return;
  if (nd.live == n_) --fullNodes_;
  nd.live = isLive ? nd.live + 1 : nd.live - 1;
  if (nd.live == n_) ++fullNodes_;
  if (j != watched_) return;
  if (!isLive) {
    --watchedLiveAt_;
    if (leftAt_[i] < 0) leftAt_[i] = now_;
  } else {
    ++watchedLiveAt_;
    if (leftAt_[i] >= 0 && backAt_[i] < 0) backAt_[i] = now_;
  }
}

int64_t Fabric::run(int64_t limit, const std::function<bool()>& done) {
  if (done && done()) return now_;
  for (;;) {
    const int64_t tEv = q_.empty() ? INT64_MAX : q_.top().t;
    const int64_t t = std::min(tEv, nextRequest_);
    if (t > limit) break;
    now_ = t;
    if (nextRequest_ <= tEv) {
      request();
      nextRequest_ = now_ + std::max<int64_t>(1, static_cast<int64_t>(gap_(rng_)));
    } else {
      const Ev e = q_.top();
      q_.pop();
      ++c_.events;
      deliver(e);
    }
    if (done && done()) return now_;
  }
  now_ = std::max(now_, limit);
  return now_;
}

void Fabric::startConnect(uint32_t i, uint32_t j) {
  Node& nd = nodes_[i];
  ++c_.connects;
  const uint32_t a = ++nd.attempt[j];
  apply(i, j, [&](PeerHealth& ph) { ph.connecting(j, tp(now_)); });
  send(kHello, j, i, a);
}

void Fabric::wake(uint32_t i) {
  Node& nd = nodes_[i];
  nd.wakeAt = -1;
  const auto d = nd.ph->due(tp(now_));
  for (uint32_t j : d.connect) startConnect(i, j);
  for (uint32_t j : d.handshakeTimedOut) {
    ++c_.handshakeTimeouts;
    apply(i, j, [&](PeerHealth& ph) { ph.lost(j, State::kDown, "handshake timed out", tp(now_)); });
  }
  for (uint32_t j : d.probeMissed) {
    ++c_.probeMisses;
    apply(i, j, [&](PeerHealth& ph) { ph.missedProbe(j, tp(now_)); });
  }
  for (uint32_t j : d.ping) {
    ++c_.pings;
    send(kPing, j, i, nd.attempt[j]);
  }
  rearm(i);
}

// The progress thread sleeps until nextTimer(), at most 250 ms (which also
// paces the handshake timeout: nextTimer() does not include it). Without a
// handshake in flight the wakes before nextTimer() find nothing due: the node
// sleeps until then, or until an event if it has no timer.
void Fabric::rearm(uint32_t i) {
  Node& nd = nodes_[i];
  if (nd.dead || nd.frozen) return;
  const int64_t never = now_ + 3600 * kSec;
  int64_t next = (nd.ph->nextTimer(tp(never)) - tp(0)).count();
  if (nd.connecting > 0) next = std::min(next, now_ + 250 * kMs);
  if (next >= never) return;
  next = std::max(next, now_ + 1);
  if (nd.wakeAt >= 0 && nd.wakeAt <= next) return;
  nd.wakeAt = next;
  push(kWake, next, i, i, 0);
}

void Fabric::deliver(const Ev& e) {
  Node& d = nodes_[e.dst];
  const uint32_t me = e.dst, peer = e.src;
  if (d.dead || d.inc != e.dstInc) {
    // Nobody listens: a connection attempt is refused (a round trip).
    if (e.kind == kHello && d.dead) {
      push(kRefused, now_ + o_.latencyNs, peer, me, e.attempt);
    }
    return;
  }
  if (e.kind == kWake) {
    if (!d.frozen && e.t == d.wakeAt) wake(me);
    return;
  }
  if (d.frozen) {  // it reads them when it runs again
    d.held.push_back(e);
    return;
  }
  const bool local = e.kind == kRefused || e.kind == kEpError || e.kind == kDeadline;
  if (!local && nodes_[peer].inc != e.srcInc) return;  // the sender restarted since
  // Client-side events belong to the current outbound connection only.
  const bool current = e.attempt == d.attempt[peer] && hasEp(me, peer);
  const auto now = tp(now_);
  switch (e.kind) {
    case kHello:
      send(kChallenge, peer, me, e.attempt);
      break;
    case kChallenge:
      if (current && d.ph->state(peer) == State::kConnecting) send(kProof, peer, me, e.attempt);
      break;
    case kProof:
      send(kWelcome, peer, me, e.attempt);
      break;
    case kWelcome:
      if (current && d.ph->state(peer) == State::kConnecting) {
        apply(me, peer, [&](PeerHealth& ph) { ph.connected(peer, now); });
        if (d.ph->state(peer) != State::kUp) rearm(me);
      }
      break;
    case kRefused:
    case kEpError:
      if (!current) break;
      ++(e.kind == kRefused ? c_.refused : c_.endpointErrors);
      apply(me, peer, [&](PeerHealth& ph) {
        ph.lost(peer, State::kDown, e.kind == kRefused ? "connection refused" : "connection lost",
                now);
      });
      rearm(me);
      break;
    case kPing:
      ++c_.pongs;
      send(kPong, peer, me, e.attempt);
      break;
    case kPong:
      if (current) apply(me, peer, [&](PeerHealth& ph) { ph.answered(peer, now); });
      break;
    case kDeadline: {
      // Sent while `peer` was frozen: answered only if it thawed in time.
      const Node& t = nodes_[peer];
      if (!current || (!t.frozen && t.thawedAt >= e.aux && t.thawedAt + o_.latencyNs <= now_))
        break;
      ++c_.deadlineMisses;
      apply(me, peer, [&](PeerHealth& ph) { ph.missedDeadline(peer, now); });
      rearm(me);
      break;
    }
    case kWake:
      break;
  }
}

void Fabric::request() {
  const uint32_t i = static_cast<uint32_t>(rng_() % n_);
  Node& nd = nodes_[i];
  if (nd.dead || nd.frozen || nd.live <= 1) return;
  ++c_.requests;
  uint32_t j = 0;
  if (nd.live - 1 >= (n_ - 1) / 8) {
    do {
      j = static_cast<uint32_t>(rng_() % n_);
    } while (j == i || !nd.ph->live(j));
  } else {
    std::vector<uint32_t> peers;
    for (uint32_t k = 0; k < n_; ++k)
      if (k != i && nd.ph->live(k)) peers.push_back(k);
    j = peers[rng_() % peers.size()];
  }
  // A live, running owner answers in 2 × latency: nothing to book. A killed
  // one fails it by the endpoint error.
  if (nodes_[j].frozen) push(kDeadline, now_ + o_.deadlineNs, i, j, nd.attempt[j], now_);
}

void Fabric::kill(uint32_t id) {
  Node& x = nodes_[id];
  if (x.live == n_) --fullNodes_;
  if (id != watched_ && watched_ != UINT32_MAX && x.ph->live(watched_)) --watchedLiveAt_;
  x.dead = true;
  x.held.clear();
  x.wakeAt = -1;
  for (uint32_t i = 0; i < n_; ++i) {
    if (i != id && !nodes_[i].dead && hasEp(i, id))
      push(kEpError, now_ + o_.latencyNs, i, id, nodes_[i].attempt[id]);
  }
}

void Fabric::restart(uint32_t id) {
  Node& x = nodes_[id];
  ++x.inc;
  x.dead = x.frozen = false;
  x.ph = makeHealth(id);
  x.live = 1;
  x.connecting = 0;
  x.wakeAt = now_;
  push(kWake, now_, id, id, 0);
}

void Fabric::freeze(uint32_t id) { nodes_[id].frozen = true; }

void Fabric::thaw(uint32_t id) {
  Node& x = nodes_[id];
  x.frozen = false;
  x.thawedAt = now_;
  // What waited is read first (progress before timers), in arrival order.
  for (Ev e : std::exchange(x.held, {})) {
    e.t = now_;
    e.seq = seq_++;
    q_.push(e);
  }
  x.wakeAt = now_;
  push(kWake, now_, id, id, 0);
}

void Fabric::watch(uint32_t id) {
  watched_ = id;
  std::fill(leftAt_.begin(), leftAt_.end(), -1);
  std::fill(backAt_.begin(), backAt_.end(), -1);
  watchedLiveAt_ = 0;
  for (uint32_t i = 0; i < n_; ++i)
    if (i != id && !nodes_[i].dead && nodes_[i].ph->live(id)) ++watchedLiveAt_;
}

}  // namespace epochfs::membersim
