// Helpers shared by the disk-tier fault tests (tests/fault/disk_*_test.cc):
// a dataset of random files, a bit-exact check through the mount, stats
// counters and a walk over the disk tier's segment records.
#pragma once

#include <fcntl.h>
#include <glob.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "cache/segment_file.h"
#include "tests/integration/mount_fixture.h"

// GCC 12 reports a false -Wrestrict inside std::string concatenation at -O3.
#pragma GCC diagnostic ignored "-Wrestrict"

namespace epochfs::itest {

constexpr size_t kFileBytes = 400 * 1000;  // one 1 MiB chunk per file, equal record sizes

struct Files {
  std::map<std::string, std::string> data;  // name -> bytes
  std::map<uint64_t, std::string> byHash;   // xxh3 -> name
};

inline Files makeFiles(const std::string& src, int n, size_t bytes, uint64_t seed) {
  Files f;
  for (int i = 0; i < n; ++i) {
    std::string name = "f" + std::to_string(i) + ".bin";
    std::string d = randomBytes(bytes, seed * 100 + static_cast<uint64_t>(i));
    writeFile(src + "/" + name, d);
    f.byHash[xxh3(d)] = name;
    f.data[name] = std::move(d);
  }
  return f;
}

// Reads every file through the mount; returns how many were not bit-exact
// (a read error counts as wrong and is reported with its errno).
inline int verifyAll(const std::string& mnt, const Files& f) {
  int bad = 0;
  for (const auto& [name, want] : f.data) {
    auto r = readFile(mnt + "/" + name);
    if (r.err != 0 || r.data != want) {
      if (++bad <= 5) {
        ADD_FAILURE() << name << ": " << (r.err ? strerror(r.err) : "WRONG BYTES SERVED") << " ("
                      << r.data.size() << " of " << want.size() << " bytes)";
      }
    }
  }
  return bad;
}

inline uint64_t num(const nlohmann::json& j, std::string_view path) {
  return counter(j, path).value_or(0);
}
inline uint64_t sourceIo(const nlohmann::json& j) {
  if (auto v = counter(j, "tiers.source.read_bytes")) return *v;
  return num(j, "tiers.source.bytes");
}

inline std::vector<std::string> globPaths(const std::string& pattern) {
  std::vector<std::string> out;
  glob_t g{};
  if (glob(pattern.c_str(), 0, nullptr, &g) == 0) {
    for (size_t i = 0; i < g.gl_pathc; ++i) out.push_back(g.gl_pathv[i]);
  }
  globfree(&g);
  return out;
}

struct Record {
  std::string segment;
  uint64_t offset = 0;  // of the header
  uint64_t length = 0;  // data bytes
  std::string file;     // dataset file whose bytes it holds ("" if unknown)
};

// Walks every segment's records (cache/segment_file.h layout).
inline std::vector<Record> records(const std::string& cacheDir, const Files& f) {
  std::vector<Record> out;
  for (const auto& seg : globPaths(cacheDir + "/epochfs-*/seg-*.dat")) {
    std::string bytes = readFile(seg).data;
    uint64_t off = 0;
    while (off + sizeof(cache::RecordHeader) <= bytes.size()) {
      cache::RecordHeader h;
      std::memcpy(&h, bytes.data() + off, sizeof h);
      if (!h.valid() || off + sizeof h + h.dataLength > bytes.size()) break;
      Record r{seg, off, h.dataLength, ""};
      auto it = f.byHash.find(xxh3(std::string_view(bytes).substr(off + sizeof h, h.dataLength)));
      if (it != f.byHash.end()) r.file = it->second;
      out.push_back(r);
      off += sizeof h + h.dataLength;
    }
  }
  return out;
}

inline void patch(const std::string& path, uint64_t off, const std::string& bytes) {
  int fd = open(path.c_str(), O_WRONLY);
  ASSERT_GE(fd, 0) << path << ": " << strerror(errno);
  ASSERT_EQ(pwrite(fd, bytes.data(), bytes.size(), static_cast<off_t>(off)),
            static_cast<ssize_t>(bytes.size()));
  close(fd);
}
inline void flipByte(const std::string& path, uint64_t off) {
  std::string b = readFile(path).data;
  ASSERT_LT(off, b.size());
  patch(path, off, std::string(1, static_cast<char>(b[off] ^ 0x5a)));
}

}  // namespace epochfs::itest
