// S3Client: the HTTP side of the S3 source, on libcurl's easy interface —
// ranged GETs (with If-Match), HEADs and ListObjectsV2 listings of one bucket
// (S3Endpoint), signed with SigV4Signer (or unsigned for a public bucket).
//
// Owns a pool of CURL easy handles, each keeping its keep-alive connection
// from one request to the next (most recently used first); the pool is
// also the bound on requests in flight: at most maxInFlight handles exist,
// and a caller beyond that blocks until one is free. HTTP/1.1 (concurrency
// comes from many connections, as S3 wants it), TCP_NODELAY, no signals,
// connect and whole-request timeouts, TLS verification always on
// (CURLOPT_CAINFO when caFile is set, else the system CA store), no
// redirects, http:// and https:// only, and plain HTTP only when the
// endpoint URL says http://. Paths are sent as they are signed
// (CURLOPT_PATH_AS_IS: a key holding "./" or "../" is not rewritten).
//
// Proxies: libcurl's defaults are kept, so http_proxy, https_proxy
// (HTTPS_PROXY), ALL_PROXY and NO_PROXY from the environment apply.
//
// Secrets: CURLOPT_VERBOSE is never set (it would print the Authorization
// header) and no header is logged; an error names the method, s3://bucket/key,
// the endpoint, the HTTP status and S3's error code, or the curl error —
// never a credential.
//
// Retries (transport/s3/retry_policy.h): getRange, head and listPage (so
// listAll) send again, re-signed, on 5xx, SlowDown and the other transient
// answers, connection failures, resets and timeouts — capped exponential
// backoff with full jitter, at most retry.maxAttempts attempts, all inside
// the request's readDeadline: each attempt's curl timeouts are cut to the
// time left, the wait for a pooled handle counts too, and once it is spent
// the last error is returned (never a hang). Never on 403/404/412/416 or
// another 4xx; a 403 saying the keys expired re-reads the credentials file
// and sends once more if the keys changed (CredentialsProvider, which also
// follows the file as it is rewritten). A retry logs at debug, giving up once
// at warn (method, s3://bucket/key, attempts, the last error).
//
// Errors: 403 PermissionDenied, 404 NotFound (S3's NoSuchKey/NoSuchBucket
// named when the body says), 412 Stale, 5xx (503 SlowDown included)
// Unavailable, other statuses IoError (or what S3's error code maps to,
// transport/s3/list_objects_parser.h); curl transport errors (connection
// refused, DNS, timeout, reset) Unavailable, TLS verification failures IoError.
//
// Thread-safe: every method may be called from many threads at once.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cache/mutex.h"
#include "cache/status.h"
#include "cache/thread_annotations.h"
#include "transport/s3/credential_chain.h"
#include "transport/s3/credentials.h"
#include "transport/s3/credentials_provider.h"
#include "transport/s3/etag.h"
#include "transport/s3/list_objects_parser.h"
#include "transport/s3/list_objects_request.h"
#include "transport/s3/retry_policy.h"
#include "transport/s3/s3_client_counters.h"
#include "transport/s3/s3_endpoint.h"
#include "transport/s3/sigv4_signer.h"

namespace epochfs::transport::s3 {

class S3Response;

struct S3ClientConfig {
  S3Endpoint endpoint;
  std::optional<Credentials> credentials;  // nullopt: unsigned requests (public bucket)
  // Where `credentials` came from: re-read when it changes (checked at most
  // once per credentialsCheckInterval) and after a 403 ExpiredToken.
  CredentialsFile credentialsFile;
  std::chrono::milliseconds credentialsCheckInterval{1000};
  std::string caFile;         // empty: the system CA store
  unsigned maxInFlight = 32;  // bound on requests in flight (blocks callers beyond it)
  std::chrono::milliseconds connectTimeout{10000};
  std::chrono::milliseconds requestTimeout{120000};  // one attempt; cut to the deadline
  // All attempts of one request (getRange, head, one listPage) end within
  // it. 30 s: rides out a gateway restart (~10 s) or a burst of SlowDown,
  // leaves a stalled connection (20 s without a byte) one more try, and keeps
  // a reader blocked on an uncached chunk well under the kernel's 120 s
  // hung-task warning; a mount against a dead endpoint fails in as much.
  std::chrono::milliseconds readDeadline{30000};
  RetryConfig retry;
  uint32_t listMaxKeys = 0;  // max-keys of each listing page; 0: the server's default (1,000)
};

struct ObjectInfo {
  uint64_t size = 0;
  ETag etag;
  std::optional<int64_t> lastModifiedNs;  // since the epoch, UTC (whole seconds)
};

// A snapshot of S3ClientCounters (see there).
struct S3ClientStats {
  uint64_t gets = 0;  // requests, successful or not (their retries apart)
  uint64_t heads = 0;
  uint64_t lists = 0;
  uint64_t bytesReceived = 0;  // body bytes of successful GETs and listings
  uint64_t errors = 0;         // requests that ended in an error
  uint64_t inFlight = 0;       // now
  uint64_t retries = 0;
  uint64_t slowdowns = 0;
  uint64_t timeouts = 0;
  uint64_t gaveUp = 0;
  uint64_t credentialReloads = 0;
};

class S3Client {
 public:
  // Checks the configuration (a readable caFile, maxInFlight >= 1); no request yet.
  static cache::Result<std::unique_ptr<S3Client>> create(S3ClientConfig config);
  ~S3Client();
  S3Client(const S3Client&) = delete;
  S3Client& operator=(const S3Client&) = delete;

  // Ranged GET of [offset, offset+len) of `key` into buf: the byte count,
  // short only at the end of the object; 0 at or past the end (S3's 416).
  // Sends Range and, when ifMatch.headerValue() has a value, If-Match (both
  // signed); a changed object is Stale. The body goes straight into buf,
  // never past len (a server sending more is an IoError); a server that
  // ignores Range (200) is handled by taking the requested slice.
  cache::Result<size_t> getRange(const std::string& key, uint64_t offset, char* buf, size_t len,
                                 const ETag& ifMatch);

  // Size, ETag and Last-Modified of `key` (NotFound when absent).
  cache::Result<ObjectInfo> head(const std::string& key);

  // One ListObjectsV2 page (listObjectsQuery + parseListObjectsV2).
  cache::Result<ListPage> listPage(const ListObjectsRequest& request);

  // Every object under `prefix` ("" or ending in '/'), in key order: one
  // page walk with delimiter '/' at the prefix, then each common prefix found
  // there listed whole (paginated, no delimiter) on up to `threads` threads.
  // A repeated continuation token (or an endless run of empty pages) is an
  // IoError rather than a loop.
  cache::Result<std::vector<ListEntry>> listAll(const std::string& prefix, unsigned threads);

  S3ClientStats stats() const;
  // The live counters (and the GET latency histogram), for the metrics.
  const S3ClientCounters& counters() const { return counters_; }
  const S3Endpoint& endpoint() const { return config_.endpoint; }
  bool signsRequests() const { return credentials_ != nullptr; }

 private:
  struct Request;

  explicit S3Client(S3ClientConfig config);

  // What a completed exchange means for the method: OK, or its error.
  using Check = std::function<cache::Status(const S3Response&)>;
  using Clock = std::chrono::steady_clock;

  // Sends `request` until `check` passes, the failure is final, the
  // attempts are spent or the deadline passed; `response` holds the last
  // attempt's answer. Counts retries, throttling, timeouts and errors.
  cache::Status execute(const Request& request, std::optional<S3Response>& response,
                        const Check& check);
  // One attempt on a pooled handle: signs, sends, fills `response`, within
  // `deadline`. A transport failure is the returned Status (its CURLcode in
  // *curlCode); an HTTP error status is left in `response` for `check`.
  // *signedWith: the signer of this attempt (null: unsigned).
  cache::Status perform(const Request& request, S3Response& response, Clock::time_point deadline,
                        int* curlCode, std::shared_ptr<const SigV4Signer>* signedWith);
  // The Status of a response other than 200 (S3's error, or an unexpected success).
  cache::Status statusOf(const Request& request, const S3Response& response) const;
  // Every page of one listing (no delimiter unless given), into `out`.
  cache::Status listWalk(ListObjectsRequest request, std::vector<ListEntry>& out,
                         std::vector<std::string>* commonPrefixes);

  // A pooled handle, waiting until `deadline` at most (null: none in time,
  // *timedOut set; or curl_easy_init failed).
  void* acquireHandle(Clock::time_point deadline, bool* timedOut);
  void releaseHandle(void* handle);

  S3ClientConfig config_;  // its credentials moved into credentials_
  const RetryPolicy retry_;
  std::unique_ptr<CredentialsProvider> credentials_;  // null: unsigned requests

  cache::Mutex poolMu_;
  cache::CondVar poolCv_;
  std::vector<void*> idle_ GUARDED_BY(poolMu_);  // CURL*, most recently used last
  unsigned created_ GUARDED_BY(poolMu_) = 0;     // handles that exist (idle or lent)

  S3ClientCounters counters_;
};

}  // namespace epochfs::transport::s3
