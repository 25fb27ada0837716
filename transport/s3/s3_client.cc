#include "transport/s3/s3_client.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <iterator>
#include <mutex>
#include <set>
#include <system_error>
#include <thread>

#include "transport/s3/s3_response.h"

namespace epochfs::transport::s3 {

using cache::Result;
using cache::Status;

namespace {

// A listing that goes on this many pages in a row without a key or prefix is
// a server looping with fresh tokens; refused.
constexpr unsigned kMaxEmptyPagesInARow = 100;

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
};

Result<std::unique_ptr<S3Client>> S3Client::create(S3ClientConfig config) {
  if (curlGlobalInit() != CURLE_OK) {
    return Status::ioError("s3: curl_global_init failed: " +
                           std::string(curl_easy_strerror(gCurlInitResult)));
  }
  if (config.maxInFlight == 0) {
    return Status::invalidArgument("s3: at least one request in flight is needed");
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

S3Client::S3Client(S3ClientConfig config) : config_(std::move(config)) {
  if (config_.credentials) {
    signer_ = std::make_unique<const SigV4Signer>(*config_.credentials, config_.endpoint.region);
    // The signer keeps the one copy of the secret.
    config_.credentials.reset();
  }
}

S3Client::~S3Client() {
  cache::MutexLock lock(poolMu_);
  for (void* h : idle_) curl_easy_cleanup(static_cast<CURL*>(h));
  idle_.clear();
}

void* S3Client::acquireHandle() {
  cache::MutexLock lock(poolMu_);
  poolCv_.wait(poolMu_, [this]() REQUIRES(poolMu_) {
    return !idle_.empty() || created_ < config_.maxInFlight;
  });
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

Status S3Client::perform(const Request& request, S3Response& response) {
  const S3Endpoint& ep = config_.endpoint;
  const std::string endpointUrl = ep.endpointUrl();
  const std::string host = ep.hostHeader();
  const std::string url = ep.url(request.path, request.query);

  // The handle first: the request is signed once it may go (a caller that
  // waited for a handle still sends a fresh x-amz-date).
  CURL* h = static_cast<CURL*>(acquireHandle());
  if (h == nullptr) return Status::noSpace("s3: " + request.what + ": curl_easy_init failed");
  HeaderList headers;
  bool ok = headers.add("Host: " + host) && headers.add("Expect:");
  for (const auto& hd : request.headers) ok = ok && headers.add(hd.name + ": " + hd.value);
  if (signer_) {
    SigningRequest sr;
    sr.method = request.method;
    sr.host = host;
    sr.path = request.path;
    sr.query = request.query;
    sr.headers = request.headers;
    auto auth = signer_->sign(sr, std::chrono::system_clock::now());
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
  inFlight_.fetch_add(1, std::memory_order_relaxed);
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
                       static_cast<long>(config_.connectTimeout.count())));
  set(curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(config_.requestTimeout.count())));
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
  if (optionsSet) rc = curl_easy_perform(h);
  // Nothing of this request stays behind in the pooled handle.
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, nullptr);
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, nullptr);
  inFlight_.fetch_sub(1, std::memory_order_relaxed);
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
  return curlError(rc, errorBuffer, request.what, endpointUrl);
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
  gets_.fetch_add(1, std::memory_order_relaxed);
  S3Response r(req.sink);
  auto fail = [this](Status s) -> Result<size_t> {
    errors_.fetch_add(1, std::memory_order_relaxed);
    return s;
  };
  if (Status s = perform(req, r); !s.isOk()) return fail(std::move(s));
  auto bad = [&](const std::string& why) {
    return fail(Status::ioError("s3: " + req.what + " (" + ep.endpointUrl() + "): " + why));
  };
  size_t got = 0;
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
    return size_t{0};
  } else if (r.success()) {
    return bad("unexpected HTTP status " + std::to_string(r.status()));
  } else {
    return fail(r.errorStatus(req.what, ep.endpointUrl(), ep.region));
  }
  bytes_.fetch_add(got, std::memory_order_relaxed);
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
  heads_.fetch_add(1, std::memory_order_relaxed);
  S3Response r(req.sink);
  Status s = perform(req, r);
  if (s.isOk() && r.status() != 200) s = statusOf(req, r);
  if (s.isOk() && !r.contentLength()) {
    s = Status::ioError("s3: " + req.what + ": no Content-Length in the response");
  }
  if (!s.isOk()) {
    errors_.fetch_add(1, std::memory_order_relaxed);
    return s;
  }
  ObjectInfo info;
  info.size = *r.contentLength();
  info.etag = r.etag().empty() ? ETag() : ETag::parse(r.etag());
  if (!r.lastModified().empty()) {
    const time_t t = curl_getdate(r.lastModified().c_str(), nullptr);
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
  lists_.fetch_add(1, std::memory_order_relaxed);
  S3Response r(req.sink);
  Status s = perform(req, r);
  if (s.isOk() && r.status() != 200) s = statusOf(req, r);
  if (!s.isOk()) {
    errors_.fetch_add(1, std::memory_order_relaxed);
    return s;
  }
  bytes_.fetch_add(r.body().size(), std::memory_order_relaxed);
  auto page = parseListObjectsV2(r.body());
  if (!page.isOk()) {
    errors_.fetch_add(1, std::memory_order_relaxed);
    return Status::ioError("s3: " + req.what + " (" + ep.endpointUrl() +
                           "): " + page.status().message());
  }
  return page;
}

Status S3Client::listWalk(ListObjectsRequest request, std::vector<ListEntry>& out,
                          std::vector<std::string>* commonPrefixes) {
  const std::string what = "LIST " + config_.endpoint.describe(request.prefix);
  std::set<std::string> tokensSeen;
  unsigned emptyInARow = 0;
  for (;;) {
    auto page = listPage(request);
    if (!page.isOk()) return page.status();
    for (auto& entry : page->objects) {
      if (entry.key.compare(0, request.prefix.size(), request.prefix) != 0) {
        return Status::ioError("s3: " + what + ": the server listed key '" + entry.key +
                               "' outside the prefix");
      }
      out.push_back(std::move(entry));
    }
    if (commonPrefixes != nullptr) {
      for (auto& p : page->commonPrefixes) {
        if (p.compare(0, request.prefix.size(), request.prefix) != 0 || p == request.prefix) {
          return Status::ioError("s3: " + what + ": the server listed prefix '" + p +
                                 "' outside the prefix");
        }
        commonPrefixes->push_back(std::move(p));
      }
    }
    if (!page->isTruncated) return Status::ok();
    const bool empty = page->objects.empty() && page->commonPrefixes.empty();
    emptyInARow = empty ? emptyInARow + 1 : 0;
    if (emptyInARow > kMaxEmptyPagesInARow) {
      return Status::ioError("s3: " + what + ": " + std::to_string(emptyInARow) +
                             " empty pages in a row; the listing does not end");
    }
    if (!tokensSeen.insert(page->nextContinuationToken).second) {
      return Status::ioError("s3: " + what +
                             ": the server repeated a continuation token; the listing does "
                             "not end");
    }
    request.continuationToken = std::move(page->nextContinuationToken);
  }
}

Result<std::vector<ListEntry>> S3Client::listAll(const std::string& prefix, unsigned threads) {
  if (!prefix.empty() && prefix.back() != '/') {
    return Status::invalidArgument("s3: list prefix '" + prefix + "' does not end in '/'");
  }
  ListObjectsRequest top;
  top.prefix = prefix;
  top.delimiter = "/";
  top.maxKeys = config_.listMaxKeys;
  std::vector<ListEntry> all;
  std::vector<std::string> dirs;
  if (Status s = listWalk(top, all, &dirs); !s.isOk()) return s;

  // Each directory's whole subtree, on up to `threads` threads.
  std::vector<std::vector<ListEntry>> parts(dirs.size());
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  cache::Mutex errorMu;
  Status firstError;
  auto worker = [&] {
    while (!failed.load()) {
      const size_t i = next.fetch_add(1);
      if (i >= dirs.size()) break;
      ListObjectsRequest sub;
      sub.prefix = dirs[i];
      sub.maxKeys = config_.listMaxKeys;
      Status s = listWalk(sub, parts[i], nullptr);
      if (!s.isOk()) {
        cache::MutexLock lock(errorMu);
        if (firstError.isOk()) firstError = std::move(s);
        failed.store(true);
      }
    }
  };
  const size_t helpers =
      dirs.empty() ? 0 : std::min<size_t>(std::max(threads, 1u), dirs.size()) - 1;
  std::vector<std::thread> pool;
  pool.reserve(helpers);
  for (size_t t = 0; t < helpers; ++t) {
    try {
      pool.emplace_back(worker);
    } catch (const std::system_error&) {
      break;  // fewer threads: this one does the rest
    }
  }
  worker();
  for (auto& t : pool) t.join();
  {
    cache::MutexLock lock(errorMu);
    if (!firstError.isOk()) return firstError;
  }

  size_t total = all.size();
  for (const auto& p : parts) total += p.size();
  all.reserve(total);
  for (auto& p : parts) {
    std::move(p.begin(), p.end(), std::back_inserter(all));
    std::vector<ListEntry>().swap(p);
  }
  // Byte order of the keys (std::string compares as unsigned char), as S3 lists.
  std::sort(all.begin(), all.end(),
            [](const ListEntry& a, const ListEntry& b) { return a.key < b.key; });
  return all;
}

S3ClientStats S3Client::stats() const {
  S3ClientStats s;
  s.gets = gets_.load(std::memory_order_relaxed);
  s.heads = heads_.load(std::memory_order_relaxed);
  s.lists = lists_.load(std::memory_order_relaxed);
  s.bytesReceived = bytes_.load(std::memory_order_relaxed);
  s.errors = errors_.load(std::memory_order_relaxed);
  s.inFlight = inFlight_.load(std::memory_order_relaxed);
  return s;
}

}  // namespace epochfs::transport::s3
