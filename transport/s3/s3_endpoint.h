// S3Endpoint: where the requests of one bucket go — scheme, host, port,
// region, bucket and the addressing style — checked once from the mount's
// options (--s3-endpoint, --s3-region, the bucket of s3://BUCKET,
// --s3-addressing). It owns nothing but these strings and builds, for an
// object key or the bucket root, the three things a request needs and that
// must agree byte for byte: the URL sent (the path encoded by uri_encoding.h,
// as the signer encodes it), the Host header, and the unencoded path for
// SigningRequest::path.
//
//   path style:    http://127.0.0.1:7480/BUCKET/KEY        Host: 127.0.0.1:7480
//   virtual-hosted: https://BUCKET.s3.eu-west-1.amazonaws.com/KEY
//
// kAuto picks as the AWS SDKs do: path style when the endpoint host is an IP
// address (v4 or [v6]) or `localhost`, or when the bucket name is not
// DNS-compatible (upper case, '_', '..', or dots over https, where a
// wildcard certificate cannot match); else virtual-hosted.
// A value type; its const methods are thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "cache/status.h"
#include "transport/s3/uri_encoding.h"

namespace epochfs::transport::s3 {

enum class Addressing : uint8_t { kAuto, kPath, kVirtual };

// "auto", "path", "virtual" (--s3-addressing); anything else InvalidArgument.
cache::Result<Addressing> parseAddressing(std::string_view name);
const char* addressingName(Addressing a);

struct S3Endpoint {
  std::string scheme;  // "http" or "https"
  std::string host;    // the endpoint's host, lower case; an IPv6 address in brackets
  uint16_t port = 0;   // 0: the scheme's default (80, 443), also when given explicitly
  std::string region;
  std::string bucket;
  Addressing addressing = Addressing::kPath;  // as resolved: never kAuto

  // `endpointUrl`: "scheme://host[:port]" with at most a trailing '/'; ""
  // is AWS's regional endpoint https://s3.REGION.amazonaws.com (.com.cn for
  // cn-*). No path, query, fragment or user info; InvalidArgument naming the
  // URL otherwise, or for a bad bucket name (3-63 of A-Z a-z 0-9 . _ -,
  // starting and ending with a letter or digit, no ".."), an empty region,
  // or kVirtual where the bucket cannot be a host name (upper case, '_') or
  // the host is an IP address.
  static cache::Result<S3Endpoint> make(std::string endpointUrl, std::string region,
                                        std::string bucket, Addressing addressing);

  // True for a name S3 can put in a host name: 3-63 of a-z 0-9 . -, labels
  // starting and ending with a letter or digit, not an IPv4 address.
  static bool dnsCompatibleBucket(std::string_view bucket);

  // "https://s3.eu-west-1.amazonaws.com", "http://127.0.0.1:7480": the
  // endpoint as requests go, without the bucket (for messages and status).
  std::string endpointUrl() const;
  // The Host header: "BUCKET.HOST" (virtual) or "HOST", ":PORT" only when
  // not the scheme's default. The same as in the URL.
  std::string hostHeader() const;

  // Unencoded paths for SigningRequest::path: "/BUCKET/KEY" or "/KEY"; the
  // bucket root "/BUCKET" or "/".
  std::string objectPath(std::string_view key) const;
  std::string bucketPath() const;

  // The URL to send: scheme://hostHeader() + the path encoded as
  // canonicalUri() does (each byte but A-Za-z0-9-._~ and '/' as %XX, the key
  // by uriEncode(key, true)) + "?" + canonicalQueryString(query) when any.
  std::string url(std::string_view unencodedPath, const QueryParams& query = {}) const;
  std::string objectUrl(std::string_view key) const { return url(objectPath(key)); }
  std::string bucketUrl(const QueryParams& query) const { return url(bucketPath(), query); }

  // "s3://BUCKET/KEY" for messages.
  std::string describe(std::string_view key = {}) const;

  uint16_t effectivePort() const { return port != 0 ? port : (scheme == "https" ? 443 : 80); }
};

}  // namespace epochfs::transport::s3
