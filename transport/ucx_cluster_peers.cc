// UcxCluster: the state of each peer (up, suspect, down, refused), the
// request deadlines and retries (the progress thread's timers), placement's
// live view and what `epochctl peers` shows. Setup and the progress loop are
// in ucx_cluster.cc, the protocol in ucx_cluster_protocol.cc.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "transport/ucx_cluster.h"

namespace epochfs::transport {

using cache::Status;

namespace {

const char* stateName(int s) {
  static const char* kNames[] = {"self", "down", "connecting", "up", "suspect", "refused"};
  return s >= 0 && s < 6 ? kNames[s] : "?";
}

}  // namespace

void UcxCluster::setState(Peer& p, State s) {
  const int old = p.state.exchange(static_cast<int>(s));
  if (old == static_cast<int>(s)) return;
  spdlog::log(s == State::kUp ? spdlog::level::info : spdlog::level::debug,
              "cluster: peer {} ({}) {} -> {}", p.member.id, p.member.address(), stateName(old),
              stateName(static_cast<int>(s)));
  if (old == static_cast<int>(State::kUp) || s == State::kUp) recomputeLive();
}

void UcxCluster::peerFailed(Peer& p, State next, const std::string& why) {
  if (!why.empty()) setLastError(p, why);
  if (p.state.load() == static_cast<int>(State::kUp)) {
    spdlog::warn("cluster: peer {} ({}) lost: {}", p.member.id, p.member.address(), why);
  }
  if (p.ep != nullptr) closeEp(std::exchange(p.ep, nullptr));
  std::vector<std::shared_ptr<Pending>> mine;
  for (auto& [id, pend] : pending_) {
    if (pend->peer == p.member.id) mine.push_back(pend);
  }
  for (auto& pend : mine)
    complete(pend, Status::unavailable("peer " + p.member.address() + ": " + why));
  p.inFlight = 0;
  p.mac = PayloadMac();
  setState(p, next);
  p.retryAt =
      Clock::now() + std::chrono::milliseconds(next == State::kRefused ? 5000 : p.backoffMs);
  p.backoffMs = std::min(p.backoffMs * 2, 2000u);
}

void UcxCluster::markSuspect(Peer& p, Clock::time_point now) {
  {
    cache::MutexLock lock(infoMu_);
    p.suspectQueued = false;
    p.badReplies.clear();
  }
  const auto s = static_cast<State>(p.state.load());
  if (s == State::kSelf || s == State::kRefused) return;
  // Repeat offenders wait longer; a quiet minute since the last suspicion resets it.
  if (p.nextSuspectFor.count() == 0 ||
      now - p.lastSuspected > p.nextSuspectFor + std::chrono::seconds(60)) {
    p.nextSuspectFor = cfg_.suspectFor;
  } else {
    p.nextSuspectFor = std::min(p.nextSuspectFor * 2, cfg_.maxSuspectFor);
  }
  p.lastSuspected = now;
  p.suspectUntil = now + p.nextSuspectFor;
  p.suspectUntilMs =
      std::chrono::duration_cast<std::chrono::milliseconds>(p.suspectUntil.time_since_epoch())
          .count();
  p.nextPing = p.suspectUntil;
  p.suspectCount.fetch_add(1, std::memory_order_relaxed);
  spdlog::warn(
      "cluster: peer {} ({}) sent {} bad payloads within {} ms; suspect, not asked for {} ms",
      p.member.id, p.member.address(), cfg_.suspectAfter, cfg_.failureWindow.count(),
      p.nextSuspectFor.count());
  setLastError(p, "suspect: repeated bad payloads (MAC or checksum)");
  if (s == State::kUp) setState(p, State::kSuspect);
}

void UcxCluster::noteBadReply(Peer& p, const std::string& why) {
  const auto now = Clock::now();
  bool suspect = false;
  {
    cache::MutexLock lock(infoMu_);
    p.lastError = why;
    p.badReplies.push_back(now);
    while (!p.badReplies.empty() && now - p.badReplies.front() > cfg_.failureWindow) {
      p.badReplies.pop_front();
    }
    if (p.badReplies.size() >= std::max(1u, cfg_.suspectAfter) && !p.suspectQueued) {
      p.suspectQueued = suspect = true;
    }
  }
  if (suspect) {
    Op op;
    op.suspect = static_cast<int>(p.member.id);
    post(std::move(op));
  }
}

void UcxCluster::recomputeLive() {
  std::vector<Candidate> live;
  std::vector<uint64_t> capacities;
  bool allKnown = true;
  uint64_t liveCapacity = 0;
  for (const auto& p : peers_) {
    const int s = p->state.load();
    if (s != static_cast<int>(State::kSelf) && s != static_cast<int>(State::kUp)) continue;
    live.push_back(Candidate{p->member.id, static_cast<double>(p->capacity.load())});
    capacities.push_back(p->capacity.load());
    liveCapacity += p->capacity.load();
    if (p->capacity.load() == 0) allKnown = false;
  }
  // Weighted by capacity when every live member announced one, else equal.
  for (auto& c : live) c.weight = allKnown ? c.weight / 1073741824.0 : 1.0;
  PlacementBuilder* const placer = placementStarted();
  const std::vector<Candidate> forTable = placer ? live : std::vector<Candidate>{};
  uint64_t generation = 0;
  {
    cache::WriterLock lock(liveMu_);
    live_ = std::move(live);
    liveCapacity_ = liveCapacity;
    liveCapacityKnown_ = allKnown;
    generation = ++liveGeneration_;
    // The old table names members that left or misses ones that came: plain
    // rendezvous until the new one is built (placement_builder.h).
    table_.reset();
  }
  if (placer) {
    placer->request(forTable, std::move(capacities), generation);
  } else if (cfg_.onPlacementChange) {
    cfg_.onPlacementChange();
  }
}

void UcxCluster::installTable(std::shared_ptr<const PlacementTable> table, uint64_t generation) {
  size_t live = 0;
  uint64_t capacity = 0, datasetBytes = 0;
  {
    cache::WriterLock lock(liveMu_);
    if (generation != liveGeneration_) return;  // the live set changed again: a newer one comes
    live = live_.size();
    capacity = liveCapacity_;
    datasetBytes = datasetBytes_;
    table_ = table;
  }
  if (!table->fits() && live > 1) {
    spdlog::warn(
        "cluster: the dataset ({} MiB x {} replicas) does not fit {:.0f} % of the live "
        "members' capacity ({} MiB): owned chunks will be evicted and re-read",
        datasetBytes >> 20, cfg_.replicas, PlacementTable::kFill * 100, capacity >> 20);
  }
  if (cfg_.onPlacementChange) cfg_.onPlacementChange();
}

void UcxCluster::handleTimers(Clock::time_point now) {
  std::vector<std::shared_ptr<Pending>> expired;
  for (auto& [id, p] : pending_) {
    if (p->deadline <= now) expired.push_back(p);
  }
  for (auto& p : expired) {
    Peer& peer = *peers_[p->peer];
    peer.timeouts.fetch_add(1, std::memory_order_relaxed);
    complete(p, Status::timedOut("peer " + peer.member.address() + " missed the deadline"));
    // A peer that misses a deadline leaves placement until it answers a ping.
    if (peer.state.load() == static_cast<int>(State::kUp)) {
      setLastError(peer, "missed a request deadline");
      spdlog::warn("cluster: peer {} ({}) missed a deadline; suspect until it answers",
                   peer.member.id, peer.member.address());
      peer.suspectUntil = now;
      peer.nextPing = now;
      setState(peer, State::kSuspect);
    }
  }
  // An inbound connection that never authenticates is closed: nothing is
  // held for a client that sends nothing or garbage.
  std::vector<ucp_ep_h> unauthed;
  for (const auto& [ep, in] : inbound_) {
    if (!in.authed && now - in.accepted > cfg_.handshakeTimeout) unauthed.push_back(ep);
  }
  for (ucp_ep_h ep : unauthed) dropInbound(ep, "no authentication within the handshake timeout");
  for (auto& pp : peers_) {
    Peer& p = *pp;
    const auto s = static_cast<State>(p.state.load());
    if ((s == State::kDown || s == State::kRefused) && p.ep == nullptr && now >= p.retryAt) {
      connect(p);
    } else if (s == State::kConnecting && now - p.connectStarted > std::chrono::seconds(5)) {
      peerFailed(p, State::kDown, "handshake timed out");
    } else if (s == State::kSuspect && now >= p.suspectUntil && now >= p.nextPing &&
               p.ep != nullptr) {
      wire::Ping ping{++p.pingSeq};
      p.nextPing = now + std::chrono::milliseconds(500);
      if (!sendAm(p.ep, wire::kPing, &ping, sizeof ping, nullptr)) {
        peerFailed(p, State::kDown, "cannot send ping");
      }
    }
  }
}

int UcxCluster::nextTimeoutMs(Clock::time_point now) const {
  auto next = now + std::chrono::milliseconds(250);  // also paces the handshake timeout
  for (const auto& [id, p] : pending_) next = std::min(next, p->deadline);
  for (const auto& p : peers_) {
    const auto s = static_cast<State>(p->state.load());
    if (s == State::kDown || s == State::kRefused) next = std::min(next, p->retryAt);
    if (s == State::kSuspect) next = std::min(next, std::max(p->nextPing, p->suspectUntil));
  }
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(next - now).count();
  return static_cast<int>(std::clamp<long>(ms + 1, 0, 250));
}

void UcxCluster::setLastError(Peer& p, const std::string& why) {
  cache::MutexLock lock(infoMu_);
  p.lastError = why;
}

bool UcxCluster::ownedElsewhere(uint64_t fileId) const {
  cache::ReaderLock lock(liveMu_);
  if (live_.size() <= 1) return false;
  if (table_ != nullptr) {
    if (const uint32_t* o = table_->ownersOf(fileId)) {
      return std::find(o, o + table_->replicas(), cfg_.selfId) == o + table_->replicas();
    }
  }
  auto o = rendezvousOwners(fileId, live_, cfg_.replicas);
  return std::find(o.begin(), o.end(), cfg_.selfId) == o.end();
}

std::vector<uint32_t> UcxCluster::owners(uint64_t fileId) const {
  cache::ReaderLock lock(liveMu_);
  if (table_ != nullptr && table_->contains(fileId)) return table_->owners(fileId);
  return rendezvousOwners(fileId, live_, cfg_.replicas);
}

Cluster::Fit UcxCluster::fit() const {
  cache::ReaderLock lock(liveMu_);
  Fit f;
  f.replicas = cfg_.replicas;
  f.liveCapacityBytes = liveCapacity_;
  f.datasetBytes = datasetBytes_;
  f.ready = !filesPending_.load() && (placer_ == nullptr || table_ != nullptr);
  // Known without waiting for the table.
  if (placer_ != nullptr && live_.size() > 1) {
    f.fits =
        liveCapacityKnown_ && PlacementTable::holds(datasetBytes_, liveCapacity_, cfg_.replicas);
  }
  return f;
}

std::vector<PeerInfo> UcxCluster::peers() const {
  std::vector<PeerInfo> out;
  cache::ReaderLock live(liveMu_);
  cache::MutexLock lock(infoMu_);
  for (const auto& p : peers_) {
    PeerInfo i;
    i.id = p->member.id;
    i.address = p->member.address();
    const int s = p->state.load();
    i.state = stateName(s);
    i.live = s == static_cast<int>(State::kSelf) || s == static_cast<int>(State::kUp);
    i.capacityBytes = p->capacity.load();
    if (i.live && table_ != nullptr) i.ownedBytes = table_->ownedBytes(i.id);
    i.fetches = p->fetches.load();
    i.bytesFetched = p->bytesFetched.load();
    i.fetchErrors = p->fetchErrors.load();
    i.timeouts = p->timeouts.load();
    i.served = p->serving.served.load();
    i.bytesServed = p->serving.bytesServed.load();
    i.serveErrors = p->serving.serveErrors.load();
    i.authFailures = p->authFailures.load();
    i.connects = p->connects.load();
    i.macFailures = p->macFailures.load();
    i.checksumFailures = p->checksumFailures.load();
    i.serveRefused = p->serving.serveRefused.load();
    i.fetchRefused = p->fetchRefused.load();
    i.suspectCount = p->suspectCount.load();
    i.faultsInjected = p->serving.faultsInjected.load();
    if (s == static_cast<int>(State::kSuspect)) {
      const int64_t nowMs =
          std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now().time_since_epoch())
              .count();
      i.suspectForMs =
          static_cast<uint64_t>(std::max<int64_t>(0, p->suspectUntilMs.load() - nowMs));
    }
    i.lastError = p->lastError;
    out.push_back(std::move(i));
  }
  return out;
}

}  // namespace epochfs::transport
