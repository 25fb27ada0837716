#include "transport/wire_decoder.h"

#include <gtest/gtest.h>

#include <vector>

namespace epochfs::transport::wire {
namespace {

Hello validHello() {
  Hello h;
  h.integrity = static_cast<uint8_t>(Integrity::kMac);
  h.nodeId = 1;
  h.memberCount = 3;
  return h;
}

template <typename T>
cache::Result<AmMessage> decode(uint16_t id, const T& t, size_t dataLen = 0) {
  return decodeAm(id, &t, sizeof t, dataLen);
}

// Pass: every well-formed message decodes to the struct that was sent, field for field.
TEST(WireDecoder, DecodesEveryWellFormedMessage) {
  Hello h = validHello();
  h.capacity = 12345;
  auto m = decode(kHello, h);
  ASSERT_TRUE(m.isOk()) << m.status().toString();
  EXPECT_EQ(std::get<Hello>(m->body).capacity, 12345u);
  EXPECT_TRUE(decode(kChallenge, h).isOk());
  EXPECT_TRUE(decode(kProof, Proof{}).isOk());
  EXPECT_TRUE(decode(kWelcome, Welcome{}).isOk());
  Request rq;
  rq.reqId = 7;
  rq.chunkIndex = 9;
  auto r = decode(kRequest, rq);
  ASSERT_TRUE(r.isOk());
  EXPECT_EQ(std::get<Request>(r->body).reqId, 7u);
  EXPECT_EQ(std::get<Request>(r->body).chunkIndex, 9u);
  Reply rp;
  rp.length = 4096;
  EXPECT_TRUE(decode(kReply, rp, 4096).isOk());
  rp.length = 0;
  rp.code = static_cast<uint32_t>(cache::Status::Code::kNotFound);
  EXPECT_TRUE(decode(kReply, rp, 0).isOk());
  EXPECT_TRUE(decode(kPing, Ping{3}).isOk());
  EXPECT_EQ(std::get<Ping>(decode(kPong, Ping{3})->body).seq, 3u);
}

// Pass: a header one byte short or long, or an unknown id, is an error, never a partial read.
TEST(WireDecoder, RejectsWrongHeaderLengthsAndIds) {
  std::vector<uint8_t> buf(sizeof(Hello) + 1, 0);
  for (uint16_t id = kFirstAm; id <= kLastAm; ++id) {
    EXPECT_FALSE(decodeAm(id, buf.data(), 0, 0).isOk()) << id;
    EXPECT_FALSE(decodeAm(id, buf.data(), buf.size(), 0).isOk()) << id;
  }
  EXPECT_FALSE(decodeAm(kProof, buf.data(), sizeof(Proof) - 1, 0).isOk());
  EXPECT_FALSE(decodeAm(kReply, buf.data(), sizeof(Reply) + 1, 0).isOk());
  EXPECT_FALSE(decodeAm(kHello, nullptr, sizeof(Hello), 0).isOk());
  EXPECT_FALSE(decodeAm(0, buf.data(), sizeof(Ping), 0).isOk());
  EXPECT_FALSE(decodeAm(kLastAm + 1, buf.data(), sizeof(Ping), 0).isOk());
  // Only a REPLY carries data.
  EXPECT_FALSE(decode(kRequest, Request{}, 1).isOk());
}

// Pass: bad magic, version, integrity mode or member ids in HELLO/CHALLENGE are rejected.
TEST(WireDecoder, RejectsBadHandshakeFields) {
  Hello h = validHello();
  h.magic ^= 1;
  EXPECT_FALSE(decode(kHello, h).isOk());
  h = validHello();
  h.version = kVersion + 1;
  EXPECT_FALSE(decode(kChallenge, h).isOk());
  h = validHello();
  h.integrity = 0;
  EXPECT_FALSE(decode(kHello, h).isOk());
  h = validHello();
  h.nodeId = h.memberCount;
  EXPECT_FALSE(decode(kHello, h).isOk());
  h = validHello();
  h.memberCount = 0;
  h.nodeId = 0;
  EXPECT_FALSE(decode(kHello, h).isOk());
  h = validHello();
  h.memberCount = kMaxMembers + 1;
  EXPECT_FALSE(decode(kHello, h).isOk());
}

// Pass: a REPLY whose length disagrees with the data, exceeds 64 MiB, has an
// unknown code, or is an error carrying bytes is rejected.
TEST(WireDecoder, RejectsInconsistentReplies) {
  Reply r;
  r.length = 100;
  EXPECT_FALSE(decode(kReply, r, 99).isOk());
  EXPECT_FALSE(decode(kReply, r, 101).isOk());
  r.length = kMaxReplyBytes + 1;
  EXPECT_FALSE(decode(kReply, r, kMaxReplyBytes + 1).isOk());
  r.length = kMaxReplyBytes;
  EXPECT_TRUE(decode(kReply, r, kMaxReplyBytes).isOk());
  r.length = 0;
  r.code = 999;
  EXPECT_FALSE(decode(kReply, r, 0).isOk());
  r.code = static_cast<uint32_t>(cache::Status::Code::kUnavailable);
  EXPECT_FALSE(decode(kReply, r, 10).isOk());
  r.length = 10;
  EXPECT_FALSE(decode(kReply, r, 10).isOk());
}

}  // namespace
}  // namespace epochfs::transport::wire
