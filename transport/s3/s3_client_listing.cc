// S3Client's listings (s3_client.h): every page of one prefix, and the
// whole tree under a prefix on several threads.
#include <algorithm>
#include <atomic>
#include <iterator>
#include <set>
#include <system_error>
#include <thread>

#include "transport/s3/s3_client.h"

namespace epochfs::transport::s3 {

using cache::Result;
using cache::Status;

namespace {

// A listing that goes on this many pages in a row without a key or prefix is
// a server looping with fresh tokens; refused.
constexpr unsigned kMaxEmptyPagesInARow = 100;

}  // namespace

Status S3Client::listWalk(ListObjectsRequest request, std::vector<ListEntry>& out,
                          std::vector<std::string>* commonPrefixes) {
  const std::string what = "LIST " + config_.endpoint.describe(request.prefix);
  std::set<std::string> tokensSeen;
  unsigned emptyInARow = 0;
  for (;;) {
    auto page = listPage(request);
    if (!page.isOk()) return page.status();
    for (auto& entry : page->objects) {
      if (entry.key.compare(0, request.prefix.size(), request.prefix) != 0) {
        return Status::ioError("s3: " + what + ": the server listed key '" + entry.key +
                               "' outside the prefix");
      }
      out.push_back(std::move(entry));
    }
    if (commonPrefixes != nullptr) {
      for (auto& p : page->commonPrefixes) {
        if (p.compare(0, request.prefix.size(), request.prefix) != 0 || p == request.prefix) {
          return Status::ioError("s3: " + what + ": the server listed prefix '" + p +
                                 "' outside the prefix");
        }
        commonPrefixes->push_back(std::move(p));
      }
    }
    if (!page->isTruncated) return Status::ok();
    const bool empty = page->objects.empty() && page->commonPrefixes.empty();
    emptyInARow = empty ? emptyInARow + 1 : 0;
    if (emptyInARow > kMaxEmptyPagesInARow) {
      return Status::ioError("s3: " + what + ": " + std::to_string(emptyInARow) +
                             " empty pages in a row; the listing does not end");
    }
    if (!tokensSeen.insert(page->nextContinuationToken).second) {
      return Status::ioError("s3: " + what +
                             ": the server repeated a continuation token; the listing does "
                             "not end");
    }
    request.continuationToken = std::move(page->nextContinuationToken);
  }
}

Result<std::vector<ListEntry>> S3Client::listAll(const std::string& prefix, unsigned threads) {
  if (!prefix.empty() && prefix.back() != '/') {
    return Status::invalidArgument("s3: list prefix '" + prefix + "' does not end in '/'");
  }
  ListObjectsRequest top;
  top.prefix = prefix;
  top.delimiter.emplace(1, '/');  // (not = "/": a false GCC 12 -Wrestrict)
  top.maxKeys = config_.listMaxKeys;
  std::vector<ListEntry> all;
  std::vector<std::string> dirs;
  if (Status s = listWalk(top, all, &dirs); !s.isOk()) return s;

  // Each directory's whole subtree, on up to `threads` threads.
  std::vector<std::vector<ListEntry>> parts(dirs.size());
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  cache::Mutex errorMu;
  Status firstError;
  auto worker = [&] {
    while (!failed.load()) {
      const size_t i = next.fetch_add(1);
      if (i >= dirs.size()) break;
      ListObjectsRequest sub;
      sub.prefix = dirs[i];
      sub.maxKeys = config_.listMaxKeys;
      Status s = listWalk(sub, parts[i], nullptr);
      if (!s.isOk()) {
        cache::MutexLock lock(errorMu);
        if (firstError.isOk()) firstError = std::move(s);
        failed.store(true);
      }
    }
  };
  const size_t helpers =
      dirs.empty() ? 0 : std::min<size_t>(std::max(threads, 1u), dirs.size()) - 1;
  std::vector<std::thread> pool;
  pool.reserve(helpers);
  for (size_t t = 0; t < helpers; ++t) {
    try {
      pool.emplace_back(worker);
    } catch (const std::system_error&) {
      break;  // fewer threads: this one does the rest
    }
  }
  worker();
  for (auto& t : pool) t.join();
  {
    cache::MutexLock lock(errorMu);
    if (!firstError.isOk()) return firstError;
  }

  size_t total = all.size();
  for (const auto& p : parts) total += p.size();
  all.reserve(total);
  for (auto& p : parts) {
    std::move(p.begin(), p.end(), std::back_inserter(all));
    std::vector<ListEntry>().swap(p);
  }
  // Byte order of the keys (std::string compares as unsigned char), as S3 lists.
  std::sort(all.begin(), all.end(),
            [](const ListEntry& a, const ListEntry& b) { return a.key < b.key; });
  return all;
}

}  // namespace epochfs::transport::s3
