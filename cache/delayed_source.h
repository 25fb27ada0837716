// DelayedSource: a Source decorator that adds a fixed latency to every read,
// for fault injection and tests (`--inject-source-latency MS`): it plays a
// high-latency shared filesystem without a network. Thread-safe; the delay
// does not serialize readers (each sleeps on its own thread).
#pragma once

#include <chrono>
#include <thread>

#include "cache/source.h"

namespace epochfs::cache {

class DelayedSource : public Source {
 public:
  DelayedSource(Source& inner, std::chrono::microseconds delay) : inner_(inner), delay_(delay) {}

  Result<size_t> read(const std::string& relPath, const FileIdentity& expected, uint64_t offset,
                      char* buf, size_t len) override {
    std::this_thread::sleep_for(delay_);
    return inner_.read(relPath, expected, offset, buf, len);
  }
  Result<ChunkBuffer> readChunk(const std::string& relPath, const FileIdentity& expected,
                                uint64_t offset, size_t len) override {
    std::this_thread::sleep_for(delay_);
    return inner_.readChunk(relPath, expected, offset, len);
  }
  Result<struct ::stat> lstat(const std::string& relPath) override { return inner_.lstat(relPath); }

 private:
  Source& inner_;
  std::chrono::microseconds delay_;
};

}  // namespace epochfs::cache
