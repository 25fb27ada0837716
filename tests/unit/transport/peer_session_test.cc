// ClientSession/ServerSession: the handshake in memory, both sides holding the
// same session key after it; a wrong secret, a non-member, another integrity
// mode, messages out of turn, replayed and forged requests are refused.
#include "transport/peer_session.h"

#include <gtest/gtest.h>

namespace epochfs::transport {
namespace {

SessionParams params(uint32_t self, std::string secret = "the job's secret") {
  SessionParams p;
  p.secret = std::move(secret);
  p.selfId = self;
  p.memberCount = 4;
  p.capacityBytes = (self + 1) * 1000;
  return p;
}

wire::Request signedRequest(const ClientSession& c, uint64_t counter) {
  wire::Request r;
  r.reqId = counter;
  r.counter = counter;
  r.tag = c.mac().sign(wire::kToServer, counter, &r, sizeof r, nullptr, 0);
  return r;
}

TEST(PeerSession, HandshakeGivesBothSidesOneSessionKey) {
  const SessionParams a = params(0), b = params(2);
  ClientSession client;
  ServerSession server;
  const wire::Hello hello = client.hello(a);
  EXPECT_EQ(hello.capacity, 1000u);
  auto challenge = server.hello(b, hello);
  ASSERT_TRUE(challenge.isOk()) << challenge.status().message();
  EXPECT_EQ(server.remote(), 0u);
  EXPECT_EQ(challenge->capacity, 3000u);
  auto proof = client.challenge(a, 2, *challenge);
  ASSERT_TRUE(proof.isOk());
  EXPECT_FALSE(server.authed());
  auto welcome = server.proof(b, *proof);
  ASSERT_TRUE(welcome.isOk());
  EXPECT_TRUE(server.authed());
  EXPECT_TRUE(client.welcome(*welcome));
  // Payloads one side signs, the other verifies.
  const Tag t = server.mac().sign(wire::kToClient, 7, "reply", 5, "data", 4);
  EXPECT_TRUE(client.mac().verify(t, wire::kToClient, 7, "reply", 5, "data", 4));
  EXPECT_TRUE(server.request(b, signedRequest(client, 1)).isOk());
  EXPECT_TRUE(server.request(b, signedRequest(client, 2)).isOk());
}

TEST(PeerSession, WrongSecretIsRefusedOnBothSides) {
  const SessionParams good = params(1), bad = params(3, "another job");
  // The server does not know the secret: the client refuses its challenge.
  ClientSession c1;
  ServerSession s1;
  auto ch = s1.hello(bad, c1.hello(good));
  ASSERT_TRUE(ch.isOk());
  EXPECT_EQ(c1.challenge(good, 3, *ch).status().code(), cache::Status::Code::kPermissionDenied);
  EXPECT_FALSE(c1.keyed());
  // The client does not know it: the server refuses its proof.
  ClientSession c2;
  ServerSession s2;
  auto ch2 = s2.hello(good, c2.hello(bad));
  ASSERT_TRUE(ch2.isOk());
  auto forged = c2.challenge(bad, 1, *ch2);
  EXPECT_FALSE(forged.isOk()) << "its own check of the server fails first";
  wire::Proof guess;
  EXPECT_EQ(s2.proof(good, guess).status().code(), cache::Status::Code::kPermissionDenied);
  EXPECT_FALSE(s2.authed());
  // A server answering for another node id is refused too.
  ClientSession c3;
  ServerSession s3;
  auto ch3 = s3.hello(params(2), c3.hello(good));
  ASSERT_TRUE(ch3.isOk());
  EXPECT_FALSE(c3.challenge(good, 3, *ch3).isOk());
}

TEST(PeerSession, ServerRefusesWhatIsNotAMemberOrOutOfTurn) {
  const SessionParams s = params(2);
  ClientSession c;
  wire::Hello h = c.hello(params(0));
  {
    ServerSession srv;
    wire::Hello other = h;
    other.memberCount = 5;
    EXPECT_FALSE(srv.hello(s, other).isOk()) << "another job's member count";
    wire::Hello self = h;
    self.nodeId = 2;
    EXPECT_FALSE(srv.hello(s, self).isOk()) << "claims to be the server itself";
    wire::Hello magic = h;
    magic.magic ^= 1;
    EXPECT_FALSE(srv.hello(s, magic).isOk());
    wire::Hello mode = h;
    mode.integrity = static_cast<uint8_t>(wire::Integrity::kChecksum);
    EXPECT_FALSE(srv.hello(s, mode).isOk()) << "--peer-integrity differs";
  }
  ServerSession srv;
  EXPECT_FALSE(srv.proof(s, wire::Proof{}).isOk()) << "proof before hello";
  EXPECT_FALSE(srv.request(s, wire::Request{}).isOk()) << "request before authentication";
  ASSERT_TRUE(srv.hello(s, h).isOk());
  EXPECT_FALSE(srv.hello(s, h).isOk()) << "a second hello";
}

TEST(PeerSession, ReplayedAndForgedRequestsAreRefused) {
  const SessionParams a = params(0), b = params(1);
  ClientSession client;
  ServerSession server;
  auto ch = server.hello(b, client.hello(a));
  ASSERT_TRUE(ch.isOk());
  auto pr = client.challenge(a, 1, *ch);
  ASSERT_TRUE(pr.isOk());
  ASSERT_TRUE(server.proof(b, *pr).isOk());
  const wire::Request r5 = signedRequest(client, 5);
  EXPECT_TRUE(server.request(b, r5).isOk());
  EXPECT_FALSE(server.request(b, r5).isOk()) << "replayed";
  EXPECT_FALSE(server.request(b, signedRequest(client, 4)).isOk()) << "counter went back";
  wire::Request forged = signedRequest(client, 6);
  forged.fileId = 99;  // changed after signing
  EXPECT_EQ(server.request(b, forged).code(), cache::Status::Code::kPermissionDenied);
  // With --peer-integrity=checksum requests carry no tag: only the counter is checked.
  SessionParams cs = b;
  cs.integrity = wire::Integrity::kChecksum;
  wire::Request plain;
  plain.counter = 7;
  EXPECT_TRUE(server.request(cs, plain).isOk());
}

}  // namespace
}  // namespace epochfs::transport
