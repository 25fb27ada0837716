#include "prefetch/image_folder_samples.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

namespace epochfs::prefetch {

namespace {

using cache::Result;
using cache::Status;

// Length of the valid UTF-8 sequence at s[i] under Python's strict decoder (no overlongs, no
// encoded surrogates, nothing above U+10FFFF), or 0 if the byte starts no valid sequence.
size_t validSequenceLength(std::string_view s, size_t i, char32_t* cp) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const auto cont = [&](size_t k, unsigned lo, unsigned hi) {
    return i + k < s.size() && b(k) >= lo && b(k) <= hi;
  };
  const unsigned c = b(0);
  if (c < 0x80) {
    *cp = c;
    return 1;
  }
  if (c >= 0xC2 && c <= 0xDF && cont(1, 0x80, 0xBF)) {
    *cp = ((c & 0x1F) << 6) | (b(1) & 0x3F);
    return 2;
  }
  if (c >= 0xE0 && c <= 0xEF) {
    const unsigned lo = c == 0xE0 ? 0xA0 : 0x80;
    const unsigned hi = c == 0xED ? 0x9F : 0xBF;
    if (cont(1, lo, hi) && cont(2, 0x80, 0xBF)) {
      *cp = ((c & 0x0F) << 12) | ((b(1) & 0x3F) << 6) | (b(2) & 0x3F);
      return 3;
    }
    return 0;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    const unsigned lo = c == 0xF0 ? 0x90 : 0x80;
    const unsigned hi = c == 0xF4 ? 0x8F : 0xBF;
    if (cont(1, lo, hi) && cont(2, 0x80, 0xBF) && cont(3, 0x80, 0xBF)) {
      *cp = ((c & 0x07) << 18) | ((b(1) & 0x3F) << 12) | ((b(2) & 0x3F) << 6) | (b(3) & 0x3F);
      return 4;
    }
  }
  return 0;
}

bool isValidUtf8(std::string_view s) {
  char32_t cp;
  for (size_t i = 0; i < s.size();) {
    const size_t n = validSequenceLength(s, i, &cp);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

// os.fsdecode: UTF-8 with surrogateescape. Decoding byte by byte on error is equivalent to
// Python's (an invalid maximal subpart is a lead byte plus continuation bytes, and no
// continuation byte can start a valid sequence).
std::u32string surrogateEscapeDecode(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    char32_t cp;
    const size_t n = validSequenceLength(s, i, &cp);
    if (n == 0) {
      out.push_back(0xDC00 + static_cast<unsigned char>(s[i]));
      ++i;
    } else {
      out.push_back(cp);
      i += n;
    }
  }
  return out;
}

// A name with its UTF-8 validity computed once, for sorting.
struct SortName {
  std::string name;
  bool utf8 = true;
};

bool lessKnown(const SortName& a, const SortName& b) {
  if (a.utf8 && b.utf8) return a.name < b.name;  // byte order == code-point order
  return surrogateEscapeDecode(a.name) < surrogateEscapeDecode(b.name);
}

void sortPython(std::vector<SortName>& v) { std::sort(v.begin(), v.end(), lessKnown); }

SortName makeSortName(std::string s) {
  SortName n;
  n.utf8 = isValidUtf8(s);
  n.name = std::move(s);
  return n;
}

// os.path.join(a, b) for a relative component b.
std::string join(const std::string& a, const std::string& b) {
  if (a.empty() || a.back() == '/') return a + b;
  return a + "/" + b;
}

// One directory as os.walk yields it: its path relative to the class directory ("" for the
// class directory itself, else "/sub/dir"), and its non-directory entries.
struct WalkDir {
  SortName suffix;
  std::vector<SortName> files;
};

enum class IsDir { kYes, kNo, kError };

// DirEntry.is_dir() (follow_symlinks=True): d_type when it is conclusive, else stat().
// kError carries errno for failures other than ENOENT (Python raises those).
IsDir entryIsDir(const std::string& dirPath, const struct dirent* e) {
  if (e->d_type == DT_DIR) return IsDir::kYes;
  if (e->d_type != DT_LNK && e->d_type != DT_UNKNOWN) return IsDir::kNo;
  struct stat st;
  if (::stat(join(dirPath, e->d_name).c_str(), &st) != 0) {
    return errno == ENOENT ? IsDir::kNo : IsDir::kError;
  }
  return S_ISDIR(st.st_mode) ? IsDir::kYes : IsDir::kNo;
}

// os.walk(top, followlinks=True) with onerror=None, top-down, path-string based like Python
// (so symlink loops end where the kernel refuses the path, as they do for Python).
void walk(const std::string& top, const std::string& suffix, std::vector<WalkDir>& out) {
  DIR* d = ::opendir(top.c_str());
  if (d == nullptr) return;  // scandir failed: onerror is None, skip silently
  std::vector<std::string> dirs;
  WalkDir here;
  here.suffix = makeSortName(suffix);
  for (;;) {
    errno = 0;
    const struct dirent* e = ::readdir(d);
    if (e == nullptr) {
      if (errno != 0) {  // iteration error: os.walk returns without yielding this directory
        ::closedir(d);
        return;
      }
      break;
    }
    if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
    if (entryIsDir(top, e) == IsDir::kYes) {
      dirs.emplace_back(e->d_name);
    } else {  // includes errors: os.walk's `except OSError: is_dir = False`
      here.files.push_back(makeSortName(e->d_name));
    }
  }
  ::closedir(d);
  out.push_back(std::move(here));
  for (const std::string& name : dirs) walk(join(top, name), suffix + "/" + name, out);
}

// find_classes(root).
Result<std::vector<std::string>> findClasses(const std::string& root) {
  DIR* d = ::opendir(root.c_str());
  if (d == nullptr) return Status::fromErrno(errno, "scandir " + root);
  std::vector<SortName> classes;
  for (;;) {
    errno = 0;
    const struct dirent* e = ::readdir(d);
    if (e == nullptr) {
      const int err = errno;
      ::closedir(d);
      if (err != 0) return Status::fromErrno(err, "scandir " + root);
      break;
    }
    if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
    switch (entryIsDir(root, e)) {
      case IsDir::kYes:
        classes.push_back(makeSortName(e->d_name));
        break;
      case IsDir::kNo:
        break;
      case IsDir::kError: {
        const int err = errno;
        const std::string what = "stat " + join(root, e->d_name);  // before closedir frees e
        ::closedir(d);
        return Status::fromErrno(err, what);
      }
    }
  }
  if (classes.empty()) {
    return Status::notFound("Couldn't find any class folder in " + root + ".");
  }
  sortPython(classes);
  std::vector<std::string> names;
  names.reserve(classes.size());
  for (SortName& c : classes) names.push_back(std::move(c.name));
  return names;
}

}  // namespace

bool pythonNameLess(std::string_view a, std::string_view b) {
  if (isValidUtf8(a) && isValidUtf8(b)) return a < b;
  return surrogateEscapeDecode(a) < surrogateEscapeDecode(b);
}

bool hasImageExtension(std::string_view name) {
  for (const char* ext : kImageExtensions) {
    const std::string_view e(ext);
    if (name.size() < e.size()) continue;
    const std::string_view tail = name.substr(name.size() - e.size());
    bool match = true;
    for (size_t i = 0; i < e.size() && match; ++i) {
      char c = tail[i];
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
      match = c == e[i];
    }
    if (match) return true;
  }
  return false;
}

std::string noValidFileMessage(const std::vector<std::string>& emptyClasses) {
  std::string msg = "Found no valid file for the classes ";
  for (size_t i = 0; i < emptyClasses.size(); ++i) {
    if (i > 0) msg += ", ";
    msg += emptyClasses[i];
  }
  msg += ". Supported extensions are: ";
  bool first = true;
  for (const char* ext : kImageExtensions) {
    if (!first) msg += ", ";
    msg += ext;
    first = false;
  }
  return msg;
}

Result<ImageFolderSamples> listImageFolderSamples(const std::string& root) {
  auto classes = findClasses(root);
  if (!classes) return classes.status();
  ImageFolderSamples result;
  result.classes = std::move(classes).value();

  std::vector<std::string> emptyClasses;  // already in sorted (class) order
  for (size_t ci = 0; ci < result.classes.size(); ++ci) {
    const std::string& cls = result.classes[ci];
    const std::string classDir = join(root, cls);
    const size_t before = result.samples.size();
    struct stat st;
    if (::stat(classDir.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
      std::vector<WalkDir> dirs;
      walk(classDir, "", dirs);
      std::sort(dirs.begin(), dirs.end(),
                [](const WalkDir& a, const WalkDir& b) { return lessKnown(a.suffix, b.suffix); });
      for (WalkDir& wd : dirs) {
        sortPython(wd.files);
        for (const SortName& f : wd.files) {
          if (!hasImageExtension(f.name)) continue;
          result.samples.push_back({cls + wd.suffix.name + "/" + f.name, static_cast<int32_t>(ci)});
        }
      }
    }
    if (result.samples.size() == before) emptyClasses.push_back(cls);
  }
  if (!emptyClasses.empty()) return Status::notFound(noValidFileMessage(emptyClasses));
  return result;
}

}  // namespace epochfs::prefetch
