// When S3Client retries and how long it waits (transport/s3/retry_policy.h):
// no network, no clock.
#include <curl/curl.h>
#include <gtest/gtest.h>

#include <set>

#include "transport/s3/retry_policy.h"

namespace epochfs::transport::s3 {
namespace {

using namespace std::chrono_literals;
using Verdict = RetryPolicy::Verdict;

Verdict http(long status, std::string_view code = "") {
  return RetryPolicy::classify({0, status, code});
}
Verdict curl(CURLcode rc) { return RetryPolicy::classify({static_cast<int>(rc), 0, ""}); }

TEST(RetryPolicy, ServerErrorsAndThrottlingAreRetried) {
  for (long s : {500L, 502L, 503L, 504L, 429L}) EXPECT_EQ(http(s), Verdict::kRetry) << s;
  EXPECT_EQ(http(503, "SlowDown"), Verdict::kRetry);
  EXPECT_EQ(http(500, "InternalError"), Verdict::kRetry);
  EXPECT_EQ(http(400, "RequestTimeout"), Verdict::kRetry);
  EXPECT_EQ(http(400, "Throttling"), Verdict::kRetry);
  EXPECT_EQ(http(501, "NotImplemented"), Verdict::kFinal);
}

TEST(RetryPolicy, ClientErrorsAreFinal) {
  for (long s : {400L, 401L, 403L, 404L, 405L, 409L, 412L, 416L}) {
    EXPECT_EQ(http(s), Verdict::kFinal) << s;
  }
  EXPECT_EQ(http(403, "AccessDenied"), Verdict::kFinal);
  EXPECT_EQ(http(403, "SignatureDoesNotMatch"), Verdict::kFinal);
  EXPECT_EQ(http(404, "SlowDown"), Verdict::kFinal);  // a 404 is a 404
  EXPECT_EQ(http(200), Verdict::kFinal);              // a bad success: not the network's fault
}

TEST(RetryPolicy, ExpiredKeysAskForTheFileAgain) {
  for (const char* code : {"ExpiredToken", "ExpiredTokenException", "TokenRefreshRequired",
                           "InvalidToken", "InvalidAccessKeyId"}) {
    EXPECT_EQ(http(403, code), Verdict::kReloadCredentials) << code;
  }
}

TEST(RetryPolicy, TransportFailuresThatMayHealAreRetried) {
  for (CURLcode rc : {CURLE_COULDNT_CONNECT, CURLE_COULDNT_RESOLVE_HOST, CURLE_OPERATION_TIMEDOUT,
                      CURLE_RECV_ERROR, CURLE_SEND_ERROR, CURLE_GOT_NOTHING, CURLE_PARTIAL_FILE,
                      CURLE_SSL_CONNECT_ERROR}) {
    EXPECT_EQ(curl(rc), Verdict::kRetry) << rc;
  }
  for (CURLcode rc : {CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CACERT_BADFILE, CURLE_URL_MALFORMAT,
                      CURLE_UNSUPPORTED_PROTOCOL, CURLE_OUT_OF_MEMORY}) {
    EXPECT_EQ(curl(rc), Verdict::kFinal) << rc;
  }
}

TEST(RetryPolicy, CountsThrottlingAndTimeouts) {
  EXPECT_TRUE(RetryPolicy::isThrottling({0, 503, "SlowDown"}));
  EXPECT_TRUE(RetryPolicy::isThrottling({0, 429, ""}));
  EXPECT_TRUE(RetryPolicy::isThrottling({0, 503, ""}));
  EXPECT_FALSE(RetryPolicy::isThrottling({0, 503, "ServiceUnavailable"}));
  EXPECT_FALSE(RetryPolicy::isThrottling({0, 500, "InternalError"}));
  EXPECT_TRUE(RetryPolicy::isTimeout({CURLE_OPERATION_TIMEDOUT, 0, ""}));
  EXPECT_FALSE(RetryPolicy::isTimeout({CURLE_RECV_ERROR, 0, ""}));
}

TEST(RetryPolicy, DelaysGrowToTheCapWithFullJitter) {
  const RetryPolicy p(RetryConfig{.maxAttempts = 20, .baseDelay = 100ms, .maxDelay = 5000ms});
  const auto lots = std::chrono::milliseconds(1h);
  const long ceilings[] = {100, 200, 400, 800, 1600, 3200, 5000, 5000, 5000};
  for (unsigned attempt = 1; attempt <= 9; ++attempt) {
    EXPECT_EQ(p.nextDelay(attempt, lots, 0.0), 0ms) << attempt;  // full jitter: from zero
    const auto top = p.nextDelay(attempt, lots, 0.999999);
    ASSERT_TRUE(top) << attempt;
    EXPECT_LE(top->count(), ceilings[attempt - 1]) << attempt;
    EXPECT_GE(top->count(), ceilings[attempt - 1] - 1) << attempt;
    EXPECT_EQ(p.nextDelay(attempt, lots, 0.5)->count(), ceilings[attempt - 1] / 2) << attempt;
  }
  // Far past the cap's doubling: no overflow.
  EXPECT_LE(p.nextDelay(19, lots, 0.999)->count(), 5000);
}

TEST(RetryPolicy, AttemptsAndTheDeadlineBoundIt) {
  const RetryPolicy p(RetryConfig{.maxAttempts = 3, .baseDelay = 100ms, .maxDelay = 5000ms});
  EXPECT_TRUE(p.nextDelay(1, 10s, 0.5));
  EXPECT_TRUE(p.nextDelay(2, 10s, 0.5));
  EXPECT_FALSE(p.nextDelay(3, 10s, 0.5)) << "three attempts made: no fourth";
  EXPECT_FALSE(p.nextDelay(0, 10s, 0.5));
  // Too little time left for another attempt: give up.
  EXPECT_FALSE(p.nextDelay(1, RetryPolicy::kMinAttemptTime - 1ms, 0.0));
  // A wait never eats the next attempt's time.
  const auto d = p.nextDelay(2, 150ms, 0.999);
  ASSERT_TRUE(d);
  EXPECT_LE(*d + RetryPolicy::kMinAttemptTime, 150ms);
}

TEST(RetryPolicy, JitterIsUniformAndVaries) {
  std::set<double> seen;
  for (int i = 0; i < 100; ++i) {
    const double u = RetryPolicy::uniform01();
    EXPECT_GE(u, 0.0);
    EXPECT_LT(u, 1.0);
    seen.insert(u);
  }
  EXPECT_GT(seen.size(), 90u);
}

}  // namespace
}  // namespace epochfs::transport::s3
