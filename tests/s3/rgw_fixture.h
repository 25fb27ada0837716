// The rgw fixture (tests/s3/README.md) as the C++ S3 tests use it: its
// rgw.json and credentials file read (loadRgwFixture), the caller's proxy and
// AWS_* variables dropped (clearS3Environment), and a test-only PUT on
// libcurl and SigV4Signer (Putter) to write the objects a test reads. Test
// support only; a Putter is used by one thread at a time.
#pragma once

#include <curl/curl.h>
#include <stdlib.h>

#include <cctype>
#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "transport/s3/credentials.h"
#include "transport/s3/s3_endpoint.h"
#include "transport/s3/sigv4_signer.h"

extern char** environ;

namespace epochfs::test_support {

struct RgwFixture {
  std::string dir, endpoint, region;
  transport::s3::Credentials credentials;
};

// Only the fixture's settings: no proxy, no AWS_* of the caller.
inline void clearS3Environment() {
  std::vector<std::string> names;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string kv(*e);
    const std::string name = kv.substr(0, kv.find('='));
    std::string lower = name;
    for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    if (name.rfind("AWS_", 0) == 0 || lower == "http_proxy" || lower == "https_proxy" ||
        lower == "all_proxy" || lower == "no_proxy") {
      names.push_back(name);
    }
  }
  for (const auto& n : names) unsetenv(n.c_str());
}

// The fixture's rgw.json and credentials file; false (with why) when absent.
inline bool loadRgwFixture(RgwFixture* f, std::string* why) {
  const char* dir = std::getenv("EPOCHFS_RGW_DIR");
  if (dir == nullptr || *dir == '\0') {
    *why = "EPOCHFS_RGW_DIR not set (run through ctest, or see tests/s3/README.md)";
    return false;
  }
  f->dir = dir;
  std::ifstream state(f->dir + "/rgw.json");
  if (!state) {
    *why = "no rgw fixture: " + f->dir + "/rgw.json is missing";
    return false;
  }
  auto j = nlohmann::json::parse(state, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("endpoint") || !j.contains("credentials_file")) {
    *why = "rgw.json unreadable";
    return false;
  }
  f->endpoint = j["endpoint"];
  f->region = j.value("region", "us-east-1");
  const std::string profile = j.value("profile", "default");
  std::ifstream ini(j["credentials_file"].get<std::string>());
  std::string line, section;
  while (std::getline(ini, line)) {
    if (!line.empty() && line.front() == '[') {
      section = line.substr(1, line.find(']') - 1);
      continue;
    }
    const size_t eq = line.find('=');
    if (section != profile || eq == std::string::npos) continue;
    auto trim = [](std::string s) {
      s.erase(0, s.find_first_not_of(" \t"));
      s.erase(s.find_last_not_of(" \t\r") + 1);
      return s;
    };
    const std::string k = trim(line.substr(0, eq)), v = trim(line.substr(eq + 1));
    if (k == "aws_access_key_id") f->credentials.accessKeyId = v;
    if (k == "aws_secret_access_key") f->credentials.secretAccessKey = v;
  }
  if (f->credentials.accessKeyId.empty() || f->credentials.secretAccessKey.empty()) {
    *why = "no keys in the fixture's credentials file";
    return false;
  }
  return true;
}

// A test-only PUT: libcurl and the signer, the body unsigned (UNSIGNED-PAYLOAD).
class Putter {
 public:
  Putter(const transport::s3::S3Endpoint& ep, const transport::s3::Credentials& credentials)
      : ep_(ep), signer_(credentials, ep.region), h_(curl_easy_init()) {}
  Putter(const Putter&) = delete;
  Putter& operator=(const Putter&) = delete;
  ~Putter() { curl_easy_cleanup(h_); }

  // PUT of the unencoded `path` ("/bucket" creates the bucket); the HTTP status or -1.
  long put(const std::string& path, const std::string& body) {
    transport::s3::SigningRequest sr;
    sr.method = "PUT";
    sr.host = ep_.hostHeader();
    sr.path = path;
    sr.payloadSha256 = std::string(transport::s3::kUnsignedPayload);
    auto auth = signer_.sign(sr, std::chrono::system_clock::now());
    if (!auth.isOk()) return -1;
    curl_slist* headers = nullptr;
    headers = curl_slist_append(headers, ("Host: " + sr.host).c_str());
    headers = curl_slist_append(headers, "Expect:");
    headers = curl_slist_append(headers, "Content-Type: application/octet-stream");
    for (const auto& hd : *auth) {
      headers = curl_slist_append(headers, (hd.name + ": " + hd.value).c_str());
    }
    const std::string url = ep_.url(path);
    curl_easy_reset(h_);
    curl_easy_setopt(h_, CURLOPT_URL, url.c_str());
    curl_easy_setopt(h_, CURLOPT_CUSTOMREQUEST, "PUT");
    curl_easy_setopt(h_, CURLOPT_POSTFIELDS, body.data());
    curl_easy_setopt(h_, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
    curl_easy_setopt(h_, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(h_, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h_, CURLOPT_PATH_AS_IS, 1L);
    curl_easy_setopt(h_, CURLOPT_TIMEOUT, 60L);
    curl_easy_setopt(
        h_, CURLOPT_WRITEFUNCTION, +[](char*, size_t s, size_t n, void*) { return s * n; });
    const CURLcode rc = curl_easy_perform(h_);
    long status = -1;
    if (rc == CURLE_OK) curl_easy_getinfo(h_, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(headers);
    return status;
  }

 private:
  transport::s3::S3Endpoint ep_;
  transport::s3::SigV4Signer signer_;
  CURL* h_;
};

}  // namespace epochfs::test_support
