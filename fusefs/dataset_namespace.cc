#include "fusefs/dataset_namespace.h"

#include <xxhash.h>

#include <algorithm>
#include <cstring>

namespace epochfs::fusefs {

using cache::Result;
using cache::Status;

namespace {

constexpr uint64_t kDirectorySize = 4096;  // what a directory's st_size serves

}  // namespace

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

Result<uint16_t> DatasetNamespace::ownerIndex(uint32_t uid, uint32_t gid) {
  const uint64_t key = uint64_t{uid} << 32 | gid;
  cache::MutexLock lock(*ownersMu_);
  if (auto it = ownerIds_->find(key); it != ownerIds_->end()) return it->second;
  const size_t next = ownerIds_->size();
  if (next >= Owners::kCapacity) {
    return Status::tooLarge("more than " + std::to_string(Owners::kCapacity) +
                            " distinct (uid, gid) pairs");
  }
  owners_->at(next) = Owner{uid, gid};
  ownerIds_->emplace(key, static_cast<uint16_t>(next));
  return static_cast<uint16_t>(next);
}

void DatasetNamespace::store(Node& n, const NodeAttr& a, uint16_t owner) {
  n.mode = static_cast<uint16_t>((n.mode & S_IFMT) | (a.mode & ~S_IFMT));
  n.owner = owner;
  n.gone = a.gone ? 1 : 0;
  if (S_ISREG(n.mode)) n.value = a.size;
  if (S_ISCHR(n.mode) || S_ISBLK(n.mode)) n.value = a.rdev;
  n.sourceIno = a.sourceIno;
  n.mtimeNs = a.mtimeNs;
  n.ctimeNs = a.ctimeNs;
}

Result<DatasetNamespace::Node> DatasetNamespace::makeNode(std::string_view name, const NodeAttr& a,
                                                          std::string_view target) {
  if (name.size() > UINT16_MAX) return Status::tooLarge("a name longer than 65,535 bytes");
  if ((a.mode & ~uint32_t{0xffff}) != 0) return Status::invalidArgument("a mode past 16 bits");
  const std::optional<uint32_t> at = names_->append(name, target);
  if (!at) return Status::tooLarge("names and symlink targets past 4 GiB");
  const Result<uint16_t> owner = ownerIndex(a.uid, a.gid);
  if (!owner.isOk()) return owner.status();
  Node n{};
  n.nameOffset = *at;
  n.nameLength = static_cast<uint16_t>(name.size());
  n.mode = static_cast<uint16_t>(a.mode & S_IFMT);
  n.kind = S_ISDIR(a.mode) ? kDir : S_ISLNK(a.mode) ? kSymlink : kOther;
  if (S_ISLNK(a.mode)) n.value = target.size();
  store(n, a, *owner);
  return n;
}

void DatasetNamespace::renumberCanonically(size_t count) {
  // Breadth-first from the root over children sorted by name: the order
  // depends only on the tree. order: new index -> old index.
  std::vector<uint32_t> order;
  order.reserve(count);
  order.push_back(0);
  for (size_t i = 0; i < order.size(); ++i) {
    const Node& n = (*nodes_)[order[i]];
    if (n.kind != kDir) continue;
    const auto first = static_cast<uint32_t>(n.value), kids = static_cast<uint32_t>(n.value >> 32);
    for (uint32_t k = 0; k < kids; ++k) order.push_back(first - 1 + k);
  }
  const size_t reached = order.size();
  {
    std::vector<uint32_t> newIno(count, 0);  // old index -> new inode (0: not reached)
    for (size_t i = 0; i < reached; ++i) newIno[order[i]] = static_cast<uint32_t>(i + 1);
    for (size_t i = 0; i < reached; ++i) {
      Node& n = (*nodes_)[order[i]];
      n.parent = n.parent == 0 ? 0 : newIno[n.parent - 1];
      if (n.kind == kDir && (n.value >> 32) != 0) {
        n.value = (n.value >> 32) << 32 | newIno[static_cast<uint32_t>(n.value) - 1];
      }
    }
    // Nodes no range reaches go last, so `order` permutes every index.
    for (size_t old = 0; old < count; ++old) {
      if (newIno[old] == 0) order.push_back(static_cast<uint32_t>(old));
    }
  }
  // In place, cycle by cycle: position i takes the node at order[i].
  std::vector<bool> placed(count, false);
  for (size_t start = 0; start < count; ++start) {
    if (placed[start]) continue;
    const Node held = (*nodes_)[start];
    size_t at = start;
    for (;;) {
      placed[at] = true;
      const size_t from = order[at];
      if (from == start) {
        (*nodes_)[at] = held;
        break;
      }
      (*nodes_)[at] = (*nodes_)[from];
      at = from;
    }
  }
  growth_->count.store(reached, std::memory_order_release);
  snapshotCount_ = reached;
}

void DatasetNamespace::countEntries() {
  files_ = dirs_ = bytes_ = 0;
  for (Ino ino = 2; ino <= nodeCount(); ++ino) {  // the root is not counted
    const Node& n = node(ino);
    if (n.gone) continue;
    if (S_ISDIR(n.mode)) {
      ++dirs_;
    } else if (S_ISREG(n.mode)) {
      ++files_;
      bytes_ += n.value;
    }
  }
}

uint64_t DatasetNamespace::computeFingerprint(bool withVersions) const {
  XXH3_state_t* st = XXH3_createState();
  XXH3_64bits_reset(st);
  for (Ino ino = 1; ino <= nodeCount(); ++ino) {
    const NodeAttr a = attrOf(node(ino));
    // Directories' times change with their entries, which the paths cover.
    const bool dir = S_ISDIR(a.mode);
    const uint64_t fields[] = {a.mode, dir ? 0 : a.size, static_cast<uint64_t>(dir ? 0 : a.mtimeNs),
                               static_cast<uint64_t>(dir ? 0 : a.ctimeNs)};
    XXH3_64bits_update(st, fields, sizeof fields);
    const std::string p = path(ino);
    XXH3_64bits_update(st, p.c_str(), p.size() + 1);  // with the NUL
    const std::string_view target = symlinkTarget(ino);
    XXH3_64bits_update(st, target.data(), target.size());
    XXH3_64bits_update(st, "", 1);
    if (withVersions && !dir) XXH3_64bits_update(st, &a.sourceIno, sizeof a.sourceIno);
  }
  const uint64_t h = XXH3_64bits_digest(st);
  XXH3_freeState(st);
  return h;
}

DatasetNamespace::ChildList DatasetNamespace::children(Ino dir) const {
  if (const auto* lists = growth_->childLists.load(std::memory_order_acquire)) {
    if (const auto* slot = lists->find(dir - 1)) {
      if (const std::vector<uint32_t>* grown = slot->load(std::memory_order_acquire)) {
        return ChildList(grown);
      }
    }
  }
  const Node& n = node(dir);
  if (n.kind != kDir) return {};
  return ChildList(static_cast<uint32_t>(n.value), static_cast<uint32_t>(n.value >> 32));
}

DatasetNamespace::Ino DatasetNamespace::lookup(Ino parent, std::string_view name) const {
  const ChildList kids = children(parent);
  size_t lo = 0, hi = kids.size();
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    if (this->name(kids[mid]) < name) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  if (lo < kids.size() && this->name(kids[lo]) == name) return kids[lo];
  return 0;
}

std::string_view DatasetNamespace::name(Ino ino) const {
  const Node& n = node(ino);
  return names_->view(n.nameOffset, n.nameLength);
}

std::string_view DatasetNamespace::symlinkTarget(Ino ino) const {
  const Node& n = node(ino);
  if (n.kind != kSymlink) return {};
  // A symlink's value is its target's length (set once, at its creation).
  return names_->view(n.nameOffset + n.nameLength, static_cast<size_t>(n.value));
}

std::string DatasetNamespace::path(Ino ino) const {
  size_t length = 0;
  for (Ino i = ino; i != kRootIno; i = node(i).parent) length += node(i).nameLength + 1u;
  if (length == 0) return {};
  std::string out(length - 1, '/');
  size_t end = out.size();
  for (Ino i = ino; i != kRootIno; i = node(i).parent) {
    const std::string_view n = name(i);
    end -= n.size();
    std::memcpy(out.data() + end, n.data(), n.size());
    if (end > 0) --end;  // the '/' before it
  }
  return out;
}

uint64_t DatasetNamespace::fileId(Ino ino) const { return cache::fileIdForPath(path(ino)); }

uint64_t DatasetNamespace::memoryBytes() const {
  cache::MutexLock lock(*ownersMu_);
  return nodeCount() * sizeof(Node) + names_->used() + ownerIds_->size() * (sizeof(Owner) + 32);
}

NodeAttr DatasetNamespace::attrOf(const Node& n) const {
  NodeAttr a;
  a.mode = n.mode;
  const Owner& o = (*owners_)[n.owner];
  a.uid = o.uid;
  a.gid = o.gid;
  a.nlink = 1;
  if (S_ISREG(n.mode) || S_ISLNK(n.mode)) a.size = n.value;
  if (S_ISDIR(n.mode)) a.size = kDirectorySize;
  if (S_ISCHR(n.mode) || S_ISBLK(n.mode)) a.rdev = n.value;
  a.sourceIno = n.sourceIno;
  a.atimeNs = n.mtimeNs;
  a.mtimeNs = n.mtimeNs;
  a.ctimeNs = n.ctimeNs;
  a.gone = n.gone != 0;
  return a;
}

NodeAttr DatasetNamespace::attr(Ino ino) const {
  cache::MutexLock lock(stripe(ino));
  return attrOf(node(ino));
}

void DatasetNamespace::setAttr(Ino ino, const NodeAttr& a) {
  // A new owner pair is interned first (no lock held across both).
  Result<uint16_t> owner = ownerIndex(a.uid, a.gid);
  cache::MutexLock lock(stripe(ino));
  Node& n = mutableNode(ino);
  const NodeAttr old = attrOf(n);
  store(n, a, owner.isOk() ? *owner : n.owner);
  const NodeAttr now = attrOf(n);
  // Unsigned arithmetic: a decrease wraps, and the sum with the base is right.
  auto counted = [](const NodeAttr& x, bool dir) -> uint64_t {
    return !x.gone && (dir ? S_ISDIR(x.mode) : S_ISREG(x.mode)) ? 1 : 0;
  };
  auto bytes = [&](const NodeAttr& x) { return counted(x, false) * x.size; };
  if (ino != kRootIno) {
    growth_->files.fetch_add(counted(now, false) - counted(old, false), std::memory_order_relaxed);
    growth_->dirs.fetch_add(counted(now, true) - counted(old, true), std::memory_order_relaxed);
    growth_->bytes.fetch_add(bytes(now) - bytes(old), std::memory_order_relaxed);
  }
}

cache::FileIdentity DatasetNamespace::identity(Ino ino) const {
  NodeAttr a = attr(ino);
  cache::FileIdentity id;
  id.fileId = fileId(ino);
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
