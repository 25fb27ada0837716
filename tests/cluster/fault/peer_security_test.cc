// docs/RELIABILITY.md case 14 against real daemons: a cluster needs a
// secret; a client without it (silent, garbage, forged proof) gets nothing
// and is closed; a recorded genuine handshake and request, replayed, are
// refused; a request naming a file outside the snapshot or another version
// of one is refused with a clear status and counted. The client is RawPeer,
// a bare UCX endpoint speaking transport/wire_format.h by hand.
#include <sys/stat.h>

#include "cache/file_identity.h"
#include "tests/cluster/cluster_mount_fixture.h"
#include "tests/cluster/fault/raw_peer.h"
#include "transport/peer_auth.h"
#include "transport/wire_format.h"

namespace epochfs::itest {
namespace {

using transport::testing::RawPeer;
using namespace std::chrono_literals;
namespace wire = transport::wire;

constexpr const char* kClusterSecret = "cluster-test-secret-0123456789";  // the fixture's

// One client session as node `claimed` of a 2-node job, toward node `server`.
struct Session {
  transport::Nonce clientNonce{};
  transport::Nonce serverNonce{};
  wire::Hello hello;
  wire::Proof proof;
  transport::PayloadMac mac;
  uint64_t counter = 1000;
};

wire::Hello helloFrom(uint32_t claimed, uint32_t members) {
  wire::Hello h;
  h.integrity = static_cast<uint8_t>(wire::Integrity::kMac);
  h.nodeId = claimed;
  h.memberCount = members;
  h.nonce = transport::randomNonce();
  return h;
}

// A genuine handshake with the secret: HELLO, CHALLENGE (server proof
// checked), PROOF, WELCOME (tag checked). Returns false on any deviation.
bool handshake(RawPeer& peer, Session* s, uint32_t claimed = 1, uint32_t server = 0,
               uint32_t members = 2) {
  s->hello = helloFrom(claimed, members);
  s->clientNonce = s->hello.nonce;
  if (!peer.send(wire::kHello, s->hello)) return false;
  auto c = peer.waitFor(wire::kChallenge, 5s);
  if (!c) return false;
  const auto ch = c->as<wire::Hello>();
  s->serverNonce = ch.nonce;
  const auto want =
      transport::handshakeProof(kClusterSecret, 'S', s->clientNonce, ch.nonce, claimed, server);
  if (!transport::equalDigests(want.data(), ch.proof.data(), want.size())) return false;
  s->proof.proof =
      transport::handshakeProof(kClusterSecret, 'C', s->clientNonce, ch.nonce, claimed, server);
  if (!peer.send(wire::kProof, s->proof)) return false;
  auto w = peer.waitFor(wire::kWelcome, 5s);
  if (!w) return false;
  s->mac = transport::PayloadMac(transport::sessionKey(kClusterSecret, s->clientNonce, ch.nonce));
  return s->mac.verify(w->as<wire::Welcome>().tag, wire::kWelcomeDir, 0, "welcome", 7, nullptr, 0);
}

cache::FileIdentity identityOfFile(const std::string& root, const std::string& rel) {
  struct stat st {};
  EXPECT_EQ(::stat((root + "/" + rel).c_str(), &st), 0) << rel;
  cache::FileIdentity id;
  id.fileId = cache::fileIdForPath(rel);
  id.size = static_cast<uint64_t>(st.st_size);
  id.mtimeNs = int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec;
  id.ctimeNs = int64_t{st.st_ctim.tv_sec} * 1000000000 + st.st_ctim.tv_nsec;
  id.inode = st.st_ino;
  return id;
}

wire::Request signedRequest(Session& s, const cache::FileIdentity& id, uint32_t chunk = 0) {
  wire::Request r;
  r.reqId = s.counter;
  r.fileId = id.fileId;
  r.size = id.size;
  r.mtimeNs = id.mtimeNs;
  r.ctimeNs = id.ctimeNs;
  r.inode = id.inode;
  r.chunkIndex = chunk;
  r.deadlineMs = 2000;
  r.counter = ++s.counter;
  r.tag = transport::Tag{};
  r.tag = s.mac.sign(wire::kToServer, r.counter, &r, sizeof r, nullptr, 0);
  return r;
}

// The reply's MAC under the session, over header and data.
bool replyAuthentic(const Session& s, const RawPeer::Message& m) {
  auto r = m.as<wire::Reply>();
  const transport::Tag tag = r.tag;
  r.tag = transport::Tag{};
  return s.mac.verify(tag, wire::kToClient, r.counter, &r, sizeof r, m.data.data(), m.data.size());
}

class PeerSecurityTest : public ClusterMountTest {
 protected:
  void SetUp() override {
    ClusterMountTest::SetUp();
    if (IsSkipped()) return;
    makeDataset(12);
  }

  nlohmann::json peerEntry(int node, int of) {
    return admin("peers", mnts_[static_cast<size_t>(node)])["peers"][static_cast<size_t>(of)];
  }
  std::string log(int node) {
    std::ifstream in(root_ + "/log" + std::to_string(node));
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }
  // Two members; what each served at start (the namespace image, one walk
  // per job) is left out of servedBytes().
  bool startPair() {
    if (!startCluster(2, 64 << 20)) return false;
    for (int n : {0, 1}) servedAtStart_[n] = servedBytes(n);
    return true;
  }
  // Bytes `node` served to peers since startPair().
  uint64_t servedBytes(int node) {
    uint64_t b = 0;
    const auto j = admin("peers", mnts_[static_cast<size_t>(node)]);  // outlives the loop
    for (const auto& p : j["peers"]) {
      b += p.value("bytes_served", uint64_t{0});
    }
    return b - servedAtStart_[node];
  }
  uint64_t servedAtStart_[2] = {0, 0};
  std::string someFile() const { return hashes_.begin()->first; }
};

// Pass: `--peers` without `--secret-file`, with a group-readable secret or
// with a secret under 16 bytes: the daemon exits non-zero before mounting,
// naming the problem.
TEST_F(PeerSecurityTest, NoUsableSecretMeansNoClusterDaemon) {
  const std::string peers = "127.0.0.1:" + std::to_string(freeLoopbackPort()) +
                            ",127.0.0.1:" + std::to_string(freeLoopbackPort());
  const std::string mnt = root_ + "/mnt-nosecret";
  mkdirs(mnt);
  const std::string loose = root_ + "/loose-secret", shortSecret = root_ + "/short-secret";
  writeFile(loose, "cluster-test-secret-0123456789", 0644);
  writeFile(shortSecret, "short", 0600);
  struct Case {
    std::vector<std::string> args;
    const char* says;
  };
  const Case cases[] = {
      {{"--peers", peers, "--node-id", "0"}, "--secret-file"},
      {{"--peers", peers, "--node-id", "0", "--secret-file", loose}, "chmod 600"},
      {{"--peers", peers, "--node-id", "0", "--secret-file", shortSecret}, "16 bytes"}};
  for (const auto& c : cases) {
    ProcResult r = mountAt(src_, mnt, c.args, 30);
    EXPECT_NE(r.exitCode, 0) << r.describe();
    EXPECT_NE(r.describe().find(c.says), std::string::npos) << r.describe();
    EXPECT_FALSE(isMounted(mnt));
    if (r.exitCode == 0) unmount(mnt);
  }
}

// Pass: a client that sends nothing, a malformed HELLO, a REQUEST before
// any handshake, or a wrong PROOF never receives a WELCOME or a REPLY (no
// data, no rendezvous key), is disconnected (the silent one after the 5 s
// handshake timeout), and the wrong proof counts as an authentication
// failure; the daemons serve no byte to anyone.
TEST_F(PeerSecurityTest, ClientsWithoutTheSecretGetNoData) {
  ASSERT_TRUE(startPair());
  const auto id = identityOfFile(src_, someFile());
  const uint64_t authBefore = peerEntry(0, 1).value("auth_failures", uint64_t{0});
  {
    RawPeer silent;
    ASSERT_TRUE(silent.connect("127.0.0.1", ports_[0]));
    silent.pump(7000ms);
    EXPECT_TRUE(silent.inbox().empty());
    EXPECT_TRUE(silent.closed()) << "a silent client must be closed after the handshake timeout";
  }
  {
    RawPeer garbage;
    ASSERT_TRUE(garbage.connect("127.0.0.1", ports_[0]));
    const char junk[7] = {'g', 'a', 'r', 'b', 'a', 'g', 'e'};
    garbage.send(wire::kHello, junk, sizeof junk);
    garbage.pump(1500ms);
    EXPECT_TRUE(garbage.inbox().empty());
    EXPECT_TRUE(garbage.closed()) << "a malformed hello must close the connection";
  }
  {
    RawPeer early;
    ASSERT_TRUE(early.connect("127.0.0.1", ports_[0]));
    Session none;
    early.send(wire::kRequest, signedRequest(none, id));
    EXPECT_FALSE(early.waitFor(wire::kReply, 1500ms)) << "a reply before authentication";
    EXPECT_TRUE(early.closed());
  }
  {
    RawPeer forger;
    ASSERT_TRUE(forger.connect("127.0.0.1", ports_[0]));
    auto hello = helloFrom(1, 2);
    forger.send(wire::kHello, hello);
    ASSERT_TRUE(forger.waitFor(wire::kChallenge, 5s)) << "a well-formed hello gets a challenge";
    wire::Proof bogus;
    bogus.proof = transport::randomNonce();
    forger.send(wire::kProof, bogus);
    EXPECT_FALSE(forger.waitFor(wire::kWelcome, 1500ms));
    Session none;
    forger.send(wire::kRequest, signedRequest(none, id));
    EXPECT_FALSE(forger.waitFor(wire::kReply, 1000ms));
    EXPECT_TRUE(forger.closed());
  }
  EXPECT_GT(peerEntry(0, 1).value("auth_failures", uint64_t{0}), authBefore);
  EXPECT_EQ(servedBytes(0), 0u);
  EXPECT_EQ(servedBytes(1), 0u);
  EXPECT_NE(log(0).find("bad proof"), std::string::npos);
  EXPECT_NE(log(0).find("handshake timeout"), std::string::npos);
  // The genuine members still see each other.
  EXPECT_TRUE(peerEntry(0, 1).value("live", false));
}

// Pass: a genuine session (with the secret) gets the right, authentic bytes;
// replaying its REQUEST on that session closes it without a second REPLY;
// replaying its recorded HELLO and PROOF on a new connection gets a fresh
// challenge nonce, no WELCOME, an authentication failure and a closed
// connection, and the replayed REQUEST there gets no REPLY either.
TEST_F(PeerSecurityTest, ReplayedHandshakeAndRequestAreRefused) {
  ASSERT_TRUE(startPair());
  const std::string rel = someFile();
  const auto id = identityOfFile(src_, rel);
  RawPeer genuine;
  ASSERT_TRUE(genuine.connect("127.0.0.1", ports_[0]));
  Session s;
  ASSERT_TRUE(handshake(genuine, &s)) << "the genuine handshake failed";
  const wire::Request req = signedRequest(s, id);
  ASSERT_TRUE(genuine.send(wire::kRequest, req));
  auto reply = genuine.waitFor(wire::kReply, 5s);
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->as<wire::Reply>().code, 0u);
  EXPECT_TRUE(replyAuthentic(s, *reply));
  EXPECT_EQ(xxh3(std::string_view(reply->data.data(), reply->data.size())), hashes_[rel]);
  const uint64_t servedOnce = servedBytes(0);
  EXPECT_EQ(servedOnce, id.size);

  // The same request again on the same session: a replay.
  genuine.send(wire::kRequest, req);
  EXPECT_FALSE(genuine.waitFor(wire::kReply, 1500ms));
  EXPECT_TRUE(genuine.closed());

  const uint64_t authBefore = peerEntry(0, 1).value("auth_failures", uint64_t{0});
  RawPeer replayer;
  ASSERT_TRUE(replayer.connect("127.0.0.1", ports_[0]));
  replayer.send(wire::kHello, s.hello);
  auto ch = replayer.waitFor(wire::kChallenge, 5s);
  ASSERT_TRUE(ch);
  EXPECT_NE(ch->as<wire::Hello>().nonce, s.serverNonce) << "the server's nonce must be fresh";
  replayer.send(wire::kProof, s.proof);
  EXPECT_FALSE(replayer.waitFor(wire::kWelcome, 1500ms));
  replayer.send(wire::kRequest, req);
  EXPECT_FALSE(replayer.waitFor(wire::kReply, 1000ms));
  EXPECT_TRUE(replayer.closed());
  EXPECT_GT(peerEntry(0, 1).value("auth_failures", uint64_t{0}), authBefore);
  EXPECT_EQ(servedBytes(0), servedOnce) << "nothing served after the genuine reply";
}

// Pass: over a genuine session, a request for a file id outside node 0's
// snapshot (the id of "../secret", of a path that does not exist) is refused
// with NotFound, one for a real file with another size, mtime, ctime or
// inode with Stale; each refusal is an authentic REPLY without data, counted
// in serve_refused, and logged; the right identity still gets the bytes.
TEST_F(PeerSecurityTest, RequestsOutsideTheSnapshotOrForAnotherVersionAreRefused) {
  ASSERT_TRUE(startPair());
  const std::string rel = someFile();
  const auto id = identityOfFile(src_, rel);
  RawPeer client;
  ASSERT_TRUE(client.connect("127.0.0.1", ports_[0]));
  Session s;
  ASSERT_TRUE(handshake(client, &s));
  struct Case {
    const char* what;
    cache::FileIdentity id;
    cache::Status::Code want;
  };
  std::vector<Case> cases;
  auto outside = id;
  outside.fileId = cache::fileIdForPath("../secret");
  cases.push_back({"outside the dataset", outside, cache::Status::Code::kNotFound});
  auto missing = id;
  missing.fileId = cache::fileIdForPath("class0/no-such-file.bin");
  cases.push_back({"not in the snapshot", missing, cache::Status::Code::kNotFound});
  auto size = id;
  size.size += 1;
  cases.push_back({"another size", size, cache::Status::Code::kStale});
  auto mtime = id;
  mtime.mtimeNs += 1;
  cases.push_back({"another mtime", mtime, cache::Status::Code::kStale});
  auto ctime = id;
  ctime.ctimeNs -= 1000000000;
  cases.push_back({"another ctime", ctime, cache::Status::Code::kStale});
  auto inode = id;
  inode.inode += 1;
  cases.push_back({"another inode", inode, cache::Status::Code::kStale});
  for (const auto& c : cases) {
    ASSERT_TRUE(client.send(wire::kRequest, signedRequest(s, c.id))) << c.what;
    auto r = client.waitFor(wire::kReply, 5s);
    ASSERT_TRUE(r) << c.what;
    EXPECT_EQ(r->as<wire::Reply>().code, static_cast<uint32_t>(c.want)) << c.what;
    EXPECT_EQ(r->as<wire::Reply>().length, 0u) << c.what;
    EXPECT_TRUE(r->data.empty()) << c.what;
    EXPECT_TRUE(replyAuthentic(s, *r)) << c.what;
  }
  EXPECT_EQ(peerEntry(0, 1).value("serve_refused", uint64_t{0}), cases.size());
  EXPECT_EQ(servedBytes(0), 0u);
  EXPECT_NE(log(0).find("not in this dataset"), std::string::npos);
  EXPECT_NE(log(0).find("another version"), std::string::npos);
  // The right identity over the same session: the bytes.
  ASSERT_TRUE(client.send(wire::kRequest, signedRequest(s, id)));
  auto ok = client.waitFor(wire::kReply, 5s);
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->as<wire::Reply>().code, 0u);
  EXPECT_EQ(xxh3(std::string_view(ok->data.data(), ok->data.size())), hashes_[rel]);
  // status.members and the metrics show the refusals too.
  EXPECT_EQ(admin("status", mnts_[0])["members"].value("serve_refused", uint64_t{0}), cases.size());
  const std::string text = admin("metrics", mnts_[0]).value("text", "");
  EXPECT_NE(text.find("epochfs_peer_refused_requests_total{mountpoint=\"" + mnts_[0] +
                      "\",by=\"self\"} " + std::to_string(cases.size())),
            std::string::npos)
      << text;
}

}  // namespace
}  // namespace epochfs::itest
