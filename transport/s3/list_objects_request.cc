#include "transport/s3/list_objects_request.h"

namespace epochfs::transport::s3 {

QueryParams listObjectsQuery(const ListObjectsRequest& request) {
  QueryParams q = {{"list-type", "2"}, {"encoding-type", "url"}, {"prefix", request.prefix}};
  if (request.delimiter) q.emplace_back("delimiter", *request.delimiter);
  if (!request.continuationToken.empty()) {
    q.emplace_back("continuation-token", request.continuationToken);
  }
  if (request.maxKeys != 0) q.emplace_back("max-keys", std::to_string(request.maxKeys));
  return q;
}

}  // namespace epochfs::transport::s3
