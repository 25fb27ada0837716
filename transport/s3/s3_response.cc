#include "transport/s3/s3_response.h"

#include <algorithm>
#include <cctype>
#include <cstring>

#include "transport/s3/list_objects_parser.h"

namespace epochfs::transport::s3 {

using cache::Status;

namespace {

char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

bool equalsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() &&
         (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\n')) {
    s.remove_suffix(1);
  }
  return s;
}

// A decimal uint64 and nothing else.
std::optional<uint64_t> parseU64(std::string_view s) {
  if (s.empty() || s.size() > 20) return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    const uint64_t d = static_cast<uint64_t>(c - '0');
    if (v > (UINT64_MAX - d) / 10) return std::nullopt;
    v = v * 10 + d;
  }
  return v;
}

Status withCode(Status::Code code, std::string m) {
  using Code = Status::Code;
  switch (code) {
    case Code::kNotFound:
      return Status::notFound(std::move(m));
    case Code::kPermissionDenied:
      return Status::permissionDenied(std::move(m));
    case Code::kStale:
      return Status::stale(std::move(m));
    case Code::kUnavailable:
      return Status::unavailable(std::move(m));
    case Code::kTimedOut:
      return Status::timedOut(std::move(m));
    case Code::kInvalidArgument:
      return Status::invalidArgument(std::move(m));
    case Code::kTooLarge:
      return Status::tooLarge(std::move(m));
    default:
      return Status::ioError(std::move(m));
  }
}

}  // namespace

std::optional<ContentRange> ContentRange::parse(std::string_view v) {
  v = trim(v);
  constexpr std::string_view kUnit = "bytes ";
  if (v.size() < kUnit.size() || !equalsIgnoreCase(v.substr(0, kUnit.size()), kUnit)) {
    return std::nullopt;
  }
  v.remove_prefix(kUnit.size());
  const size_t slash = v.find('/');
  if (slash == std::string_view::npos) return std::nullopt;
  const std::string_view range = v.substr(0, slash), total = v.substr(slash + 1);
  ContentRange r;
  if (total != "*") {
    r.total = parseU64(total);
    if (!r.total) return std::nullopt;
  }
  if (range == "*") {
    if (!r.total) return std::nullopt;
    return r;
  }
  const size_t dash = range.find('-');
  if (dash == std::string_view::npos) return std::nullopt;
  r.first = parseU64(range.substr(0, dash));
  r.last = parseU64(range.substr(dash + 1));
  if (!r.first || !r.last || *r.first > *r.last) return std::nullopt;
  if (r.total && *r.last >= *r.total) return std::nullopt;
  return r;
}

size_t S3Response::onHeader(char* data, size_t size, size_t count, void* self) {
  static_cast<S3Response*>(self)->header(std::string_view(data, size * count));
  return size * count;
}

size_t S3Response::onBody(char* data, size_t size, size_t count, void* self) {
  return static_cast<S3Response*>(self)->bodyInto(data, size * count);
}

void S3Response::header(std::string_view line) {
  if (line.size() > 5 && line.substr(0, 5) == "HTTP/") {
    // A status line: a new response (after a 100 Continue, the final one).
    const size_t sp = line.find(' ');
    const auto code =
        sp == std::string_view::npos ? std::nullopt : parseU64(trim(line.substr(sp + 1, 3)));
    status_ = code && *code < 1000 ? static_cast<long>(*code) : 0;
    contentLength_.reset();
    contentRange_.clear();
    etag_.clear();
    lastModified_.clear();
    bucketRegion_.clear();
    requestId_.clear();
    return;
  }
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos) return;
  const std::string_view name = trim(line.substr(0, colon));
  const std::string_view value = trim(line.substr(colon + 1));
  if (equalsIgnoreCase(name, "content-length")) {
    contentLength_ = parseU64(value);
  } else if (equalsIgnoreCase(name, "content-range")) {
    contentRange_ = value;
  } else if (equalsIgnoreCase(name, "etag")) {
    etag_ = value;
  } else if (equalsIgnoreCase(name, "last-modified")) {
    lastModified_ = value;
  } else if (equalsIgnoreCase(name, "x-amz-bucket-region")) {
    bucketRegion_ = value;
  } else if (equalsIgnoreCase(name, "x-amz-request-id")) {
    requestId_ = value;
  }
}

size_t S3Response::bodyInto(const char* data, size_t n) {
  const uint64_t pos = bodyBytes_;
  bodyBytes_ += n;
  if (!success()) {
    // An error's body: what fits of S3's <Error> document.
    body_.append(data, std::min(n, kMaxErrorBody - std::min(kMaxErrorBody, body_.size())));
    return n;
  }
  switch (sink_.kind) {
    case BodySink::Kind::kDiscard:
      return n;
    case BodySink::Kind::kString:
      if (body_.size() + n > sink_.maxString) {
        tooLarge_ = true;
        return 0;  // stops the transfer
      }
      body_.append(data, n);
      return n;
    case BodySink::Kind::kBuffer:
      break;
  }
  if (status_ == 206) {
    if (n > sink_.len - written_) {
      overflowed_ = true;
      return 0;
    }
    std::memcpy(sink_.buf + written_, data, n);
    written_ += n;
    return n;
  }
  if (status_ != 200) return n;  // another 2xx: S3Client refuses it
  // The whole object from byte 0: keep [offset, offset + len) (the caller
  // checked that the sum does not overflow).
  const uint64_t end = sink_.offset + sink_.len;
  const uint64_t lo = std::max(pos, sink_.offset), hi = std::min(pos + n, end);
  if (lo < hi) {
    std::memcpy(sink_.buf + (lo - sink_.offset), data + (lo - pos), hi - lo);
    written_ = static_cast<size_t>(hi - sink_.offset);
  }
  const bool nothingToKeep = contentLength_ && *contentLength_ <= sink_.offset;
  if (bodyBytes_ >= end || nothingToKeep) {
    sliceComplete_ = true;
    // Stop the transfer unless it ends here anyway (keeping the connection).
    if (!contentLength_ || bodyBytes_ < *contentLength_) return 0;
  }
  return n;
}

Status S3Response::errorStatus(std::string_view what, std::string_view endpoint,
                               std::string_view region) const {
  std::string m = "s3: " + std::string(what) + " (" + std::string(endpoint) + "): HTTP " +
                  std::to_string(status_);
  std::optional<Status> doc;
  if (body_.find("<Error") != std::string::npos) {
    auto parsed = parseListObjectsV2(body_);
    if (!parsed.isOk()) doc = parsed.status();
  }
  if (doc) {
    std::string_view detail = doc->message();
    if (detail.substr(0, 4) == "s3: ") detail.remove_prefix(4);
    m += " ";
    m += detail;
  } else if (!requestId_.empty()) {
    m += " [request id " + requestId_ + "]";
  }
  if (!bucketRegion_.empty() && bucketRegion_ != region) {
    m += "; the bucket is in region " + bucketRegion_ + ", not " + std::string(region);
  }
  if (status_ == 403) return Status::permissionDenied(std::move(m));
  if (status_ == 404) {
    if (!doc) m += " (no such key or bucket)";
    return Status::notFound(std::move(m));
  }
  if (status_ == 412) return Status::stale(m + ": the object changed since it was listed");
  if (status_ >= 500 && status_ < 600) return Status::unavailable(std::move(m));
  return doc ? withCode(doc->code(), std::move(m)) : Status::ioError(std::move(m));
}

std::string S3Response::errorCode() const {
  if (success() || status_ == 0) return "";
  const size_t open = body_.find("<Code>");
  if (open == std::string::npos) return "";
  const size_t from = open + 6, close = body_.find("</Code>", from);
  if (close == std::string::npos || close - from > 64) return "";
  std::string code = body_.substr(from, close - from);
  for (char c : code) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') {
      return "";
    }
  }
  return code;
}

}  // namespace epochfs::transport::s3
