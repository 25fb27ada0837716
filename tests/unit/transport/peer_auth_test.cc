#include "transport/peer_auth.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <vector>

namespace epochfs::transport {
namespace {

TEST(PeerAuth, SecretFileMustBePrivate) {
  char path[] = "/tmp/epochfs-secret-XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  std::ofstream(path) << "0123456789abcdef-secret\n";
  chmod(path, 0600);
  auto s = loadSecretFile(path);
  ASSERT_TRUE(s.isOk()) << s.status().toString();
  EXPECT_EQ(*s, "0123456789abcdef-secret");
  chmod(path, 0640);
  EXPECT_EQ(loadSecretFile(path).status().code(), cache::Status::Code::kPermissionDenied);
  chmod(path, 0604);
  EXPECT_FALSE(loadSecretFile(path).isOk());
  chmod(path, 0600);
  std::ofstream(path) << "short";
  EXPECT_FALSE(loadSecretFile(path).isOk());
  unlink(path);
  EXPECT_FALSE(loadSecretFile(path).isOk());
}

TEST(PeerAuth, ProofsBindSecretNoncesRolesAndNodes) {
  const Nonce a = randomNonce(), b = randomNonce();
  EXPECT_NE(a, b);
  const Digest p = handshakeProof("secret-one-secret", 'S', a, b, 1, 2);
  EXPECT_EQ(p, handshakeProof("secret-one-secret", 'S', a, b, 1, 2));
  EXPECT_NE(p, handshakeProof("secret-two-secret", 'S', a, b, 1, 2));
  EXPECT_NE(p, handshakeProof("secret-one-secret", 'C', a, b, 1, 2));
  EXPECT_NE(p, handshakeProof("secret-one-secret", 'S', a, randomNonce(), 1, 2));
  EXPECT_NE(p, handshakeProof("secret-one-secret", 'S', a, b, 2, 1));
  EXPECT_NE(sessionKey("secret-one-secret", a, b), sessionKey("secret-one-secret", b, a));
}

// Pass: a tag verifies only for the same key, direction, counter, header and
// bytes (one flipped bit fails). Its cost: tools/bench/peerbench/mac_bench.cc.
TEST(PeerAuth, PayloadMacDetectsAnyChange) {
  PayloadMac mac(sessionKey("k-k-k-k-k-k-k-k-k", randomNonce(), randomNonce()));
  std::vector<char> data(1 << 20, 'x');
  const char hdr[] = "header";
  Tag t = mac.sign(2, 7, hdr, sizeof hdr, data.data(), data.size());
  EXPECT_TRUE(mac.verify(t, 2, 7, hdr, sizeof hdr, data.data(), data.size()));
  EXPECT_FALSE(mac.verify(t, 2, 8, hdr, sizeof hdr, data.data(), data.size()));
  EXPECT_FALSE(mac.verify(t, 1, 7, hdr, sizeof hdr, data.data(), data.size()));
  data[12345] ^= 1;
  EXPECT_FALSE(mac.verify(t, 2, 7, hdr, sizeof hdr, data.data(), data.size()));
  data[12345] ^= 1;
  PayloadMac other(sessionKey("k-k-k-k-k-k-k-k-k", randomNonce(), randomNonce()));
  EXPECT_FALSE(other.verify(t, 2, 7, hdr, sizeof hdr, data.data(), data.size()));
}

// Pass: the piece callback sees every byte of the data once, in order, in
// pieces of at most kPieceBytes, and does not change the tag (sign and verify
// with and without it agree, for lengths around the piece size).
TEST(PeerAuth, PayloadMacPiecesCoverTheDataAndKeepTheTag) {
  PayloadMac mac(sessionKey("k-k-k-k-k-k-k-k-k", randomNonce(), randomNonce()));
  const char hdr[] = "header";
  for (size_t len : {size_t(0), size_t(1), PayloadMac::kPieceBytes - 1, PayloadMac::kPieceBytes,
                     PayloadMac::kPieceBytes + 17, size_t(1) << 20}) {
    std::vector<char> data(len);
    for (size_t i = 0; i < len; ++i) data[i] = static_cast<char>(i * 131 + 7);
    std::vector<char> seen;
    bool tooBig = false;
    const Tag withPieces =
        mac.sign(1, 9, hdr, sizeof hdr, data.data(), len, [&](const void* p, size_t n) {
          tooBig |= n > PayloadMac::kPieceBytes;
          seen.insert(seen.end(), static_cast<const char*>(p), static_cast<const char*>(p) + n);
        });
    EXPECT_EQ(withPieces, mac.sign(1, 9, hdr, sizeof hdr, data.data(), len)) << len;
    EXPECT_EQ(seen, data) << len;
    EXPECT_FALSE(tooBig) << len;
    EXPECT_TRUE(mac.verify(withPieces, 1, 9, hdr, sizeof hdr, data.data(), len,
                           [](const void*, size_t) {}));
  }
}

}  // namespace
}  // namespace epochfs::transport
