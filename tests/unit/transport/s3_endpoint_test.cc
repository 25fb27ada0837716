// S3Endpoint (transport/s3/s3_endpoint.h): the endpoint URL parsed, the
// addressing style chosen, bucket names checked, and the URL, Host header and
// signing path built for keys that need encoding. No network.
#include "transport/s3/s3_endpoint.h"

#include <gtest/gtest.h>

#include "transport/s3/sigv4_signer.h"

namespace epochfs::transport::s3 {
namespace {

using Code = cache::Status::Code;

S3Endpoint make(const std::string& url, const std::string& bucket = "data",
                Addressing a = Addressing::kAuto, const std::string& region = "eu-west-1") {
  auto e = S3Endpoint::make(url, region, bucket, a);
  EXPECT_TRUE(e.isOk()) << url << " " << bucket << ": " << e.status().toString();
  return e.isOk() ? *e : S3Endpoint{};
}

// Refused as InvalidArgument with `needle` (and the URL or bucket) in the message.
void expectRefused(const std::string& url, const std::string& bucket, Addressing a,
                   const std::string& needle) {
  auto e = S3Endpoint::make(url, "eu-west-1", bucket, a);
  ASSERT_FALSE(e.isOk()) << url << " " << bucket;
  EXPECT_EQ(e.status().code(), Code::kInvalidArgument) << e.status().toString();
  EXPECT_NE(e.status().message().find(needle), std::string::npos) << e.status().toString();
}

TEST(S3Endpoint, AwsDefaultIsRegionalHttpsVirtualHosted) {
  const S3Endpoint e = make("", "my-bucket");
  EXPECT_EQ(e.scheme, "https");
  EXPECT_EQ(e.host, "s3.eu-west-1.amazonaws.com");
  EXPECT_EQ(e.port, 0);
  EXPECT_EQ(e.addressing, Addressing::kVirtual);
  EXPECT_EQ(e.endpointUrl(), "https://s3.eu-west-1.amazonaws.com");
  EXPECT_EQ(e.hostHeader(), "my-bucket.s3.eu-west-1.amazonaws.com");
  EXPECT_EQ(e.objectPath("dir/a.jpg"), "/dir/a.jpg");
  EXPECT_EQ(e.objectUrl("dir/a.jpg"), "https://my-bucket.s3.eu-west-1.amazonaws.com/dir/a.jpg");
  EXPECT_EQ(e.bucketPath(), "/");
  EXPECT_EQ(e.bucketUrl({{"list-type", "2"}, {"prefix", ""}}),
            "https://my-bucket.s3.eu-west-1.amazonaws.com/?list-type=2&prefix=");
  EXPECT_EQ(make("", "b12", Addressing::kAuto, "cn-north-1").host,
            "s3.cn-north-1.amazonaws.com.cn");
}

TEST(S3Endpoint, IpAndLocalhostArePathStyle) {
  const S3Endpoint e = make("http://127.0.0.1:7480", "data");
  EXPECT_EQ(e.addressing, Addressing::kPath);
  EXPECT_EQ(e.port, 7480);
  EXPECT_EQ(e.hostHeader(), "127.0.0.1:7480");
  EXPECT_EQ(e.objectPath("a/b"), "/data/a/b");
  EXPECT_EQ(e.objectUrl("a/b"), "http://127.0.0.1:7480/data/a/b");
  EXPECT_EQ(e.bucketPath(), "/data");
  EXPECT_EQ(e.bucketUrl({{"list-type", "2"}}), "http://127.0.0.1:7480/data?list-type=2");

  const S3Endpoint v6 = make("http://[::1]:9000/", "data");
  EXPECT_EQ(v6.host, "[::1]");
  EXPECT_EQ(v6.addressing, Addressing::kPath);
  EXPECT_EQ(v6.hostHeader(), "[::1]:9000");
  EXPECT_EQ(v6.objectUrl("k"), "http://[::1]:9000/data/k");

  EXPECT_EQ(make("http://LocalHost:9000", "data").addressing, Addressing::kPath);
  EXPECT_EQ(make("http://localhost:9000", "data").host, "localhost");
  EXPECT_EQ(make("http://minio.internal:9000", "data").addressing, Addressing::kVirtual);
}

TEST(S3Endpoint, BucketsThatCannotBeHostNamesArePathStyle) {
  // Dots over https: a wildcard certificate does not match "a.b.s3...".
  EXPECT_EQ(make("", "my.bucket").addressing, Addressing::kPath);
  EXPECT_EQ(make("", "my.bucket").hostHeader(), "s3.eu-west-1.amazonaws.com");
  EXPECT_EQ(make("", "my.bucket").objectPath("k"), "/my.bucket/k");
  // Over http the name is fine in a host.
  EXPECT_EQ(make("http://s3.example.com", "my.bucket").addressing, Addressing::kVirtual);
  // Legacy names: upper case, underscores.
  EXPECT_EQ(make("", "My_Bucket").addressing, Addressing::kPath);
  EXPECT_EQ(make("", "Upper").addressing, Addressing::kPath);
  EXPECT_EQ(make("", "under_score").addressing, Addressing::kPath);
  // Labels may not start or end with '-'; an IPv4-like name is not a host.
  EXPECT_EQ(make("", "a-.b").addressing, Addressing::kPath);
  EXPECT_EQ(make("http://s3.example.com", "192.168.1.1").addressing, Addressing::kPath);
  EXPECT_TRUE(S3Endpoint::dnsCompatibleBucket("my-bucket.v2"));
  EXPECT_FALSE(S3Endpoint::dnsCompatibleBucket("my-.bucket"));
}

TEST(S3Endpoint, ExplicitAddressingIsKept) {
  EXPECT_EQ(make("", "data", Addressing::kPath).addressing, Addressing::kPath);
  EXPECT_EQ(make("", "data", Addressing::kPath).hostHeader(), "s3.eu-west-1.amazonaws.com");
  EXPECT_EQ(make("https://s3.example.com", "my.bucket", Addressing::kVirtual).hostHeader(),
            "my.bucket.s3.example.com");
  EXPECT_EQ(make("http://localhost:9000", "data", Addressing::kVirtual).hostHeader(),
            "data.localhost:9000");
  expectRefused("http://127.0.0.1:9000", "data", Addressing::kVirtual, "IP address");
  expectRefused("http://[::1]:9000", "data", Addressing::kVirtual, "IP address");
  expectRefused("", "My_Bucket", Addressing::kVirtual, "My_Bucket");
}

TEST(S3Endpoint, DefaultPortsAreLeftOutOfTheHostHeader) {
  EXPECT_EQ(make("https://s3.example.com:443", "data").hostHeader(), "data.s3.example.com");
  EXPECT_EQ(make("https://s3.example.com:443", "data").port, 0);
  EXPECT_EQ(make("http://s3.example.com:80", "data").hostHeader(), "data.s3.example.com");
  EXPECT_EQ(make("http://s3.example.com:443", "data").hostHeader(), "data.s3.example.com:443");
  EXPECT_EQ(make("https://s3.example.com:80", "data").hostHeader(), "data.s3.example.com:80");
  EXPECT_EQ(make("https://s3.example.com:8443", "data").effectivePort(), 8443);
  EXPECT_EQ(make("https://s3.example.com", "data").effectivePort(), 443);
  EXPECT_EQ(make("http://s3.example.com", "data").effectivePort(), 80);
  // Scheme and host are case-insensitive; the URL is normalised.
  EXPECT_EQ(make("HTTPS://S3.Example.COM/", "data").endpointUrl(), "https://s3.example.com");
}

TEST(S3Endpoint, BadUrlsAreRefusedNamingTheUrl) {
  const auto a = Addressing::kAuto;
  expectRefused("ftp://s3.example.com", "data", a, "ftp://s3.example.com");
  expectRefused("ftp://s3.example.com", "data", a, "not http or https");
  expectRefused("s3.example.com", "data", a, "no scheme");
  expectRefused("https://s3.example.com/bucket", "data", a, "a path is not allowed");
  expectRefused("https://s3.example.com/a/", "data", a, "a path is not allowed");
  expectRefused("https://s3.example.com?x=1", "data", a, "query");
  expectRefused("https://s3.example.com#frag", "data", a, "query or fragment");
  expectRefused("https://user:pw@s3.example.com", "data", a, "user info");
  expectRefused("https://", "data", a, "no host");
  expectRefused("https://:9000", "data", a, "no host");
  expectRefused("https://s3.example.com:", "data", a, "empty port");
  expectRefused("https://s3.example.com:0", "data", a, "port");
  expectRefused("https://s3.example.com:65536", "data", a, "port");
  expectRefused("https://s3.example.com:99999999999", "data", a, "port");
  expectRefused("https://s3.example.com:80a", "data", a, "port");
  expectRefused("https://s3 example.com", "data", a, "not a host name");
  expectRefused("https://s3..example.com", "data", a, "not a host name");
  expectRefused("http://[::1", "data", a, "unclosed");
  expectRefused("http://[not:v6]:80", "data", a, "not an IPv6 address");
  expectRefused("http://[::1]x", "data", a, "junk");
  expectRefused("http://[::1]:", "data", a, "empty port");
  EXPECT_EQ(S3Endpoint::make("", "", "data", a).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(S3Endpoint::make("", "eu/west", "data", a).status().code(), Code::kInvalidArgument);
}

TEST(S3Endpoint, BucketNamesFollowS3Rules) {
  const auto a = Addressing::kAuto;
  expectRefused("", "ab", a, "3 to 63");
  expectRefused("", std::string(64, 'a'), a, "3 to 63");
  expectRefused("", "-data", a, "start and end");
  expectRefused("", "data.", a, "start and end");
  expectRefused("", "da..ta", a, "'..'");
  expectRefused("", "da ta", a, "only letters");
  expectRefused("", "da/ta", a, "only letters");
  expectRefused("", "dätä", a, "only letters");
  make("", std::string(63, 'a'));
  make("", "abc");
  make("", "a.b-c");
}

TEST(S3Endpoint, KeysAreEncodedOnTheWireAsSigned) {
  const S3Endpoint e = make("http://127.0.0.1:7480", "data");
  // Space, '+', '%', non-ASCII (UTF-8 bytes), and the reserved characters.
  EXPECT_EQ(e.objectUrl("dir/a b.jpg"), "http://127.0.0.1:7480/data/dir/a%20b.jpg");
  EXPECT_EQ(e.objectUrl("c++/x+y"), "http://127.0.0.1:7480/data/c%2B%2B/x%2By");
  EXPECT_EQ(e.objectUrl("100%/p%41"), "http://127.0.0.1:7480/data/100%25/p%2541");
  EXPECT_EQ(e.objectUrl("caf\xc3\xa9/\xe6\x97\xa5.txt"),
            "http://127.0.0.1:7480/data/caf%C3%A9/%E6%97%A5.txt");
  EXPECT_EQ(e.objectUrl("q?a=1&b#c"), "http://127.0.0.1:7480/data/q%3Fa%3D1%26b%23c");
  EXPECT_EQ(e.objectUrl("keep-._~/x"), "http://127.0.0.1:7480/data/keep-._~/x");
  // No normalisation: "./", "../" and "//" stay as they are.
  EXPECT_EQ(e.objectUrl("a/../b//c/./d"), "http://127.0.0.1:7480/data/a/../b//c/./d");
  // The path the signer gets is the unencoded one; its canonical URI is the
  // URL's path: the bytes signed are the bytes sent.
  const std::string key = "dir/a b+c%d\xc3\xa9";
  EXPECT_EQ(e.objectPath(key), "/data/" + key);
  EXPECT_EQ(e.objectUrl(key), e.scheme + "://" + e.hostHeader() + canonicalUri(e.objectPath(key)));
  EXPECT_EQ(e.objectUrl(key), "http://127.0.0.1:7480/data/" + uriEncode(key, true));

  const S3Endpoint v = make("", "data");
  EXPECT_EQ(v.objectUrl("a b"), "https://data.s3.eu-west-1.amazonaws.com/a%20b");
  // Query values: '/' as %2F, sorted.
  EXPECT_EQ(v.bucketUrl({{"prefix", "a b/"}, {"delimiter", "/"}}),
            "https://data.s3.eu-west-1.amazonaws.com/?delimiter=%2F&prefix=a%20b%2F");
}

TEST(S3Endpoint, SignsWhatItSends) {
  // The signing request built from the endpoint: host and path as the URL.
  const S3Endpoint e = make("http://127.0.0.1:7480", "data");
  SigV4Signer signer(Credentials("AKID", "SECRET"), e.region);
  SigningRequest r;
  r.host = e.hostHeader();
  r.path = e.objectPath("a b/c+d");
  auto canonical = signer.canonicalRequest(r, "20240101T000000Z");
  ASSERT_TRUE(canonical.isOk()) << canonical.status().toString();
  EXPECT_EQ(canonical->substr(0, canonical->find('\n', 4)), "GET\n/data/a%20b/c%2Bd");
  EXPECT_NE(canonical->find("host:127.0.0.1:7480\n"), std::string::npos);
}

TEST(S3Endpoint, AddressingNames) {
  EXPECT_EQ(*parseAddressing("auto"), Addressing::kAuto);
  EXPECT_EQ(*parseAddressing("path"), Addressing::kPath);
  EXPECT_EQ(*parseAddressing("virtual"), Addressing::kVirtual);
  EXPECT_EQ(parseAddressing("vhost").status().code(), Code::kInvalidArgument);
  EXPECT_STREQ(addressingName(Addressing::kVirtual), "virtual");
  EXPECT_EQ(make("", "data").describe("a/b"), "s3://data/a/b");
}

}  // namespace
}  // namespace epochfs::transport::s3
