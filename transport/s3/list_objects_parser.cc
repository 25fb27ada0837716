#include "transport/s3/list_objects_parser.h"

#include <expat.h>

#include <chrono>
#include <climits>
#include <memory>

#include "transport/s3/uri_encoding.h"

namespace epochfs::transport::s3 {

namespace {

// Limits on what a hostile or broken server can make us hold: S3 nests three
// levels and no value it sends comes near 64 KiB.
constexpr size_t kMaxDepth = 16;
constexpr size_t kMaxTextBytes = 64 * 1024;

// A decimal integer of at most 63 bits, nothing else (no sign, no space).
std::optional<uint64_t> parseUint63(std::string_view s) {
  if (s.empty() || s.size() > 19) return std::nullopt;
  uint64_t n = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + static_cast<uint64_t>(c - '0');
  }
  if (n > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
  return n;
}

bool digits(std::string_view s, size_t pos, size_t n, int* out) {
  if (pos + n > s.size()) return false;
  int v = 0;
  for (size_t i = pos; i < pos + n; ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    v = v * 10 + (s[i] - '0');
  }
  *out = v;
  return true;
}

// "2009-10-12T17:50:30.000Z" (the fraction optional, 1-9 digits; UTC only;
// years 1900-2200).
std::optional<int64_t> parseTimestampNs(std::string_view s) {
  int y, mo, d, h, mi, sec;
  if (!digits(s, 0, 4, &y) || s.size() < 20 || s[4] != '-' || !digits(s, 5, 2, &mo) ||
      s[7] != '-' || !digits(s, 8, 2, &d) || s[10] != 'T' || !digits(s, 11, 2, &h) ||
      s[13] != ':' || !digits(s, 14, 2, &mi) || s[16] != ':' || !digits(s, 17, 2, &sec)) {
    return std::nullopt;
  }
  size_t pos = 19;
  int64_t fracNs = 0;
  if (s[pos] == '.') {
    size_t n = 0;
    int64_t scale = 100000000;
    for (++pos; pos < s.size() && s[pos] >= '0' && s[pos] <= '9'; ++pos, ++n) {
      fracNs += (s[pos] - '0') * scale;
      scale /= 10;
    }
    if (n == 0 || n > 9) return std::nullopt;
  }
  if (pos + 1 != s.size() || s[pos] != 'Z') return std::nullopt;
  using namespace std::chrono;
  const year_month_day date{year(y), month(static_cast<unsigned>(mo)),
                            day(static_cast<unsigned>(d))};
  // Years far outside any object's life would overflow int64 nanoseconds (past 2262).
  if (!date.ok() || y < 1900 || y > 2200 || h > 23 || mi > 59 || sec > 60) return std::nullopt;
  const auto t = sys_days(date) + hours(h) + minutes(mi) + seconds(sec);
  return duration_cast<nanoseconds>(t.time_since_epoch()).count() + fracNs;
}

std::string quoted(std::string_view s) {
  constexpr size_t kShown = 200;  // a hostile key must not make the message huge
  std::string out = "'";
  out.append(s.substr(0, kShown));
  out.append(s.size() > kShown ? "...'" : "'");
  return out;
}

// The expat callbacks' state for one body.
class ListHandler {
 public:
  explicit ListHandler(XML_Parser parser) : parser_(parser) {}

  cache::Status status() const { return status_; }

  void start(const char* qualifiedName) {
    if (!status_.isOk()) return;
    std::string_view name = localName(qualifiedName);
    if (path_.empty()) {
      if (name != "ListBucketResult" && name != "Error") {
        return fail("the root element is <" + std::string(name) +
                    ">, not <ListBucketResult> or <Error>");
      }
      isError_ = name == "Error";
    }
    if (path_.size() >= kMaxDepth) return fail("elements nested deeper than 16 levels");
    path_.emplace_back(name);
    text_.clear();
    if (!isError_ && at("Contents")) {
      entry_ = ListEntry();
      haveKey_ = haveSize_ = false;
    }
  }

  void text(const char* s, int len) {
    if (!status_.isOk()) return;
    if (text_.size() + static_cast<size_t>(len) > kMaxTextBytes) {
      return fail("an element's text exceeds 64 KiB");
    }
    text_.append(s, static_cast<size_t>(len));
  }

  void end() {
    if (!status_.isOk() || path_.empty()) return;
    if (isError_) {
      endInError();
    } else {
      endInList();
    }
    path_.pop_back();
    text_.clear();
  }

  void doctype() { fail("a DOCTYPE declaration (S3 sends none)"); }

  // What the whole document said, once expat accepted it.
  cache::Result<ListPage> finish() {
    if (isError_) {
      if (errorCode_.empty())
        return cache::Status::ioError("s3: an <Error> document without <Code>");
      return statusForS3Error(errorCode_, errorMessage_, errorResource_, errorRequestId_);
    }
    if (encodingType_ == "url") {
      for (auto& e : page_.objects) {
        if (auto st = decode(&e.key, "Key"); !st.isOk()) return st;
      }
      for (auto& p : page_.commonPrefixes) {
        if (auto st = decode(&p, "Prefix"); !st.isOk()) return st;
      }
    } else if (!encodingType_.empty()) {
      return invalid("EncodingType " + quoted(encodingType_) + " is not 'url'");
    }
    for (const auto& e : page_.objects) {
      if (e.key.empty()) return invalid("a <Contents> with an empty <Key>");
    }
    if (page_.isTruncated && page_.nextContinuationToken.empty()) {
      return invalid("IsTruncated is true but there is no <NextContinuationToken>");
    }
    return std::move(page_);
  }

 private:
  static std::string_view localName(const char* qualified) {
    std::string_view n(qualified);
    const size_t sep = n.rfind(' ');  // expat's namespace separator (XML_ParserCreateNS)
    return sep == std::string_view::npos ? n : n.substr(sep + 1);
  }

  // The open elements below the root are exactly `names`.
  template <typename... Names>
  bool at(Names... names) const {
    const std::string_view want[] = {names...};
    if (path_.size() != sizeof...(names) + 1) return false;
    for (size_t i = 0; i < sizeof...(names); ++i) {
      if (path_[i + 1] != want[i]) return false;
    }
    return true;
  }

  void endInError() {
    if (at("Code")) errorCode_ = text_;
    if (at("Message")) errorMessage_ = text_;
    if (at("Resource")) errorResource_ = text_;
    if (at("RequestId")) errorRequestId_ = text_;
  }

  void endInList() {
    if (at("IsTruncated")) {
      if (text_ != "true" && text_ != "false") {
        return fail("IsTruncated " + quoted(text_) + " is neither true nor false");
      }
      page_.isTruncated = text_ == "true";
    } else if (at("NextContinuationToken")) {
      page_.nextContinuationToken = text_;
    } else if (at("KeyCount")) {
      page_.keyCount = parseUint63(text_);
      if (!page_.keyCount) return fail("KeyCount " + quoted(text_) + " is not a count");
    } else if (at("EncodingType")) {
      encodingType_ = text_;
    } else if (at("CommonPrefixes", "Prefix")) {
      page_.commonPrefixes.push_back(text_);
    } else if (at("Contents", "Key")) {
      if (haveKey_) return fail("a <Contents> with two <Key>s");
      entry_.key = text_;
      haveKey_ = true;
    } else if (at("Contents", "Size")) {
      if (haveSize_) return fail("a <Contents> with two <Size>s");
      sizeText_ = text_;
      haveSize_ = true;
    } else if (at("Contents", "ETag")) {
      entry_.etag = ETag::parse(text_);
    } else if (at("Contents", "LastModified")) {
      entry_.lastModifiedNs = parseTimestampNs(text_);
      if (!entry_.lastModifiedNs) {
        return fail("LastModified " + quoted(text_) + " is not an ISO 8601 UTC time");
      }
    } else if (at("Contents")) {
      endContents();
    }
  }

  void endContents() {
    if (!haveKey_) return fail("a <Contents> without <Key>");
    if (!haveSize_) return fail("object " + quoted(entry_.key) + " has no <Size>");
    const bool numeric =
        !sizeText_.empty() && sizeText_.find_first_not_of("0123456789") == std::string::npos;
    if (!numeric) {
      return fail("object " + quoted(entry_.key) + ": Size " + quoted(sizeText_) +
                  " is not a non-negative integer");
    }
    auto size = parseUint63(sizeText_);
    if (!size) {
      return fail("object " + quoted(entry_.key) + ": Size " + quoted(sizeText_) +
                  " is out of range (more than 2^63-1 bytes)");
    }
    entry_.size = *size;
    page_.objects.push_back(std::move(entry_));
  }

  cache::Status decode(std::string* s, const char* what) const {
    std::string out;
    if (!urlDecode(*s, &out)) {
      return invalid(std::string(what) + " " + quoted(*s) + " is not valid percent-encoding");
    }
    *s = std::move(out);
    return cache::Status::ok();
  }

  static cache::Status invalid(const std::string& what) {
    return cache::Status::ioError("s3: bad ListObjectsV2 response: " + what);
  }

  void fail(const std::string& what) {
    if (!status_.isOk()) return;
    status_ = invalid(what);
    XML_StopParser(parser_, XML_FALSE);
  }

  XML_Parser parser_;
  cache::Status status_;
  std::vector<std::string> path_;  // open elements, local names, root first
  std::string text_;               // character data of the innermost element
  bool isError_ = false;
  ListPage page_;
  ListEntry entry_;
  std::string sizeText_;
  bool haveKey_ = false;
  bool haveSize_ = false;
  std::string encodingType_;
  std::string errorCode_, errorMessage_, errorResource_, errorRequestId_;
};

void XMLCALL onStart(void* h, const XML_Char* name, const XML_Char** /*attrs*/) {
  static_cast<ListHandler*>(h)->start(name);
}
void XMLCALL onEnd(void* h, const XML_Char* /*name*/) { static_cast<ListHandler*>(h)->end(); }
void XMLCALL onText(void* h, const XML_Char* s, int len) {
  static_cast<ListHandler*>(h)->text(s, len);
}
void XMLCALL onDoctype(void* h, const XML_Char*, const XML_Char*, const XML_Char*, int) {
  static_cast<ListHandler*>(h)->doctype();
}

}  // namespace

cache::Result<ListPage> parseListObjectsV2(std::string_view body) {
  if (body.size() > kMaxListBodyBytes) {
    return cache::Status::tooLarge("s3: ListObjectsV2 response of " + std::to_string(body.size()) +
                                   " bytes (at most " + std::to_string(kMaxListBodyBytes) + ")");
  }
  struct Free {
    void operator()(XML_Parser p) const { XML_ParserFree(p); }
  };
  // Namespace processing on, so <ListBucketResult xmlns="..."> and a
  // prefixed <s3:Key> both reach the handler as their local names.
  std::unique_ptr<XML_ParserStruct, Free> parser(XML_ParserCreateNS(nullptr, ' '));
  if (!parser) return cache::Status::noSpace("s3: cannot create an XML parser");
  ListHandler handler(parser.get());
  XML_SetUserData(parser.get(), &handler);
  XML_SetElementHandler(parser.get(), onStart, onEnd);
  XML_SetCharacterDataHandler(parser.get(), onText);
  XML_SetStartDoctypeDeclHandler(parser.get(), onDoctype);
  const XML_Status rc =
      XML_Parse(parser.get(), body.data(), static_cast<int>(body.size()), /*isFinal=*/XML_TRUE);
  if (!handler.status().isOk()) return handler.status();
  if (rc != XML_STATUS_OK) {
    return cache::Status::ioError("s3: ListObjectsV2 response is not well-formed XML (line " +
                                  std::to_string(XML_GetCurrentLineNumber(parser.get())) +
                                  ", column " +
                                  std::to_string(XML_GetCurrentColumnNumber(parser.get())) +
                                  "): " + XML_ErrorString(XML_GetErrorCode(parser.get())));
  }
  return handler.finish();
}

cache::Status statusForS3Error(std::string_view code, std::string_view message,
                               std::string_view resource, std::string_view requestId) {
  std::string m = "s3: " + std::string(code);
  if (!message.empty()) m += ": " + std::string(message);
  if (!resource.empty()) m += " (resource " + std::string(resource) + ")";
  if (!requestId.empty()) m += " [request id " + std::string(requestId) + "]";
  if (code == "NoSuchBucket" || code == "NoSuchKey") return cache::Status::notFound(m);
  if (code == "AccessDenied" || code == "InvalidAccessKeyId" || code == "SignatureDoesNotMatch" ||
      code == "ExpiredToken" || code == "InvalidToken" || code == "TokenRefreshRequired" ||
      code == "AllAccessDisabled" || code == "AccountProblem" || code == "RequestTimeTooSkewed") {
    return cache::Status::permissionDenied(m);
  }
  if (code == "PreconditionFailed") return cache::Status::stale(m);
  if (code == "SlowDown" || code == "ServiceUnavailable" || code == "InternalError" ||
      code == "RequestTimeout") {
    return cache::Status::unavailable(m);
  }
  return cache::Status::ioError(m);
}

}  // namespace epochfs::transport::s3
