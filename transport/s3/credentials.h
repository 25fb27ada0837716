// Credentials: an AWS access key pair and an optional session token. The
// secret and the token are never printed: operator<< shows the key id only
// (so a log line or a test failure that prints a Credentials leaks nothing),
// and the destructor wipes both. Thread-compatible (a plain value).
#pragma once

#include <ostream>
#include <string>
#include <utility>

namespace epochfs::transport::s3 {

struct Credentials {
  std::string accessKeyId;
  std::string secretAccessKey;  // never printed, never logged
  std::string sessionToken;     // empty: long-term keys; never printed, never logged

  Credentials() = default;
  Credentials(std::string keyId, std::string secret, std::string token = {})
      : accessKeyId(std::move(keyId)),
        secretAccessKey(std::move(secret)),
        sessionToken(std::move(token)) {}
  Credentials(const Credentials&) = default;
  Credentials(Credentials&&) = default;
  Credentials& operator=(const Credentials&) = default;
  Credentials& operator=(Credentials&&) = default;
  ~Credentials();

  bool hasSessionToken() const { return !sessionToken.empty(); }

  // "access key AKIA... (secret hidden[, session token hidden])".
  friend std::ostream& operator<<(std::ostream& os, const Credentials& c);
};

}  // namespace epochfs::transport::s3
