#include "fusefs/dataset_namespace.h"

#include <dirent.h>
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <functional>
#include <thread>
#include <unordered_map>

namespace epochfs::fusefs {

using cache::Result;
using cache::Status;

NodeAttr attrFromStat(const struct stat& st) {
  NodeAttr a;
  a.mode = st.st_mode;
  a.uid = st.st_uid;
  a.gid = st.st_gid;
  a.nlink = static_cast<uint32_t>(st.st_nlink);
  a.size = static_cast<uint64_t>(st.st_size);
  a.sourceIno = st.st_ino;
  a.rdev = st.st_rdev;
  a.atimeNs = int64_t{st.st_atim.tv_sec} * 1000000000 + st.st_atim.tv_nsec;
  a.mtimeNs = int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec;
  a.ctimeNs = int64_t{st.st_ctim.tv_sec} * 1000000000 + st.st_ctim.tv_nsec;
  return a;
}

// Walks the tree with a pool of threads: each takes a directory, lists and
// stats its entries without the lock, then appends them in one locked step
// and queues the subdirectories.
class DatasetNamespace::Walker {
 public:
  Walker(DatasetNamespace& ns, int rootFd) : ns_(ns), rootFd_(rootFd) {}

  Status run(unsigned threads) {
    Node root;
    struct stat st;
    if (fstat(rootFd_, &st) != 0) return Status::fromErrno(errno, "stat source root");
    root.attr = attrFromStat(st);
    ns_.nodes_.push_back(std::move(root));
    queue_.push_back(1);
    pending_ = 1;
    std::vector<std::thread> pool;
    for (unsigned i = 0; i < threads; ++i) pool.emplace_back([this] { work(); });
    for (auto& t : pool) t.join();
    return error_;
  }

 private:
  struct Entry {
    std::string name;
    struct stat st;
    std::string target;
  };

  void work() {
    for (;;) {
      uint32_t dir;
      std::string dirPath;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return !queue_.empty() || pending_ == 0; });
        if (queue_.empty()) return;
        dir = queue_.front();
        queue_.pop_front();
        dirPath = ns_.nodes_[dir - 1].path;
      }
      std::vector<Entry> entries;
      Status s = list(dirPath, entries);
      std::lock_guard<std::mutex> lock(mu_);
      if (!s.isOk() && error_.isOk()) error_ = s;
      if (s.isOk()) append(dir, dirPath, entries);
      if (--pending_ == 0) cv_.notify_all();
    }
  }

  Status list(const std::string& dirPath, std::vector<Entry>& out) {
    int fd = openat(rootFd_, dirPath.empty() ? "." : dirPath.c_str(),
                    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return Status::fromErrno(errno, "cannot list source directory '" + dirPath + "'");
    DIR* d = fdopendir(fd);
    if (d == nullptr) {
      close(fd);
      return Status::fromErrno(errno, "fdopendir " + dirPath);
    }
    while (struct dirent* de = readdir(d)) {
      std::string_view n = de->d_name;
      if (n == "." || n == "..") continue;
      Entry e;
      e.name = de->d_name;
      if (fstatat(fd, de->d_name, &e.st, AT_SYMLINK_NOFOLLOW) != 0) {
        spdlog::warn("snapshot: skipping {}/{}: {}", dirPath, e.name, strerror(errno));
        continue;
      }
      if (S_ISLNK(e.st.st_mode)) {
        std::string buf(static_cast<size_t>(std::max<off_t>(e.st.st_size, 255)) + 1, '\0');
        ssize_t n2 = readlinkat(fd, de->d_name, buf.data(), buf.size());
        if (n2 < 0) {
          spdlog::warn("snapshot: skipping symlink {}/{}: {}", dirPath, e.name, strerror(errno));
          continue;
        }
        buf.resize(static_cast<size_t>(n2));
        e.target = std::move(buf);
      }
      out.push_back(std::move(e));
    }
    closedir(d);
    std::sort(out.begin(), out.end(),
              [](const Entry& a, const Entry& b) { return a.name < b.name; });
    return Status::ok();
  }

  // Called with mu_ held.
  void append(uint32_t dir, const std::string& dirPath, std::vector<Entry>& entries) {
    auto& nodes = ns_.nodes_;
    std::vector<uint32_t> kids;
    kids.reserve(entries.size());
    for (Entry& e : entries) {
      Node n;
      n.parent = dir;
      n.path = dirPath.empty() ? e.name : dirPath + "/" + e.name;
      n.nameOffset = static_cast<uint32_t>(n.path.size() - e.name.size());
      n.target = std::move(e.target);
      n.attr = attrFromStat(e.st);
      n.fileId = cache::fileIdForPath(n.path);
      nodes.push_back(std::move(n));
      const uint32_t ino = static_cast<uint32_t>(nodes.size());
      kids.push_back(ino);
      if (S_ISDIR(e.st.st_mode)) {
        ++ns_.dirs_;
        queue_.push_back(ino);
        ++pending_;
      } else if (S_ISREG(e.st.st_mode)) {
        ++ns_.files_;
        ns_.bytes_ += static_cast<uint64_t>(e.st.st_size);
      }
    }
    nodes[dir - 1].children = std::move(kids);
    if (!queue_.empty()) cv_.notify_all();
  }

  DatasetNamespace& ns_;
  int rootFd_;
  std::mutex mu_;  // guards everything below and ns_.nodes_ during the walk
  std::condition_variable cv_;
  std::deque<uint32_t> queue_;
  size_t pending_ = 0;  // directories queued or being listed
  Status error_;
};

Result<DatasetNamespace> DatasetNamespace::snapshot(int rootFd, unsigned threads) {
  DatasetNamespace ns;
  Walker walker(ns, rootFd);
  Status s = walker.run(std::max(1u, threads));
  if (!s.isOk()) return s;
  if (ns.nodes_.size() >= UINT32_MAX) return Status::tooLarge("more than 4 billion entries");
  ns.renumberCanonically();
  ns.fingerprint_ = ns.computeFingerprint(/*withVersions=*/false);
  return ns;
}

namespace {

// Hashes std::string and std::string_view alike, so the directory map is
// searched with views into the entries' paths (no copy per entry).
struct PathHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return XXH3_64bits(s.data(), s.size()); }
};

// Relative, '/'-separated, no empty, "." or ".." component.
bool wellFormedPath(std::string_view p) {
  if (p.empty()) return false;
  for (size_t start = 0;;) {
    const size_t slash = p.find('/', start);
    const std::string_view c =
        p.substr(start, slash == std::string_view::npos ? slash : slash - start);
    if (c.empty() || c == "." || c == "..") return false;
    if (slash == std::string_view::npos) return true;
    start = slash + 1;
  }
}

}  // namespace

// Builds the nodes from a listing: directories are found (or created with the
// default attributes, parents first) through a map from path to inode; files
// are appended under their parent. Then every child list is sorted by name and
// rid of duplicate names, and renumberCanonically() drops the losers.
class DatasetNamespace::EntryBuilder {
 public:
  EntryBuilder(DatasetNamespace& ns, const NodeAttr& dirAttr) : ns_(ns), dirAttr_(dirAttr) {}

  Status run(std::vector<NamespaceEntry>& entries) {
    ns_.nodes_.reserve(entries.size() + 1);
    Node root;
    root.attr = dirAttr_;
    ns_.nodes_.push_back(std::move(root));
    listed_.push_back(true);
    dirs_.emplace("", 1);
    for (NamespaceEntry& e : entries) {
      // A path adds at most one node per component (at most half its bytes).
      if (ns_.nodes_.size() + e.path.size() / 2 + 2 >= UINT32_MAX) {
        return Status::tooLarge("more than 4 billion entries");
      }
      add(e);
    }
    dropDuplicates();
    if (malformed_ > 0) {
      spdlog::warn("namespace: skipped {} malformed path(s), e.g. '{}'", malformed_,
                   malformedExample_);
    }
    if (duplicates_ > 0) {
      spdlog::warn("namespace: skipped {} duplicate path(s), e.g. '{}'", duplicates_,
                   duplicateExample_);
    }
    return Status::ok();
  }

 private:
  void add(NamespaceEntry& e) {
    if (!wellFormedPath(e.path)) {
      if (malformed_++ == 0) malformedExample_ = e.path;
      return;
    }
    const size_t slash = e.path.rfind('/');
    const std::string_view parentPath =
        slash == std::string::npos ? std::string_view() : std::string_view(e.path).substr(0, slash);
    if (!S_ISDIR(e.attr.mode)) {
      const uint32_t parent = dir(parentPath);  // before e.path is moved from
      addNode(parent, std::move(e.path), e.attr);
      return;
    }
    if (auto it = dirs_.find(e.path); it != dirs_.end()) {
      // Created as some path's parent: the listing's attributes replace the
      // defaults; listed twice: the first wins.
      if (!listed_[it->second - 1]) {
        ns_.nodes_[it->second - 1].attr = e.attr;
        listed_[it->second - 1] = true;
      } else if (duplicates_++ == 0) {
        duplicateExample_ = e.path;
      }
      return;
    }
    const uint32_t parent = dir(parentPath);
    const uint32_t ino = addNode(parent, std::move(e.path), e.attr);
    listed_[ino - 1] = true;
    dirs_.emplace(ns_.nodes_[ino - 1].path, ino);
  }

  // The directory at `path`, created with its missing parents.
  uint32_t dir(std::string_view path) {
    if (auto it = dirs_.find(path); it != dirs_.end()) return it->second;
    const size_t slash = path.rfind('/');
    const uint32_t parent = dir(slash == std::string_view::npos ? "" : path.substr(0, slash));
    const uint32_t ino = addNode(parent, std::string(path), dirAttr_);
    dirs_.emplace(std::string(path), ino);
    return ino;
  }

  uint32_t addNode(uint32_t parent, std::string path, const NodeAttr& attr) {
    Node n;
    n.parent = parent;
    const size_t slash = path.rfind('/');
    n.nameOffset = slash == std::string::npos ? 0 : static_cast<uint32_t>(slash + 1);
    n.path = std::move(path);
    n.fileId = cache::fileIdForPath(n.path);
    n.attr = attr;
    ns_.nodes_.push_back(std::move(n));
    listed_.push_back(false);
    const auto ino = static_cast<uint32_t>(ns_.nodes_.size());
    ns_.nodes_[parent - 1].children.push_back(ino);
    return ino;
  }

  // Sorts every child list by name; of equal names a directory wins, then the
  // first added. Directories are unique (the map), so only files are dropped.
  void dropDuplicates() {
    auto& nodes = ns_.nodes_;
    for (Node& n : nodes) {
      auto& kids = n.children;
      if (kids.size() < 2) continue;
      std::sort(kids.begin(), kids.end(), [&](uint32_t a, uint32_t b) {
        const std::string_view na = ns_.name(a), nb = ns_.name(b);
        if (na != nb) return na < nb;
        const bool da = S_ISDIR(nodes[a - 1].attr.mode), db = S_ISDIR(nodes[b - 1].attr.mode);
        if (da != db) return da;
        return a < b;
      });
      auto last = std::unique(kids.begin(), kids.end(), [&](uint32_t a, uint32_t b) {
        if (ns_.name(a) != ns_.name(b)) return false;
        if (duplicates_++ == 0) duplicateExample_ = nodes[b - 1].path;
        return true;
      });
      kids.erase(last, kids.end());
    }
  }

  DatasetNamespace& ns_;
  const NodeAttr dirAttr_;
  std::unordered_map<std::string, uint32_t, PathHash, std::equal_to<>> dirs_;  // path -> inode
  std::vector<bool> listed_;  // by inode - 1: attributes from the listing (not dirAttr)
  uint64_t malformed_ = 0, duplicates_ = 0;
  std::string malformedExample_, duplicateExample_;
};

Result<DatasetNamespace> DatasetNamespace::fromEntries(std::vector<NamespaceEntry> entries,
                                                       const NodeAttr& dirAttr) {
  DatasetNamespace ns;
  {
    EntryBuilder builder(ns, dirAttr);
    Status s = builder.run(entries);
    if (!s.isOk()) return s;
  }
  entries = {};
  ns.renumberCanonically();
  for (size_t i = 1; i < ns.nodes_.size(); ++i) {  // the root is not counted (as in snapshot())
    const NodeAttr& a = ns.nodes_[i].attr;
    if (S_ISDIR(a.mode)) {
      ++ns.dirs_;
    } else if (S_ISREG(a.mode)) {
      ++ns.files_;
      ns.bytes_ += a.size;
    }
  }
  ns.fingerprint_ = ns.computeFingerprint(/*withVersions=*/true);
  return ns;
}

void DatasetNamespace::renumberCanonically() {
  // Breadth-first from the root over children sorted by name: the order
  // depends only on the tree.
  std::vector<uint32_t> order;  // new index -> old inode
  order.reserve(nodes_.size());
  order.push_back(1);
  for (size_t i = 0; i < order.size(); ++i) {
    for (uint32_t kid : nodes_[order[i] - 1].children) order.push_back(kid);
  }
  std::vector<uint32_t> newIno(nodes_.size() + 1, 0);  // old inode -> new inode
  for (size_t i = 0; i < order.size(); ++i) newIno[order[i]] = static_cast<uint32_t>(i + 1);
  std::vector<Node> renumbered;
  renumbered.reserve(order.size());
  for (uint32_t old : order) {
    Node n = std::move(nodes_[old - 1]);
    n.parent = newIno[n.parent];
    for (uint32_t& kid : n.children) kid = newIno[kid];
    renumbered.push_back(std::move(n));
  }
  nodes_ = std::move(renumbered);
}

uint64_t DatasetNamespace::computeFingerprint(bool withVersions) const {
  XXH3_state_t* st = XXH3_createState();
  XXH3_64bits_reset(st);
  for (const Node& n : nodes_) {
    // Directories' times change with their entries, which the paths cover.
    const bool dir = S_ISDIR(n.attr.mode);
    const uint64_t fields[] = {n.attr.mode, dir ? 0 : n.attr.size,
                               static_cast<uint64_t>(dir ? 0 : n.attr.mtimeNs),
                               static_cast<uint64_t>(dir ? 0 : n.attr.ctimeNs)};
    XXH3_64bits_update(st, fields, sizeof fields);
    XXH3_64bits_update(st, n.path.data(), n.path.size() + 1);  // with the NUL
    XXH3_64bits_update(st, n.target.data(), n.target.size() + 1);
    if (withVersions && !dir) XXH3_64bits_update(st, &n.attr.sourceIno, sizeof n.attr.sourceIno);
  }
  const uint64_t h = XXH3_64bits_digest(st);
  XXH3_freeState(st);
  return h;
}

const std::vector<uint32_t>& DatasetNamespace::children(Ino dir) const {
  if (const auto* slot = growth_->childLists.find(dir - 1)) {
    if (const std::vector<uint32_t>* grown = slot->load(std::memory_order_acquire)) return *grown;
  }
  return node(dir).children;
}

DatasetNamespace::Ino DatasetNamespace::lookup(Ino parent, std::string_view name) const {
  const auto& kids = children(parent);
  auto it =
      std::lower_bound(kids.begin(), kids.end(), name,
                       [this](uint32_t ino, std::string_view n) { return this->name(ino) < n; });
  if (it != kids.end() && this->name(*it) == name) return *it;
  return 0;
}

std::string_view DatasetNamespace::name(Ino ino) const {
  const Node& n = node(ino);
  return std::string_view(n.path).substr(n.nameOffset);
}

NodeAttr DatasetNamespace::attr(Ino ino) const {
  std::lock_guard<std::mutex> lock(stripe(ino));
  return node(ino).attr;
}

void DatasetNamespace::setAttr(Ino ino, const NodeAttr& a) {
  std::lock_guard<std::mutex> lock(stripe(ino));
  NodeAttr& old = mutableNode(ino).attr;
  // Unsigned arithmetic: a decrease wraps, and the sum with the base is right.
  auto counted = [](const NodeAttr& x, bool dir) -> uint64_t {
    return !x.gone && (dir ? S_ISDIR(x.mode) : S_ISREG(x.mode)) ? 1 : 0;
  };
  auto bytes = [&](const NodeAttr& x) { return counted(x, false) * x.size; };
  if (ino != kRootIno) {
    growth_->files.fetch_add(counted(a, false) - counted(old, false), std::memory_order_relaxed);
    growth_->dirs.fetch_add(counted(a, true) - counted(old, true), std::memory_order_relaxed);
    growth_->bytes.fetch_add(bytes(a) - bytes(old), std::memory_order_relaxed);
  }
  old = a;
}

cache::FileIdentity DatasetNamespace::identity(Ino ino) const {
  NodeAttr a = attr(ino);
  cache::FileIdentity id;
  id.fileId = node(ino).fileId;
  id.size = a.size;
  id.mtimeNs = a.mtimeNs;
  id.ctimeNs = a.ctimeNs;
  id.inode = a.sourceIno;
  return id;
}

void DatasetNamespace::fillStat(Ino ino, struct stat* st) const {
  NodeAttr a = attr(ino);
  *st = {};
  st->st_ino = ino;
  st->st_mode = a.mode;
  st->st_nlink = a.nlink;
  st->st_uid = a.uid;
  st->st_gid = a.gid;
  st->st_rdev = a.rdev;
  st->st_size = static_cast<off_t>(a.size);
  st->st_blksize = 1 << 20;
  st->st_blocks = static_cast<blkcnt_t>((a.size + 511) / 512);
  st->st_atim = {a.atimeNs / 1000000000, a.atimeNs % 1000000000};
  st->st_mtim = {a.mtimeNs / 1000000000, a.mtimeNs % 1000000000};
  st->st_ctim = {a.ctimeNs / 1000000000, a.ctimeNs % 1000000000};
}

}  // namespace epochfs::fusefs
