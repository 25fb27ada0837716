// RetryPolicy: when S3Client sends a request again, and after how long — the
// AWS SDKs' "standard" mode: capped exponential backoff with full jitter
// (delay = random(0, min(maxDelay, baseDelay * 2^(attempt-1)))), at most
// maxAttempts attempts, all inside the request's deadline (a delay never
// leaves less than kMinAttemptTime for the next attempt; no time left: no
// retry).
//
// What is retried (classify):
//   - transport failures that may heal: connection refused or reset, DNS,
//     send/receive errors, an empty or partial answer, timeouts (the
//     whole-request one and the 20 s without a byte), a TLS handshake cut off;
//     not TLS verification failures or a refused option;
//   - HTTP 500, 502, 503, 504 and 429, and S3's transient codes on any other
//     status (SlowDown, RequestTimeout — a 400 —, InternalError,
//     ServiceUnavailable, Throttling, ThrottlingException,
//     RequestLimitExceeded, TooManyRequests, PriorRequestNotComplete);
//   - never another 4xx (403, 404, 412, 416, ...), except that a 403 whose
//     code says the keys expired (ExpiredToken, ExpiredTokenException,
//     TokenRefreshRequired, InvalidToken, InvalidAccessKeyId) is
//     kReloadCredentials: S3Client re-reads the credentials file and sends
//     once more only if the keys changed.
//
// Pure: no clock or network; the jitter's random number is passed in
// (uniform01() draws one from a per-thread generator, no shared lock).
// Thread-safe (const after construction).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string_view>

namespace epochfs::transport::s3 {

struct RetryConfig {
  // 10 attempts: the waits reach the cap at the 7th and add up to ~10 s on
  // average (21 s at most), so an endpoint that fails fast (connection
  // refused) is given up on by then, a slow one by the deadline. 100 ms base
  // as the AWS SDKs' standard mode; a 5 s cap (20 s there) keeps a reader's
  // wait short.
  unsigned maxAttempts = 10;  // 1: no retries
  std::chrono::milliseconds baseDelay{100};
  std::chrono::milliseconds maxDelay{5000};
};

// One attempt's outcome as the policy sees it.
struct AttemptOutcome {
  int curlCode = 0;         // CURLcode of a transport failure; 0: none
  long httpStatus = 0;      // the answer's status; 0: no answer
  std::string_view s3Code;  // S3's <Code> of an error answer; "" when none
};

class RetryPolicy {
 public:
  enum class Verdict : uint8_t { kFinal, kRetry, kReloadCredentials };

  // The shortest time worth starting an attempt with.
  static constexpr std::chrono::milliseconds kMinAttemptTime{100};

  explicit RetryPolicy(RetryConfig config = {}) : config_(config) {}

  // Whether a failed attempt is worth another (see the header comment).
  static Verdict classify(const AttemptOutcome& outcome);
  // A throttling answer (503 SlowDown, 429, S3's throttling codes): counted.
  static bool isThrottling(const AttemptOutcome& outcome);
  // The transport failure was a timeout (CURLE_OPERATION_TIMEDOUT).
  static bool isTimeout(const AttemptOutcome& outcome);

  // The wait before the next attempt after `attemptsMade` (>= 1) failed
  // ones, with `timeLeft` until the deadline and `u01` a random number in
  // [0, 1); nullopt: give up (attempts exhausted, or too little time left).
  std::optional<std::chrono::milliseconds> nextDelay(unsigned attemptsMade,
                                                     std::chrono::milliseconds timeLeft,
                                                     double u01) const;

  // A uniform random number in [0, 1) from this thread's own generator.
  static double uniform01();

  const RetryConfig& config() const { return config_; }

 private:
  RetryConfig config_;
};

}  // namespace epochfs::transport::s3
