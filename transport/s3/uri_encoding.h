// URI encoding as S3 and its SigV4 canonical request expect it. The same
// functions build the canonical request and (later) the URL on the wire, so the
// bytes signed are the bytes sent. Pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace epochfs::transport::s3 {

// Query parameters as (name, value), neither encoded. An empty value is a
// parameter all the same: it is sent and signed as "name=".
using QueryParams = std::vector<std::pair<std::string, std::string>>;

// Percent-encodes the bytes of `s` (UTF-8 as given): the unreserved characters
// A-Z a-z 0-9 - . _ ~ are kept, '/' too when `keepSlash`, every other byte
// becomes %XX with upper-case hex (space is %20, never '+').
std::string uriEncode(std::string_view s, bool keepSlash);

// The canonical URI of an object path such as "/bucket/dir/a b.jpg": each
// segment encoded, the '/'s kept. S3 does not normalise paths: "." and ".."
// segments and repeated '/' are kept as they are. An empty path is "/".
std::string canonicalUri(std::string_view path);

// The canonical query string: names and values encoded (a '/' in a value as
// %2F), sorted by encoded name, then by encoded value, joined by '&'.
std::string canonicalQueryString(const QueryParams& params);

// Decodes the form S3 uses for keys in a listing requested with
// encoding-type=url: %XX is the byte, '+' is a space. False when a '%' is not
// followed by two hex digits.
bool urlDecode(std::string_view s, std::string* out);

}  // namespace epochfs::transport::s3
