// The sample list of torchvision's ImageFolder, computed in C++ so the daemon can map a
// sampler's indices to paths without running Python.
//
// listImageFolderSamples(root) returns what torchvision 0.14's
// `datasets.ImageFolder(root)` builds as `.classes` and `.samples` (paths made relative to
// root), including its corner cases (tests/unit/prefetch/image_folder_samples_test.cc compares
// against the installed torchvision):
//   - classes: the entries of root that are directories after following symlinks (hidden ones
//     included), sorted; none -> NotFound "Couldn't find any class folder in ROOT.".
//   - per class (in class order): os.walk(class_dir, followlinks=True) — symlinked directories
//     are descended into, directories that cannot be listed are skipped silently, a symlink loop
//     is walked until the kernel answers ELOOP/ENAMETOOLONG, exactly as Python does — then the
//     walk's directories are sorted by their full path string (not depth-first: "a b" sorts
//     before "a/x") and each directory's non-directory entries (regular files, symlinks to
//     files, dangling symlinks, ...) are sorted by name.
//   - a file is a sample when its name ends, ASCII-case-insensitively, with one of
//     kImageExtensions (for str.lower() no non-ASCII character lowers to one of these letters,
//     so ASCII folding is exact).
//   - a class without any sample -> NotFound "Found no valid file for the classes A, B. Supported
//     extensions are: .jpg, ..." (torchvision raises FileNotFoundError with this message).
// Root is taken literally ('~' is not expanded, unlike Python's os.path.expanduser).
//
// Ordering and non-UTF-8 names: Python sorts str by code point, and names are decoded from the
// file system's bytes as UTF-8 with surrogateescape (each byte of an invalid sequence becomes
// U+DC00+byte). For valid UTF-8 byte order equals code-point order, so names are compared as
// bytes; when either name is not valid UTF-8 both are decoded the way Python does and compared
// by code point, so the order matches Python's for every name. Paths are returned as the raw
// bytes found on disk (std::string), never re-encoded.
//
// Thread-safety: a pure function of the file system; safe to call concurrently.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "cache/status.h"

namespace epochfs::prefetch {

// torchvision.datasets.folder.IMG_EXTENSIONS (0.14), in its order.
inline constexpr const char* kImageExtensions[] = {".jpg", ".jpeg", ".png",  ".ppm", ".bmp",
                                                   ".pgm", ".tif",  ".tiff", ".webp"};

struct ImageFolderSample {
  std::string relPath;  // "class/sub/name.jpg", relative to root, raw bytes
  int32_t classIndex = 0;
  bool operator==(const ImageFolderSample&) const = default;
};

struct ImageFolderSamples {
  std::vector<std::string> classes;        // ImageFolder.classes
  std::vector<ImageFolderSample> samples;  // ImageFolder.samples, in dataset index order
};

cache::Result<ImageFolderSamples> listImageFolderSamples(const std::string& root);

// Python's ordering of two file names (str comparison after surrogateescape decoding).
bool pythonNameLess(std::string_view a, std::string_view b);

// Whether ImageFolder takes `name` as a sample (kImageExtensions, ASCII case folded).
bool hasImageExtension(std::string_view name);

// The message ImageFolder raises for classes without a sample (`emptyClasses` sorted).
std::string noValidFileMessage(const std::vector<std::string>& emptyClasses);

// torchvision's has_file_allowed_extension(name, IMG_EXTENSIONS).
bool hasImageExtension(std::string_view name);

}  // namespace epochfs::prefetch
