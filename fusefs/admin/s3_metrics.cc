#include "fusefs/admin/s3_metrics.h"

#include <atomic>
#include <cstdint>
#include <string>

#include "transport/s3/s3_client_counters.h"

namespace epochfs::fusefs {

namespace {

using Counters = transport::s3::S3ClientCounters;

// One plain value of the counters: stats.s3.NAME, exported as `family`.
struct S3Value {
  const char* name;
  MetricKind kind;
  const char* unit;
  const char* help;
  std::atomic<uint64_t> Counters::*member;
  const char* family;
  MetricDeclarations::Labels labels;
};

const char* const kRequestsHelp =
    "S3 requests by method (a request's retries apart: see epochfs_s3_retries_total).";

}  // namespace

void declareS3Metrics(MetricDeclarations& d, const Counters& c) {
  constexpr MetricKind kCounter = MetricKind::kCounter;
  const S3Value values[] = {
      {"requests.get",
       kCounter,
       "requests",
       kRequestsHelp,
       &Counters::gets,
       "epochfs_s3_requests_total",
       {{"method", "get"}}},
      {"requests.head",
       kCounter,
       "requests",
       kRequestsHelp,
       &Counters::heads,
       "epochfs_s3_requests_total",
       {{"method", "head"}}},
      {"requests.list",
       kCounter,
       "requests",
       kRequestsHelp,
       &Counters::lists,
       "epochfs_s3_requests_total",
       {{"method", "list"}}},
      {"bytes_received",
       kCounter,
       "bytes",
       "Body bytes of successful GETs and listings.",
       &Counters::bytesReceived,
       "epochfs_s3_received_bytes_total",
       {}},
      {"errors",
       kCounter,
       "requests",
       "S3 requests that failed (after their retries).",
       &Counters::errors,
       "epochfs_s3_errors_total",
       {}},
      {"retries",
       kCounter,
       "attempts",
       "S3 attempts after a request's first (backoff after 5xx, SlowDown, resets, timeouts; "
       "new keys after ExpiredToken).",
       &Counters::retries,
       "epochfs_s3_retries_total",
       {}},
      {"slowdowns",
       kCounter,
       "answers",
       "Throttling answers from the object store (503 SlowDown, 429, Throttling).",
       &Counters::slowdowns,
       "epochfs_s3_slowdowns_total",
       {}},
      {"timeouts",
       kCounter,
       "attempts",
       "S3 attempts ended by a timeout (connect, 20 s without a byte, or the read deadline).",
       &Counters::timeouts,
       "epochfs_s3_timeouts_total",
       {}},
      {"gave_up",
       kCounter,
       "requests",
       "S3 requests that failed after retrying (attempts or --s3-read-deadline spent).",
       &Counters::gaveUp,
       "epochfs_s3_gave_up_total",
       {}},
      {"credential_reloads",
       kCounter,
       "reloads",
       "Times new keys were read from the credentials file (it changed, or ExpiredToken).",
       &Counters::credentialReloads,
       "epochfs_s3_credential_reloads_total",
       {}},
      {"in_flight",
       MetricKind::kGauge,
       "requests",
       "S3 attempts on the wire now.",
       &Counters::inFlight,
       "epochfs_s3_in_flight_requests",
       {}},
  };
  for (const S3Value& v : values) {
    const std::atomic<uint64_t>& value = c.*v.member;
    d(
        std::string("stats.s3.") + v.name, v.kind, v.unit, v.help,
        [&value] { return value.load(std::memory_order_relaxed); }, v.family, v.labels);
  }
  d.latency("stats.s3.get_latency_us",
            "Latency of one S3 GET attempt that got an answer, request to last byte.",
            "epochfs_s3_get_latency_seconds", c.getLatency);
}

}  // namespace epochfs::fusefs
