#include "fusefs/daemon/s3_mount_options.h"

#include <cstdlib>
#include <filesystem>

namespace epochfs::fusefs {

using cache::Status;

namespace {

constexpr std::string_view kScheme = "s3://";

}  // namespace

void addS3Options(CLI::App& app, S3CommandLine& into) {
  S3MountOptions& s = into.options;
  auto mark = [&into](auto&&...) { into.anyGiven = true; };
  app.add_option("--s3-endpoint", s.endpoint,
                 "S3 endpoint URL (default: https://s3.REGION.amazonaws.com)")
      ->each(mark);
  app.add_option("--s3-region", s.region,
                 "S3 region (default: AWS_REGION, AWS_DEFAULT_REGION, else us-east-1)")
      ->each(mark);
  app.add_option("--s3-addressing", s.addressing,
                 "auto|path|virtual (default auto: path style for an IP address or localhost)")
      ->check(CLI::IsMember({"auto", "path", "virtual"}))
      ->each(mark);
  app.add_flag("--s3-no-sign-request", s.noSign, "Send unsigned requests (a public bucket)")
      ->each(mark);
  app.add_option("--s3-credentials-file", s.credentialsFile,
                 "AWS credentials file (INI, mode 0600) instead of the AWS chain")
      ->each(mark);
  app.add_option("--s3-profile", s.profile,
                 "Profile in the credentials file (default: AWS_PROFILE)")
      ->each(mark);
  app.add_option("--s3-ca-file", s.caFile, "CA bundle for HTTPS (default: the system's)")
      ->each(mark);
  app.add_option("--s3-max-requests", s.maxRequests, "S3 requests in flight (default 32)")
      ->check(CLI::Range(1, 1024))
      ->each(mark);
  app.add_option("--s3-read-deadline", s.readDeadlineSeconds,
                 "Seconds one S3 request may take, retries included, before the read fails "
                 "with EIO (default 30)")
      ->check(CLI::Range(1, 3600))
      ->each(mark);
}

Status finishS3Options(MountOptions& o, S3CommandLine& given) {
  if (o.source.rfind(kScheme, 0) != 0) {
    if (given.anyGiven) return Status::invalidArgument("--s3-* options need an s3:// source");
    return Status::ok();
  }
  S3MountOptions s = given.options;
  const std::string rest = o.source.substr(kScheme.size());
  const size_t slash = rest.find('/');
  s.bucket = rest.substr(0, slash);
  if (s.bucket.empty()) return Status::invalidArgument("source " + o.source + " names no bucket");
  // The bucket's naming rules are checked with the endpoint's
  // (transport/s3/s3_endpoint.h), when the daemon starts.
  if (slash != std::string::npos) s.prefix = rest.substr(slash + 1);
  if (!s.prefix.empty() && s.prefix.back() != '/') s.prefix += '/';
  if (s.prefix.find("//") != std::string::npos || (!s.prefix.empty() && s.prefix[0] == '/')) {
    return Status::invalidArgument("source " + o.source + ": the prefix has an empty component");
  }
  if (s.noSign && !s.credentialsFile.empty()) {
    return Status::invalidArgument("--s3-no-sign-request and --s3-credentials-file conflict");
  }
  o.source = std::string(kScheme) + s.bucket + "/" + s.prefix;
  o.s3 = std::move(s);
  return Status::ok();
}

void resolveS3Options(S3MountOptions& s) {
  for (const char* var : {"AWS_REGION", "AWS_DEFAULT_REGION"}) {
    const char* v = std::getenv(var);
    if (s.region.empty() && v != nullptr && *v != '\0') s.region = v;
  }
  if (s.region.empty()) s.region = "us-east-1";
  for (std::string* p : {&s.credentialsFile, &s.caFile}) {
    if (!p->empty()) *p = std::filesystem::absolute(*p).string();
  }
}

}  // namespace epochfs::fusefs
