// Fuzzes s3::parseListObjectsV2(), the parser of what an S3 server (or
// anything posing as one) returns for a listing: input = the response body.
// Pass: no crash, no sanitizer report, bounded memory, and every parsed page
// keeps the parser's promises (checked below; a violation aborts, which
// libFuzzer reports as a crash).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "transport/s3/list_objects_parser.h"

namespace s3 = epochfs::transport::s3;

namespace {

void require(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Its own buffer, so ASan sees any read past the end.
  const std::string body(reinterpret_cast<const char*>(data), size);
  auto page = s3::parseListObjectsV2(body);
  if (!page.isOk()) {
    require(!page.status().message().empty());
    return 0;
  }
  require(!page->isTruncated || !page->nextContinuationToken.empty());
  for (const auto& e : page->objects) {
    require(!e.key.empty());
    require(e.size <= static_cast<uint64_t>(INT64_MAX));
    if (e.etag.kind() == s3::ETag::Kind::kMd5) {
      // The rebuilt If-Match value parses back to the same ETag.
      require(s3::ETag::parse(*e.etag.headerValue()) == e.etag);
    } else {
      require(!e.etag.headerValue().has_value());
    }
  }
  return 0;
}
