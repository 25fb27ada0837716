// The query of one ListObjectsV2 request (GET /?list-type=2&...), for the
// signer and the URL alike (uri_encoding.h builds both from these pairs).
// Pure; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "transport/s3/uri_encoding.h"

namespace epochfs::transport::s3 {

struct ListObjectsRequest {
  std::string prefix;                    // sent even when empty ("prefix=")
  std::optional<std::string> delimiter;  // "/" to list one level
  std::string continuationToken;         // the previous page's NextContinuationToken
  uint32_t maxKeys = 0;                  // 0: the server's default (1000 on AWS)
};

// list-type=2, encoding-type=url (keys come back percent-encoded, as botocore
// asks for them, so a key holding a character XML 1.0 cannot carry still
// lists; ListObjectsParser decodes them), prefix, and delimiter,
// continuation-token and max-keys when set.
QueryParams listObjectsQuery(const ListObjectsRequest& request);

}  // namespace epochfs::transport::s3
