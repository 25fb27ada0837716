// S3Client (transport/s3/s3_client.h) against a fake HTTP server on
// 127.0.0.1 (fake_s3_server.h) that misbehaves on purpose, for what a real S3 server (the rgw
// tests, tests/s3/s3_client_test.cc) never does: a 200 that ignored Range, a
// 206 longer than asked, a wrong Content-Range, a looping listing, a slow
// answer. Also what the client sends (Host, Range, If-Match, the signed
// header list, no Authorization when unsigned), that one connection serves
// sequential requests (keep-alive), and the bound on requests in flight.
#include "transport/s3/s3_client.h"

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "tests/unit/transport/fake_s3_server.h"

namespace epochfs::transport::s3 {
namespace {

using Code = cache::Status::Code;
using namespace std::chrono_literals;
using namespace fake_s3;

TEST(S3Client, SendsSignedRangeAndIfMatchOnOneConnection) {
  const std::string obj = object(1000);
  FakeServer server([&](const HttpRequest& r) { return serveRange(obj, r); });
  auto c = client(server);
  const ETag etag = ETag::parse("\"0123456789abcdef0123456789abcdef\"");
  char buf[64];
  for (uint64_t off = 0; off < 1000; off += 100) {
    auto got = c->getRange("dir/a b+c.bin", off, buf, 10, etag);
    ASSERT_TRUE(got.isOk()) << got.status().toString();
    ASSERT_EQ(*got, 10u);
    EXPECT_EQ(std::string(buf, 10), obj.substr(off, 10));
  }
  EXPECT_EQ(server.connections(), 1) << "keep-alive: one connection for sequential requests";
  const auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 10u);
  const HttpRequest& r = reqs[3];
  EXPECT_EQ(r.method, "GET");
  EXPECT_EQ(r.target, "/bkt/dir/a%20b%2Bc.bin");
  EXPECT_EQ(r.headers.at("host"), "127.0.0.1:" + server.url().substr(17));
  EXPECT_EQ(r.headers.at("range"), "bytes=300-309");
  EXPECT_EQ(r.headers.at("if-match"), "\"0123456789abcdef0123456789abcdef\"");
  const std::string auth = r.headers.at("authorization");
  EXPECT_NE(auth.find("Credential=AKIDEXAMPLE/"), std::string::npos) << auth;
  EXPECT_NE(auth.find("SignedHeaders=host;if-match;range;x-amz-content-sha256;x-amz-date,"),
            std::string::npos)
      << auth;
  EXPECT_EQ(auth.find("SECRETEXAMPLE"), std::string::npos);
  EXPECT_EQ(r.headers.count("x-amz-date"), 1u);
  EXPECT_EQ(c->stats().gets, 10u);
  EXPECT_EQ(c->stats().bytesReceived, 100u);
}

TEST(S3Client, PathsAreSentAsSigned) {
  const std::string obj = object(100);
  FakeServer server([&](const HttpRequest& r) { return serveRange(obj, r); });
  auto c = client(server);
  char buf[10];
  for (const std::string key : {"a/./b/../c", "/lead//double", "\xc3\xa9 %+?#"}) {
    ASSERT_TRUE(c->getRange(key, 0, buf, 10, ETag()).isOk()) << key;
  }
  const auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 3u);
  EXPECT_EQ(reqs[0].target, "/bkt/a/./b/../c");  // not normalised (CURLOPT_PATH_AS_IS)
  EXPECT_EQ(reqs[1].target, "/bkt//lead//double");
  EXPECT_EQ(reqs[2].target, "/bkt/%C3%A9%20%25%2B%3F%23");
}

TEST(S3Client, UnsignedRequestsCarryNoAuthorization) {
  const std::string obj = object(100);
  FakeServer server([&](const HttpRequest& r) { return serveRange(obj, r); });
  auto c = client(server, /*sign=*/false);
  char buf[10];
  ASSERT_TRUE(c->getRange("k", 0, buf, 10, ETag()).isOk());
  const auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].headers.count("authorization"), 0u);
  EXPECT_EQ(reqs[0].headers.count("if-match"), 0u);  // no ETag to match
  EXPECT_EQ(reqs[0].headers.at("range"), "bytes=0-9");
}

TEST(S3Client, AServerIgnoringRangeGivesTheSlice) {
  const std::string obj = object(300000);
  FakeServer server([&](const HttpRequest&) { return reply(200, obj); });
  auto c = client(server);
  std::string buf(1000 + 16, '#');
  for (const auto& [off, len, want] :
       std::vector<std::tuple<uint64_t, size_t, size_t>>{{0, 1000, 1000},
                                                         {12345, 1000, 1000},
                                                         {299500, 1000, 500},
                                                         {300000, 1000, 0},
                                                         {500000, 10, 0}}) {
    auto got = c->getRange("k", off, buf.data(), len, ETag());
    ASSERT_TRUE(got.isOk()) << off << ": " << got.status().toString();
    EXPECT_EQ(*got, want) << off;
    EXPECT_EQ(buf.substr(0, want), obj.substr(std::min<uint64_t>(off, obj.size()), want)) << off;
    EXPECT_EQ(buf.substr(1000), std::string(16, '#'));
  }
}

TEST(S3Client, MoreBytesThanAskedIsAnErrorAndNothingPastTheBuffer) {
  FakeServer server([&](const HttpRequest& r) {
    auto [first, last] = rangeOf(r);
    // Claims the range, sends 10 bytes more.
    return reply(206, std::string(last - first + 11, 'x'),
                 "Content-Range: bytes " + std::to_string(first) + "-" + std::to_string(last) +
                     "/100000\r\n");
  });
  auto c = client(server);
  std::string buf(100 + 16, '#');
  auto got = c->getRange("k", 0, buf.data(), 100, ETag());
  ASSERT_FALSE(got.isOk());
  EXPECT_EQ(got.status().code(), Code::kIoError) << got.status().toString();
  EXPECT_NE(got.status().message().find("more than"), std::string::npos);
  EXPECT_EQ(buf.substr(100), std::string(16, '#'));
}

TEST(S3Client, AWrongContentRangeIsAnError) {
  FakeServer server([&](const HttpRequest&) {
    return reply(206, std::string(10, 'x'), "Content-Range: bytes 5-14/100\r\n");
  });
  auto c = client(server);
  char buf[10];
  auto got = c->getRange("k", 0, buf, 10, ETag());
  ASSERT_FALSE(got.isOk());
  EXPECT_EQ(got.status().code(), Code::kIoError) << got.status().toString();
}

TEST(S3Client, ErrorsAndTimeouts) {
  std::atomic<int> mode{0};
  FakeServer server([&](const HttpRequest&) {
    switch (mode.load()) {
      case 0:
        return reply(503,
                     "<Error><Code>SlowDown</Code><Message>Please reduce your request rate."
                     "</Message></Error>");
      case 1:
        return reply(416, "", "Content-Range: bytes */50\r\n");
      default:
        std::this_thread::sleep_for(600ms);
        return reply(200, "late");
    }
  });
  auto c = client(server, true, 32, [](S3ClientConfig& cfg) {
    cfg.requestTimeout = 200ms;
    cfg.retry.maxAttempts = 1;  // no retries here (s3_client_retry_test.cc)
  });
  char buf[10];
  auto got = c->getRange("k", 0, buf, 10, ETag());
  EXPECT_EQ(got.status().code(), Code::kUnavailable) << got.status().toString();
  EXPECT_NE(got.status().message().find("SlowDown"), std::string::npos);
  mode = 1;
  got = c->getRange("k", 50, buf, 10, ETag());
  ASSERT_TRUE(got.isOk()) << got.status().toString();
  EXPECT_EQ(*got, 0u);
  got = c->getRange("k", 10, buf, 10, ETag());  // 416 though the object is longer
  EXPECT_EQ(got.status().code(), Code::kIoError) << got.status().toString();
  mode = 2;
  got = c->getRange("k", 0, buf, 10, ETag());
  EXPECT_EQ(got.status().code(), Code::kUnavailable) << got.status().toString();
  EXPECT_NE(got.status().message().find("GET s3://bkt/k"), std::string::npos);
  EXPECT_EQ(c->stats().errors, 3u);
}

TEST(S3Client, HeadReadsSizeETagAndDate) {
  FakeServer server([&](const HttpRequest& r) {
    EXPECT_EQ(r.method, "HEAD");
    return "HTTP/1.1 200 OK\r\nContent-Length: 12345\r\n"
           "ETag: \"0123456789abcdef0123456789abcdef-3\"\r\n"
           "Last-Modified: Wed, 12 Oct 2009 17:50:00 GMT\r\n\r\n";
  });
  auto c = client(server);
  auto info = c->head("k");
  ASSERT_TRUE(info.isOk()) << info.status().toString();
  EXPECT_EQ(info->size, 12345u);
  EXPECT_EQ(info->etag.parts(), 3u);
  ASSERT_TRUE(info->lastModifiedNs);
  EXPECT_EQ(*info->lastModifiedNs, 1255369800LL * 1000000000);
}

TEST(S3Client, ALoopingListingIsRefused) {
  FakeServer server([&](const HttpRequest&) {
    return reply(200,
                 "<ListBucketResult><IsTruncated>true</IsTruncated>"
                 "<NextContinuationToken>same</NextContinuationToken>"
                 "<Contents><Key>a</Key><Size>1</Size></Contents></ListBucketResult>");
  });
  auto c = client(server);
  auto all = c->listAll("", 2);
  ASSERT_FALSE(all.isOk());
  EXPECT_EQ(all.status().code(), Code::kIoError);
  EXPECT_NE(all.status().message().find("repeated a continuation token"), std::string::npos)
      << all.status().toString();
  EXPECT_EQ(c->stats().lists, 2u);
}

TEST(S3Client, RequestsInFlightAreBounded) {
  const std::string obj = object(100);
  FakeServer server([&](const HttpRequest& r) {
    std::this_thread::sleep_for(20ms);
    return serveRange(obj, r);
  });
  auto c = client(server, true, /*maxInFlight=*/2);
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      char buf[10];
      for (int i = 0; i < 5; ++i) {
        auto got = c->getRange("k", 10 * i, buf, 10, ETag());
        if (!got.isOk() || *got != 10) bad++;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_LE(server.maxConcurrent(), 2);
  EXPECT_LE(server.connections(), 2) << "two handles, each keeping its connection";
  EXPECT_EQ(c->stats().inFlight, 0u);
  EXPECT_EQ(c->stats().gets, 40u);
}

TEST(S3Client, CreateChecksItsConfiguration) {
  S3ClientConfig cfg;
  cfg.endpoint = *S3Endpoint::make("http://127.0.0.1:1", "us-east-1", "bkt", Addressing::kAuto);
  cfg.maxInFlight = 0;
  EXPECT_EQ(S3Client::create(cfg).status().code(), Code::kInvalidArgument);
  cfg.maxInFlight = 1;
  cfg.caFile = "/nonexistent/ca.pem";
  EXPECT_FALSE(S3Client::create(cfg).isOk());
  cfg.caFile.clear();
  EXPECT_EQ(S3Client::create(S3ClientConfig{}).status().code(), Code::kInvalidArgument);
  auto c = S3Client::create(cfg);
  ASSERT_TRUE(c.isOk());
  char buf[1];
  EXPECT_EQ((*c)->getRange("", 0, buf, 1, ETag()).status().code(), Code::kInvalidArgument);
  EXPECT_EQ((*c)->getRange("k", UINT64_MAX, buf, 1, ETag()).status().code(),
            Code::kInvalidArgument);
}

}  // namespace
}  // namespace epochfs::transport::s3
