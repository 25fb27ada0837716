// Fuzzes the whole mount command line: parseMountCommandLine() (the `-o`
// expansion, CLI11 and every option check; no filesystem) on argv made of the
// input's lines, plus parseSize() and parseTorchOrder() on the raw input.
// Pass: no crash, no sanitizer report, bounded memory, and an accepted command
// line satisfies the documented limits (checked below; a violation aborts).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "fusefs/daemon/mount_options.h"

namespace fusefs = epochfs::fusefs;

namespace {

void require(bool ok) {
  if (!ok) std::abort();
}

constexpr uint64_t kMemory = 64ull << 30;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // --help prints the usage to stdout on every such input.
  if (std::freopen("/dev/null", "w", stdout) == nullptr) return 1;
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  (void)fusefs::parseSize(text, kMemory);
  (void)fusefs::parseSize(text, 0);
  (void)fusefs::parseTorchOrder(text);

  std::vector<std::string> args{"epochfs"};
  size_t pos = 0;
  while (pos <= text.size() && args.size() < 64) {
    const size_t nl = std::min(text.find('\n', pos), text.size());
    args.push_back(text.substr(pos, nl - pos));
    pos = nl + 1;
  }
  bool exitNow = false;
  auto cl = fusefs::parseMountCommandLine(args, kMemory, &exitNow);
  if (!cl.isOk()) {
    require(!cl.status().message().empty());
    return 0;
  }
  if (exitNow) return 0;
  const fusefs::MountOptions& o = cl->options;
  require(!o.source.empty() && !o.mountpoint.empty());
  require(o.chunkSize >= 4096 && o.chunkSize <= (64u << 20) &&
          (o.chunkSize & (o.chunkSize - 1)) == 0);
  require(o.threads >= 1 && o.threads <= 1024);
  require(o.prefetchThreads >= 1 && o.prefetchThreads <= 1024);
  require(!o.clustered() || !o.secretFile.empty());
  require(cl->diskCache.empty() || !o.cacheDir.empty());
  if (o.torchOrder) {
    require(o.torchOrderSpec.world >= 1 && !o.torchOrderSpec.ranks.empty());
    for (int r : o.torchOrderSpec.ranks) require(r >= 0 && r < o.torchOrderSpec.world);
  }
  return 0;
}
