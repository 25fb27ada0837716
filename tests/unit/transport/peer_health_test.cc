// PeerHealth on virtual time, no UCX: connecting and connected make a member
// live; a lost one retries after a backoff doubling 250 ms to 2 s (5 s after
// a refused handshake); a handshake not through in 5 s times out; a missed
// deadline makes it suspect and pinged every 500 ms until it answers; bad
// payloads make it suspect for 5 s, doubling on repeats, reset by a quiet
// minute; reconnecting does not end a suspicion.
#include "transport/peer_health.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

namespace epochfs::transport {
namespace {

using State = PeerHealth::State;
using std::chrono::milliseconds;
using std::chrono::seconds;

const PeerHealth::Clock::time_point kT0 = PeerHealth::Clock::time_point{} + std::chrono::hours(1);

std::vector<Member> members(uint32_t n) {
  std::vector<Member> m;
  for (uint32_t id = 0; id < n; ++id) m.push_back({id, "10.0.0." + std::to_string(id), 7711});
  return m;
}

// Exact timers: no retry jitter, no probes of up members (their own tests below).
PeerHealth::Options exact() {
  PeerHealth::Options o;
  o.retryJitter = 0;
  o.probeInterval = milliseconds(0);
  return o;
}

struct Health {
  int liveChanges = 0;
  PeerHealth ph;
  explicit Health(uint32_t n = 2, PeerHealth::Options o = exact())
      : ph(members(n), 0, 100, o, [this] { ++liveChanges; }) {}
  // Member `id` through its handshake at `t`.
  void up(uint32_t id, PeerHealth::Clock::time_point t) {
    ph.connecting(id, t);
    ASSERT_EQ(ph.connected(id, t), State::kUp);
  }
};

std::vector<uint32_t> ids(const std::vector<PeerHealth::LiveMember>& live) {
  std::vector<uint32_t> out;
  for (const auto& m : live) out.push_back(m.id);
  return out;
}

TEST(PeerHealth, StartupConnectsEveryMemberAndConnectedMakesItLive) {
  Health h(3);
  EXPECT_EQ(h.ph.state(0), State::kSelf);
  EXPECT_EQ(h.ph.state(1), State::kDown);
  EXPECT_EQ(ids(h.ph.liveMembers()), (std::vector<uint32_t>{0}));
  const auto d = h.ph.due(kT0);
  EXPECT_EQ(d.connect, (std::vector<uint32_t>{1, 2}));
  h.ph.connecting(1, kT0);
  h.ph.connecting(2, kT0);
  EXPECT_EQ(h.ph.state(1), State::kConnecting);
  EXPECT_FALSE(h.ph.live(1));
  EXPECT_EQ(h.liveChanges, 0);
  EXPECT_TRUE(h.ph.due(kT0 + milliseconds(1)).connect.empty());
  EXPECT_EQ(h.ph.connected(1, kT0 + milliseconds(1)), State::kUp);
  EXPECT_TRUE(h.ph.live(1));
  EXPECT_EQ(h.liveChanges, 1);
  EXPECT_EQ(ids(h.ph.liveMembers()), (std::vector<uint32_t>{0, 1}));
  EXPECT_EQ(h.ph.connected(2, kT0 + milliseconds(1)), State::kUp);
  EXPECT_EQ(h.liveChanges, 2);
  EXPECT_EQ(h.ph.liveMembers().size(), 3u);
}

TEST(PeerHealth, LostRetriesAfterABackoffDoublingTo2Seconds) {
  Health h;
  h.up(1, kT0);
  auto t = kT0 + seconds(1);
  h.ph.lost(1, State::kDown, "connection lost", t);
  EXPECT_EQ(h.ph.state(1), State::kDown);
  EXPECT_FALSE(h.ph.live(1));
  EXPECT_EQ(h.liveChanges, 2);
  EXPECT_EQ(h.ph.info(1, t).lastError, "connection lost");
  for (int backoffMs : {250, 500, 1000, 2000, 2000}) {
    SCOPED_TRACE(backoffMs);
    EXPECT_EQ(h.ph.nextTimer(t + seconds(10)), t + milliseconds(backoffMs));
    EXPECT_TRUE(h.ph.due(t + milliseconds(backoffMs - 1)).connect.empty());
    t += milliseconds(backoffMs);
    EXPECT_EQ(h.ph.due(t).connect, (std::vector<uint32_t>{1}));
    h.ph.connecting(1, t);
    h.ph.lost(1, State::kDown, "connection refused", t);
  }
  // A completed handshake resets the backoff.
  h.ph.connecting(1, t);
  EXPECT_EQ(h.ph.connected(1, t), State::kUp);
  EXPECT_EQ(h.ph.info(1, t).lastError, "");
  h.ph.lost(1, State::kDown, "connection lost", t);
  EXPECT_EQ(h.ph.nextTimer(t + seconds(10)), t + milliseconds(250));
}

TEST(PeerHealth, RefusedRetriesAfter5Seconds) {
  Health h;
  h.ph.connecting(1, kT0);
  h.ph.lost(1, State::kRefused, "failed authentication", kT0);
  EXPECT_EQ(h.ph.state(1), State::kRefused);
  EXPECT_FALSE(h.ph.live(1));
  EXPECT_EQ(h.liveChanges, 0);
  EXPECT_TRUE(h.ph.due(kT0 + milliseconds(4999)).connect.empty());
  EXPECT_EQ(h.ph.nextTimer(kT0 + seconds(10)), kT0 + seconds(5));
  EXPECT_EQ(h.ph.due(kT0 + seconds(5)).connect, (std::vector<uint32_t>{1}));
}

TEST(PeerHealth, HandshakeTimesOutAfter5Seconds) {
  Health h;
  h.ph.connecting(1, kT0);
  EXPECT_TRUE(h.ph.due(kT0 + milliseconds(4999)).handshakeTimedOut.empty());
  EXPECT_EQ(h.ph.nextTimer(kT0 + seconds(10)), kT0 + seconds(5)) << "its deadline is a timer";
  const auto t = kT0 + seconds(5);
  EXPECT_EQ(h.ph.due(t).handshakeTimedOut, (std::vector<uint32_t>{1}));
  h.ph.lost(1, State::kDown, "handshake timed out", t);
  EXPECT_EQ(h.ph.state(1), State::kDown);
  EXPECT_EQ(h.ph.due(t + milliseconds(250)).connect, (std::vector<uint32_t>{1}));
}

TEST(PeerHealth, MissedDeadlineMakesItSuspectAndPingedUntilItAnswers) {
  Health h;
  h.ph.missedDeadline(1, kT0);  // not up: nothing to suspect
  EXPECT_EQ(h.ph.state(1), State::kDown);
  h.up(1, kT0);
  const auto t = kT0 + seconds(1);
  h.ph.missedDeadline(1, t);
  EXPECT_EQ(h.ph.state(1), State::kSuspect);
  EXPECT_FALSE(h.ph.live(1));
  EXPECT_EQ(h.liveChanges, 2);
  EXPECT_EQ(ids(h.ph.liveMembers()), (std::vector<uint32_t>{0}));
  EXPECT_EQ(h.ph.info(1, t).lastError, "missed a request deadline");
  EXPECT_EQ(h.ph.nextTimer(t + seconds(10)), t);
  EXPECT_EQ(h.ph.due(t).ping, (std::vector<uint32_t>{1}));  // at once
  EXPECT_TRUE(h.ph.due(t + milliseconds(499)).ping.empty());
  EXPECT_EQ(h.ph.due(t + milliseconds(500)).ping, (std::vector<uint32_t>{1}));
  EXPECT_EQ(h.ph.nextTimer(t + seconds(10)), t + milliseconds(1000));
  h.ph.missedDeadline(1, t + milliseconds(600));  // already suspect: no change
  h.ph.answered(1, t + milliseconds(700));
  EXPECT_EQ(h.ph.state(1), State::kUp);
  EXPECT_EQ(h.liveChanges, 3);
  EXPECT_TRUE(h.ph.due(t + seconds(2)).ping.empty());
  h.ph.answered(1, t + seconds(2));  // a late pong changes nothing
  EXPECT_EQ(h.ph.state(1), State::kUp);
}

TEST(PeerHealth, ThreeBadRepliesWithinTheWindowAskForOneSuspicion) {
  Health h(3);
  h.up(1, kT0);
  EXPECT_FALSE(h.ph.noteBadReply(1, "bad MAC", kT0));
  EXPECT_FALSE(h.ph.noteBadReply(1, "bad MAC", kT0 + seconds(1)));
  EXPECT_TRUE(h.ph.noteBadReply(1, "bad checksum", kT0 + seconds(2)));
  EXPECT_FALSE(h.ph.noteBadReply(1, "bad MAC", kT0 + seconds(3)));  // already queued
  EXPECT_EQ(h.ph.info(1, kT0).lastError, "bad MAC");
  EXPECT_EQ(h.ph.state(1), State::kUp);  // noteBadReply only asks
  // Spread wider than the 10 s window: never three within it.
  EXPECT_FALSE(h.ph.noteBadReply(2, "x", kT0));
  EXPECT_FALSE(h.ph.noteBadReply(2, "x", kT0 + seconds(6)));
  EXPECT_FALSE(h.ph.noteBadReply(2, "x", kT0 + seconds(12)));
  EXPECT_TRUE(h.ph.noteBadReply(2, "x", kT0 + seconds(13)));
}

TEST(PeerHealth, BadPayloadsSuspectFor5SecondsDoublingAndAQuietMinuteResets) {
  Health h;
  h.up(1, kT0);
  auto t = kT0 + seconds(1);
  h.ph.suspectBadPayloads(1, t);
  EXPECT_EQ(h.ph.state(1), State::kSuspect);
  EXPECT_FALSE(h.ph.live(1));
  auto i = h.ph.info(1, t);
  EXPECT_EQ(i.suspectCount, 1u);
  EXPECT_EQ(i.suspectForMs, 5000u);
  EXPECT_EQ(h.ph.info(1, t + seconds(2)).suspectForMs, 3000u);
  EXPECT_EQ(i.lastError, "suspect: repeated bad payloads (MAC or checksum)");
  EXPECT_TRUE(h.ph.due(t + milliseconds(4999)).ping.empty());  // not asked, not pinged
  h.ph.answered(1, t + seconds(4));                            // too early: still suspect
  EXPECT_EQ(h.ph.state(1), State::kSuspect);
  EXPECT_EQ(h.ph.nextTimer(t + seconds(60)), t + seconds(5));
  EXPECT_EQ(h.ph.due(t + seconds(5)).ping, (std::vector<uint32_t>{1}));
  h.ph.answered(1, t + milliseconds(5001));
  EXPECT_EQ(h.ph.state(1), State::kUp);
  // Repeats within a minute double the wait, up to 60 s.
  for (int waitS : {10, 20, 40, 60, 60}) {
    SCOPED_TRACE(waitS);
    t += seconds(30);
    h.ph.suspectBadPayloads(1, t);
    EXPECT_EQ(h.ph.info(1, t).suspectForMs, static_cast<uint64_t>(waitS) * 1000);
    EXPECT_TRUE(h.ph.due(t + seconds(waitS) - milliseconds(1)).ping.empty());
    EXPECT_EQ(h.ph.due(t + seconds(waitS)).ping, (std::vector<uint32_t>{1}));
    h.ph.answered(1, t + seconds(waitS));
    EXPECT_EQ(h.ph.state(1), State::kUp);
  }
  EXPECT_EQ(h.ph.info(1, t).suspectCount, 6u);
  // Quiet for a minute after the last suspicion ended: 5 s again.
  t += seconds(60) + seconds(61);
  h.ph.suspectBadPayloads(1, t);
  EXPECT_EQ(h.ph.info(1, t).suspectForMs, 5000u);
}

TEST(PeerHealth, ReconnectingDoesNotEndASuspicion) {
  Health h(3);
  h.up(1, kT0);
  h.up(2, kT0);
  h.ph.suspectBadPayloads(1, kT0);
  h.ph.lost(1, State::kDown, "connection lost", kT0 + seconds(1));
  EXPECT_EQ(h.ph.state(1), State::kDown);
  const auto t = kT0 + milliseconds(1250);
  EXPECT_EQ(h.ph.due(t).connect, (std::vector<uint32_t>{1}));
  h.ph.connecting(1, t);
  EXPECT_EQ(h.ph.connected(1, t), State::kSuspect);
  EXPECT_FALSE(h.ph.live(1));
  EXPECT_EQ(h.ph.nextTimer(kT0 + seconds(60)), kT0 + seconds(5));
  EXPECT_TRUE(h.ph.due(kT0 + milliseconds(4999)).ping.empty());
  EXPECT_EQ(h.ph.due(kT0 + seconds(5)).ping, (std::vector<uint32_t>{1}));
  h.ph.answered(1, kT0 + seconds(5));
  EXPECT_EQ(h.ph.state(1), State::kUp);
  // Suspected while down: the suspicion waits for the connection.
  h.ph.lost(2, State::kDown, "connection lost", kT0);  // (no due() below: its retry is not asked)
  h.ph.suspectBadPayloads(2, kT0);
  EXPECT_EQ(h.ph.state(2), State::kDown);
  h.ph.connecting(2, kT0 + seconds(1));
  EXPECT_EQ(h.ph.connected(2, kT0 + seconds(1)), State::kSuspect);
  h.ph.lost(2, State::kDown, "connection lost", kT0 + seconds(2));
  h.ph.connecting(2, kT0 + seconds(6));
  EXPECT_EQ(h.ph.connected(2, kT0 + seconds(6)), State::kUp);  // over by then
}

TEST(PeerHealth, SelfAndRefusedAreNeverSuspected) {
  Health h;
  h.ph.suspectBadPayloads(0, kT0);
  EXPECT_EQ(h.ph.state(0), State::kSelf);
  EXPECT_TRUE(h.ph.live(0));
  h.ph.lost(1, State::kRefused, "failed authentication", kT0);
  h.ph.suspectBadPayloads(1, kT0);
  EXPECT_EQ(h.ph.state(1), State::kRefused);
  EXPECT_EQ(h.ph.info(1, kT0).suspectCount, 0u);
}

TEST(PeerHealth, LiveMembersCarryCapacitiesAndInfoShowsTheState) {
  Health h(4);
  h.up(1, kT0);
  h.up(3, kT0);
  h.ph.setCapacity(1, 1000);
  h.ph.setCapacity(3, 3000);
  const auto live = h.ph.liveMembers();
  ASSERT_EQ(ids(live), (std::vector<uint32_t>{0, 1, 3}));
  EXPECT_EQ(live[0].capacityBytes, 100u);  // its own, from the constructor
  EXPECT_EQ(live[1].capacityBytes, 1000u);
  EXPECT_EQ(live[2].capacityBytes, 3000u);
  EXPECT_EQ(h.ph.capacity(3), 3000u);
  EXPECT_EQ(h.ph.size(), 4u);
  EXPECT_EQ(h.ph.member(2).address(), "10.0.0.2:7711");
  const auto i = h.ph.info(3, kT0);
  EXPECT_EQ(i.state, State::kUp);
  EXPECT_EQ(i.capacityBytes, 3000u);
  EXPECT_EQ(i.suspectCount, 0u);
  EXPECT_EQ(i.suspectForMs, 0u);
  h.ph.setLastError(2, "ucp_ep_create: no route");
  EXPECT_EQ(h.ph.info(2, kT0).lastError, "ucp_ep_create: no route");
  EXPECT_EQ(h.ph.info(2, kT0).state, State::kDown);
  EXPECT_STREQ(PeerHealth::stateName(State::kSelf), "self");
  EXPECT_STREQ(PeerHealth::stateName(State::kConnecting), "connecting");
  EXPECT_STREQ(PeerHealth::stateName(State::kSuspect), "suspect");
  EXPECT_STREQ(PeerHealth::stateName(State::kRefused), "refused");
  EXPECT_STREQ(PeerHealth::stateName(static_cast<State>(9)), "?");
}

TEST(PeerHealth, RetriesAreStretchedByJitterSoMembersDoNotRetryInStep) {
  PeerHealth::Options o = exact();
  o.retryJitter = 0.5;
  std::vector<PeerHealth::Clock::time_point> retries;
  for (uint32_t self = 1; self <= 8; ++self) {
    PeerHealth ph(members(9), self, 100, o, nullptr);
    ph.connecting(0, kT0);
    ph.lost(0, State::kDown, "connection lost", kT0);
    // The others are down and due at once; when is member 0 due again?
    auto at = kT0;
    while (at < kT0 + seconds(1)) {
      const auto connect = ph.due(at).connect;
      if (std::find(connect.begin(), connect.end(), 0u) != connect.end()) break;
      at += milliseconds(1);
    }
    EXPECT_GE(at, kT0 + milliseconds(250));
    EXPECT_LE(at, kT0 + milliseconds(375));
    retries.push_back(at);
  }
  std::sort(retries.begin(), retries.end());
  EXPECT_GE(std::unique(retries.begin(), retries.end()) - retries.begin(), 6)
      << "eight members losing one member retry at different times";
}

TEST(PeerHealth, AnUpMemberNotHeardFromIsProbedAndSuspectWhenItMissesTheProbe) {
  PeerHealth::Options o = exact();
  o.probeInterval = seconds(4);
  Health h(3, o);
  h.up(1, kT0);
  h.up(2, kT0);
  EXPECT_TRUE(h.ph.due(kT0 + milliseconds(2999)).ping.empty()) << "not before 0.75 × the interval";
  // Member 1 is heard from (replies): no probe for it while that goes on.
  for (auto t = kT0; t < kT0 + seconds(6); t += milliseconds(500)) h.ph.heard(1, t);
  std::vector<uint32_t> probed;
  auto t = kT0 + seconds(3);
  for (; t <= kT0 + milliseconds(5250); t += milliseconds(250)) {
    for (uint32_t id : h.ph.due(t).ping) probed.push_back(id);
  }
  EXPECT_EQ(probed, (std::vector<uint32_t>{2})) << "one probe, within 1.25 × the interval";
  EXPECT_EQ(h.ph.state(2), State::kUp);
  // Member 2 does not answer within the probe timeout (2 s): suspect, then pinged.
  const auto suspectAt = h.ph.nextTimer(t + seconds(10));
  EXPECT_LE(suspectAt, kT0 + milliseconds(5250) + seconds(2));
  const auto missed = h.ph.due(suspectAt);
  EXPECT_TRUE(missed.ping.empty());
  EXPECT_EQ(missed.probeMissed, (std::vector<uint32_t>{2}));
  EXPECT_EQ(h.ph.state(2), State::kUp) << "until the caller says so";
  h.ph.missedProbe(2, suspectAt);
  EXPECT_EQ(h.ph.state(2), State::kSuspect);
  EXPECT_EQ(h.ph.info(2, suspectAt).lastError, "missed a probe");
  EXPECT_EQ(h.ph.liveMembers().size(), 2u);
  EXPECT_EQ(h.ph.due(suspectAt).ping, (std::vector<uint32_t>{2}));
  h.ph.answered(2, suspectAt + milliseconds(1));
  EXPECT_EQ(h.ph.state(2), State::kUp) << "it answers: live again";
  EXPECT_EQ(h.ph.state(1), State::kUp);
}

TEST(PeerHealth, AnAnsweredProbeKeepsItUp) {
  PeerHealth::Options o = exact();
  o.probeInterval = seconds(4);
  Health h(2, o);
  h.up(1, kT0);
  int probes = 0;
  for (auto t = kT0; t <= kT0 + seconds(60); t += milliseconds(250)) {
    for (uint32_t id : h.ph.due(t).ping) {
      ++probes;
      h.ph.answered(id, t + milliseconds(1));
    }
  }
  EXPECT_GE(probes, 11);  // one every 3–5 s (+ a tick)
  EXPECT_LE(probes, 20);
  EXPECT_EQ(h.ph.state(1), State::kUp);
  EXPECT_EQ(h.liveChanges, 1);
}

}  // namespace
}  // namespace epochfs::transport
