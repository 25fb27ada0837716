// S3Client's retries and credentials that change (transport/s3/s3_client.h,
// retry_policy.h, credentials_provider.h) against the fake server
// (fake_s3_server.h): SlowDown then success, a reset connection, what is
// never retried, the read deadline, a stalled server, an ExpiredToken answered
// with keys read again from the rewritten file, a file rewritten between
// requests. Backoff delays are shortened so the tests run fast; no timing is
// asserted tighter than "ended before the deadline plus a generous margin".
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include "tests/unit/scoped_temp_dir.h"
#include "tests/unit/transport/fake_s3_server.h"
#include "transport/s3/s3_client.h"

namespace epochfs::transport::s3 {
namespace {

using Code = cache::Status::Code;
using namespace std::chrono_literals;
using namespace fake_s3;

std::string s3Error(int status, const std::string& code) {
  return reply(status, "<Error><Code>" + code + "</Code><Message>m</Message></Error>");
}

// Fast backoff: the tests wait milliseconds, not seconds.
void fastRetries(S3ClientConfig& cfg) {
  cfg.retry.baseDelay = 1ms;
  cfg.retry.maxDelay = 20ms;
}

TEST(S3ClientRetry, SlowDownThenSuccess) {
  const std::string obj = object(1000);
  std::atomic<int> answered{0};
  FakeServer server([&](const HttpRequest& r) {
    if (answered++ < 3) return s3Error(503, "SlowDown");
    return serveRange(obj, r);
  });
  auto c = client(server, true, 32, fastRetries);
  char buf[100];
  auto got = c->getRange("k", 100, buf, 100, ETag());
  ASSERT_TRUE(got.isOk()) << got.status().toString();
  EXPECT_EQ(std::string(buf, 100), obj.substr(100, 100));
  const S3ClientStats st = c->stats();
  EXPECT_EQ(st.gets, 1u);
  EXPECT_EQ(st.retries, 3u);
  EXPECT_EQ(st.slowdowns, 3u);
  EXPECT_EQ(st.errors, 0u);
  EXPECT_EQ(st.gaveUp, 0u);
  EXPECT_EQ(st.bytesReceived, 100u);
  const auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 4u);
  for (const auto& r : reqs) {
    EXPECT_NE(r.headers.at("authorization").find("Credential=AKIDEXAMPLE/"), std::string::npos);
    EXPECT_EQ(r.headers.at("range"), "bytes=100-199");
  }
  uint64_t timed = 0;
  for (const auto& n : c->counters().getLatency.counts) timed += n.load();
  EXPECT_EQ(timed, 4u) << "every GET attempt that got an answer";
}

TEST(S3ClientRetry, AResetConnectionIsRetried) {
  const std::string obj = object(1000);
  std::atomic<int> answered{0};
  FakeServer server([&](const HttpRequest& r) {
    if (answered++ == 0) return kCloseWithoutAnswer;
    return serveRange(obj, r);
  });
  auto c = client(server, true, 32, fastRetries);
  char buf[10];
  auto got = c->getRange("k", 0, buf, 10, ETag());
  ASSERT_TRUE(got.isOk()) << got.status().toString();
  EXPECT_EQ(std::string(buf, 10), obj.substr(0, 10));
  EXPECT_EQ(c->stats().retries, 1u);
  EXPECT_EQ(c->stats().errors, 0u);
  EXPECT_GE(server.connections(), 2);
}

TEST(S3ClientRetry, ClientErrorsAreNeverRetried) {
  for (const auto& [answer, code] : std::vector<std::pair<std::string, Code>>{
           {s3Error(403, "AccessDenied"), Code::kPermissionDenied},
           {s3Error(404, "NoSuchKey"), Code::kNotFound},
           {s3Error(412, "PreconditionFailed"), Code::kStale},
           {s3Error(400, "InvalidArgument"), Code::kIoError},
           {s3Error(501, "NotImplemented"), Code::kUnavailable}}) {
    FakeServer server([&](const HttpRequest&) { return answer; });
    auto c = client(server, true, 32, fastRetries);
    char buf[10];
    auto got = c->getRange("k", 0, buf, 10, ETag());
    EXPECT_EQ(got.status().code(), code) << got.status().toString();
    EXPECT_EQ(server.requests().size(), 1u) << answer;
    EXPECT_EQ(c->stats().retries, 0u);
    EXPECT_EQ(c->stats().errors, 1u);
  }
}

TEST(S3ClientRetry, HeadAndListingsRetryToo) {
  std::atomic<int> answered{0};
  FakeServer server([&](const HttpRequest& r) {
    if (answered++ % 2 == 0) return s3Error(500, "InternalError");
    if (r.method == "HEAD") return std::string("HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\n");
    return reply(200,
                 "<ListBucketResult><IsTruncated>false</IsTruncated>"
                 "<Contents><Key>a</Key><Size>1</Size></Contents></ListBucketResult>");
  });
  auto c = client(server, true, 32, fastRetries);
  auto info = c->head("k");
  ASSERT_TRUE(info.isOk()) << info.status().toString();
  EXPECT_EQ(info->size, 7u);
  auto all = c->listAll("", 1);
  ASSERT_TRUE(all.isOk()) << all.status().toString();
  ASSERT_EQ(all->size(), 1u);
  EXPECT_EQ(c->stats().retries, 2u);
  EXPECT_EQ(c->stats().heads, 1u);
  EXPECT_EQ(c->stats().lists, 1u);
}

TEST(S3ClientRetry, AlwaysUnavailableEndsAtTheDeadline) {
  FakeServer server([&](const HttpRequest&) { return s3Error(503, "SlowDown"); });
  constexpr auto kDeadline = 1500ms;
  auto c = client(server, true, 32, [&](S3ClientConfig& cfg) {
    cfg.readDeadline = kDeadline;
    cfg.retry.baseDelay = 20ms;
    cfg.retry.maxDelay = 200ms;
    cfg.retry.maxAttempts = 1000;  // the deadline ends it
  });
  char buf[10];
  const auto start = std::chrono::steady_clock::now();
  auto got = c->getRange("k", 0, buf, 10, ETag());
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(got.status().code(), Code::kUnavailable) << got.status().toString();
  EXPECT_NE(got.status().message().find("attempts"), std::string::npos);
  EXPECT_NE(got.status().message().find("SlowDown"), std::string::npos);
  EXPECT_GT(server.requests().size(), 1u);
  EXPECT_LT(took, kDeadline + 10s);
  EXPECT_EQ(c->stats().gaveUp, 1u);
  EXPECT_EQ(c->stats().errors, 1u);
  EXPECT_EQ(c->stats().retries, server.requests().size() - 1);
}

TEST(S3ClientRetry, TheAttemptsAreBounded) {
  FakeServer server([&](const HttpRequest&) { return s3Error(500, "InternalError"); });
  auto c = client(server, true, 32, [](S3ClientConfig& cfg) {
    fastRetries(cfg);
    cfg.retry.maxAttempts = 4;
  });
  char buf[10];
  EXPECT_EQ(c->getRange("k", 0, buf, 10, ETag()).status().code(), Code::kUnavailable);
  EXPECT_EQ(server.requests().size(), 4u);
}

TEST(S3ClientRetry, AStalledServerEndsAtTheDeadline) {
  std::atomic<bool> release{false};
  FakeServer server([&](const HttpRequest&) {
    for (int i = 0; i < 3000 && !release.load(); ++i) std::this_thread::sleep_for(10ms);
    return reply(200, "late");
  });
  constexpr auto kDeadline = 1000ms;
  auto c = client(server, true, 32, [&](S3ClientConfig& cfg) {
    fastRetries(cfg);
    cfg.readDeadline = kDeadline;  // cuts the 10 s request timeout
  });
  char buf[10];
  const auto start = std::chrono::steady_clock::now();
  auto got = c->getRange("k", 0, buf, 10, ETag());
  const auto took = std::chrono::steady_clock::now() - start;
  release = true;
  EXPECT_EQ(got.status().code(), Code::kUnavailable) << got.status().toString();
  EXPECT_LT(took, kDeadline + 10s);
  EXPECT_GE(c->stats().timeouts, 1u);
}

// A credentials file the test rewrites, as a site's refresher would.
class S3ClientCredentials : public ::testing::Test {
 protected:
  epochfs::testing::ScopedTempDir dir_{"s3creds"};
  std::string path_ = dir_.path() + "/credentials";

  void writeKeys(const std::string& id) {
    const std::string tmp = path_ + ".new";
    std::ofstream(tmp) << "[default]\naws_access_key_id = " << id
                       << "\naws_secret_access_key = secret-of-" << id << "\n";
    chmod(tmp.c_str(), 0600);
    std::rename(tmp.c_str(), path_.c_str());  // as refreshers do: never a half-written file
  }
  std::unique_ptr<S3Client> clientOf(const FakeServer& server,
                                     std::chrono::milliseconds checkInterval) {
    return client(server, true, 32, [&](S3ClientConfig& cfg) {
      fastRetries(cfg);
      cfg.credentials = Credentials("AKIDOLD", "secret-of-AKIDOLD");
      cfg.credentialsFile = {CredentialsFile::Kind::kExplicit, path_, "default"};
      cfg.credentialsCheckInterval = checkInterval;
    });
  }
  static std::string keyOf(const HttpRequest& r) {
    const std::string auth = r.headers.at("authorization");
    const size_t at = auth.find("Credential=") + 11;
    return auth.substr(at, auth.find('/', at) - at);
  }
};

TEST_F(S3ClientCredentials, ExpiredTokenReadsTheRewrittenFileAndRetriesOnce) {
  writeKeys("AKIDOLD");
  const std::string obj = object(100);
  FakeServer server([&](const HttpRequest& r) {
    if (keyOf(r) == "AKIDOLD") return s3Error(403, "ExpiredToken");
    return serveRange(obj, r);
  });
  auto c = clientOf(server, 1h);  // the stat check never runs: only the 403 reloads
  writeKeys("AKIDNEWER");
  char buf[10];
  auto got = c->getRange("k", 0, buf, 10, ETag());
  ASSERT_TRUE(got.isOk()) << got.status().toString();
  const auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_EQ(keyOf(reqs[0]), "AKIDOLD");
  EXPECT_EQ(keyOf(reqs[1]), "AKIDNEWER");
  EXPECT_EQ(c->stats().credentialReloads, 1u);
  EXPECT_EQ(c->stats().retries, 1u);
  EXPECT_EQ(c->stats().errors, 0u);
}

TEST_F(S3ClientCredentials, ExpiredTokenWithTheSameKeysIsReturned) {
  writeKeys("AKIDOLD");
  FakeServer server([&](const HttpRequest&) { return s3Error(403, "ExpiredToken"); });
  auto c = clientOf(server, 1h);
  char buf[10];
  auto got = c->getRange("k", 0, buf, 10, ETag());
  EXPECT_EQ(got.status().code(), Code::kPermissionDenied);
  EXPECT_NE(got.status().message().find("ExpiredToken"), std::string::npos);
  EXPECT_EQ(got.status().message().find("secret-of"), std::string::npos);
  EXPECT_EQ(server.requests().size(), 1u);
  EXPECT_EQ(c->stats().credentialReloads, 0u);
}

TEST_F(S3ClientCredentials, ARewrittenFileSignsTheNextRequest) {
  writeKeys("AKIDOLD");
  const std::string obj = object(100);
  FakeServer server([&](const HttpRequest& r) { return serveRange(obj, r); });
  auto c = clientOf(server, 0ms);  // stat before every request
  char buf[10];
  ASSERT_TRUE(c->getRange("k", 0, buf, 10, ETag()).isOk());
  writeKeys("AKIDNEWER");
  ASSERT_TRUE(c->getRange("k", 0, buf, 10, ETag()).isOk());
  // A file that became malformed keeps the keys in use.
  std::ofstream(path_) << "not an ini file [";
  ASSERT_TRUE(c->getRange("k", 0, buf, 10, ETag()).isOk());
  const auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 3u);
  EXPECT_EQ(keyOf(reqs[0]), "AKIDOLD");
  EXPECT_EQ(keyOf(reqs[1]), "AKIDNEWER");
  EXPECT_EQ(keyOf(reqs[2]), "AKIDNEWER");
  EXPECT_EQ(c->stats().credentialReloads, 1u);
  EXPECT_EQ(c->stats().retries, 0u);
}

}  // namespace
}  // namespace epochfs::transport::s3
