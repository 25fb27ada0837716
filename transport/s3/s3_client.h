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
// Errors: 403 PermissionDenied, 404 NotFound (S3's NoSuchKey/NoSuchBucket
// named when the body says), 412 Stale, 5xx (503 SlowDown included)
// Unavailable, other statuses IoError (or what S3's error code maps to,
// transport/s3/list_objects_parser.h); curl transport errors (connection
// refused, DNS, timeout, reset) Unavailable, TLS verification failures IoError.
// No retries here: the caller decides.
//
// Thread-safe: every method may be called from many threads at once.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cache/mutex.h"
#include "cache/status.h"
#include "cache/thread_annotations.h"
#include "transport/s3/credentials.h"
#include "transport/s3/etag.h"
#include "transport/s3/list_objects_parser.h"
#include "transport/s3/list_objects_request.h"
#include "transport/s3/s3_endpoint.h"
#include "transport/s3/sigv4_signer.h"

namespace epochfs::transport::s3 {

class S3Response;

struct S3ClientConfig {
  S3Endpoint endpoint;
  std::optional<Credentials> credentials;  // nullopt: unsigned requests (public bucket)
  std::string caFile;                      // empty: the system CA store
  unsigned maxInFlight = 32;               // bound on requests in flight (blocks callers beyond it)
  std::chrono::milliseconds connectTimeout{10000};
  std::chrono::milliseconds requestTimeout{120000};
  uint32_t listMaxKeys = 0;  // max-keys of each listing page; 0: the server's default (1,000)
};

struct ObjectInfo {
  uint64_t size = 0;
  ETag etag;
  std::optional<int64_t> lastModifiedNs;  // since the epoch, UTC (whole seconds)
};

struct S3ClientStats {
  uint64_t gets = 0;  // requests sent, successful or not
  uint64_t heads = 0;
  uint64_t lists = 0;
  uint64_t bytesReceived = 0;  // body bytes of successful GETs and listings
  uint64_t errors = 0;         // requests that ended in an error
  uint64_t inFlight = 0;       // now
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
  const S3Endpoint& endpoint() const { return config_.endpoint; }
  bool signsRequests() const { return signer_ != nullptr; }

 private:
  struct Request;

  explicit S3Client(S3ClientConfig config);

  // Runs one request on a pooled handle: signs, sends, fills `response`. A
  // transport failure is the returned Status; an HTTP error status is left
  // in `response` for the caller to map.
  cache::Status perform(const Request& request, S3Response& response);
  // The Status of a response other than 200 (S3's error, or an unexpected success).
  cache::Status statusOf(const Request& request, const S3Response& response) const;
  // Every page of one listing (no delimiter unless given), into `out`.
  cache::Status listWalk(ListObjectsRequest request, std::vector<ListEntry>& out,
                         std::vector<std::string>* commonPrefixes);

  void* acquireHandle();
  void releaseHandle(void* handle);

  S3ClientConfig config_;                      // its credentials moved into signer_
  std::unique_ptr<const SigV4Signer> signer_;  // null: unsigned requests

  cache::Mutex poolMu_;
  cache::CondVar poolCv_;
  std::vector<void*> idle_ GUARDED_BY(poolMu_);  // CURL*, most recently used last
  unsigned created_ GUARDED_BY(poolMu_) = 0;     // handles that exist (idle or lent)

  std::atomic<uint64_t> gets_{0}, heads_{0}, lists_{0}, bytes_{0}, errors_{0}, inFlight_{0};
};

}  // namespace epochfs::transport::s3
