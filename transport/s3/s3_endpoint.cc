#include "transport/s3/s3_endpoint.h"

#include <arpa/inet.h>

#include <algorithm>

namespace epochfs::transport::s3 {

using cache::Result;
using cache::Status;

namespace {

bool isLower(char c) { return c >= 'a' && c <= 'z'; }
bool isUpper(char c) { return c >= 'A' && c <= 'Z'; }
bool isDigit(char c) { return c >= '0' && c <= '9'; }
bool isAlnum(char c) { return isLower(c) || isUpper(c) || isDigit(c); }

std::string lowerCase(std::string s) {
  for (char& c : s) {
    if (isUpper(c)) c = static_cast<char>(c - 'A' + 'a');
  }
  return s;
}

bool isIpv4(std::string_view s) {
  in_addr a{};
  return inet_pton(AF_INET, std::string(s).c_str(), &a) == 1;
}

// "[...]" holding an IPv6 address (no zone id).
bool isBracketedIpv6(std::string_view s) {
  if (s.size() < 3 || s.front() != '[' || s.back() != ']') return false;
  in6_addr a{};
  return inet_pton(AF_INET6, std::string(s.substr(1, s.size() - 2)).c_str(), &a) == 1;
}

bool isIpHost(std::string_view host) { return isIpv4(host) || isBracketedIpv6(host); }

// A host name as URLs carry it: labels of letters, digits, '-' and '_' (seen
// in container names), separated by single dots.
bool validHostName(std::string_view h) {
  if (h.empty() || h.size() > 253 || h.front() == '.' || h.back() == '.') return false;
  char prev = '.';
  for (char c : h) {
    if (!(isAlnum(c) || c == '-' || c == '_' || c == '.')) return false;
    if (c == '.' && prev == '.') return false;
    prev = c;
  }
  return true;
}

Status badUrl(const std::string& url, const std::string& why) {
  return Status::invalidArgument("s3: endpoint URL '" + url + "': " + why);
}

Status badBucket(const std::string& bucket, const std::string& why) {
  return Status::invalidArgument("s3: bucket name '" + bucket + "': " + why);
}

// S3's bucket naming rules, with the legacy upper case and '_' of old
// us-east-1 buckets (path style only) accepted.
Status checkBucket(const std::string& b) {
  if (b.size() < 3 || b.size() > 63) return badBucket(b, "must be 3 to 63 characters");
  for (char c : b) {
    if (!(isAlnum(c) || c == '.' || c == '-' || c == '_')) {
      return badBucket(b, "only letters, digits, '.', '-' and '_' are allowed");
    }
  }
  if (!isAlnum(b.front()) || !isAlnum(b.back())) {
    return badBucket(b, "must start and end with a letter or digit");
  }
  if (b.find("..") != std::string::npos) return badBucket(b, "holds '..'");
  return Status::ok();
}

}  // namespace

Result<Addressing> parseAddressing(std::string_view name) {
  if (name == "auto") return Addressing::kAuto;
  if (name == "path") return Addressing::kPath;
  if (name == "virtual") return Addressing::kVirtual;
  return Status::invalidArgument("s3: addressing '" + std::string(name) +
                                 "' is not auto, path or virtual");
}

const char* addressingName(Addressing a) {
  switch (a) {
    case Addressing::kAuto:
      return "auto";
    case Addressing::kPath:
      return "path";
    case Addressing::kVirtual:
      return "virtual";
  }
  return "?";
}

bool S3Endpoint::dnsCompatibleBucket(std::string_view b) {
  if (b.size() < 3 || b.size() > 63 || isIpv4(b)) return false;
  char prev = '.';
  for (size_t i = 0; i < b.size(); ++i) {
    const char c = b[i];
    if (!(isLower(c) || isDigit(c) || c == '-' || c == '.')) return false;
    // Each label starts and ends with a letter or digit.
    if (c == '.' && (prev == '.' || prev == '-')) return false;
    if (c == '-' && prev == '.') return false;
    prev = c;
  }
  return isLower(b.back()) || isDigit(b.back());
}

Result<S3Endpoint> S3Endpoint::make(std::string endpointUrl, std::string region, std::string bucket,
                                    Addressing addressing) {
  S3Endpoint e;
  if (region.empty()) return Status::invalidArgument("s3: no region");
  for (char c : region) {
    if (!(isAlnum(c) || c == '-' || c == '_')) {
      return Status::invalidArgument("s3: region '" + region +
                                     "': only letters, digits, '-' and '_' are allowed");
    }
  }
  if (Status s = checkBucket(bucket); !s.isOk()) return s;
  if (endpointUrl.empty()) {
    const bool china = region.rfind("cn-", 0) == 0;
    endpointUrl = "https://s3." + region + (china ? ".amazonaws.com.cn" : ".amazonaws.com");
  }

  const std::string& url = endpointUrl;
  const size_t schemeEnd = url.find("://");
  if (schemeEnd == std::string::npos) return badUrl(url, "no scheme (http:// or https://)");
  e.scheme = lowerCase(url.substr(0, schemeEnd));
  if (e.scheme != "http" && e.scheme != "https") {
    return badUrl(url, "scheme '" + e.scheme + "' is not http or https");
  }
  std::string_view rest = std::string_view(url).substr(schemeEnd + 3);
  if (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  if (rest.find('@') != std::string_view::npos) return badUrl(url, "user info is not allowed");
  if (rest.find_first_of("?#") != std::string_view::npos) {
    return badUrl(url, "a query or fragment is not allowed");
  }
  if (rest.find('/') != std::string_view::npos) {
    return badUrl(url, "a path is not allowed (the bucket goes in s3://BUCKET)");
  }
  std::string_view portText;
  if (!rest.empty() && rest.front() == '[') {
    const size_t close = rest.find(']');
    if (close == std::string_view::npos) return badUrl(url, "an unclosed '[' in the host");
    e.host = lowerCase(std::string(rest.substr(0, close + 1)));
    if (!isBracketedIpv6(e.host)) return badUrl(url, "'" + e.host + "' is not an IPv6 address");
    rest.remove_prefix(close + 1);
    if (!rest.empty() && rest.front() != ':') return badUrl(url, "junk after the IPv6 address");
    if (!rest.empty()) portText = rest.substr(1);
    if (rest == ":") return badUrl(url, "an empty port");
  } else {
    const size_t colon = rest.find(':');
    e.host = lowerCase(std::string(rest.substr(0, colon)));
    if (colon != std::string_view::npos) {
      portText = rest.substr(colon + 1);
      if (portText.empty()) return badUrl(url, "an empty port");
    }
    if (e.host.empty()) return badUrl(url, "no host");
    if (!validHostName(e.host)) return badUrl(url, "'" + e.host + "' is not a host name");
  }
  if (!portText.empty()) {
    uint32_t port = 0;
    for (char c : portText) {
      if (!isDigit(c) || port > 65535) return badUrl(url, "the port is not a number 1-65535");
      port = port * 10 + static_cast<uint32_t>(c - '0');
    }
    if (port == 0 || port > 65535) return badUrl(url, "the port is not a number 1-65535");
    e.port = static_cast<uint16_t>(port);
    if (e.port == (e.scheme == "https" ? 443 : 80)) e.port = 0;
  }
  e.region = std::move(region);
  e.bucket = std::move(bucket);

  const bool ipHost = isIpHost(e.host);
  const bool hostable = dnsCompatibleBucket(e.bucket);
  switch (addressing) {
    case Addressing::kAuto: {
      const bool dotsOverTls = e.scheme == "https" && e.bucket.find('.') != std::string::npos;
      e.addressing = ipHost || e.host == "localhost" || !hostable || dotsOverTls
                         ? Addressing::kPath
                         : Addressing::kVirtual;
      break;
    }
    case Addressing::kPath:
      e.addressing = Addressing::kPath;
      break;
    case Addressing::kVirtual:
      if (ipHost) {
        return badUrl(url, "virtual-hosted addressing needs a host name, not an IP address (" +
                               std::string("use path addressing)"));
      }
      if (!hostable) {
        return badBucket(e.bucket,
                         "cannot be part of a host name (virtual-hosted addressing); use path "
                         "addressing");
      }
      e.addressing = Addressing::kVirtual;
      break;
  }
  return e;
}

std::string S3Endpoint::endpointUrl() const {
  std::string out = scheme + "://" + host;
  if (port != 0) {
    out += ':';
    out += std::to_string(port);
  }
  return out;
}

std::string S3Endpoint::hostHeader() const {
  std::string out = addressing == Addressing::kVirtual ? bucket + "." + host : host;
  if (port != 0) {
    out += ':';
    out += std::to_string(port);
  }
  return out;
}

std::string S3Endpoint::objectPath(std::string_view key) const {
  std::string out = addressing == Addressing::kVirtual ? "/" : "/" + bucket + "/";
  out.append(key);
  return out;
}

std::string S3Endpoint::bucketPath() const {
  return addressing == Addressing::kVirtual ? "/" : "/" + bucket;
}

std::string S3Endpoint::url(std::string_view unencodedPath, const QueryParams& query) const {
  std::string out = scheme + "://" + hostHeader() + canonicalUri(unencodedPath);
  if (!query.empty()) {
    out += '?';
    out += canonicalQueryString(query);
  }
  return out;
}

std::string S3Endpoint::describe(std::string_view key) const {
  return "s3://" + bucket + "/" + std::string(key);
}

}  // namespace epochfs::transport::s3
