// The s3:// source's command line (fusefs/daemon/s3_mount_options.h).
#include <gtest/gtest.h>

#include "fusefs/daemon/mount_options.h"

namespace epochfs::fusefs {
namespace {

cache::Result<MountOptions> parse(std::vector<std::string> args) {
  args.insert(args.begin(), "epochfs");
  bool exitNow = false;
  auto cl = parseMountCommandLine(args, uint64_t{8} << 30, &exitNow);
  if (!cl.isOk()) return cl.status();
  return std::move(cl->options);
}

TEST(S3MountOptions, BucketAndPrefix) {
  auto o = parse({"s3://my-bucket/train/images", "/mnt", "--s3-endpoint", "http://127.0.0.1:9"});
  ASSERT_TRUE(o.isOk()) << o.status().message();
  ASSERT_TRUE(o->s3.has_value());
  EXPECT_EQ(o->s3->bucket, "my-bucket");
  EXPECT_EQ(o->s3->prefix, "train/images/");
  EXPECT_EQ(o->s3->endpoint, "http://127.0.0.1:9");
  EXPECT_EQ(o->source, "s3://my-bucket/train/images/");
  EXPECT_EQ(o->s3->addressing, "auto");
}

TEST(S3MountOptions, WholeBucketAndDashO) {
  auto o = parse({"s3://data.set", "/mnt", "-o", "s3_region=eu-west-1,s3_no_sign_request,ro"});
  ASSERT_TRUE(o.isOk()) << o.status().message();
  EXPECT_EQ(o->s3->prefix, "");
  EXPECT_EQ(o->s3->region, "eu-west-1");
  EXPECT_TRUE(o->s3->noSign);
  EXPECT_EQ(o->source, "s3://data.set/");
}

TEST(S3MountOptions, ReadDeadline) {
  auto o = parse({"s3://b", "/mnt"});
  ASSERT_TRUE(o.isOk()) << o.status().message();
  EXPECT_EQ(o->s3->readDeadlineSeconds, 30u);
  o = parse({"s3://b", "/mnt", "--s3-read-deadline", "3"});
  ASSERT_TRUE(o.isOk()) << o.status().message();
  EXPECT_EQ(o->s3->readDeadlineSeconds, 3u);
  o = parse({"s3://b", "/mnt", "-o", "s3_read_deadline=1"});
  ASSERT_TRUE(o.isOk()) << o.status().message();
  EXPECT_EQ(o->s3->readDeadlineSeconds, 1u);
  for (const char* bad : {"0", "-1", "1.5", "soon", "3601"}) {
    o = parse({"s3://b", "/mnt", "--s3-read-deadline", bad});
    ASSERT_FALSE(o.isOk()) << bad;
    EXPECT_NE(o.status().message().find("s3-read-deadline"), std::string::npos)
        << o.status().message();
    EXPECT_EQ(o.status().message().find('\n'), std::string::npos) << o.status().message();
  }
}

TEST(S3MountOptions, BadInputIsAClearError) {
  for (const auto& [args, says] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"s3://", "/mnt"}, "names no bucket"},
           {{"s3:///x", "/mnt"}, "names no bucket"},
           {{"s3://bucket/a//b", "/mnt"}, "empty component"},
           {{"/data", "/mnt", "--s3-region", "x"}, "need an s3:// source"},
           {{"/data", "/mnt", "--s3-read-deadline", "5"}, "need an s3:// source"},
           {{"s3://bucket", "/mnt", "--revalidate", "5"}, "--revalidate"},
           {{"s3://bucket", "/mnt", "--s3-addressing", "dns"}, "s3-addressing"},
           {{"s3://bucket", "/mnt", "--s3-no-sign-request", "--s3-credentials-file", "f"},
            "conflict"}}) {
    auto o = parse(args);
    ASSERT_FALSE(o.isOk()) << args[0];
    EXPECT_NE(o.status().message().find(says), std::string::npos) << o.status().message();
  }
}

}  // namespace
}  // namespace epochfs::fusefs
