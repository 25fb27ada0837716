#include "transport/s3/sigv4_signer.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <array>
#include <ctime>

namespace epochfs::transport::s3 {

namespace {

using Digest = std::array<unsigned char, 32>;

std::string hex(const unsigned char* p, size_t n) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(2 * n, '0');
  for (size_t i = 0; i < n; ++i) {
    out[2 * i] = kHex[p[i] >> 4];
    out[2 * i + 1] = kHex[p[i] & 0xF];
  }
  return out;
}

bool sha256(std::string_view data, Digest* out) {
  unsigned int len = 0;
  return EVP_Digest(data.data(), data.size(), out->data(), &len, EVP_sha256(), nullptr) == 1 &&
         len == out->size();
}

bool hmacSha256(const void* key, size_t keyLen, std::string_view msg, Digest* out) {
  unsigned int len = 0;
  return HMAC(EVP_sha256(), key, static_cast<int>(keyLen),
              reinterpret_cast<const unsigned char*>(msg.data()), msg.size(), out->data(),
              &len) != nullptr &&
         len == out->size();
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

bool isSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

// SigV4's Trimall: no leading or trailing white space, runs of it as one space.
std::string trimAll(std::string_view v) {
  std::string out;
  bool pendingSpace = false;
  for (char c : v) {
    if (isSpace(c)) {
      pendingSpace = !out.empty();
    } else {
      if (pendingSpace) out.push_back(' ');
      pendingSpace = false;
      out.push_back(c);
    }
  }
  return out;
}

// A value that cannot go on a header line as given (header injection).
bool hasLineBreakOrNul(std::string_view v) {
  return v.find_first_of(std::string_view("\r\n\0", 3)) != std::string_view::npos;
}

// An RFC 9110 token: what a header name may be.
bool isToken(std::string_view name) {
  if (name.empty()) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
    if (!ok) return false;
  }
  return true;
}

bool isPayloadHash(std::string_view h) {
  if (h == kUnsignedPayload) return true;
  return h.size() == 64 && std::all_of(h.begin(), h.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

}  // namespace

std::string SigV4Signer::amzDate(std::chrono::system_clock::time_point t) {
  const std::time_t secs =
      std::chrono::system_clock::to_time_t(std::chrono::floor<std::chrono::seconds>(t));
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[32];
  const size_t n = std::strftime(buf, sizeof buf, "%Y%m%dT%H%M%SZ", &tm);
  return std::string(buf, n);
}

std::string SigV4Signer::credentialScope(std::string_view amzDate) const {
  return std::string(amzDate.substr(0, 8)) + "/" + region_ + "/" + service_ + "/aws4_request";
}

cache::Result<std::vector<HttpHeader>> SigV4Signer::headersToSign(const SigningRequest& request,
                                                                  std::string_view amzDate) const {
  std::vector<HttpHeader> headers = {
      {"host", request.host},
      {"x-amz-content-sha256", request.payloadSha256},
      {"x-amz-date", std::string(amzDate)},
  };
  if (credentials_.hasSessionToken()) {
    headers.push_back({"x-amz-security-token", credentials_.sessionToken});
  }
  const size_t own = headers.size();
  for (const auto& h : request.headers) {
    std::string name = lower(h.name);
    if (!isToken(name)) {
      return cache::Status::invalidArgument("sigv4: header name '" + h.name + "' is not a token");
    }
    if (hasLineBreakOrNul(h.value)) {
      return cache::Status::invalidArgument("sigv4: header " + name + " holds a line break or NUL");
    }
    auto named = [&](const HttpHeader& seen) { return seen.name == name; };
    if (name == "authorization" || std::any_of(headers.begin(), headers.begin() + own, named)) {
      return cache::Status::invalidArgument("sigv4: header " + name + " is set by the signer");
    }
    if (std::any_of(headers.begin() + own, headers.end(), named)) {
      return cache::Status::invalidArgument("sigv4: header " + name + " given twice");
    }
    headers.push_back({std::move(name), trimAll(h.value)});
  }
  std::sort(headers.begin(), headers.end(),
            [](const HttpHeader& a, const HttpHeader& b) { return a.name < b.name; });
  return headers;
}

cache::Result<std::string> SigV4Signer::canonicalRequest(const SigningRequest& request,
                                                         std::string_view amzDate) const {
  if (request.method.empty() || !std::all_of(request.method.begin(), request.method.end(),
                                             [](char c) { return c >= 'A' && c <= 'Z'; })) {
    return cache::Status::invalidArgument("sigv4: method '" + request.method +
                                          "' is not an upper-case HTTP method");
  }
  if (request.host.empty() || hasLineBreakOrNul(request.host) ||
      request.host.find_first_of(" \t") != std::string::npos) {
    return cache::Status::invalidArgument("sigv4: host '" + request.host + "' is not a host");
  }
  if (request.path.empty() || request.path.front() != '/') {
    return cache::Status::invalidArgument("sigv4: path '" + request.path +
                                          "' does not start with '/'");
  }
  if (!isPayloadHash(request.payloadSha256)) {
    return cache::Status::invalidArgument(
        "sigv4: payload hash is neither UNSIGNED-PAYLOAD nor 64 lower-case hex digits");
  }
  auto headers = headersToSign(request, amzDate);
  if (!headers.isOk()) return headers.status();

  std::string out = request.method + "\n" + canonicalUri(request.path) + "\n" +
                    canonicalQueryString(request.query) + "\n";
  std::string signedNames;
  for (const auto& h : *headers) {
    out += h.name + ":" + h.value + "\n";
    if (!signedNames.empty()) signedNames.push_back(';');
    signedNames += h.name;
  }
  out += "\n" + signedNames + "\n" + request.payloadSha256;
  return out;
}

std::string SigV4Signer::stringToSign(std::string_view canonicalRequest,
                                      std::string_view amzDate) const {
  Digest d{};
  // EVP_Digest of a short string fails only when OpenSSL itself is broken;
  // the all-zero digest then makes a signature the server refuses.
  if (!sha256(canonicalRequest, &d)) d.fill(0);
  return "AWS4-HMAC-SHA256\n" + std::string(amzDate) + "\n" + credentialScope(amzDate) + "\n" +
         hex(d.data(), d.size());
}

cache::Result<std::vector<HttpHeader>> SigV4Signer::sign(
    const SigningRequest& request, std::chrono::system_clock::time_point now) const {
  if (credentials_.accessKeyId.empty() || credentials_.secretAccessKey.empty()) {
    return cache::Status::invalidArgument("sigv4: no access key id or secret access key");
  }
  if (credentials_.accessKeyId.find_first_of("/, \t\r\n") != std::string::npos) {
    return cache::Status::invalidArgument("sigv4: the access key id holds '/', ',' or a space");
  }
  if (hasLineBreakOrNul(credentials_.sessionToken)) {
    return cache::Status::invalidArgument("sigv4: the session token holds a line break or NUL");
  }
  if (region_.empty() || service_.empty()) {
    return cache::Status::invalidArgument("sigv4: no region or service to sign for");
  }
  const std::string date = amzDate(now);
  auto canonical = canonicalRequest(request, date);
  if (!canonical.isOk()) return canonical.status();
  const std::string toSign = stringToSign(*canonical, date);

  // kSigning = HMAC(HMAC(HMAC(HMAC("AWS4" + secret, date), region), service), "aws4_request").
  std::string seed = "AWS4" + credentials_.secretAccessKey;
  Digest key{};
  bool ok = hmacSha256(seed.data(), seed.size(), std::string_view(date).substr(0, 8), &key);
  OPENSSL_cleanse(seed.data(), seed.size());
  for (std::string_view part :
       {std::string_view(region_), std::string_view(service_), std::string_view("aws4_request")}) {
    Digest next{};
    ok = ok && hmacSha256(key.data(), key.size(), part, &next);
    key = next;
    OPENSSL_cleanse(next.data(), next.size());
  }
  Digest signature{};
  ok = ok && hmacSha256(key.data(), key.size(), toSign, &signature);
  OPENSSL_cleanse(key.data(), key.size());
  if (!ok) return cache::Status::ioError("sigv4: OpenSSL HMAC-SHA256 failed");

  std::string signedNames;
  auto headers = headersToSign(request, date);  // validated by canonicalRequest()
  for (const auto& h : *headers) {
    if (!signedNames.empty()) signedNames.push_back(';');
    signedNames += h.name;
  }
  std::vector<HttpHeader> out;
  out.push_back({"Authorization", "AWS4-HMAC-SHA256 Credential=" + credentials_.accessKeyId + "/" +
                                      credentialScope(date) + ", SignedHeaders=" + signedNames +
                                      ", Signature=" + hex(signature.data(), signature.size())});
  out.push_back({"x-amz-date", date});
  out.push_back({"x-amz-content-sha256", request.payloadSha256});
  if (credentials_.hasSessionToken()) {
    out.push_back({"x-amz-security-token", credentials_.sessionToken});
  }
  return out;
}

}  // namespace epochfs::transport::s3
