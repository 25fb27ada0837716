// S3Response: what one HTTP exchange of S3Client brings back, filled by
// libcurl's header and body callbacks (onHeader, onBody: the signatures of
// CURLOPT_HEADERFUNCTION and CURLOPT_WRITEFUNCTION, with the S3Response as
// their user data) — the status, the few headers S3Client reads, and the body
// where the sink says:
//
//   kBuffer: a ranged GET's bytes straight into the caller's buffer, never
//            past its length. A 206 writes from the buffer's start (more than
//            fits is an overflow, the transfer stops); a 200 (the server
//            ignored Range) is the whole object, of which only
//            [offset, offset+len) is kept, the transfer stopping once past it.
//   kString: a listing's body, at most `maxString` bytes.
//   kDiscard: nothing (HEAD).
// An error status's body (S3's <Error> document) is kept, up to 64 KiB,
// whatever the sink. errorStatus() turns an error response into a Status.
//
// No libcurl types here (the callbacks take plain pointers), so it is tested
// without a network (tests/unit/transport/s3_response_test.cc).
// One per request, used by one thread at a time (thread-compatible).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "cache/status.h"

namespace epochfs::transport::s3 {

struct BodySink {
  enum class Kind : uint8_t { kDiscard, kString, kBuffer };
  Kind kind = Kind::kDiscard;
  char* buf = nullptr;  // kBuffer: the caller's buffer of `len` bytes
  size_t len = 0;
  uint64_t offset = 0;   // kBuffer: the object offset of buf[0]
  size_t maxString = 0;  // kString: the largest body kept
};

// "bytes FIRST-LAST/TOTAL", "bytes FIRST-LAST/*" or "bytes */TOTAL".
struct ContentRange {
  std::optional<uint64_t> first, last;  // both or neither
  std::optional<uint64_t> total;
  static std::optional<ContentRange> parse(std::string_view value);
};

class S3Response {
 public:
  static constexpr size_t kMaxErrorBody = 64 << 10;

  explicit S3Response(BodySink sink) : sink_(sink) {}

  static size_t onHeader(char* data, size_t size, size_t count, void* self);
  static size_t onBody(char* data, size_t size, size_t count, void* self);

  long status() const { return status_; }
  bool success() const { return status_ >= 200 && status_ < 300; }
  const std::optional<uint64_t>& contentLength() const { return contentLength_; }
  const std::string& contentRange() const { return contentRange_; }
  const std::string& etag() const { return etag_; }
  const std::string& lastModified() const { return lastModified_; }
  const std::string& body() const { return body_; }  // kString or an error's body

  // kBuffer: bytes written into the buffer (a 200: of the slice, from buf[0]).
  size_t written() const { return written_; }
  // Body bytes received, all of them (a 200's skipped bytes included).
  uint64_t bodyBytes() const { return bodyBytes_; }
  // Why onBody stopped the transfer: a 206 longer than the buffer, a listing
  // over maxString; or, not an error, a 200's slice complete.
  bool overflowed() const { return overflowed_; }
  bool tooLarge() const { return tooLarge_; }
  bool sliceComplete() const { return sliceComplete_; }

  // The Status of an error response of the request `what` ("GET
  // s3://bucket/key") to `endpoint`: by HTTP status (403 PermissionDenied,
  // 404 NotFound, 412 Stale, 5xx Unavailable), otherwise by S3's error code
  // (statusForS3Error), otherwise IoError; the message names the request,
  // the endpoint, the status and S3's code and message when the body has an
  // <Error> document, and the bucket's region when S3 says it differs from
  // `region`.
  cache::Status errorStatus(std::string_view what, std::string_view endpoint,
                            std::string_view region) const;
  // S3's <Code> of an error response ("SlowDown", "ExpiredToken"); "" for a
  // success, a body without one (HEAD has no body) or a code that is not a
  // plain name.
  std::string errorCode() const;

 private:
  void header(std::string_view line);
  size_t bodyInto(const char* data, size_t n);

  const BodySink sink_;
  long status_ = 0;
  std::optional<uint64_t> contentLength_;
  std::string contentRange_, etag_, lastModified_, bucketRegion_, requestId_;
  std::string body_;
  size_t written_ = 0;
  uint64_t bodyBytes_ = 0;
  bool overflowed_ = false;
  bool tooLarge_ = false;
  bool sliceComplete_ = false;
};

}  // namespace epochfs::transport::s3
