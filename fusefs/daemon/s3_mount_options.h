// The command line of an object-store source: `epochfs s3://BUCKET[/PREFIX]
// MOUNTPOINT --s3-...` (docs/CONFIGURATION.md "Object stores"). Part of the
// pure first step of option parsing (mount_options.h; fuzzed with it): no
// filesystem, no network. Credentials are not options: they come from where
// the AWS tools look, or from the file --s3-credentials-file names
// (transport/s3/credential_chain.h). Not thread-safe (parsing state).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "cache/status.h"
#include "fusefs/daemon/mount_options.h"

namespace epochfs::fusefs {

// What the --s3-* options say, as given.
struct S3CommandLine {
  S3MountOptions options;
  bool anyGiven = false;  // some --s3-* option was on the command line
};

// Declares the --s3-* options on `app`, writing into `into`.
void addS3Options(CLI::App& app, S3CommandLine& into);

// After parsing: an "s3://" source sets o.s3 (bucket, prefix, the options)
// and the canonical o.source "s3://BUCKET/PREFIX"; --s3-* options without an
// s3:// source, a URL without a bucket or with a malformed bucket name fail.
cache::Status finishS3Options(MountOptions& o, S3CommandLine& given);

// Step 2: the region from the environment when not given, files absolute.
void resolveS3Options(S3MountOptions& s3);

}  // namespace epochfs::fusefs
