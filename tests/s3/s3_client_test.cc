// S3Client (transport/s3/s3_client.h) against a real S3 server: Ceph's RADOS
// Gateway of the CTest fixture s3_rgw (tests/s3/README.md). Ranged GETs at
// several offsets with their exact bytes, the end of an object, If-Match,
// the errors (missing key and bucket, a wrong secret, unsigned requests to a
// private bucket, a closed port), listAll over ~1,400 keys in several
// "directories" (spaces, '+', '%', non-ASCII; 1,100 in one, so pages of 1,000
// and of 37) compared with boto3's listing, and 8 threads reading at once
// through 4 connections.
//
// The objects are written by a test-only PUT (tests/s3/rgw_fixture.h: libcurl + SigV4Signer,
// UNSIGNED-PAYLOAD) into a fresh bucket; boto3's view comes from
// tests/s3/s3_client_boto3.py run through popen. The fixture's directory is
// EPOCHFS_RGW_DIR; without its rgw.json the test exits 77 (skipped). The
// caller's proxy and AWS_* variables are cleared first.
#include "transport/s3/s3_client.h"

#include <gtest/gtest.h>
#include <stdio.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tests/loopback_port.h"
#include "tests/s3/rgw_fixture.h"
#include "transport/s3/s3_endpoint.h"
#include "transport/s3/sigv4_signer.h"

namespace epochfs::transport::s3 {
namespace {

using Code = cache::Status::Code;
using std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr int kSkip = 77;
constexpr size_t kBlobSize = (1 << 20) + 123;
constexpr unsigned kUploadThreads = 8;

using test_support::Putter;
test_support::RgwFixture* gRgw = nullptr;

// The bytes of object `key`: a function of its name, so reads are checked
// without a copy.
std::string contentOf(const std::string& key, size_t size) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : key) h = (h ^ c) * 1099511628211ull;
  std::string out(size, '\0');
  for (size_t i = 0; i < size; ++i) {
    const uint64_t x = (h + i / 8) * 0x9E3779B97F4A7C15ull;
    out[i] = static_cast<char>(x >> (8 * (i % 8)));
  }
  return out;
}

// Every object of the bucket, with its size.
std::map<std::string, size_t> objectSet() {
  std::map<std::string, size_t> m;
  m["blob.bin"] = kBlobSize;
  m["small.txt"] = 10;
  m["empty"] = 0;
  m["dsx/notme"] = 1;
  m["other/z"] = 1;
  m["ds/top1.txt"] = 5;
  m["ds/top 2+%.txt"] = 7;
  for (int i = 0; i < 100; ++i) m["ds/a/" + std::to_string(i) + ".jpg"] = i % 50;
  for (int i = 0; i < 50; ++i) m["ds/b c/img " + std::to_string(i) + ".jpg"] = 3 + i % 7;
  for (int i = 0; i < 30; ++i) m["ds/plus+dir/x+y_" + std::to_string(i)] = 1 + i % 5;
  for (int i = 0; i < 30; ++i) m["ds/pct%25/p%" + std::to_string(i)] = 2 + i % 4;
  for (int i = 0; i < 30; ++i) {
    m["ds/\xc3\xbcn\xc3\xaf/\xe6\x97\xa5\xe6\x9c\xac_" + std::to_string(i) + ".txt"] = 4 + i % 3;
  }
  for (int i = 0; i < 60; ++i) {
    m["ds/deep/x" + std::to_string(i % 3) + "/y/" + std::to_string(i)] = i % 11;
  }
  for (int i = 0; i < 1100; ++i) m["ds/big/" + std::to_string(i)] = i % 13;
  return m;
}

S3Endpoint endpointFor(const std::string& bucket, const std::string& url = "") {
  auto ep =
      S3Endpoint::make(url.empty() ? gRgw->endpoint : url, gRgw->region, bucket, Addressing::kAuto);
  EXPECT_TRUE(ep.isOk()) << ep.status().toString();
  return *ep;
}

std::unique_ptr<S3Client> makeClient(const std::string& bucket,
                                     std::optional<Credentials> creds = gRgw->credentials,
                                     const std::string& url = "", unsigned maxInFlight = 32,
                                     uint32_t listMaxKeys = 0,
                                     std::chrono::milliseconds readDeadline = 30000ms) {
  S3ClientConfig cfg;
  cfg.endpoint = endpointFor(bucket, url);
  cfg.credentials = std::move(creds);
  cfg.maxInFlight = maxInFlight;
  cfg.listMaxKeys = listMaxKeys;
  cfg.connectTimeout = std::chrono::milliseconds(3000);
  cfg.requestTimeout = std::chrono::milliseconds(30000);
  cfg.readDeadline = readDeadline;
  auto c = S3Client::create(std::move(cfg));
  EXPECT_TRUE(c.isOk()) << c.status().toString();
  return c.isOk() ? std::move(c).value() : nullptr;
}

struct BotoEntry {
  std::string key;
  uint64_t size;
  std::string etag;
};

// boto3's listing of `prefix` (tests/s3/s3_client_boto3.py).
std::vector<BotoEntry> botoList(const std::string& bucket, const std::string& prefix) {
  const std::string cmd = "/usr/bin/python3 " EPOCHFS_S3_TEST_DIR "/s3_client_boto3.py list '" +
                          gRgw->dir + "' '" + bucket + "' '" + prefix + "'";
  std::vector<BotoEntry> out;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) {
    ADD_FAILURE() << "popen " << cmd;
    return out;
  }
  std::string text;
  char chunk[65536];
  size_t n;
  while ((n = fread(chunk, 1, sizeof chunk, p)) > 0) text.append(chunk, n);
  const int rc = pclose(p);
  EXPECT_EQ(rc, 0) << cmd;
  auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_array()) {
    ADD_FAILURE() << "boto3 helper printed no JSON list";
    return out;
  }
  for (const auto& e : j) out.push_back({e[0], e[1], e[2]});
  return out;
}

class S3ClientTest : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::random_device rd;
    bucket_ = "client-" + std::to_string(rd()) + "-" + std::to_string(rd() % 100000);
    objects_ = objectSet();
    const S3Endpoint ep = endpointFor(bucket_);
    Putter creator(ep, gRgw->credentials);
    const long created = creator.put(ep.bucketPath(), "");
    if (created != 200) {
      setupError_ = "CreateBucket " + bucket_ + ": HTTP " + std::to_string(created);
      return;
    }
    std::vector<std::pair<std::string, size_t>> all(objects_.begin(), objects_.end());
    std::atomic<size_t> next{0};
    std::atomic<int> failures{0};
    std::vector<std::thread> threads;
    const auto t0 = steady_clock::now();
    for (unsigned t = 0; t < kUploadThreads; ++t) {
      threads.emplace_back([&] {
        Putter putter(ep, gRgw->credentials);
        for (size_t i = next.fetch_add(1); i < all.size(); i = next.fetch_add(1)) {
          const auto& [key, size] = all[i];
          if (putter.put(ep.objectPath(key), contentOf(key, size)) != 200) failures++;
        }
      });
    }
    for (auto& t : threads) t.join();
    if (failures > 0) setupError_ = std::to_string(failures.load()) + " PUTs failed";
    std::printf("uploaded %zu objects in %.1f s\n", all.size(),
                std::chrono::duration<double>(steady_clock::now() - t0).count());
  }

  void SetUp() override { ASSERT_TRUE(setupError_.empty()) << setupError_; }

  // getRange into a buffer with guard bytes after `len`: they stay untouched.
  static cache::Result<size_t> guardedGet(S3Client& c, const std::string& key, uint64_t offset,
                                          size_t len, const ETag& etag, std::string* got) {
    constexpr size_t kGuard = 64;
    std::string buf(len + kGuard, '\x5a');
    auto r = c.getRange(key, offset, buf.data(), len, etag);
    EXPECT_EQ(buf.substr(len), std::string(kGuard, '\x5a')) << "written past len: " << key;
    if (r.isOk()) *got = buf.substr(0, *r);
    return r;
  }

  static inline std::string bucket_;
  static inline std::map<std::string, size_t> objects_;
  static inline std::string setupError_;
};

TEST_F(S3ClientTest, GetRangeReturnsTheExactBytes) {
  auto c = makeClient(bucket_);
  ASSERT_TRUE(c);
  const std::string blob = contentOf("blob.bin", kBlobSize);
  auto info = c->head("blob.bin");
  ASSERT_TRUE(info.isOk()) << info.status().toString();
  EXPECT_EQ(info->size, kBlobSize);
  EXPECT_EQ(info->etag.kind(), ETag::Kind::kMd5);
  ASSERT_TRUE(info->lastModifiedNs);
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  EXPECT_LT(std::llabs(*info->lastModifiedNs / 1000000000 -
                       std::chrono::duration_cast<std::chrono::seconds>(now).count()),
            3600);
  struct Case {
    uint64_t offset;
    size_t len;
    size_t want;
  } cases[] = {
      {0, 100, 100},
      {4096, 65536, 65536},
      {12345, 1, 1},
      {kBlobSize - 10, 10, 10},            // the last bytes exactly
      {kBlobSize - 10, 100, 10},           // short at the end
      {0, kBlobSize, kBlobSize},           // the whole object
      {1, kBlobSize + 50, kBlobSize - 1},  // more than there is
      {kBlobSize, 10, 0},                  // at the end
      {kBlobSize + 1000, 10, 0},           // past it
  };
  for (const ETag& etag : {ETag(), info->etag}) {
    for (const auto& k : cases) {
      std::string got;
      auto r = guardedGet(*c, "blob.bin", k.offset, k.len, etag, &got);
      ASSERT_TRUE(r.isOk()) << k.offset << "+" << k.len << ": " << r.status().toString();
      EXPECT_EQ(*r, k.want) << k.offset << "+" << k.len;
      EXPECT_TRUE(got == blob.substr(std::min<uint64_t>(k.offset, kBlobSize), k.want))
          << k.offset << "+" << k.len;
    }
  }
  std::string got;
  auto empty = guardedGet(*c, "empty", 0, 10, ETag(), &got);
  ASSERT_TRUE(empty.isOk()) << empty.status().toString();
  EXPECT_EQ(*empty, 0u);
  auto zero = c->getRange("blob.bin", 5, got.data(), 0, ETag());
  ASSERT_TRUE(zero.isOk());
  EXPECT_EQ(*zero, 0u);
}

TEST_F(S3ClientTest, KeysThatNeedEncodingRead) {
  auto c = makeClient(bucket_);
  ASSERT_TRUE(c);
  for (const std::string key :
       {"ds/top 2+%.txt", "ds/b c/img 7.jpg", "ds/plus+dir/x+y_3", "ds/pct%25/p%4",
        "ds/\xc3\xbcn\xc3\xaf/\xe6\x97\xa5\xe6\x9c\xac_5.txt"}) {
    const size_t size = objects_.at(key);
    std::string got;
    auto r = guardedGet(*c, key, 0, 100, ETag(), &got);
    ASSERT_TRUE(r.isOk()) << key << ": " << r.status().toString();
    EXPECT_EQ(got, contentOf(key, size)) << key;
    auto info = c->head(key);
    ASSERT_TRUE(info.isOk()) << key << ": " << info.status().toString();
    EXPECT_EQ(info->size, size) << key;
  }
}

TEST_F(S3ClientTest, IfMatchWithAnotherETagIsStale) {
  auto c = makeClient(bucket_);
  ASSERT_TRUE(c);
  const ETag wrong = ETag::parse("\"0123456789abcdef0123456789abcdef\"");
  ASSERT_TRUE(wrong.headerValue());
  char buf[16];
  auto r = c->getRange("small.txt", 0, buf, sizeof buf, wrong);
  ASSERT_FALSE(r.isOk());
  EXPECT_EQ(r.status().code(), Code::kStale) << r.status().toString();
  EXPECT_NE(r.status().message().find("changed since it was listed"), std::string::npos);
  EXPECT_NE(r.status().message().find("small.txt"), std::string::npos);
  EXPECT_EQ(c->stats().errors, 1u);
}

TEST_F(S3ClientTest, MissingKeyAndBucketAreNotFound) {
  auto c = makeClient(bucket_);
  ASSERT_TRUE(c);
  char buf[16];
  auto r = c->getRange("no/such key", 0, buf, sizeof buf, ETag());
  ASSERT_FALSE(r.isOk());
  EXPECT_EQ(r.status().code(), Code::kNotFound) << r.status().toString();
  EXPECT_NE(r.status().message().find("NoSuchKey"), std::string::npos) << r.status().toString();
  EXPECT_NE(r.status().message().find("no/such key"), std::string::npos);
  auto h = c->head("no/such key");
  ASSERT_FALSE(h.isOk());
  EXPECT_EQ(h.status().code(), Code::kNotFound) << h.status().toString();

  auto none = makeClient(bucket_ + "-missing");
  ASSERT_TRUE(none);
  r = none->getRange("small.txt", 0, buf, sizeof buf, ETag());
  ASSERT_FALSE(r.isOk());
  EXPECT_EQ(r.status().code(), Code::kNotFound) << r.status().toString();
  EXPECT_NE(r.status().message().find("NoSuchBucket"), std::string::npos) << r.status().toString();
  auto l = none->listAll("", 2);
  ASSERT_FALSE(l.isOk());
  EXPECT_EQ(l.status().code(), Code::kNotFound) << l.status().toString();
}

TEST_F(S3ClientTest, AWrongSecretIsPermissionDeniedAndNeverPrinted) {
  const std::string wrongSecret = "NotTheSecret-7f3a9c";
  auto c = makeClient(bucket_, Credentials(gRgw->credentials.accessKeyId, wrongSecret));
  ASSERT_TRUE(c);
  char buf[16];
  auto r = c->getRange("small.txt", 0, buf, sizeof buf, ETag());
  auto h = c->head("small.txt");
  ListObjectsRequest ds;
  ds.prefix = "ds/";
  auto l = c->listPage(ds);
  for (const cache::Status& s : {r.status(), h.status(), l.status()}) {
    EXPECT_EQ(s.code(), Code::kPermissionDenied) << s.toString();
    EXPECT_EQ(s.message().find(wrongSecret), std::string::npos) << s.toString();
    EXPECT_EQ(s.message().find(gRgw->credentials.secretAccessKey), std::string::npos);
  }
  EXPECT_EQ(c->stats().errors, 3u);
  // Unsigned requests to a private bucket: refused too.
  auto anon = makeClient(bucket_, std::nullopt);
  ASSERT_TRUE(anon);
  EXPECT_FALSE(anon->signsRequests());
  r = anon->getRange("small.txt", 0, buf, sizeof buf, ETag());
  EXPECT_EQ(r.status().code(), Code::kPermissionDenied) << r.status().toString();
}

// Retried (a refused connection may heal) until the read deadline, then Unavailable.
TEST_F(S3ClientTest, AClosedPortIsUnavailableAtTheDeadline) {
  const uint16_t port = test_support::freeLoopbackPort();
  ASSERT_NE(port, 0);
  const std::string url = "http://127.0.0.1:" + std::to_string(port);
  auto c = makeClient(bucket_, gRgw->credentials, url, 32, 0, 1000ms);
  ASSERT_TRUE(c);
  char buf[16];
  const auto t0 = steady_clock::now();
  auto r = c->getRange("small.txt", 0, buf, sizeof buf, ETag());
  const auto took = steady_clock::now() - t0;
  ASSERT_FALSE(r.isOk());
  EXPECT_EQ(r.status().code(), Code::kUnavailable) << r.status().toString();
  EXPECT_NE(r.status().message().find(url), std::string::npos) << r.status().toString();
  EXPECT_LT(took, std::chrono::seconds(4));
  EXPECT_GT(c->stats().retries, 0u);
  auto l = c->listAll("ds/", 4);
  EXPECT_EQ(l.status().code(), Code::kUnavailable) << l.status().toString();
  EXPECT_EQ(c->stats().inFlight, 0u);
}

void expectSameListing(const cache::Result<std::vector<ListEntry>>& ours,
                       const std::vector<BotoEntry>& boto, const std::string& what) {
  ASSERT_TRUE(ours.isOk()) << what << ": " << ours.status().toString();
  ASSERT_EQ(ours->size(), boto.size()) << what;
  for (size_t i = 0; i < boto.size(); ++i) {
    const ListEntry& e = (*ours)[i];
    ASSERT_EQ(e.key, boto[i].key) << what << " #" << i;
    EXPECT_EQ(e.size, boto[i].size) << what << " " << e.key;
    EXPECT_EQ(e.etag, ETag::parse(boto[i].etag)) << what << " " << e.key;
  }
}

TEST_F(S3ClientTest, ListAllEqualsBoto3) {
  const auto bodsDs = botoList(bucket_, "ds/");
  ASSERT_EQ(bodsDs.size(), 1402u);  // every key under ds/, and not dsx/
  auto c = makeClient(bucket_);
  ASSERT_TRUE(c);
  const auto t0 = steady_clock::now();
  expectSameListing(c->listAll("ds/", 4), bodsDs, "ds/ in pages of 1000");
  std::printf("listAll ds/: %.2f s, %lu requests\n",
              std::chrono::duration<double>(steady_clock::now() - t0).count(),
              static_cast<unsigned long>(c->stats().lists));
  // Small pages: many continuation tokens, on 8 threads.
  auto paged = makeClient(bucket_, gRgw->credentials, "", 32, 37);
  ASSERT_TRUE(paged);
  expectSameListing(paged->listAll("ds/", 8), bodsDs, "ds/ in pages of 37");
  EXPECT_GT(paged->stats().lists, 1100u / 37);
  // The whole bucket, and one directory; one thread.
  expectSameListing(c->listAll("", 1), botoList(bucket_, ""), "the bucket");
  expectSameListing(paged->listAll("ds/b c/", 1), botoList(bucket_, "ds/b c/"), "ds/b c/");
  auto none = c->listAll("nothing/", 4);
  ASSERT_TRUE(none.isOk()) << none.status().toString();
  EXPECT_TRUE(none->empty());
  EXPECT_EQ(c->listAll("ds", 4).status().code(), Code::kInvalidArgument);
}

TEST_F(S3ClientTest, ListPageIsOnePage) {
  auto c = makeClient(bucket_);
  ASSERT_TRUE(c);
  ListObjectsRequest big;
  big.prefix = "ds/big/";
  big.maxKeys = 100;
  auto p = c->listPage(big);
  ASSERT_TRUE(p.isOk()) << p.status().toString();
  EXPECT_EQ(p->objects.size(), 100u);
  EXPECT_TRUE(p->isTruncated);
  EXPECT_FALSE(p->nextContinuationToken.empty());
  ListObjectsRequest ds;
  ds.prefix = "ds/";
  ds.delimiter = "/";
  auto top = c->listPage(ds);
  ASSERT_TRUE(top.isOk()) << top.status().toString();
  EXPECT_EQ(top->objects.size(), 2u);
  EXPECT_EQ(top->commonPrefixes.size(), 7u);
}

TEST_F(S3ClientTest, ConcurrentReadsFromEightThreads) {
  auto c = makeClient(bucket_, gRgw->credentials, "", /*maxInFlight=*/4);
  ASSERT_TRUE(c);
  const std::string blob = contentOf("blob.bin", kBlobSize);
  std::vector<std::string> keys;
  for (const auto& [k, size] : objects_) {
    if (k.rfind("ds/", 0) == 0) keys.push_back(k);
  }
  constexpr int kThreads = 8, kReads = 120;
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(1000 + t);
      std::string buf(70000, '\0');
      for (int i = 0; i < kReads; ++i) {
        std::string key = "blob.bin";
        uint64_t offset = rng() % (kBlobSize + 100);
        size_t len = 1 + rng() % 65536;
        if (i % 2 == 1) {
          key = keys[rng() % keys.size()];
          offset = 0;
          len = 64;
        }
        auto r = c->getRange(key, offset, buf.data(), len, ETag());
        const size_t size = key == "blob.bin" ? kBlobSize : objects_.at(key);
        const size_t want = offset >= size ? 0 : std::min<size_t>(len, size - offset);
        const std::string expect = key == "blob.bin"
                                       ? blob.substr(std::min<uint64_t>(offset, size), want)
                                       : contentOf(key, size).substr(0, want);
        if (!r.isOk() || *r != want || buf.compare(0, want, expect) != 0) {
          if (bad++ < 5) {
            ADD_FAILURE() << key << " " << offset << "+" << len << ": "
                          << (r.isOk() ? std::to_string(*r) : r.status().toString());
          }
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(bad.load(), 0);
  const S3ClientStats st = c->stats();
  EXPECT_EQ(st.gets, static_cast<uint64_t>(kThreads * kReads));
  EXPECT_EQ(st.errors, 0u);
  EXPECT_EQ(st.inFlight, 0u);
  EXPECT_GT(st.bytesReceived, 0u);
}

}  // namespace
}  // namespace epochfs::transport::s3

int main(int argc, char** argv) {
  using namespace epochfs::transport::s3;
  epochfs::test_support::clearS3Environment();
  static epochfs::test_support::RgwFixture fixture;
  std::string why;
  if (!epochfs::test_support::loadRgwFixture(&fixture, &why)) {
    std::printf("SKIPPED: %s\n", why.c_str());
    return kSkip;
  }
  gRgw = &fixture;
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
