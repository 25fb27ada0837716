// Where an S3 mount's credentials come from: the places the AWS tools look,
// in their order, or the file --s3-credentials-file names.
//
//   1. --s3-credentials-file FILE: an AWS credentials file (INI); the profile
//      is --s3-profile, else AWS_PROFILE, else "default". It must not be
//      readable by group or others (it holds a secret, like --secret-file).
//   2. AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY [+ AWS_SESSION_TOKEN].
//   3. The shared credentials file (AWS_SHARED_CREDENTIALS_FILE, else
//      ~/.aws/credentials), profile as in 1.
//   4. The config file (AWS_CONFIG_FILE, else ~/.aws/config), "[profile P]"
//      or "[default]", with static keys.
// The rest of the AWS chain is refused with a message naming it: web identity
// (AWS_WEB_IDENTITY_TOKEN_FILE, web_identity_token_file), credential_process,
// role_arn (assume role), SSO, and instance metadata (IMDS/ECS) when nothing
// else is found. A public bucket needs --s3-no-sign-request.
//
// The secret is never put in a message. Pure but for reading the files and
// the environment it is given; thread-compatible.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "cache/status.h"
#include "transport/s3/credentials.h"

namespace epochfs::transport::s3 {

struct CredentialRequest {
  std::string credentialsFile;  // --s3-credentials-file (absolute); empty: the chain
  std::string profile;          // --s3-profile; empty: AWS_PROFILE, else "default"
  bool noSign = false;          // --s3-no-sign-request: no credentials at all
};

// The file keys were read from, so that they can be read again when the
// site's refresher rewrites it (S3Client re-reads it: when it changes, and
// after a 403 ExpiredToken). Keys from the environment have none.
struct CredentialsFile {
  enum class Kind : uint8_t {
    kNone,      // not from a file (the environment, or unsigned)
    kExplicit,  // --s3-credentials-file: must stay private (mode 0600)
    kShared,    // the shared credentials file: section [PROFILE]
    kConfig,    // the config file: section [profile PROFILE] or [default]
  };
  Kind kind = Kind::kNone;
  std::string path;
  std::string profile;  // resolved (--s3-profile, AWS_PROFILE or "default")

  bool isSet() const { return kind != Kind::kNone; }
  // "PATH [profile P]" for messages.
  std::string describe() const;
};

struct ResolvedCredentials {
  std::optional<Credentials> credentials;  // nullopt: requests go unsigned
  std::string origin;    // for logs and status: "environment", "file PATH [profile P]", "none"
  CredentialsFile file;  // where to read them again; kind kNone: nowhere
};

// getenv by default; tests pass their own.
using EnvLookup = std::function<const char*(const char*)>;

cache::Result<ResolvedCredentials> resolveCredentials(const CredentialRequest& request,
                                                      const EnvLookup& env = nullptr);

// The keys of `file` read again by the rules that found them first (an
// explicit file must still be private). A profile that no longer holds keys
// is an error; the message never holds a secret.
cache::Result<Credentials> rereadCredentials(const CredentialsFile& file);

// Resolved credentials as bytes for a pipe from the supervisor to its worker
// (never the environment), and back. decode fails on anything malformed.
std::string encodeCredentials(const ResolvedCredentials& c);
cache::Result<ResolvedCredentials> decodeCredentials(const std::string& bytes);

}  // namespace epochfs::transport::s3
