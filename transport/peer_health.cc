// PeerHealth: each member's state and timers (peer_health.h).
#include "transport/peer_health.h"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace epochfs::transport {

PeerHealth::Options PeerHealth::Options::from(const ClusterConfig& c) {
  Options o;
  o.suspectAfter = std::max(1u, c.suspectAfter);
  o.failureWindow = c.failureWindow;
  o.suspectFor = c.suspectFor;
  o.maxSuspectFor = c.maxSuspectFor;
  o.probeTimeout = c.deadline;
  return o;
}

PeerHealth::PeerHealth(std::vector<Member> members, uint32_t selfId, uint64_t selfCapacity,
                       Options options, std::function<void()> onLiveChange)
    : opt_(options),
      jitter_(0x9e3779b9u * (selfId + 1)),
      onLiveChange_(std::move(onLiveChange)),
      reported_(members.size()) {
  members_.reserve(members.size());
  std::uniform_real_distribution<double> phase(0.75, 1.25);
  for (auto& m : members) {
    auto e = std::make_unique<Entry>();
    e->member = std::move(m);
    e->backoff = opt_.firstBackoff;
    e->probeAfter = std::chrono::milliseconds(
        static_cast<int64_t>(static_cast<double>(opt_.probeInterval.count()) * phase(jitter_)));
    if (e->member.id == selfId) {
      e->state = static_cast<int>(State::kSelf);
      e->capacity = selfCapacity;
    }
    members_.push_back(std::move(e));
  }
}

const char* PeerHealth::stateName(State s) {
  static const char* kNames[] = {"self", "down", "connecting", "up", "suspect", "refused"};
  const int i = static_cast<int>(s);
  return i >= 0 && i < 6 ? kNames[i] : "?";
}

void PeerHealth::setState(Entry& e, State s) {
  const State old = static_cast<State>(e.state.exchange(static_cast<int>(s)));
  if (old == s) return;
  spdlog::log(s == State::kUp ? spdlog::level::info : spdlog::level::debug,
              "cluster: peer {} ({}) {} -> {}", e.member.id, e.member.address(), stateName(old),
              stateName(s));
  if ((old == State::kUp || s == State::kUp) && onLiveChange_) onLiveChange_();
}

void PeerHealth::connecting(uint32_t id, Clock::time_point now) {
  Entry& e = *members_[id];
  e.connectStarted = now;
  setState(e, State::kConnecting);
}

PeerHealth::State PeerHealth::connected(uint32_t id, Clock::time_point now) {
  Entry& e = *members_[id];
  e.backoff = opt_.firstBackoff;
  e.lastHeard = now;
  e.probeSent = {};
  if (now < e.suspectUntil) {
    e.nextPing = e.suspectUntil;
    setState(e, State::kSuspect);
    return State::kSuspect;
  }
  setLastError(id, "");
  setState(e, State::kUp);
  return State::kUp;
}

void PeerHealth::lost(uint32_t id, State next, const std::string& why, Clock::time_point now) {
  Entry& e = *members_[id];
  if (!why.empty()) setLastError(id, why);
  if (state(id) == State::kUp) {
    spdlog::warn("cluster: peer {} ({}) lost: {}", id, e.member.address(), why);
  }
  setState(e, next);
  const auto wait = next == State::kRefused ? opt_.refusedRetry : e.backoff;
  const double stretch = std::uniform_real_distribution<double>(0, opt_.retryJitter)(jitter_);
  e.retryAt = now + wait + std::chrono::duration_cast<Clock::duration>(wait * stretch);
  e.backoff = std::min(e.backoff * 2, opt_.maxBackoff);
}

void PeerHealth::missedDeadline(uint32_t id, Clock::time_point now) {
  if (state(id) == State::kUp) unanswered(*members_[id], "a request deadline", now);
}

void PeerHealth::missedProbe(uint32_t id, Clock::time_point now) {
  if (state(id) == State::kUp) unanswered(*members_[id], "a probe", now);
}

void PeerHealth::unanswered(Entry& e, const char* what, Clock::time_point now) {
  setLastError(e.member.id, std::string("missed ") + what);
  spdlog::warn("cluster: peer {} ({}) missed {}; suspect until it answers", e.member.id,
               e.member.address(), what);
  e.probeSent = {};
  e.suspectUntil = now;
  e.nextPing = now;
  setState(e, State::kSuspect);
}

void PeerHealth::answered(uint32_t id, Clock::time_point now) {
  Entry& e = *members_[id];
  e.lastHeard = now;
  e.probeSent = {};
  if (state(id) != State::kSuspect || now < e.suspectUntil) return;
  spdlog::info("cluster: peer {} ({}) answers again", id, e.member.address());
  setState(e, State::kUp);
}

void PeerHealth::suspectBadPayloads(uint32_t id, Clock::time_point now) {
  Entry& e = *members_[id];
  {
    cache::MutexLock lock(mu_);
    reported_[id].suspectQueued = false;
    reported_[id].badReplies.clear();
  }
  const State s = state(id);
  if (s == State::kSelf || s == State::kRefused) return;
  // Repeat offenders wait longer; a quiet minute since the last suspicion resets it.
  if (e.nextSuspectFor.count() == 0 ||
      now - e.lastSuspected > e.nextSuspectFor + std::chrono::seconds(60)) {
    e.nextSuspectFor = opt_.suspectFor;
  } else {
    e.nextSuspectFor = std::min(e.nextSuspectFor * 2, opt_.maxSuspectFor);
  }
  e.lastSuspected = now;
  e.suspectUntil = now + e.nextSuspectFor;
  e.suspectUntilMs.store(
      std::chrono::duration_cast<std::chrono::milliseconds>(e.suspectUntil.time_since_epoch())
          .count());
  e.nextPing = e.suspectUntil;
  e.suspectCount.fetch_add(1, std::memory_order_relaxed);
  spdlog::warn(
      "cluster: peer {} ({}) sent {} bad payloads within {} ms; suspect, not asked for {} ms", id,
      e.member.address(), opt_.suspectAfter, opt_.failureWindow.count(), e.nextSuspectFor.count());
  setLastError(id, "suspect: repeated bad payloads (MAC or checksum)");
  if (s == State::kUp) setState(e, State::kSuspect);
}

PeerHealth::Due PeerHealth::due(Clock::time_point now) {
  Due d;
  for (auto& ep : members_) {
    Entry& e = *ep;
    const State s = state(e.member.id);
    if ((s == State::kDown || s == State::kRefused) && now >= e.retryAt) {
      d.connect.push_back(e.member.id);
    } else if (s == State::kConnecting && now - e.connectStarted >= opt_.connectTimeout) {
      d.handshakeTimedOut.push_back(e.member.id);
    } else if (s == State::kSuspect && now >= e.suspectUntil && now >= e.nextPing) {
      e.nextPing = now + opt_.pingInterval;
      d.ping.push_back(e.member.id);
    } else if (s == State::kUp && opt_.probeInterval.count() > 0 && now >= probeTimer(e)) {
      if (e.probeSent != Clock::time_point{}) {
        d.probeMissed.push_back(e.member.id);
      } else {
        e.probeSent = now;
        d.ping.push_back(e.member.id);
      }
    }
  }
  return d;
}

PeerHealth::Clock::time_point PeerHealth::probeTimer(const Entry& e) const {
  if (e.probeSent != Clock::time_point{}) return e.probeSent + opt_.probeTimeout;
  // On the progress loop's 250 ms ticks: the probes of one tick go together.
  constexpr auto kTick = std::chrono::milliseconds(250);
  const auto at = (e.lastHeard + e.probeAfter).time_since_epoch();
  return Clock::time_point{} + ((at + kTick - Clock::duration(1)) / kTick) * kTick;
}

PeerHealth::Clock::time_point PeerHealth::nextTimer(Clock::time_point bound) const {
  Clock::time_point next = bound;
  for (const auto& e : members_) {
    const State s = state(e->member.id);
    if (s == State::kDown || s == State::kRefused) next = std::min(next, e->retryAt);
    if (s == State::kSuspect) next = std::min(next, std::max(e->nextPing, e->suspectUntil));
    if (s == State::kConnecting) next = std::min(next, e->connectStarted + opt_.connectTimeout);
    if (s == State::kUp && opt_.probeInterval.count() > 0) next = std::min(next, probeTimer(*e));
  }
  return next;
}

bool PeerHealth::live(uint32_t id) const {
  const State s = state(id);
  return s == State::kSelf || s == State::kUp;
}

std::vector<PeerHealth::LiveMember> PeerHealth::liveMembers() const {
  std::vector<LiveMember> out;
  for (const auto& e : members_) {
    if (live(e->member.id)) out.push_back(LiveMember{e->member.id, e->capacity.load()});
  }
  return out;
}

PeerHealth::Info PeerHealth::info(uint32_t id, Clock::time_point now) const {
  const Entry& e = *members_[id];
  Info i;
  i.state = state(id);
  i.capacityBytes = e.capacity.load();
  i.suspectCount = e.suspectCount.load();
  if (i.state == State::kSuspect) {
    const int64_t nowMs =
        std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count();
    i.suspectForMs = static_cast<uint64_t>(std::max<int64_t>(0, e.suspectUntilMs.load() - nowMs));
  }
  cache::MutexLock lock(mu_);
  i.lastError = reported_[id].lastError;
  return i;
}

bool PeerHealth::noteBadReply(uint32_t id, const std::string& why, Clock::time_point now) {
  cache::MutexLock lock(mu_);
  Reported& e = reported_[id];
  e.lastError = why;
  e.badReplies.push_back(now);
  const auto stale =
      std::find_if(e.badReplies.begin(), e.badReplies.end(),
                   [&](Clock::time_point t) { return now - t <= opt_.failureWindow; });
  e.badReplies.erase(e.badReplies.begin(), stale);
  if (e.badReplies.size() > opt_.suspectAfter) e.badReplies.erase(e.badReplies.begin());
  if (e.badReplies.size() < opt_.suspectAfter || e.suspectQueued) return false;
  e.suspectQueued = true;
  return true;
}

void PeerHealth::setLastError(uint32_t id, const std::string& why) {
  cache::MutexLock lock(mu_);
  reported_[id].lastError = why;
}

}  // namespace epochfs::transport
