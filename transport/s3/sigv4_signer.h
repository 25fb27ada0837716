// SigV4Signer: AWS Signature Version 4 for S3 requests (the Authorization
// header form), with OpenSSL's SHA-256 and HMAC-SHA256 — not libcurl's
// CURLOPT_AWS_SIGV4, whose 7.88 release mis-signs the listing requests we send
// (transport/s3/README.md). Checked against botocore's S3SigV4Auth
// (tests/unit/transport/sigv4_vectors.json) and the AWS documentation example.
//
// Signed headers: host, x-amz-content-sha256, x-amz-date, x-amz-security-token
// (with a session token) and whatever the caller lists in
// SigningRequest::headers (the S3 source lists Range and If-Match there, as
// botocore signs every header it sends). Headers the caller sends without
// listing them are simply unsigned, which S3 allows for any header outside
// x-amz-*.
//
// Thread-safe: sign() is const and touches no shared state. The signer holds
// the credentials; nothing it returns or prints contains the secret.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "cache/status.h"
#include "transport/s3/credentials.h"
#include "transport/s3/uri_encoding.h"

namespace epochfs::transport::s3 {

struct HttpHeader {
  std::string name;
  std::string value;
  bool operator==(const HttpHeader&) const = default;
};

// x-amz-content-sha256 of a request without a body: SHA-256 of "" (what
// botocore sends for a GET), or the literal that skips payload signing.
inline constexpr std::string_view kEmptyPayloadSha256 =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
inline constexpr std::string_view kUnsignedPayload = "UNSIGNED-PAYLOAD";

struct SigningRequest {
  std::string method = "GET";  // upper case: GET, HEAD
  std::string host;            // as sent in Host: "bucket.s3.eu-west-1.amazonaws.com",
                               // "127.0.0.1:7480" (the port only when not the default)
  std::string path = "/";  // NOT encoded: "/bucket/dir/ä b.jpg" (path style) or "/dir/ä b.jpg"
  QueryParams query;       // NOT encoded
  std::vector<HttpHeader> headers;  // further headers to sign (e.g. range, if-match)
  std::string payloadSha256 = std::string(kEmptyPayloadSha256);  // or kUnsignedPayload
};

class SigV4Signer {
 public:
  SigV4Signer(Credentials credentials, std::string region, std::string service = "s3")
      : credentials_(std::move(credentials)),
        region_(std::move(region)),
        service_(std::move(service)) {}

  // The headers to add to the request: Authorization, x-amz-date,
  // x-amz-content-sha256 and, with a session token, x-amz-security-token.
  // `now` is the signing time (passed in, so tests are deterministic); it is
  // truncated to the second. InvalidArgument for an incomplete request or
  // credentials, or a header that could not be sent as given.
  cache::Result<std::vector<HttpHeader>> sign(const SigningRequest& request,
                                              std::chrono::system_clock::time_point now) const;

  // The steps of sign(), public for tests and for debugging a
  // SignatureDoesNotMatch (S3 returns its own canonical request). They hold
  // no secret, but the canonical request holds the session token when there
  // is one: do not log it. `amzDate` is "YYYYMMDDTHHMMSSZ".
  cache::Result<std::string> canonicalRequest(const SigningRequest& request,
                                              std::string_view amzDate) const;
  std::string stringToSign(std::string_view canonicalRequest, std::string_view amzDate) const;

  // "YYYYMMDDTHHMMSSZ" in UTC.
  static std::string amzDate(std::chrono::system_clock::time_point t);

  const std::string& region() const { return region_; }

 private:
  // The lower-cased, trimmed headers that are signed, sorted by name.
  cache::Result<std::vector<HttpHeader>> headersToSign(const SigningRequest& request,
                                                       std::string_view amzDate) const;
  std::string credentialScope(std::string_view amzDate) const;

  Credentials credentials_;
  std::string region_;
  std::string service_;
};

}  // namespace epochfs::transport::s3
