// Where an S3 mount's credentials come from (transport/s3/credential_chain.h).
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <map>

#include "tests/unit/scoped_temp_dir.h"
#include "transport/s3/credential_chain.h"

namespace epochfs::transport::s3 {
namespace {

struct FakeEnv {
  std::map<std::string, std::string> vars;
  EnvLookup lookup() const {
    return [this](const char* n) -> const char* {
      auto it = vars.find(n);
      return it == vars.end() ? nullptr : it->second.c_str();
    };
  }
};

std::string write(const std::string& path, const std::string& text, mode_t mode = 0600) {
  std::ofstream(path) << text;
  chmod(path.c_str(), mode);
  return path;
}

class CredentialChain : public ::testing::Test {
 protected:
  epochfs::testing::ScopedTempDir dir_{"credchain"};
  FakeEnv env_;
  void SetUp() override {
    env_.vars["HOME"] = dir_.path();  // no ~/.aws: nothing found unless a test adds it
  }
};

TEST_F(CredentialChain, EnvironmentFirst) {
  env_.vars["AWS_ACCESS_KEY_ID"] = "AKIDENV";
  env_.vars["AWS_SECRET_ACCESS_KEY"] = "secret-env";
  env_.vars["AWS_SESSION_TOKEN"] = "tok";
  auto r = resolveCredentials({}, env_.lookup());
  ASSERT_TRUE(r.isOk()) << r.status().message();
  EXPECT_EQ(r->credentials->accessKeyId, "AKIDENV");
  EXPECT_EQ(r->credentials->sessionToken, "tok");
  EXPECT_EQ(r->origin, "environment");
}

TEST_F(CredentialChain, SharedFileWithProfile) {
  const std::string f = write(dir_.path() + "/creds",
                              "[default]\naws_access_key_id = AKIDDEF\naws_secret_access_key = "
                              "s1\n\n# comment\n[other]\naws_access_key_id=AKIDOTHER\n"
                              "aws_secret_access_key=s2\n",
                              0644);
  env_.vars["AWS_SHARED_CREDENTIALS_FILE"] = f;
  auto r = resolveCredentials({}, env_.lookup());
  ASSERT_TRUE(r.isOk()) << r.status().message();
  EXPECT_EQ(r->credentials->accessKeyId, "AKIDDEF");
  env_.vars["AWS_PROFILE"] = "other";
  r = resolveCredentials({}, env_.lookup());
  ASSERT_TRUE(r.isOk());
  EXPECT_EQ(r->credentials->accessKeyId, "AKIDOTHER");
  EXPECT_EQ(r->credentials->secretAccessKey, "s2");
}

TEST_F(CredentialChain, ExplicitFileMustBePrivate) {
  const std::string f =
      write(dir_.path() + "/c", "[default]\naws_access_key_id=A\naws_secret_access_key=S\n", 0644);
  CredentialRequest req;
  req.credentialsFile = f;
  auto r = resolveCredentials(req, env_.lookup());
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(r.status().message().find("chmod 600"), std::string::npos);
  chmod(f.c_str(), 0600);
  r = resolveCredentials(req, env_.lookup());
  ASSERT_TRUE(r.isOk()) << r.status().message();
  EXPECT_EQ(r->credentials->accessKeyId, "A");
  req.profile = "missing";
  r = resolveCredentials(req, env_.lookup());
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(r.status().message().find("[missing]"), std::string::npos);
}

TEST_F(CredentialChain, UnsupportedSourcesAreNamed) {
  env_.vars["AWS_WEB_IDENTITY_TOKEN_FILE"] = "/var/run/token";
  auto r = resolveCredentials({}, env_.lookup());
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(r.status().message().find("web identity"), std::string::npos);
  env_.vars.erase("AWS_WEB_IDENTITY_TOKEN_FILE");
  env_.vars["AWS_CONFIG_FILE"] =
      write(dir_.path() + "/config", "[default]\ncredential_process = /bin/get-keys\n");
  r = resolveCredentials({}, env_.lookup());
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(r.status().message().find("credential_process"), std::string::npos);
}

TEST_F(CredentialChain, NothingFoundSaysWhereItLooked) {
  auto r = resolveCredentials({}, env_.lookup());
  ASSERT_FALSE(r.isOk());
  EXPECT_EQ(r.status().code(), cache::Status::Code::kPermissionDenied);
  EXPECT_NE(r.status().message().find("--s3-no-sign-request"), std::string::npos);
  EXPECT_NE(r.status().message().find("instance metadata"), std::string::npos);
}

TEST_F(CredentialChain, NoSignNeedsNothing) {
  CredentialRequest req;
  req.noSign = true;
  auto r = resolveCredentials(req, env_.lookup());
  ASSERT_TRUE(r.isOk());
  EXPECT_FALSE(r->credentials.has_value());
}

TEST_F(CredentialChain, SecretsNeverInMessages) {
  env_.vars["AWS_CONFIG_FILE"] =
      write(dir_.path() + "/config", "[default]\naws_access_key_id=AKID\n");
  env_.vars["AWS_SHARED_CREDENTIALS_FILE"] =
      write(dir_.path() + "/creds", "[default]\naws_secret_access_key = TOPSECRET\n");
  auto r = resolveCredentials({}, env_.lookup());
  ASSERT_FALSE(r.isOk());
  EXPECT_EQ(r.status().message().find("TOPSECRET"), std::string::npos);
}

TEST(CredentialHandoff, RoundTrip) {
  ResolvedCredentials in{Credentials("AKID", "sec ret+/=", "token"), "environment", {}};
  auto out = decodeCredentials(encodeCredentials(in));
  ASSERT_TRUE(out.isOk());
  EXPECT_EQ(out->origin, "environment");
  EXPECT_EQ(out->credentials->secretAccessKey, "sec ret+/=");
  EXPECT_EQ(out->credentials->sessionToken, "token");
  EXPECT_FALSE(out->file.isSet());
  ResolvedCredentials none{std::nullopt, "none", {}};
  out = decodeCredentials(encodeCredentials(none));
  ASSERT_TRUE(out.isOk());
  EXPECT_FALSE(out->credentials.has_value());
  EXPECT_FALSE(decodeCredentials("").isOk());
  EXPECT_FALSE(decodeCredentials(std::string("a\0b", 3)).isOk());
}

TEST(CredentialHandoff, TheFileTravelsWithTheKeys) {
  using Kind = CredentialsFile::Kind;
  for (Kind kind : {Kind::kExplicit, Kind::kShared, Kind::kConfig}) {
    ResolvedCredentials in{
        Credentials("AKID", "secret"), "file /etc/creds profile [p]", {kind, "/etc/creds", "p"}};
    auto out = decodeCredentials(encodeCredentials(in));
    ASSERT_TRUE(out.isOk()) << out.status().message();
    EXPECT_EQ(out->file.kind, kind);
    EXPECT_EQ(out->file.path, "/etc/creds");
    EXPECT_EQ(out->file.profile, "p");
    EXPECT_EQ(out->credentials->accessKeyId, "AKID");
  }
  // A kind without a path, or an unknown kind, is malformed.
  EXPECT_FALSE(decodeCredentials(std::string("o\0shared\0\0p\0", 12)).isOk());
  EXPECT_FALSE(decodeCredentials(std::string("o\0weird\0/f\0p\0", 14)).isOk());
  EXPECT_FALSE(decodeCredentials(std::string("o\0\0/f\0p\0", 9)).isOk());
}

TEST_F(CredentialChain, WhereTheKeysCameFromIsKeptAndReadAgain) {
  const std::string shared =
      write(dir_.path() + "/creds", "[default]\naws_access_key_id=A1\naws_secret_access_key=S1\n");
  env_.vars["AWS_SHARED_CREDENTIALS_FILE"] = shared;
  auto r = resolveCredentials({}, env_.lookup());
  ASSERT_TRUE(r.isOk()) << r.status().message();
  EXPECT_EQ(r->file.kind, CredentialsFile::Kind::kShared);
  EXPECT_EQ(r->file.path, shared);
  EXPECT_EQ(r->file.profile, "default");
  write(shared, "[default]\naws_access_key_id=A2\naws_secret_access_key=S2\n");
  auto again = rereadCredentials(r->file);
  ASSERT_TRUE(again.isOk()) << again.status().message();
  EXPECT_EQ(again->accessKeyId, "A2");
  write(shared, "[other]\naws_access_key_id=A3\naws_secret_access_key=S3\n");
  again = rereadCredentials(r->file);
  ASSERT_FALSE(again.isOk());
  EXPECT_NE(again.status().message().find("no keys"), std::string::npos);

  // The config file's [profile P]; an explicit file stays private on every read.
  env_.vars.erase("AWS_SHARED_CREDENTIALS_FILE");
  env_.vars["AWS_CONFIG_FILE"] = write(
      dir_.path() + "/config", "[profile p]\naws_access_key_id=C1\naws_secret_access_key=S\n");
  env_.vars["AWS_PROFILE"] = "p";
  r = resolveCredentials({}, env_.lookup());
  ASSERT_TRUE(r.isOk()) << r.status().message();
  EXPECT_EQ(r->file.kind, CredentialsFile::Kind::kConfig);
  EXPECT_EQ(rereadCredentials(r->file)->accessKeyId, "C1");
  CredentialRequest req;
  req.credentialsFile =
      write(dir_.path() + "/mine", "[p]\naws_access_key_id=E1\naws_secret_access_key=S\n");
  r = resolveCredentials(req, env_.lookup());
  ASSERT_TRUE(r.isOk()) << r.status().message();
  EXPECT_EQ(r->file.kind, CredentialsFile::Kind::kExplicit);
  chmod(req.credentialsFile.c_str(), 0644);
  EXPECT_FALSE(rereadCredentials(r->file).isOk());
  // Keys from the environment have no file.
  env_.vars["AWS_ACCESS_KEY_ID"] = "AKIDENV";
  env_.vars["AWS_SECRET_ACCESS_KEY"] = "s";
  r = resolveCredentials({}, env_.lookup());
  ASSERT_TRUE(r.isOk());
  EXPECT_FALSE(r->file.isSet());
}

}  // namespace
}  // namespace epochfs::transport::s3
