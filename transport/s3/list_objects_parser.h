// Parses the body of a ListObjectsV2 response (and the <Error> document S3
// sends instead) with expat. Keys, prefixes and the continuation token come
// back as UTF-8 strings with XML entities decoded, and percent-decoded when
// the response says EncodingType=url (listObjectsQuery() asks for it). Every
// problem is a Status naming it: malformed XML, a DOCTYPE (S3 never sends one;
// refusing it keeps entity expansion out), a Contents without Key or Size, a
// Size that is not a non-negative 63-bit integer, a truncated page without a
// NextContinuationToken, or the server's own error code and message. Pure;
// thread-safe (one expat parser per call).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cache/status.h"
#include "transport/s3/etag.h"

namespace epochfs::transport::s3 {

struct ListEntry {
  std::string key;                        // the full object key, decoded
  uint64_t size = 0;                      // at most INT64_MAX (an off_t)
  ETag etag;                              // kNone when the listing has none
  std::optional<int64_t> lastModifiedNs;  // since the epoch, UTC
};

struct ListPage {
  std::vector<ListEntry> objects;
  std::vector<std::string> commonPrefixes;  // with the delimiter: "dir/"
  bool isTruncated = false;
  std::string nextContinuationToken;  // non-empty when isTruncated
  std::optional<uint64_t> keyCount;   // as the server counted (objects + prefixes on AWS)
};

// The largest body parsed: a page of 1,000 keys of 1,024 bytes each,
// percent-encoded, with their metadata, is well under it.
inline constexpr size_t kMaxListBodyBytes = 64 << 20;

cache::Result<ListPage> parseListObjectsV2(std::string_view body);

// The Status for an S3 error code (the <Code> of an error document):
// NoSuchBucket/NoSuchKey are NotFound, AccessDenied and the credential errors
// PermissionDenied, PreconditionFailed Stale, SlowDown and 5xx-style codes
// Unavailable, the rest IoError; the message names the code.
cache::Status statusForS3Error(std::string_view code, std::string_view message,
                               std::string_view resource = {}, std::string_view requestId = {});

}  // namespace epochfs::transport::s3
