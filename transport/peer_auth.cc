#include "transport/peer_auth.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <vector>

namespace epochfs::transport {

using cache::Result;
using cache::Status;

Result<std::string> loadSecretFile(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return Status::fromErrno(errno, "cannot open secret file " + path);
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return Status::invalidArgument("secret file " + path + " is not a regular file");
  }
  if ((st.st_mode & 077) != 0) {
    close(fd);
    return Status::permissionDenied("secret file " + path +
                                    " is readable by group or others (chmod 600 it)");
  }
  std::string secret;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0) secret.append(buf, static_cast<size_t>(n));
  close(fd);
  while (!secret.empty() && (secret.back() == '\n' || secret.back() == '\r')) secret.pop_back();
  if (secret.size() < 16) {
    return Status::invalidArgument("secret file " + path + " holds fewer than 16 bytes");
  }
  return secret;
}

Nonce randomNonce() {
  Nonce n;
  if (RAND_bytes(n.data(), static_cast<int>(n.size())) != 1) {
    throw std::runtime_error("RAND_bytes failed");
  }
  return n;
}

namespace {

Digest hmac(const std::string& key, const std::vector<uint8_t>& msg) {
  Digest out{};
  unsigned len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), msg.data(), msg.size(), out.data(),
       &len);
  return out;
}

void append(std::vector<uint8_t>& v, const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  v.insert(v.end(), b, b + n);
}

}  // namespace

Digest handshakeProof(const std::string& secret, char role, const Nonce& clientNonce,
                      const Nonce& serverNonce, uint32_t clientNode, uint32_t serverNode) {
  std::vector<uint8_t> msg;
  append(msg, "epochfs-proof", 13);
  append(msg, &role, 1);
  append(msg, clientNonce.data(), clientNonce.size());
  append(msg, serverNonce.data(), serverNonce.size());
  append(msg, &clientNode, sizeof clientNode);
  append(msg, &serverNode, sizeof serverNode);
  return hmac(secret, msg);
}

Digest sessionKey(const std::string& secret, const Nonce& clientNonce, const Nonce& serverNonce) {
  std::vector<uint8_t> msg;
  append(msg, "epochfs-session", 15);
  append(msg, clientNonce.data(), clientNonce.size());
  append(msg, serverNonce.data(), serverNonce.size());
  return hmac(secret, msg);
}

bool equalDigests(const uint8_t* a, const uint8_t* b, size_t n) {
  return CRYPTO_memcmp(a, b, n) == 0;
}

Tag PayloadMac::sign(uint32_t direction, uint64_t counter, const void* header, size_t headerLen,
                     const void* data, size_t dataLen) const {
  return sign(direction, counter, header, headerLen, data, dataLen, PieceFn());
}

Tag PayloadMac::sign(uint32_t direction, uint64_t counter, const void* header, size_t headerLen,
                     const void* data, size_t dataLen, const PieceFn& alongside) const {
  // ChaCha20-Poly1305 with everything as additional data and no plaintext:
  // the tag is a Poly1305 MAC under a one-time key derived from (key, iv).
  // 1.6x faster than AES-GMAC here (83 vs 132 us per MiB: OpenSSL's Poly1305
  // has AVX2/AVX-512 code, its GCM additional-data path does not).
  // The cipher is fetched once (an implicit fetch on every init costs a
  // lookup); one context per thread, freed when the thread ends.
  static EVP_CIPHER* const cipher = EVP_CIPHER_fetch(nullptr, "ChaCha20-Poly1305", nullptr);
  struct CtxFree {
    void operator()(EVP_CIPHER_CTX* c) const { EVP_CIPHER_CTX_free(c); }
  };
  thread_local std::unique_ptr<EVP_CIPHER_CTX, CtxFree> owned(EVP_CIPHER_CTX_new());
  EVP_CIPHER_CTX* ctx = owned.get();
  if (ctx == nullptr || cipher == nullptr)
    throw std::runtime_error("ChaCha20-Poly1305 unavailable");
  uint8_t iv[12];
  std::memcpy(iv, &direction, 4);
  std::memcpy(iv + 4, &counter, 8);
  Tag tag{};
  int outl = 0;
  uint8_t none[16];
  // The header is zero-padded to 16 bytes: Poly1305 then reads the data in
  // whole blocks straight from the buffer (a header of 56 bytes made every
  // MiB 24 % slower). Headers have a fixed size per message type, so the
  // padding is unambiguous.
  static const uint8_t kZeros[16] = {};
  const size_t pad = (16 - headerLen % 16) % 16;
  bool ok =
      EVP_EncryptInit_ex(ctx, cipher, nullptr, key_.data(), iv) == 1 &&
      (headerLen == 0 ||
       (EVP_EncryptUpdate(ctx, nullptr, &outl, static_cast<const uint8_t*>(header),
                          static_cast<int>(headerLen)) == 1 &&
        (pad == 0 || EVP_EncryptUpdate(ctx, nullptr, &outl, kZeros, static_cast<int>(pad)) == 1)));
  // In pieces (Poly1305 buffers partial blocks: the tag does not depend on them).
  const auto* d = static_cast<const uint8_t*>(data);
  for (size_t off = 0; ok && off < dataLen; off += kPieceBytes) {
    const size_t n = std::min(dataLen - off, kPieceBytes);
    ok = EVP_EncryptUpdate(ctx, nullptr, &outl, d + off, static_cast<int>(n)) == 1;
    if (ok && alongside) alongside(d + off, n);
  }
  ok = ok && EVP_EncryptFinal_ex(ctx, none, &outl) == 1 &&
       EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_GET_TAG, static_cast<int>(tag.size()), tag.data()) ==
           1;
  if (!ok) throw std::runtime_error("payload MAC (ChaCha20-Poly1305) failed");
  return tag;
}

bool PayloadMac::verify(const Tag& tag, uint32_t direction, uint64_t counter, const void* header,
                        size_t headerLen, const void* data, size_t dataLen) const {
  return verify(tag, direction, counter, header, headerLen, data, dataLen, PieceFn());
}

bool PayloadMac::verify(const Tag& tag, uint32_t direction, uint64_t counter, const void* header,
                        size_t headerLen, const void* data, size_t dataLen,
                        const PieceFn& alongside) const {
  const Tag want = sign(direction, counter, header, headerLen, data, dataLen, alongside);
  return equalDigests(tag.data(), want.data(), tag.size());
}

}  // namespace epochfs::transport
