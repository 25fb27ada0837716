#include <gtest/gtest.h>

#include "transport/s3/list_objects_parser.h"
#include "transport/s3/list_objects_request.h"
#include "transport/s3/uri_encoding.h"

namespace epochfs::transport::s3 {
namespace {

using Code = cache::Status::Code;

std::string page(const std::string& inner) {
  return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
         "<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">" +
         inner + "</ListBucketResult>";
}

std::string contents(const std::string& key, const std::string& size,
                     const std::string& extra = "") {
  return "<Contents><Key>" + key + "</Key><Size>" + size + "</Size>" + extra + "</Contents>";
}

// The problem is named: code, and a message holding `needle`.
void expectError(const cache::Result<ListPage>& r, Code code, const std::string& needle) {
  ASSERT_FALSE(r.isOk());
  EXPECT_EQ(r.status().code(), code) << r.status().toString();
  EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().toString();
}

// A truncated first page as AWS sends it (encoding-type=url asked for).
TEST(S3ListObjectsParser, ParsesATruncatedPage) {
  const std::string body = page(
      "<Name>examplebucket</Name><Prefix>train%2F</Prefix>"
      "<NextContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=</NextContinuationToken>"
      "<KeyCount>2</KeyCount><MaxKeys>2</MaxKeys><EncodingType>url</EncodingType>"
      "<IsTruncated>true</IsTruncated>"
      "<Contents><Key>train%2Fcat%2F001.jpg</Key>"
      "<LastModified>2009-10-12T17:50:30.000Z</LastModified>"
      "<ETag>&quot;fba9dede5f27731c9771645a39863328&quot;</ETag><Size>434234</Size>"
      "<StorageClass>STANDARD</StorageClass></Contents>"
      "<Contents><Key>train%2Fcat%2F002.jpg</Key>"
      "<LastModified>2024-03-01T12:34:56Z</LastModified>"
      "<ETag>\"0123456789abcdef0123456789abcdef-12\"</ETag><Size>0</Size>"
      "<Owner><ID>abc</ID><DisplayName>x</DisplayName></Owner>"
      "<ChecksumAlgorithm>CRC32</ChecksumAlgorithm></Contents>");
  auto r = parseListObjectsV2(body);
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  EXPECT_TRUE(r->isTruncated);
  EXPECT_EQ(r->nextContinuationToken, "1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=");
  EXPECT_EQ(r->keyCount, 2u);
  ASSERT_EQ(r->objects.size(), 2u);
  EXPECT_EQ(r->objects[0].key, "train/cat/001.jpg");
  EXPECT_EQ(r->objects[0].size, 434234u);
  EXPECT_EQ(r->objects[0].lastModifiedNs, 1255369830'000'000'000LL);
  EXPECT_EQ(r->objects[0].etag.kind(), ETag::Kind::kMd5);
  EXPECT_EQ(r->objects[0].etag.parts(), 0u);
  EXPECT_EQ(r->objects[0].etag.headerValue(), "\"fba9dede5f27731c9771645a39863328\"");
  EXPECT_EQ(r->objects[1].key, "train/cat/002.jpg");
  EXPECT_EQ(r->objects[1].size, 0u);
  EXPECT_EQ(r->objects[1].lastModifiedNs, 1709296496'000'000'000LL);
  EXPECT_EQ(r->objects[1].etag.parts(), 12u);
  EXPECT_EQ(r->objects[1].etag.headerValue(), "\"0123456789abcdef0123456789abcdef-12\"");
  EXPECT_TRUE(r->commonPrefixes.empty());
}

TEST(S3ListObjectsParser, ParsesCommonPrefixesOfTheLastPage) {
  auto r =
      parseListObjectsV2(page("<Prefix></Prefix><Delimiter>/</Delimiter><KeyCount>3</KeyCount>"
                              "<IsTruncated>false</IsTruncated>" +
                              contents("README", "12") +
                              "<CommonPrefixes><Prefix>train/</Prefix></CommonPrefixes>"
                              "<CommonPrefixes><Prefix>val/</Prefix></CommonPrefixes>"));
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  EXPECT_FALSE(r->isTruncated);
  EXPECT_TRUE(r->nextContinuationToken.empty());
  ASSERT_EQ(r->objects.size(), 1u);
  EXPECT_EQ(r->objects[0].key, "README");
  EXPECT_EQ(r->objects[0].etag.kind(), ETag::Kind::kNone);
  EXPECT_FALSE(r->objects[0].lastModifiedNs.has_value());
  EXPECT_EQ(r->commonPrefixes, (std::vector<std::string>{"train/", "val/"}));
}

// Without EncodingType=url the keys are taken as they are, entities decoded
// by expat; with it, percent-decoded too ('+' is a space there).
TEST(S3ListObjectsParser, DecodesEntitiesAndPercentEncoding) {
  auto plain = parseListObjectsV2(
      page("<IsTruncated>false</IsTruncated>" +
           contents("a&amp;b &lt;c&gt; &quot;d&quot; &apos;e&apos; &#xE4;&#228;+%41", "1") +
           contents("日本/\xC3\xA4.jpg", "2")));
  ASSERT_TRUE(plain.isOk()) << plain.status().toString();
  EXPECT_EQ(plain->objects[0].key, "a&b <c> \"d\" 'e' ää+%41");
  EXPECT_EQ(plain->objects[1].key, "日本/ä.jpg");

  auto encoded = parseListObjectsV2(
      page("<EncodingType>url</EncodingType><IsTruncated>false</IsTruncated>" +
           contents("dir%2F%C3%A4+b%2Bc%25d~e.jpg", "1") + contents("ctl%01char", "1") +
           "<CommonPrefixes><Prefix>a+b%2F</Prefix></CommonPrefixes>"));
  ASSERT_TRUE(encoded.isOk()) << encoded.status().toString();
  EXPECT_EQ(encoded->objects[0].key, "dir/ä b+c%d~e.jpg");
  EXPECT_EQ(encoded->objects[1].key,
            "ctl\x01"
            "char");
  EXPECT_EQ(encoded->commonPrefixes, (std::vector<std::string>{"a b/"}));

  expectError(parseListObjectsV2(page("<EncodingType>url</EncodingType>" + contents("a%zz", "1"))),
              Code::kIoError, "percent-encoding");
  expectError(parseListObjectsV2(page("<EncodingType>base64</EncodingType>")), Code::kIoError,
              "EncodingType");
}

TEST(S3ListObjectsParser, AcceptsAPrefixedNamespaceAndAnEmptyPage) {
  auto r = parseListObjectsV2(
      "<s3:ListBucketResult xmlns:s3=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
      "<s3:IsTruncated>false</s3:IsTruncated><s3:KeyCount>1</s3:KeyCount>"
      "<s3:Contents><s3:Key>k</s3:Key><s3:Size>5</s3:Size></s3:Contents></s3:ListBucketResult>");
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  ASSERT_EQ(r->objects.size(), 1u);
  EXPECT_EQ(r->objects[0].size, 5u);

  auto empty = parseListObjectsV2(page("<KeyCount>0</KeyCount><IsTruncated>false</IsTruncated>"));
  ASSERT_TRUE(empty.isOk());
  EXPECT_TRUE(empty->objects.empty());
  EXPECT_EQ(empty->keyCount, 0u);
}

TEST(S3ListObjectsParser, SizesUpTo63Bits) {
  auto r = parseListObjectsV2(
      page(contents("big", "9223372036854775807") + contents("5TiB", "5497558138880")));
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  EXPECT_EQ(r->objects[0].size, 9223372036854775807ULL);
  EXPECT_EQ(r->objects[1].size, 5497558138880ULL);
  expectError(parseListObjectsV2(page(contents("big", "9223372036854775808"))), Code::kIoError,
              "Size '9223372036854775808' is out of range");
  expectError(parseListObjectsV2(page(contents("big", "99999999999999999999999999"))),
              Code::kIoError, "out of range");
  expectError(parseListObjectsV2(page(contents("neg", "-1"))), Code::kIoError,
              "object 'neg': Size '-1' is not a non-negative integer");
  expectError(parseListObjectsV2(page(contents("f", "1.5"))), Code::kIoError, "not a non-negative");
  expectError(parseListObjectsV2(page(contents("sp", " 1"))), Code::kIoError, "not a non-negative");
  expectError(parseListObjectsV2(page(contents("e", ""))), Code::kIoError, "not a non-negative");
}

TEST(S3ListObjectsParser, NamesMissingOrDoubledFields) {
  expectError(parseListObjectsV2(page("<Contents><Size>1</Size></Contents>")), Code::kIoError,
              "without <Key>");
  expectError(parseListObjectsV2(page("<Contents><Key>k</Key></Contents>")), Code::kIoError,
              "object 'k' has no <Size>");
  expectError(parseListObjectsV2(page(contents("", "1"))), Code::kIoError, "empty <Key>");
  expectError(
      parseListObjectsV2(page("<Contents><Key>a</Key><Key>b</Key><Size>1</Size></Contents>")),
      Code::kIoError, "two <Key>s");
  expectError(parseListObjectsV2(page("<IsTruncated>true</IsTruncated>" + contents("k", "1"))),
              Code::kIoError, "no <NextContinuationToken>");
  expectError(parseListObjectsV2(page("<IsTruncated>yes</IsTruncated>")), Code::kIoError,
              "IsTruncated 'yes'");
  expectError(parseListObjectsV2(page("<KeyCount>-3</KeyCount>")), Code::kIoError, "KeyCount");
  expectError(
      parseListObjectsV2(page(contents("k", "1", "<LastModified>yesterday</LastModified>"))),
      Code::kIoError, "LastModified 'yesterday'");
  expectError(parseListObjectsV2(
                  page(contents("k", "1", "<LastModified>2024-02-30T00:00:00Z</LastModified>"))),
              Code::kIoError, "LastModified");
  // Found by fuzz_list_objects: a year past 2262 overflowed int64 nanoseconds.
  expectError(parseListObjectsV2(
                  page(contents("k", "1", "<LastModified>6586-01-01T00:00:00Z</LastModified>"))),
              Code::kIoError, "LastModified");
}

TEST(S3ListObjectsParser, TurnsAnErrorDocumentIntoItsStatus) {
  const std::string doc =
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>NoSuchBucket</Code>"
      "<Message>The specified bucket does not exist</Message><BucketName>nope</BucketName>"
      "<Resource>/nope</Resource><RequestId>4442587FB7D0A2F9</RequestId></Error>";
  expectError(parseListObjectsV2(doc), Code::kNotFound,
              "s3: NoSuchBucket: The specified bucket does not exist (resource /nope) "
              "[request id 4442587FB7D0A2F9]");
  expectError(parseListObjectsV2("<Error><Code>SignatureDoesNotMatch</Code><Message>The request "
                                 "signature we calculated does not match</Message></Error>"),
              Code::kPermissionDenied, "SignatureDoesNotMatch");
  expectError(parseListObjectsV2("<Error><Code>AccessDenied</Code></Error>"),
              Code::kPermissionDenied, "AccessDenied");
  expectError(parseListObjectsV2("<Error><Code>SlowDown</Code></Error>"), Code::kUnavailable,
              "SlowDown");
  expectError(parseListObjectsV2("<Error><Code>Weird</Code></Error>"), Code::kIoError, "Weird");
  expectError(parseListObjectsV2("<Error><Message>no code</Message></Error>"), Code::kIoError,
              "without <Code>");
}

TEST(S3ListObjectsParser, RefusesMalformedOrHostileXml) {
  expectError(parseListObjectsV2(""), Code::kIoError, "not well-formed XML");
  expectError(parseListObjectsV2(page(contents("k", "1")).substr(0, 120)), Code::kIoError,
              "not well-formed XML");
  expectError(parseListObjectsV2("<ListBucketResult><Contents></ListBucketResult>"), Code::kIoError,
              "line 1");
  expectError(parseListObjectsV2(page(contents("a&bogus;b", "1"))), Code::kIoError,
              "not well-formed");
  expectError(parseListObjectsV2("<ListAllMyBucketsResult/>"), Code::kIoError,
              "root element is <ListAllMyBucketsResult>");
  expectError(parseListObjectsV2("<?xml version=\"1.0\"?><!DOCTYPE lolz [<!ENTITY lol \"lol\">"
                                 "<!ENTITY lol2 \"&lol;&lol;&lol;&lol;\">]>"
                                 "<ListBucketResult><Contents><Key>&lol2;</Key><Size>1</Size>"
                                 "</Contents></ListBucketResult>"),
              Code::kIoError, "DOCTYPE");
  std::string deep = "<ListBucketResult>";
  for (int i = 0; i < 40; ++i) deep += "<a>";
  expectError(parseListObjectsV2(deep), Code::kIoError, "deeper than 16");
  expectError(parseListObjectsV2(page(contents(std::string(70000, 'k'), "1"))), Code::kIoError,
              "64 KiB");
}

TEST(S3ETag, KeepsS3FormsCompactAndExact) {
  const ETag single = ETag::parse("\"fba9dede5f27731c9771645a39863328\"");
  EXPECT_EQ(single.kind(), ETag::Kind::kMd5);
  EXPECT_EQ(single.bytes()[0], 0xfb);
  EXPECT_EQ(single.bytes()[15], 0x28);
  EXPECT_EQ(single.parts(), 0u);
  const ETag multi = ETag::parse("\"fba9dede5f27731c9771645a39863328-1\"");
  EXPECT_EQ(multi.kind(), ETag::Kind::kMd5);
  EXPECT_EQ(multi.parts(), 1u);
  EXPECT_EQ(multi.headerValue(), "\"fba9dede5f27731c9771645a39863328-1\"");
  EXPECT_NE(single, multi);
  EXPECT_NE(single.identityHash(), multi.identityHash());
  EXPECT_LE(sizeof(ETag), 24u);

  // Anything else is hashed: it still tells versions apart, but has no If-Match value.
  for (const char* odd :
       {"fba9dede5f27731c9771645a39863328", "\"FBA9DEDE5F27731C9771645A39863328\"",
        "W/\"fba9dede5f27731c9771645a39863328\"", "\"fba9dede5f27731c9771645a39863328-0\"",
        "\"fba9dede5f27731c9771645a39863328-01\"", "\"fba9dede5f27731c9771645a39863328-\"",
        "\"fba9dede5f27731c9771645a39863328-99999999999\"", "\"abc\"", ""}) {
    SCOPED_TRACE(odd);
    const ETag e = ETag::parse(odd);
    EXPECT_EQ(e.kind(), ETag::Kind::kHashed);
    EXPECT_FALSE(e.headerValue().has_value());
    EXPECT_NE(e.identityHash(), single.identityHash());
  }
  EXPECT_EQ(ETag::parse("\"abc\""), ETag::parse("\"abc\""));
  EXPECT_NE(ETag::parse("\"abc\"").identityHash(), ETag::parse("\"abd\"").identityHash());
  EXPECT_EQ(ETag().identityHash(), 0u);
}

TEST(S3ListObjectsRequest, BuildsTheQueryTheSignerSigns) {
  ListObjectsRequest req;
  req.delimiter = "/";
  req.continuationToken = "1/AbC+dEf/gh==x*y";
  req.maxKeys = 1000;
  EXPECT_EQ(canonicalQueryString(listObjectsQuery(req)),
            "continuation-token=1%2FAbC%2BdEf%2Fgh%3D%3Dx%2Ay&delimiter=%2F&encoding-type=url&"
            "list-type=2&max-keys=1000&prefix=");
  EXPECT_EQ(canonicalQueryString(listObjectsQuery(ListObjectsRequest{"train/ä b/", {}, {}, 0})),
            "encoding-type=url&list-type=2&prefix=train%2F%C3%A4%20b%2F");
}

}  // namespace
}  // namespace epochfs::transport::s3
