// An ImageNet-shaped synthetic dataset: DIR/class_XXXX/img_XXXXXXX.JPEG with
// log-normal sizes and pseudo-random (incompressible) content.
//
// Everything is a pure function of the DatasetSpec, so the file list and each
// file's size can be recomputed without touching the disk. The dataset tree
// holds nothing but the images (ImageFolder would take any extra entry for a
// class); the manifest lives next to it as `DIR.manifest.json`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace epochfs::bench {

struct DatasetSpec {
  int files = 20000;
  int classes = 100;
  double mean_kb = 110.0;  // KiB; mean of the log-normal before clamping
  uint64_t seed = 1;
};

inline constexpr double kSizeSigma = 0.5;
inline constexpr uint64_t kMinFileBytes = 1024;
inline constexpr uint64_t kMaxFileBytes = 2 * 1024 * 1024;

// Relative path of file `index` ("class_0003/img_0000042.JPEG").
std::string datasetFilePath(const DatasetSpec& spec, int index);

// Size in bytes of file `index`.
uint64_t datasetFileBytes(const DatasetSpec& spec, int index);

// Relative paths of all files, in index order.
std::vector<std::string> datasetFiles(const DatasetSpec& spec);

// `DIR.manifest.json` for `dir` (trailing slashes ignored).
std::string manifestPath(const std::string& dir);

// True if `dir` holds exactly the dataset `spec` describes (manifest matches
// and every file exists with its expected size).
bool datasetMatches(const std::string& dir, const DatasetSpec& spec);

// Makes `dir` hold the dataset: reuses it if it matches, otherwise generates it
// into a sibling staging directory and renames it into place. Replaces an
// existing `dir` only if it is empty or carries an epochbench manifest.
// Progress goes to stderr. Throws std::runtime_error on failure.
void ensureDataset(const std::string& dir, const DatasetSpec& spec);

}  // namespace epochfs::bench
