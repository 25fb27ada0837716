// Fuzzes the option parsers that take user text: parseSize() and
// parseTorchOrder(). Pass: no crash, no sanitizer report, bounded memory.
// (parseMountOptions() checks paths on the filesystem; not fuzzed here.)
#include <cstddef>
#include <cstdint>
#include <string>

#include "fusefs/mount_options.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  (void)epochfs::fusefs::parseSize(text, 64ull << 30);
  (void)epochfs::fusefs::parseSize(text, 0);
  (void)epochfs::fusefs::parseTorchOrder(text);
  return 0;
}
