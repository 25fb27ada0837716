#include "tools/bench/epochbench/dataset_generator.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <thread>

namespace epochfs::bench {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kManifestFormat = "epochbench-dataset/1";

uint64_t splitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t fileStream(const DatasetSpec& spec, int index, uint64_t purpose) {
  uint64_t state =
      spec.seed * 0x2545f4914f6cdd1dULL ^ (static_cast<uint64_t>(index) << 8) ^ purpose;
  splitMix64(state);
  return state;
}

double unitInterval(uint64_t& state) {  // in (0, 1]
  return (static_cast<double>(splitMix64(state) >> 11) + 1.0) * 0x1.0p-53;
}

std::string stripTrailingSlashes(std::string dir) {
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  return dir;
}

json manifestFor(const DatasetSpec& spec) {
  uint64_t total = 0;
  for (int i = 0; i < spec.files; ++i) total += datasetFileBytes(spec, i);
  return json{{"format", kManifestFormat}, {"files", spec.files}, {"classes", spec.classes},
              {"mean_kb", spec.mean_kb},   {"sigma", kSizeSigma}, {"seed", spec.seed},
              {"total_bytes", total}};
}

void writeFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  if (!out.flush()) throw std::runtime_error("cannot write " + path);
}

// Writes the files of `spec` under `root` (which exists) with a few threads.
void writeDataset(const std::string& root, const DatasetSpec& spec) {
  for (int c = 0; c < spec.classes; ++c) {
    char name[32];
    std::snprintf(name, sizeof(name), "class_%04d", c);
    fs::create_directory(fs::path(root) / name);
  }
  unsigned threads = std::clamp(std::thread::hardware_concurrency(), 1u, 8u);
  std::atomic<int> next{0};
  std::atomic<int> done{0};
  std::mutex error_mu;
  std::string error;  // guarded by error_mu; first failure wins
  auto worker = [&] {
    std::vector<uint64_t> buffer(kMaxFileBytes / sizeof(uint64_t));
    for (int i = next++; i < spec.files; i = next++) {
      uint64_t bytes = datasetFileBytes(spec, i);
      uint64_t state = fileStream(spec, i, 0xc0);
      size_t words = (bytes + 7) / 8;
      for (size_t w = 0; w < words; ++w) buffer[w] = splitMix64(state);
      std::string path = root + "/" + datasetFilePath(spec, i);
      int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      bool ok = fd >= 0;
      const char* p = reinterpret_cast<const char*>(buffer.data());
      for (uint64_t left = bytes; ok && left > 0;) {
        ssize_t n = ::write(fd, p, left);
        if (n < 0 && errno == EINTR) continue;
        ok = n > 0;
        if (ok) p += n, left -= static_cast<uint64_t>(n);
      }
      if (fd >= 0 && ::close(fd) != 0) ok = false;
      if (!ok) {
        std::lock_guard lock(error_mu);
        if (error.empty()) error = path + ": " + std::strerror(errno);
        next = spec.files;
        return;
      }
      int d = ++done;
      if (d % 5000 == 0) std::fprintf(stderr, "  %d/%d files\n", d, spec.files);
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t) pool.emplace_back(worker);
  for (auto& t : pool) t.join();
  if (!error.empty()) throw std::runtime_error("generating dataset: " + error);
}

}  // namespace

std::string datasetFilePath(const DatasetSpec& spec, int index) {
  int cls = static_cast<int>(static_cast<int64_t>(index) * spec.classes / spec.files);
  char name[64];
  std::snprintf(name, sizeof(name), "class_%04d/img_%07d.JPEG", cls, index);
  return name;
}

uint64_t datasetFileBytes(const DatasetSpec& spec, int index) {
  uint64_t state = fileStream(spec, index, 0x51);
  double u1 = unitInterval(state), u2 = unitInterval(state);
  double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);  // Box-Muller
  double mu = std::log(spec.mean_kb * 1024.0) - kSizeSigma * kSizeSigma / 2;
  double bytes = std::exp(mu + kSizeSigma * z);
  return std::clamp(static_cast<uint64_t>(bytes), kMinFileBytes, kMaxFileBytes);
}

std::vector<std::string> datasetFiles(const DatasetSpec& spec) {
  std::vector<std::string> files;
  files.reserve(spec.files);
  for (int i = 0; i < spec.files; ++i) files.push_back(datasetFilePath(spec, i));
  return files;
}

std::string manifestPath(const std::string& dir) {
  return stripTrailingSlashes(dir) + ".manifest.json";
}

bool datasetMatches(const std::string& dir, const DatasetSpec& spec) {
  std::ifstream in(manifestPath(dir));
  if (!in) return false;
  json manifest = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (manifest != manifestFor(spec)) return false;
  for (int i = 0; i < spec.files; ++i) {
    struct stat st;
    std::string path = dir + "/" + datasetFilePath(spec, i);
    if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) ||
        static_cast<uint64_t>(st.st_size) != datasetFileBytes(spec, i)) {
      return false;
    }
  }
  // Nothing else may sit in the tree: exactly `classes` directories.
  int entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++entries;
  return entries == spec.classes;
}

void ensureDataset(const std::string& dir_arg, const DatasetSpec& spec) {
  if (spec.files < 1 || spec.classes < 1 || spec.classes > spec.files || spec.mean_kb <= 0) {
    throw std::runtime_error("need files >= classes >= 1 and mean-kb > 0");
  }
  const std::string dir = stripTrailingSlashes(dir_arg);
  if (dir.empty() || dir == "/") throw std::runtime_error("refusing dataset dir '" + dir + "'");
  if (datasetMatches(dir, spec)) {
    std::fprintf(stderr, "dataset %s: reusing (%d files, %d classes)\n", dir.c_str(), spec.files,
                 spec.classes);
    return;
  }
  std::error_code ec;
  const bool exists = fs::exists(dir, ec);
  const bool ours = fs::exists(manifestPath(dir), ec);
  if (exists && !ours && !(fs::is_directory(dir, ec) && fs::is_empty(dir, ec))) {
    throw std::runtime_error(dir + " exists and is not an epochbench dataset (no " +
                             manifestPath(dir) + "); pick another --dir or remove it");
  }
  if (ours)
    std::fprintf(stderr, "dataset %s: differs from the request, replacing it\n", dir.c_str());
  const std::string staging = dir + ".epochbench-partial";
  fs::remove_all(staging);
  fs::create_directories(staging);
  std::fprintf(stderr, "dataset %s: generating %d files in %d classes, mean %.0f KiB...\n",
               dir.c_str(), spec.files, spec.classes, spec.mean_kb);
  writeDataset(staging, spec);
  fs::remove(manifestPath(dir), ec);
  if (exists) fs::remove_all(dir);
  fs::rename(staging, dir);
  json manifest = manifestFor(spec);
  writeFile(manifestPath(dir), manifest.dump(2) + "\n");
  std::fprintf(stderr, "dataset %s: %.1f MB written\n", dir.c_str(),
               manifest["total_bytes"].get<double>() / 1e6);
}

}  // namespace epochfs::bench
