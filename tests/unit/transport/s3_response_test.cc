// S3Response (transport/s3/s3_response.h): the callbacks S3Client hands
// libcurl, fed by hand — a ranged body into the caller's buffer and never
// past it, a 200 that ignored Range cut to the slice, headers, and the
// mapping of error responses to a Status. No network.
#include "transport/s3/s3_response.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace epochfs::transport::s3 {
namespace {

using Code = cache::Status::Code;

void headers(S3Response& r, const std::vector<std::string>& lines) {
  for (std::string line : lines) {
    line += "\r\n";
    ASSERT_EQ(S3Response::onHeader(line.data(), 1, line.size(), &r), line.size());
  }
}

// Feeds `body` in pieces of `piece` bytes; the count onBody accepted in all,
// stopping at the first piece it refused.
size_t feed(S3Response& r, std::string body, size_t piece) {
  size_t accepted = 0;
  for (size_t at = 0; at < body.size(); at += piece) {
    const size_t n = std::min(piece, body.size() - at);
    const size_t took = S3Response::onBody(body.data() + at, 1, n, &r);
    accepted += took;
    if (took != n) break;
  }
  return accepted;
}

std::string object(size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) s.push_back(static_cast<char>('a' + i % 26));
  return s;
}

TEST(S3Response, PartialContentGoesIntoTheBuffer) {
  std::string buf(10, '.');
  S3Response r({BodySink::Kind::kBuffer, buf.data(), 8, 100, 0});
  headers(r, {"HTTP/1.1 206 Partial Content", "Content-Range: bytes 100-107/200",
              "content-length: 8", "ETag: \"abc\""});
  EXPECT_EQ(r.status(), 206);
  EXPECT_EQ(r.contentRange(), "bytes 100-107/200");
  EXPECT_EQ(*r.contentLength(), 8u);
  EXPECT_EQ(r.etag(), "\"abc\"");
  EXPECT_EQ(feed(r, "01234567", 3), 8u);
  EXPECT_EQ(r.written(), 8u);
  EXPECT_EQ(buf, "01234567..");
  EXPECT_FALSE(r.overflowed());
}

TEST(S3Response, MoreThanAskedStopsWithoutWritingPastTheBuffer) {
  std::string buf(10, '.');
  S3Response r({BodySink::Kind::kBuffer, buf.data(), 4, 0, 0});
  headers(r, {"HTTP/1.1 206 Partial Content", "Content-Range: bytes 0-7/8"});
  EXPECT_EQ(feed(r, "01234567", 3), 3u);  // the second piece would cross the end
  EXPECT_TRUE(r.overflowed());
  EXPECT_EQ(buf, "012.......");
}

TEST(S3Response, AWholeObjectForARangeIsCutToTheSlice) {
  const std::string obj = object(100);
  for (size_t piece : {1u, 7u, 64u, 1000u}) {
    std::string buf(20, '.');
    S3Response r({BodySink::Kind::kBuffer, buf.data(), 10, 30, 0});
    headers(r, {"HTTP/1.1 200 OK", "Content-Length: 100"});
    const size_t accepted = feed(r, obj, piece);
    // Stopped once past the slice, unless the body ended in the same piece.
    if (piece < 100) {
      EXPECT_LT(accepted, 100u) << piece;
    }
    EXPECT_TRUE(r.sliceComplete()) << piece;
    EXPECT_EQ(r.written(), 10u) << piece;
    EXPECT_EQ(buf.substr(0, 10), obj.substr(30, 10)) << piece;
    EXPECT_EQ(buf.substr(10), std::string(10, '.')) << piece;
  }
}

TEST(S3Response, AWholeObjectEndingInTheSliceIsShort) {
  const std::string obj = object(35);
  std::string buf(10, '.');
  S3Response r({BodySink::Kind::kBuffer, buf.data(), 10, 30, 0});
  headers(r, {"HTTP/1.1 200 OK", "Content-Length: 35"});
  EXPECT_EQ(feed(r, obj, 4), 35u);  // read to its natural end
  EXPECT_EQ(r.written(), 5u);
  EXPECT_EQ(buf, obj.substr(30) + ".....");
  // Ending exactly at the slice's end: accepted whole (the connection stays).
  std::string buf2(5, '.');
  S3Response exact({BodySink::Kind::kBuffer, buf2.data(), 5, 30, 0});
  headers(exact, {"HTTP/1.1 200 OK", "Content-Length: 35"});
  EXPECT_EQ(feed(exact, obj, 4), 35u);
  EXPECT_EQ(buf2, obj.substr(30));
}

TEST(S3Response, AWholeObjectBeforeTheOffsetStopsAtOnce) {
  std::string buf(4, '.');
  S3Response r({BodySink::Kind::kBuffer, buf.data(), 4, 50, 0});
  headers(r, {"HTTP/1.1 200 OK", "Content-Length: 20"});
  EXPECT_EQ(feed(r, object(20), 5), 0u);
  EXPECT_TRUE(r.sliceComplete());
  EXPECT_EQ(r.written(), 0u);
  EXPECT_EQ(buf, "....");
}

TEST(S3Response, AnInterimResponseIsForgotten) {
  S3Response r({BodySink::Kind::kDiscard});
  headers(r, {"HTTP/1.1 100 Continue", "ETag: \"old\"", "", "HTTP/1.1 200 OK", "Content-Length: 5",
              "Last-Modified: Wed, 12 Oct 2009 17:50:00 GMT"});
  EXPECT_EQ(r.status(), 200);
  EXPECT_EQ(r.etag(), "");
  EXPECT_EQ(r.lastModified(), "Wed, 12 Oct 2009 17:50:00 GMT");
}

TEST(S3Response, ListingBodiesAreBounded) {
  S3Response r({BodySink::Kind::kString, nullptr, 0, 0, 10});
  headers(r, {"HTTP/1.1 200 OK"});
  EXPECT_EQ(feed(r, "0123456789", 4), 10u);
  EXPECT_EQ(r.body(), "0123456789");
  EXPECT_EQ(S3Response::onBody(const_cast<char*>("x"), 1, 1, &r), 0u);
  EXPECT_TRUE(r.tooLarge());
}

TEST(S3Response, ContentRangeParses) {
  auto r = ContentRange::parse("bytes 0-9/100");
  ASSERT_TRUE(r);
  EXPECT_EQ(*r->first, 0u);
  EXPECT_EQ(*r->last, 9u);
  EXPECT_EQ(*r->total, 100u);
  r = ContentRange::parse("bytes */42");
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->first);
  EXPECT_EQ(*r->total, 42u);
  r = ContentRange::parse("bytes 5-9/*");
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->total);
  for (const char* bad : {"", "bytes", "bytes 9-5/100", "bytes 0-100/100", "bytes */*",
                          "items 0-1/2", "bytes 0-/2", "bytes -1/2", "bytes 0-1"}) {
    EXPECT_FALSE(ContentRange::parse(bad)) << bad;
  }
}

std::string errorDoc(const std::string& code, const std::string& message) {
  return "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>" + code + "</Code><Message>" +
         message + "</Message><Resource>/b/k</Resource><RequestId>tx1</RequestId></Error>";
}

cache::Status errorOf(const std::string& statusLine, const std::string& body,
                      std::vector<std::string> more = {}) {
  S3Response r({BodySink::Kind::kBuffer, nullptr, 0, 0, 0});
  more.insert(more.begin(), statusLine);
  headers(r, more);
  EXPECT_EQ(feed(r, body, 16), body.size());  // an error's body never goes to the buffer
  return r.errorStatus("GET s3://b/k", "http://127.0.0.1:7480", "us-east-1");
}

TEST(S3Response, ErrorsMapByStatusAndS3Code) {
  auto s = errorOf("HTTP/1.1 404 Not Found", errorDoc("NoSuchKey", "The key does not exist."));
  EXPECT_EQ(s.code(), Code::kNotFound);
  EXPECT_NE(s.message().find("GET s3://b/k"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("http://127.0.0.1:7480"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("HTTP 404"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("NoSuchKey"), std::string::npos) << s.message();

  s = errorOf("HTTP/1.1 404 Not Found", errorDoc("NoSuchBucket", "x"));
  EXPECT_EQ(s.code(), Code::kNotFound);
  EXPECT_NE(s.message().find("NoSuchBucket"), std::string::npos) << s.message();

  s = errorOf("HTTP/1.1 404 Not Found", "");  // a HEAD: no body
  EXPECT_EQ(s.code(), Code::kNotFound);
  EXPECT_NE(s.message().find("no such key or bucket"), std::string::npos) << s.message();

  EXPECT_EQ(errorOf("HTTP/1.1 403 Forbidden", errorDoc("SignatureDoesNotMatch", "x")).code(),
            Code::kPermissionDenied);
  EXPECT_EQ(errorOf("HTTP/1.1 403 Forbidden", "").code(), Code::kPermissionDenied);
  s = errorOf("HTTP/1.1 412 Precondition Failed", errorDoc("PreconditionFailed", "x"));
  EXPECT_EQ(s.code(), Code::kStale);
  EXPECT_NE(s.message().find("changed since it was listed"), std::string::npos) << s.message();
  EXPECT_EQ(errorOf("HTTP/1.1 503 Slow Down", errorDoc("SlowDown", "x")).code(),
            Code::kUnavailable);
  EXPECT_EQ(errorOf("HTTP/1.1 500 Internal Server Error", "").code(), Code::kUnavailable);
  EXPECT_EQ(errorOf("HTTP/1.1 502 Bad Gateway", "<html>proxy</html>").code(), Code::kUnavailable);
  // Others by S3's code, else IoError.
  EXPECT_EQ(errorOf("HTTP/1.1 400 Bad Request", errorDoc("ExpiredToken", "x")).code(),
            Code::kPermissionDenied);
  EXPECT_EQ(errorOf("HTTP/1.1 400 Bad Request", errorDoc("InvalidArgument", "x")).code(),
            Code::kIoError);
  EXPECT_EQ(errorOf("HTTP/1.1 409 Conflict", "not xml").code(), Code::kIoError);
  // A wrong region says where the bucket is.
  s = errorOf("HTTP/1.1 301 Moved Permanently", errorDoc("PermanentRedirect", "x"),
              {"x-amz-bucket-region: eu-central-1"});
  EXPECT_EQ(s.code(), Code::kIoError);
  EXPECT_NE(s.message().find("the bucket is in region eu-central-1"), std::string::npos)
      << s.message();
}

}  // namespace
}  // namespace epochfs::transport::s3
