#include "transport/s3/credentials.h"

#include <openssl/crypto.h>

namespace epochfs::transport::s3 {

namespace {

void wipe(std::string& s) {
  // OPENSSL_cleanse: a wipe the compiler may not drop as a dead store.
  if (!s.empty()) OPENSSL_cleanse(s.data(), s.size());
}

}  // namespace

Credentials::~Credentials() {
  wipe(secretAccessKey);
  wipe(sessionToken);
}

std::ostream& operator<<(std::ostream& os, const Credentials& c) {
  os << "access key " << c.accessKeyId << " (secret hidden";
  if (c.hasSessionToken()) os << ", session token hidden";
  return os << ')';
}

}  // namespace epochfs::transport::s3
