// What torchvision's ImageFolder(root) lists, computed from the mount's
// namespace instead of the source directory: for a source that is not a
// directory (an object store), where `--order torch-distributed` still needs
// the dataset's sample list. The same rules as
// prefetch/image_folder_samples.h without symlinks (a listing has none):
// classes are the root's directories in Python's order; a class's samples are
// its subtree's files with an image extension, directories sorted by their
// path, files by name. Pure; safe to call concurrently with readers of `ns`.
#pragma once

#include "cache/status.h"
#include "fusefs/dataset_namespace.h"
#include "prefetch/image_folder_samples.h"

namespace epochfs::fusefs {

cache::Result<prefetch::ImageFolderSamples> imageFolderSamplesOf(const DatasetNamespace& ns);

}  // namespace epochfs::fusefs
