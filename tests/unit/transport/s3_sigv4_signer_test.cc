#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "transport/s3/sigv4_signer.h"

namespace epochfs::transport::s3 {
namespace {

using std::chrono::system_clock;

system_clock::time_point at(int64_t epochSeconds) {
  return system_clock::time_point(std::chrono::seconds(epochSeconds));
}

std::string headerValue(const std::vector<HttpHeader>& headers, const std::string& name) {
  for (const auto& h : headers) {
    if (h.name == name) return h.value;
  }
  return "<absent>";
}

// The "GET Object" example of the AWS S3 SigV4 documentation
// (sig-v4-header-based-auth.html): its canonical request, the hash of it in
// the string to sign, and its signature.
TEST(S3SigV4Signer, MatchesTheAwsDocumentationExample) {
  SigV4Signer signer(
      Credentials("AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"), "us-east-1");
  SigningRequest req;
  req.host = "examplebucket.s3.amazonaws.com";
  req.path = "/test.txt";
  req.headers = {{"Range", "bytes=0-9"}};
  const auto when = at(1369353600);  // 2013-05-24T00:00:00Z
  ASSERT_EQ(SigV4Signer::amzDate(when), "20130524T000000Z");

  auto canonical = signer.canonicalRequest(req, "20130524T000000Z");
  ASSERT_TRUE(canonical.isOk()) << canonical.status().toString();
  EXPECT_EQ(
      *canonical,
      "GET\n/test.txt\n\nhost:examplebucket.s3.amazonaws.com\nrange:bytes=0-9\n"
      "x-amz-content-sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\n"
      "x-amz-date:20130524T000000Z\n\nhost;range;x-amz-content-sha256;x-amz-date\n"
      "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(signer.stringToSign(*canonical, "20130524T000000Z"),
            "AWS4-HMAC-SHA256\n20130524T000000Z\n20130524/us-east-1/s3/aws4_request\n"
            "7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972");

  auto headers = signer.sign(req, when);
  ASSERT_TRUE(headers.isOk()) << headers.status().toString();
  EXPECT_EQ(headerValue(*headers, "Authorization"),
            "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
            "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
            "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
  EXPECT_EQ(headerValue(*headers, "x-amz-date"), "20130524T000000Z");
  EXPECT_EQ(headerValue(*headers, "x-amz-content-sha256"), kEmptyPayloadSha256);
  EXPECT_EQ(headerValue(*headers, "x-amz-security-token"), "<absent>");
}

// Every case of tests/unit/transport/sigv4_vectors.json (made by botocore's
// S3SigV4Auth; the CTest s3_sigv4_vectors_current keeps the file current):
// the same canonical request, string to sign and headers, byte for byte.
TEST(S3SigV4Signer, MatchesBotocoreVectors) {
  std::ifstream in(EPOCHFS_S3_SIGV4_VECTORS);
  ASSERT_TRUE(in) << "cannot read " << EPOCHFS_S3_SIGV4_VECTORS;
  const auto doc = nlohmann::json::parse(in);
  ASSERT_GE(doc.at("cases").size(), 7u);
  for (const auto& c : doc.at("cases")) {
    SCOPED_TRACE(c.at("name").get<std::string>());
    SigV4Signer signer(Credentials(c.at("access_key"), c.at("secret_key"), c.at("session_token")),
                       c.at("region"));
    SigningRequest req;
    req.method = c.at("method");
    req.host = c.at("host");
    req.path = c.at("path");
    for (const auto& q : c.at("query")) req.query.emplace_back(q.at(0), q.at(1));
    for (const auto& h : c.at("headers")) req.headers.push_back({h.at(0), h.at(1)});
    if (c.at("unsigned_payload").get<bool>()) req.payloadSha256 = kUnsignedPayload;
    const auto when = at(c.at("time_epoch_s").get<int64_t>());
    const std::string date = SigV4Signer::amzDate(when);
    const auto& want = c.at("expected");

    auto canonical = signer.canonicalRequest(req, date);
    ASSERT_TRUE(canonical.isOk()) << canonical.status().toString();
    EXPECT_EQ(*canonical, want.at("canonical_request").get<std::string>());
    EXPECT_EQ(signer.stringToSign(*canonical, date), want.at("string_to_sign").get<std::string>());
    auto headers = signer.sign(req, when);
    ASSERT_TRUE(headers.isOk()) << headers.status().toString();
    EXPECT_EQ(headers->size(), want.at("headers").size());
    for (const auto& [name, value] : want.at("headers").items()) {
      const std::string ours = name == "authorization" ? "Authorization" : name;
      EXPECT_EQ(headerValue(*headers, ours), value.get<std::string>()) << name;
    }
  }
}

TEST(S3SigV4Signer, SignsWhatTheCallerListsTrimmedAndSorted) {
  SigV4Signer signer(Credentials("AKID", "secret"), "us-east-1");
  SigningRequest req;
  req.host = "h";
  req.headers = {{"X-Custom", "  a   b \t c  "}, {"If-Match", "\"e\""}};
  auto canonical = signer.canonicalRequest(req, "20240101T000000Z");
  ASSERT_TRUE(canonical.isOk());
  EXPECT_NE(canonical->find("host:h\nif-match:\"e\"\nx-amz-content-sha256:"), std::string::npos);
  EXPECT_NE(canonical->find("x-amz-date:20240101T000000Z\nx-custom:a b c\n\n"), std::string::npos);
  EXPECT_NE(canonical->find("\nhost;if-match;x-amz-content-sha256;x-amz-date;x-custom\n"),
            std::string::npos);
}

TEST(S3SigV4Signer, RefusesWhatItCannotSign) {
  const auto when = at(1700000000);
  SigningRequest good;
  good.host = "h";
  auto refused = [&](const SigV4Signer& s, const SigningRequest& r) {
    auto res = s.sign(r, when);
    return !res.isOk() && res.status().code() == cache::Status::Code::kInvalidArgument;
  };
  const SigV4Signer ok(Credentials("AKID", "secret"), "us-east-1");
  EXPECT_TRUE(ok.sign(good, when).isOk());
  EXPECT_TRUE(refused(SigV4Signer(Credentials("", "secret"), "us-east-1"), good));
  EXPECT_TRUE(refused(SigV4Signer(Credentials("AKID", ""), "us-east-1"), good));
  EXPECT_TRUE(refused(SigV4Signer(Credentials("AK/ID", "secret"), "us-east-1"), good));
  EXPECT_TRUE(
      refused(SigV4Signer(Credentials("AKID", "secret", "tok\r\nX: y"), "us-east-1"), good));
  EXPECT_TRUE(refused(SigV4Signer(Credentials("AKID", "secret"), ""), good));
  auto with = [&](auto change) {
    SigningRequest r = good;
    change(r);
    return r;
  };
  EXPECT_TRUE(refused(ok, with([](SigningRequest& r) { r.method = "get"; })));
  EXPECT_TRUE(refused(ok, with([](SigningRequest& r) { r.host = ""; })));
  EXPECT_TRUE(refused(ok, with([](SigningRequest& r) { r.host = "a\r\nb"; })));
  EXPECT_TRUE(refused(ok, with([](SigningRequest& r) { r.path = "key"; })));
  EXPECT_TRUE(refused(ok, with([](SigningRequest& r) { r.payloadSha256 = "abc"; })));
  EXPECT_TRUE(refused(ok, with([](SigningRequest& r) { r.headers = {{"Range", "a\nb"}}; })));
  EXPECT_TRUE(refused(ok, with([](SigningRequest& r) { r.headers = {{"Bad Name", "v"}}; })));
  EXPECT_TRUE(refused(ok, with([](SigningRequest& r) { r.headers = {{"X-Amz-Date", "v"}}; })));
  EXPECT_TRUE(refused(ok, with([](SigningRequest& r) { r.headers = {{"authorization", "v"}}; })));
  EXPECT_TRUE(refused(ok, with([](SigningRequest& r) {
                        r.headers = {{"Range", "a"}, {"range", "b"}};
                      })));
}

TEST(S3SigV4Signer, TruncatesTheTimeToTheSecond) {
  const auto t = at(1369353600) + std::chrono::milliseconds(999);
  EXPECT_EQ(SigV4Signer::amzDate(t), "20130524T000000Z");
  EXPECT_EQ(SigV4Signer::amzDate(at(1709296496)), "20240301T123456Z");
}

TEST(S3Credentials, PrintingNeverShowsTheSecretOrToken) {
  Credentials c("AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "SeSsIoNtOkEn");
  std::ostringstream os;
  os << c;
  EXPECT_EQ(os.str(), "access key AKIAIOSFODNN7EXAMPLE (secret hidden, session token hidden)");
  EXPECT_EQ(testing::PrintToString(c).find("wJalr"), std::string::npos);
  EXPECT_EQ(testing::PrintToString(c).find("SeSsIoN"), std::string::npos);
}

TEST(S3UriEncoding, EncodesAsS3Expects) {
  EXPECT_EQ(canonicalUri("/dir/ä b+c%d~e.jpg"), "/dir/%C3%A4%20b%2Bc%25d~e.jpg");
  EXPECT_EQ(canonicalUri("/a*b(c)!'@$&,;=:?#[]"),
            "/a%2Ab%28c%29%21%27%40%24%26%2C%3B%3D%3A%3F%23%5B%5D");
  EXPECT_EQ(canonicalUri("/a//./../b/"), "/a//./../b/");  // S3 does not normalise
  EXPECT_EQ(canonicalUri(""), "/");
  EXPECT_EQ(uriEncode("a/b c", false), "a%2Fb%20c");
  EXPECT_EQ(uriEncode(std::string("\x00\x7f\xff", 3), false), "%00%7F%FF");
}

TEST(S3UriEncoding, CanonicalQuerySortsEncodedNamesThenValues) {
  const QueryParams q = {{"prefix", ""}, {"list-type", "2"}, {"b", "2"},
                         {"b", "1/+="},  {"A", "x"},         {"continuation-token", "a*b"}};
  EXPECT_EQ(canonicalQueryString(q),
            "A=x&b=1%2F%2B%3D&b=2&continuation-token=a%2Ab&list-type=2&prefix=");
  EXPECT_EQ(canonicalQueryString({}), "");
}

TEST(S3UriEncoding, UrlDecodeTakesPlusAsSpace) {
  std::string out;
  ASSERT_TRUE(urlDecode("dir/%C3%A4+b%2Bc%25d~e.jpg", &out));
  EXPECT_EQ(out, "dir/ä b+c%d~e.jpg");
  EXPECT_FALSE(urlDecode("bad%2", &out));
  EXPECT_FALSE(urlDecode("bad%zz", &out));
  EXPECT_FALSE(urlDecode("%", &out));
}

}  // namespace
}  // namespace epochfs::transport::s3
