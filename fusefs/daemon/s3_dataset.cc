#include "fusefs/daemon/s3_dataset.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <thread>

#include "cache/file_identity.h"

namespace epochfs::fusefs {

using cache::Result;
using cache::Status;
using nlohmann::json;
namespace s3 = transport::s3;

namespace {

// Prefixes listed at once (the top level's "directories", e.g. ImageFolder's classes).
constexpr unsigned kListThreads = 8;

s3::Addressing addressingOf(const std::string& a) {
  if (a == "path") return s3::Addressing::kPath;
  if (a == "virtual") return s3::Addressing::kVirtual;
  return s3::Addressing::kAuto;
}

}  // namespace

Result<std::unique_ptr<S3Dataset>> S3Dataset::open(const S3MountOptions& options,
                                                   std::optional<s3::Credentials> credentials,
                                                   std::string credentialsOrigin,
                                                   s3::CredentialsFile file) {
  std::unique_ptr<S3Dataset> ds(new S3Dataset());
  ds->options_ = options;
  ds->credentialsOrigin_ = std::move(credentialsOrigin);
  ds->signed_ = credentials.has_value();
  auto endpoint = s3::S3Endpoint::make(options.endpoint, options.region, options.bucket,
                                       addressingOf(options.addressing));
  if (!endpoint.isOk()) return endpoint.status();
  ds->endpointUrl_ = endpoint->endpointUrl();
  s3::S3ClientConfig cc;
  cc.endpoint = std::move(endpoint).value();
  cc.credentials = std::move(credentials);
  cc.credentialsFile = std::move(file);
  cc.caFile = options.caFile;
  cc.maxInFlight = options.maxRequests;
  cc.readDeadline = std::chrono::seconds(options.readDeadlineSeconds);
  auto client = s3::S3Client::create(std::move(cc));
  if (!client.isOk()) return client.status();
  ds->client_ = std::move(client).value();
  ds->source_ = std::make_unique<s3::S3Source>(*ds->client_, options.prefix);
  ds->uid_ = getuid();
  ds->gid_ = getgid();
  return ds;
}

std::string S3Dataset::datasetKey() const {
  return endpointUrl_ + "/" + options_.bucket + "/" + options_.prefix;
}

Result<DatasetNamespace> S3Dataset::snapshot() {
  cache::MutexLock lock(snapshotMu_);
  const std::string where = "s3://" + options_.bucket + "/" + options_.prefix;
  auto listed = client_->listAll(options_.prefix, kListThreads);
  if (!listed.isOk()) return listed.status().withContext(where);
  listings_.fetch_add(1);
  if (listed->empty()) {
    return Status::notFound(where + ": no objects under this prefix (a mistyped prefix?)");
  }
  std::vector<ObjectRecord> records;
  records.reserve(listed->size());
  s3::S3Source::Versions versions;
  versions.reserve(listed->size());
  for (s3::ListEntry& e : *listed) {
    ObjectRecord r;
    r.size = e.size;
    r.mtimeNs = e.lastModifiedNs.value_or(0);
    r.versionHash = e.etag.identityHash();
    if (e.key.size() > options_.prefix.size()) {
      versions.emplace_back(cache::fileIdForPath(e.key.substr(options_.prefix.size())), e.etag);
    }
    r.key = std::move(e.key);
    records.push_back(std::move(r));
  }
  listed->clear();
  ObjectTree tree = objectTreeFromKeys(records, options_.prefix, uid_, gid_);
  records.clear();
  logSkips(tree.skips, where);
  {
    cache::MutexLock skipsLock(skipsMu_);
    skips_ = tree.skips;
  }
  auto ns = DatasetNamespace::fromEntries(std::move(tree.entries), tree.rootAttr);
  if (!ns.isOk()) return ns.status();
  if (ns->fileCount() == 0) {
    return Status::notFound(where + ": no object under this prefix can be a file");
  }
  source_->setVersions(std::move(versions));
  return ns;
}

json S3Dataset::status() const {
  const s3::S3ClientStats st = client_->stats();
  ObjectTreeSkips skips;
  {
    cache::MutexLock lock(skipsMu_);
    skips = skips_;
  }
  return {{"endpoint", endpointUrl_},
          {"bucket", options_.bucket},
          {"prefix", options_.prefix},
          {"region", options_.region},
          {"addressing", options_.addressing},
          {"signed", signed_},
          {"credentials", credentialsOrigin_},
          {"listings", listings_.load()},
          {"requests", {{"get", st.gets}, {"head", st.heads}, {"list", st.lists}}},
          {"bytes_received", st.bytesReceived},
          {"errors", st.errors},
          {"in_flight", st.inFlight},
          {"retries", st.retries},
          {"slowdowns", st.slowdowns},
          {"timeouts", st.timeouts},
          {"gave_up", st.gaveUp},
          {"credential_reloads", st.credentialReloads},
          {"read_deadline_s", options_.readDeadlineSeconds},
          {"skipped_keys",
           {{"collisions", skips.collisions},
            {"empty_components", skips.emptyComponents},
            {"dot_components", skips.dotComponents},
            {"long_names", skips.longNames},
            {"outside_prefix", skips.outsidePrefix}}}};
}

std::shared_ptr<const s3::S3Source::Versions> S3Dataset::versions() const {
  return source_->currentVersions();
}

void S3Dataset::adoptVersions(s3::S3Source::Versions versions) {
  source_->setVersions(std::move(versions));
}

}  // namespace epochfs::fusefs
