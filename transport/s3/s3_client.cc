#include "transport/s3/s3_client.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <mutex>
#include <thread>

#include "transport/s3/s3_response.h"

namespace epochfs::transport::s3 {

using cache::Result;
using cache::Status;

namespace {

std::once_flag gCurlInitOnce;
CURLcode gCurlInitResult = CURLE_OK;

CURLcode curlGlobalInit() {
  std::call_once(gCurlInitOnce, [] { gCurlInitResult = curl_global_init(CURL_GLOBAL_DEFAULT); });
  return gCurlInitResult;
}

// curl_slist owner.
struct HeaderList {
  curl_slist* list = nullptr;
  ~HeaderList() { curl_slist_free_all(list); }
  bool add(const std::string& line) {
    curl_slist* next = curl_slist_append(list, line.c_str());
    if (next == nullptr) return false;
    list = next;
    return true;
  }
};

// Transport failures: Unavailable when the network may heal (refused, DNS,
// timeout, reset), IoError for what will not (TLS verification, a bad CA file).
Status curlError(CURLcode rc, const char* errorBuffer, const std::string& what,
                 const std::string& endpoint) {
  // The handle's own text is the more precise ("Failed to connect to 127.0.0.1
  // port 9 after 0 ms: Couldn't connect to server"); curl's generic one else.
  std::string m = "s3: " + what + " (" + endpoint +
                  "): " + (errorBuffer[0] != '\0' ? errorBuffer : curl_easy_strerror(rc));
  switch (rc) {
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_URL_MALFORMAT:
    case CURLE_OUT_OF_MEMORY:
      return Status::ioError(std::move(m));
    default:
      return Status::unavailable(std::move(m));
  }
}

}  // namespace

// One request as S3Client sends it.
struct S3Client::Request {
  const char* method = "GET";  // GET or HEAD
  std::string path;            // unencoded (S3Endpoint::objectPath / bucketPath)
  QueryParams query;
  std::vector<HttpHeader> headers;  // sent and signed
  std::string what;                 // "GET s3://bucket/key" for messages
  BodySink sink;
  bool timed = false;  // its attempts go into the GET latency histogram
};

Result<std::unique_ptr<S3Client>> S3Client::create(S3ClientConfig config) {
  if (curlGlobalInit() != CURLE_OK) {
    return Status::ioError("s3: curl_global_init failed: " +
                           std::string(curl_easy_strerror(gCurlInitResult)));
  }
  if (config.maxInFlight == 0) {
    return Status::invalidArgument("s3: at least one request in flight is needed");
  }
  if (config.readDeadline.count() < 1 || config.retry.maxAttempts == 0) {
    return Status::invalidArgument("s3: the read deadline and the attempts must be positive");
  }
  const S3Endpoint& e = config.endpoint;
  if (e.host.empty() || e.bucket.empty() || (e.scheme != "http" && e.scheme != "https") ||
      e.addressing == Addressing::kAuto) {
    return Status::invalidArgument("s3: the endpoint is not made by S3Endpoint::make");
  }
  if (!config.caFile.empty()) {
    const int fd = ::open(config.caFile.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return Status::fromErrno(errno, "s3: CA file " + config.caFile);
    ::close(fd);
  }
  if (config.credentials) {
    if (config.credentials->accessKeyId.empty() || config.credentials->secretAccessKey.empty()) {
      return Status::invalidArgument("s3: credentials without an access key id or secret");
    }
  }
  return std::unique_ptr<S3Client>(new S3Client(std::move(config)));
}

S3Client::S3Client(S3ClientConfig config) : config_(std::move(config)), retry_(config_.retry) {
  if (config_.credentials) {
    credentials_ = std::make_unique<CredentialsProvider>(
        std::move(*config_.credentials), config_.endpoint.region, config_.credentialsFile,
        config_.credentialsCheckInterval, counters_.credentialReloads);
    // The provider keeps the secret.
    config_.credentials.reset();
  }
}

S3Client::~S3Client() {
  cache::MutexLock lock(poolMu_);
  for (void* h : idle_) curl_easy_cleanup(static_cast<CURL*>(h));
  idle_.clear();
}

void* S3Client::acquireHandle(Clock::time_point deadline, bool* timedOut) {
  cache::MutexLock lock(poolMu_);
  const bool free = poolCv_.waitUntil(poolMu_, deadline, [this]() REQUIRES(poolMu_) {
    return !idle_.empty() || created_ < config_.maxInFlight;
  });
  if (!free) {
    *timedOut = true;
    return nullptr;
  }
  if (!idle_.empty()) {
    void* h = idle_.back();  // the most recently used: its connection is the warmest
    idle_.pop_back();
    return h;
  }
  CURL* h = curl_easy_init();
  if (h != nullptr) ++created_;
  return h;
}

void S3Client::releaseHandle(void* handle) {
  {
    cache::MutexLock lock(poolMu_);
    idle_.push_back(handle);
  }
  poolCv_.notifyOne();
}

Status S3Client::perform(const Request& request, S3Response& response, Clock::time_point deadline,
                         int* curlCode, std::shared_ptr<const SigV4Signer>* signedWith) {
  const S3Endpoint& ep = config_.endpoint;
  const std::string endpointUrl = ep.endpointUrl();
  const std::string host = ep.hostHeader();
  const std::string url = ep.url(request.path, request.query);

  // The handle first: the request is signed once it may go (a caller that
  // waited for a handle still sends a fresh x-amz-date).
  bool noHandleInTime = false;
  CURL* h = static_cast<CURL*>(acquireHandle(deadline, &noHandleInTime));
  if (h == nullptr && noHandleInTime) {
    return Status::unavailable("s3: " + request.what +
                               ": no connection came free within the read deadline (" +
                               std::to_string(config_.maxInFlight) + " requests in flight)");
  }
  if (h == nullptr) return Status::noSpace("s3: " + request.what + ": curl_easy_init failed");
  // Every curl timeout of this attempt ends by the deadline.
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  if (left.count() < 1) {
    releaseHandle(h);
    return Status::unavailable("s3: " + request.what + ": the read deadline passed");
  }
  HeaderList headers;
  bool ok = headers.add("Host: " + host) && headers.add("Expect:");
  for (const auto& hd : request.headers) ok = ok && headers.add(hd.name + ": " + hd.value);
  if (credentials_) {
    // This request's signer: a swap by the provider does not change it.
    const std::shared_ptr<const SigV4Signer> signer = credentials_->signer();
    *signedWith = signer;
    SigningRequest sr;
    sr.method = request.method;
    sr.host = host;
    sr.path = request.path;
    sr.query = request.query;
    sr.headers = request.headers;
    auto auth = signer->sign(sr, std::chrono::system_clock::now());
    if (!auth.isOk()) {
      releaseHandle(h);
      return auth.status();
    }
    for (const auto& hd : *auth) ok = ok && headers.add(hd.name + ": " + hd.value);
  }
  if (!ok) {
    releaseHandle(h);
    return Status::noSpace("s3: " + request.what + ": out of memory for the headers");
  }
  counters_.inFlight.fetch_add(1, std::memory_order_relaxed);
  // reset() keeps the handle's live connection, its DNS and TLS session caches.
  curl_easy_reset(h);
  char errorBuffer[CURL_ERROR_SIZE] = {0};
  CURLcode rc = CURLE_OK;
  auto set = [&rc](CURLcode r) {
    if (rc == CURLE_OK) rc = r;
  };
  set(curl_easy_setopt(h, CURLOPT_URL, url.c_str()));
  set(curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers.list));
  set(curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errorBuffer));
  set(curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L));
  set(curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L));
  set(curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L));
  set(curl_easy_setopt(h, CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_1_1)));
  set(curl_easy_setopt(h, CURLOPT_PATH_AS_IS, 1L));
  set(curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L));
#if LIBCURL_VERSION_NUM >= 0x075500  // 7.85
  set(curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https"));
#else
  set(curl_easy_setopt(h, CURLOPT_PROTOCOLS, static_cast<long>(CURLPROTO_HTTP | CURLPROTO_HTTPS)));
#endif
  set(curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS,
                       static_cast<long>(std::min(config_.connectTimeout, left).count())));
  set(curl_easy_setopt(h, CURLOPT_TIMEOUT_MS,
                       static_cast<long>(std::min(config_.requestTimeout, left).count())));
  // A server that stops sending (or never answers) fails in 20 s, not at the
  // whole-request timeout: fewer than 1 byte/s for 20 s ends the request.
  set(curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L));
  set(curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, 20L));
  set(curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L));
  set(curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L));
  if (!config_.caFile.empty()) set(curl_easy_setopt(h, CURLOPT_CAINFO, config_.caFile.c_str()));
  if (std::string_view(request.method) == "HEAD") {
    set(curl_easy_setopt(h, CURLOPT_NOBODY, 1L));
  } else {
    set(curl_easy_setopt(h, CURLOPT_HTTPGET, 1L));
  }
  set(curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, &S3Response::onHeader));
  set(curl_easy_setopt(h, CURLOPT_HEADERDATA, &response));
  set(curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, &S3Response::onBody));
  set(curl_easy_setopt(h, CURLOPT_WRITEDATA, &response));
  const bool optionsSet = rc == CURLE_OK;
  if (optionsSet) {
    const auto sent = Clock::now();
    rc = curl_easy_perform(h);
    if (request.timed && rc == CURLE_OK) {
      counters_.getLatency.record(static_cast<uint64_t>(
          std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - sent).count()));
    }
  }
  // Nothing of this request stays behind in the pooled handle.
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, nullptr);
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, nullptr);
  counters_.inFlight.fetch_sub(1, std::memory_order_relaxed);
  releaseHandle(h);

  if (rc == CURLE_OK) return Status::ok();
  const S3Response& r = response;
  if (rc == CURLE_WRITE_ERROR && r.sliceComplete()) return Status::ok();
  if (r.overflowed()) {
    return Status::ioError("s3: " + request.what + " (" + endpointUrl +
                           "): the server sent more than the " + std::to_string(request.sink.len) +
                           " bytes asked for");
  }
  if (r.tooLarge()) {
    return Status::tooLarge("s3: " + request.what + " (" + endpointUrl + "): a body over " +
                            std::to_string(request.sink.maxString) + " bytes");
  }
  if (!optionsSet) {
    return Status::ioError("s3: " + request.what +
                           ": libcurl refused an option: " + curl_easy_strerror(rc));
  }
  *curlCode = static_cast<int>(rc);
  return curlError(rc, errorBuffer, request.what, endpointUrl);
}

Status S3Client::execute(const Request& req, std::optional<S3Response>& response,
                         const Check& check) {
  const Clock::time_point start = Clock::now();
  const Clock::time_point deadline = start + config_.readDeadline;
  bool reloaded = false;  // the one attempt after new keys was made
  for (unsigned attempt = 1;; ++attempt) {
    response.emplace(req.sink);
    int curlCode = 0;
    std::shared_ptr<const SigV4Signer> signedWith;
    Status s = perform(req, *response, deadline, &curlCode, &signedWith);
    if (s.isOk()) s = check(*response);
    if (s.isOk()) return s;
    const std::string code = curlCode == 0 ? response->errorCode() : "";
    const AttemptOutcome outcome{curlCode, curlCode == 0 ? response->status() : 0, code};
    if (RetryPolicy::isThrottling(outcome)) counters_.slowdowns.fetch_add(1);
    if (RetryPolicy::isTimeout(outcome)) counters_.timeouts.fetch_add(1);
    const RetryPolicy::Verdict verdict = RetryPolicy::classify(outcome);
    std::optional<std::chrono::milliseconds> delay;
    if (verdict == RetryPolicy::Verdict::kReloadCredentials) {
      // Expired keys: the file again, once, and only keys other than this
      // attempt's are worth a retry (the periodic check may have put them in
      // place while it was in flight).
      if (!reloaded && credentials_) {
        credentials_->reloadNow();
        if (credentials_->signer() != signedWith) delay.emplace(0);
      }
      reloaded = true;
    } else if (verdict == RetryPolicy::Verdict::kRetry) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      delay = retry_.nextDelay(attempt, left, RetryPolicy::uniform01());
    }
    if (!delay) {
      counters_.errors.fetch_add(1, std::memory_order_relaxed);
      if (attempt == 1) return s;
      counters_.gaveUp.fetch_add(1, std::memory_order_relaxed);
      const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
      char took[64];
      std::snprintf(took, sizeof took, "%u attempts in %.1f s", attempt, seconds);
      spdlog::warn("s3: {} ({}): giving up after {} (read deadline {} ms): {}", req.what,
                   config_.endpoint.endpointUrl(), took, config_.readDeadline.count(), s.message());
      return s.withContext(std::string("after ") + took);
    }
    spdlog::debug("s3: {}: attempt {} failed, retrying in {} ms: {}", req.what, attempt,
                  delay->count(), s.message());
    counters_.retries.fetch_add(1, std::memory_order_relaxed);
    if (delay->count() > 0) std::this_thread::sleep_for(*delay);
  }
}

Result<size_t> S3Client::getRange(const std::string& key, uint64_t offset, char* buf, size_t len,
                                  const ETag& ifMatch) {
  if (len == 0) return size_t{0};
  const S3Endpoint& ep = config_.endpoint;
  if (key.empty()) return Status::invalidArgument("s3: GET of an empty key");
  if (buf == nullptr || offset > UINT64_MAX - len) {
    return Status::invalidArgument("s3: GET " + ep.describe(key) + ": bad range");
  }
  const uint64_t last = offset + len - 1;
  Request req;
  req.method = "GET";
  req.path = ep.objectPath(key);
  req.what =
      "GET " + ep.describe(key) + " bytes " + std::to_string(offset) + "-" + std::to_string(last);
  req.headers.push_back({"Range", "bytes=" + std::to_string(offset) + "-" + std::to_string(last)});
  if (auto tag = ifMatch.headerValue()) req.headers.push_back({"If-Match", *tag});
  req.sink = {BodySink::Kind::kBuffer, buf, len, offset, 0};
  req.timed = true;
  counters_.gets.fetch_add(1, std::memory_order_relaxed);
  size_t got = 0;
  auto check = [&](const S3Response& r) -> Status {
    auto bad = [&](const std::string& why) {
      return Status::ioError("s3: " + req.what + " (" + ep.endpointUrl() + "): " + why);
    };
    got = 0;
    if (r.status() == 206) {
      const auto range = ContentRange::parse(r.contentRange());
      if (!range || !range->first) return bad("a 206 without a valid Content-Range");
      if (*range->first != offset || *range->last > last) {
        return bad("the server sent bytes " + std::to_string(*range->first) + "-" +
                   std::to_string(*range->last));
      }
      got = static_cast<size_t>(*range->last - *range->first + 1);
      if (r.written() != got) {
        return bad("got " + std::to_string(r.written()) + " of the " + std::to_string(got) +
                   " bytes of the range");
      }
      // Short only at the end of the object.
      if (got < len && range->total && *range->last + 1 != *range->total) {
        return bad("a short range before the end of the object");
      }
    } else if (r.status() == 200) {
      // The server ignored Range and sent the whole object: the slice was kept.
      uint64_t size = r.contentLength().value_or(r.bodyBytes());
      if (r.sliceComplete() && !r.contentLength()) size = std::max(size, offset + r.written());
      got = offset >= size ? 0 : static_cast<size_t>(std::min<uint64_t>(len, size - offset));
      if (r.written() != got) {
        return bad("got " + std::to_string(r.written()) + " of " + std::to_string(got) + " bytes");
      }
    } else if (r.status() == 416) {
      // Nothing at or past the end; unless the server says the object is longer.
      const auto range = ContentRange::parse(r.contentRange());
      if (range && range->total && *range->total > offset) {
        return bad("416 although the object has " + std::to_string(*range->total) + " bytes");
      }
    } else {
      return statusOf(req, r);
    }
    return Status::ok();
  };
  std::optional<S3Response> r;
  if (Status s = execute(req, r, check); !s.isOk()) return s;
  counters_.bytesReceived.fetch_add(got, std::memory_order_relaxed);
  return got;
}

// The Status of a response other than 200: S3's error, or an unexpected success code.
Status S3Client::statusOf(const Request& req, const S3Response& r) const {
  const S3Endpoint& ep = config_.endpoint;
  if (r.success()) {
    return Status::ioError("s3: " + req.what + ": unexpected HTTP status " +
                           std::to_string(r.status()));
  }
  return r.errorStatus(req.what, ep.endpointUrl(), ep.region);
}

Result<ObjectInfo> S3Client::head(const std::string& key) {
  const S3Endpoint& ep = config_.endpoint;
  if (key.empty()) return Status::invalidArgument("s3: HEAD of an empty key");
  Request req;
  req.method = "HEAD";
  req.path = ep.objectPath(key);
  req.what = "HEAD " + ep.describe(key);
  counters_.heads.fetch_add(1, std::memory_order_relaxed);
  std::optional<S3Response> r;
  Status s = execute(req, r, [&](const S3Response& answer) {
    if (answer.status() != 200) return statusOf(req, answer);
    if (!answer.contentLength()) {
      return Status::ioError("s3: " + req.what + ": no Content-Length in the response");
    }
    return Status::ok();
  });
  if (!s.isOk()) return s;
  ObjectInfo info;
  info.size = *r->contentLength();
  info.etag = r->etag().empty() ? ETag() : ETag::parse(r->etag());
  if (!r->lastModified().empty()) {
    const time_t t = curl_getdate(r->lastModified().c_str(), nullptr);
    if (t != -1) info.lastModifiedNs = static_cast<int64_t>(t) * 1000000000;
  }
  return info;
}

Result<ListPage> S3Client::listPage(const ListObjectsRequest& request) {
  const S3Endpoint& ep = config_.endpoint;
  Request req;
  req.method = "GET";
  req.path = ep.bucketPath();
  req.query = listObjectsQuery(request);
  req.what = "LIST " + ep.describe(request.prefix);
  req.sink.kind = BodySink::Kind::kString;
  req.sink.maxString = kMaxListBodyBytes;
  counters_.lists.fetch_add(1, std::memory_order_relaxed);
  Result<ListPage> page = Status::ioError("s3: " + req.what + ": no answer");
  std::optional<S3Response> r;
  Status s = execute(req, r, [&](const S3Response& answer) {
    if (answer.status() != 200) return statusOf(req, answer);
    page = parseListObjectsV2(answer.body());
    if (!page.isOk()) {
      return Status::ioError("s3: " + req.what + " (" + ep.endpointUrl() +
                             "): " + page.status().message());
    }
    return Status::ok();
  });
  if (!s.isOk()) return s;
  counters_.bytesReceived.fetch_add(r->body().size(), std::memory_order_relaxed);
  return page;
}

S3ClientStats S3Client::stats() const {
  const auto get = [](const std::atomic<uint64_t>& v) { return v.load(std::memory_order_relaxed); };
  const S3ClientCounters& c = counters_;
  S3ClientStats s;
  s.gets = get(c.gets);
  s.heads = get(c.heads);
  s.lists = get(c.lists);
  s.bytesReceived = get(c.bytesReceived);
  s.errors = get(c.errors);
  s.inFlight = get(c.inFlight);
  s.retries = get(c.retries);
  s.slowdowns = get(c.slowdowns);
  s.timeouts = get(c.timeouts);
  s.gaveUp = get(c.gaveUp);
  s.credentialReloads = get(c.credentialReloads);
  return s;
}

}  // namespace epochfs::transport::s3
