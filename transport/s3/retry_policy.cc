#include "transport/s3/retry_policy.h"

#include <curl/curl.h>

#include <algorithm>
#include <functional>
#include <random>
#include <thread>

namespace epochfs::transport::s3 {

namespace {

bool oneOf(std::string_view code, std::initializer_list<std::string_view> codes) {
  return std::find(codes.begin(), codes.end(), code) != codes.end();
}

bool transientCurlError(int code) {
  switch (static_cast<CURLcode>(code)) {
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_CONNECT:
    case CURLE_WEIRD_SERVER_REPLY:
    case CURLE_PARTIAL_FILE:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_SSL_CONNECT_ERROR:  // a handshake cut off (verification failures differ)
    case CURLE_GOT_NOTHING:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
      return true;
    default:
      return false;
  }
}

bool throttlingCode(std::string_view code) {
  return oneOf(code, {"SlowDown", "Throttling", "ThrottlingException", "RequestLimitExceeded",
                      "TooManyRequests", "RequestThrottled"});
}

}  // namespace

RetryPolicy::Verdict RetryPolicy::classify(const AttemptOutcome& o) {
  if (o.curlCode != 0) return transientCurlError(o.curlCode) ? Verdict::kRetry : Verdict::kFinal;
  const long s = o.httpStatus;
  if (s == 403) {
    const bool expired =
        oneOf(o.s3Code, {"ExpiredToken", "ExpiredTokenException", "TokenRefreshRequired",
                         "InvalidToken", "InvalidAccessKeyId"});
    return expired ? Verdict::kReloadCredentials : Verdict::kFinal;
  }
  if (s == 500 || s == 502 || s == 503 || s == 504 || s == 429) return Verdict::kRetry;
  if (s == 404 || s == 412 || s == 416 || s < 400) return Verdict::kFinal;
  const bool transient = throttlingCode(o.s3Code) ||
                         oneOf(o.s3Code, {"RequestTimeout", "InternalError", "ServiceUnavailable",
                                          "PriorRequestNotComplete"});
  return transient ? Verdict::kRetry : Verdict::kFinal;
}

bool RetryPolicy::isThrottling(const AttemptOutcome& o) {
  return o.curlCode == 0 && (o.httpStatus == 429 || throttlingCode(o.s3Code) ||
                             (o.httpStatus == 503 && o.s3Code.empty()));
}

bool RetryPolicy::isTimeout(const AttemptOutcome& o) {
  return o.curlCode == CURLE_OPERATION_TIMEDOUT;
}

std::optional<std::chrono::milliseconds> RetryPolicy::nextDelay(unsigned attemptsMade,
                                                                std::chrono::milliseconds timeLeft,
                                                                double u01) const {
  using std::chrono::milliseconds;
  if (attemptsMade == 0 || attemptsMade >= config_.maxAttempts) return std::nullopt;
  if (timeLeft < kMinAttemptTime) return std::nullopt;
  // min(maxDelay, base * 2^(attemptsMade-1)), the shift bounded (no overflow).
  const unsigned shift = std::min(attemptsMade - 1, 30u);
  const int64_t base = std::max<int64_t>(config_.baseDelay.count(), 0);
  const int64_t cap = std::max<int64_t>(config_.maxDelay.count(), 0);
  const int64_t ceiling = base > (cap >> shift) ? cap : base << shift;
  const double u = std::clamp(u01, 0.0, 1.0);
  auto delay = milliseconds(static_cast<int64_t>(static_cast<double>(ceiling) * u));
  delay = std::min(delay, timeLeft - kMinAttemptTime);
  return delay;
}

double RetryPolicy::uniform01() {
  // One generator per thread, seeded once from the OS and the thread's id.
  thread_local std::mt19937_64 engine([] {
    std::random_device rd;
    return (static_cast<uint64_t>(rd()) << 32) ^ rd() ^
           std::hash<std::thread::id>()(std::this_thread::get_id());
  }());
  return std::uniform_real_distribution<double>(0.0, 1.0)(engine);
}

}  // namespace epochfs::transport::s3
