#include "fusefs/daemon/namespace_exchange.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <thread>

namespace epochfs::fusefs {

using cache::Result;
using cache::Status;
using Clock = std::chrono::steady_clock;

// Chunk 0 of kFileId. Native-endian like the rest of the wire format.
struct NamespaceExchange::Manifest {
  enum State : uint8_t { kWaiting = 0, kWalking = 1, kHolding = 2 };
  static constexpr uint32_t kMagic = 0x534e5045;  // "EPNS"
  static constexpr uint16_t kVersion = 1;
  uint32_t magic = kMagic;
  uint16_t version = kVersion;
  uint8_t state = kWaiting;
  uint8_t pad = 0;
  uint32_t walker = UINT32_MAX;  // none known yet
  uint32_t pieceBytes = 0;
  uint64_t progress = 0;    // the walker's entries (and requests) so far
  uint64_t imageBytes = 0;  // kHolding: the image's length
  uint64_t haveBytes = 0;   // kHolding: the prefix of it held (and served)
  uint64_t fingerprint = 0;
};
static_assert(sizeof(NamespaceExchange::Manifest) == 48);

namespace {

constexpr uint32_t kMaxPieceBytes = 64u << 20;

cache::FileIdentity imageIdentity() {
  cache::FileIdentity id;
  id.fileId = NamespaceExchange::kFileId;
  return id;  // size 0: the reply's own length sizes the receive buffer
}

std::string ms(std::chrono::milliseconds d) { return fmt::format("{:.1f} s", d.count() / 1000.0); }

// All `n` bytes at `offset` of `fd` (pread, or pwrite when `write`).
Status fullIo(bool write, int fd, char* p, size_t n, uint64_t offset) {
  for (size_t done = 0; done < n;) {
    const off_t at = static_cast<off_t>(offset + done);
    const ssize_t got =
        write ? pwrite(fd, p + done, n - done, at) : pread(fd, p + done, n - done, at);
    if (got <= 0) {
      return Status::fromErrno(got < 0 ? errno : EIO,
                               write ? "write namespace image" : "read namespace image");
    }
    done += static_cast<size_t>(got);
  }
  return Status::ok();
}

}  // namespace

NamespaceExchange::NamespaceExchange(transport::Cluster& cluster, Options options)
    : cluster_(cluster),
      options_(std::move(options)),
      self_(cluster.config().selfId),
      members_(cluster.config().members.size()),
      out_(members_, false),
      seenUp_(members_, false) {}

NamespaceExchange::~NamespaceExchange() {
  if (fd_ >= 0) close(fd_);
}

NamespaceExchange::Manifest NamespaceExchange::manifestNow() const {
  Manifest m;
  m.state = state_;
  m.walker = walker_;
  m.pieceBytes = options_.pieceBytes;
  m.progress = progress_;
  if (state_ == Manifest::kWalking) {
    m.progress = walkProgress_.load(std::memory_order_relaxed) +
                 (options_.sourceProgress ? options_.sourceProgress() : 0);
  }
  m.imageBytes = imageBytes_;
  m.haveBytes = haveBytes_;
  m.fingerprint = fingerprint_;
  return m;
}

Result<cache::ChunkRef> NamespaceExchange::serve(const cache::FileIdentity& id,
                                                 uint32_t index) const {
  const auto key = cache::ChunkKey::make(0, kFileId, index);
  cache::MutexLock lock(mu_);
  if (index == 0) {
    const Manifest m = manifestNow();
    return cache::makeChunk(key, id, cache::ChunkBuffer::copyOf(&m, sizeof m));
  }
  if (state_ != Manifest::kHolding) return Status::unavailable("no namespace image yet");
  const uint64_t begin = uint64_t(index - 1) * options_.pieceBytes;
  if (begin >= imageBytes_) return Status::invalidArgument("past the namespace image's end");
  const uint64_t end = std::min<uint64_t>(begin + options_.pieceBytes, imageBytes_);
  if (end > haveBytes_) return Status::unavailable("that piece of the image has not come yet");
  cache::ChunkBuffer data(end - begin);
  // Under mu_: the image is not replaced while it is read (a piece is ~1 ms).
  if (Status s = fullIo(false, fd_, data.data(), data.size(), begin); !s.isOk()) return s;
  return cache::makeChunk(key, id, std::move(data));
}

std::vector<std::string> NamespaceExchange::peerStates() const {
  std::vector<std::string> states(members_, "down");
  for (const auto& p : cluster_.peers()) {
    if (p.id < members_) states[p.id] = p.state;
  }
  return states;
}

uint32_t NamespaceExchange::parentNow() const {
  std::vector<uint32_t> left;
  for (uint32_t m = 0; m < members_; ++m) {
    if (!out_[m] || m == self_) left.push_back(m);
  }
  const size_t pos = static_cast<size_t>(std::find(left.begin(), left.end(), self_) - left.begin());
  return pos == 0 ? self_ : left[(pos - 1) / std::max(1u, options_.fanOut)];
}

void NamespaceExchange::countOut(uint32_t member, const char* why) {
  countOut(std::vector<uint32_t>{member}, why);
}

void NamespaceExchange::countOut(const std::vector<uint32_t>& members, const char* why) {
  std::vector<uint32_t> now;
  for (uint32_t m : members) {
    if (m >= members_ || m == self_ || out_[m]) continue;
    out_[m] = true;
    now.push_back(m);
  }
  if (now.empty()) return;
  if (now.size() == 1) {
    spdlog::warn("namespace: member {} counted out ({}); the tree is recomputed", now[0], why);
  } else {
    spdlog::warn("namespace: {} members counted out ({}), {} to {}; the tree is recomputed",
                 now.size(), why, now.front(), now.back());
  }
  cache::MutexLock lock(mu_);
  origin_.countedOut.insert(origin_.countedOut.end(), now.begin(), now.end());
}

Result<NamespaceExchange::Manifest> NamespaceExchange::askManifest(uint32_t parent) {
  auto c = cluster_.fetchFromNode(parent, imageIdentity(), 0);
  if (!c.isOk()) return c.status();
  const auto& data = (*c)->data;
  Manifest m;
  if (data.size() != sizeof m) return Status::corruption("a namespace manifest of the wrong size");
  std::memcpy(&m, data.data(), sizeof m);
  if (m.magic != Manifest::kMagic || m.version != Manifest::kVersion ||
      m.state > Manifest::kHolding || m.pieceBytes == 0 || m.pieceBytes > kMaxPieceBytes ||
      m.haveBytes > m.imageBytes) {
    return Status::corruption("a malformed namespace manifest");
  }
  return m;
}

Result<DatasetNamespace> NamespaceExchange::obtain(const Walk& walk, const Publish& publish,
                                                   const Adopt& adopt) {
  const auto start = Clock::now();
  std::vector<Clock::time_point> failingSince(members_, Clock::time_point::max());
  uint32_t lastWalker = UINT32_MAX;
  uint64_t lastProgress = 0;
  auto lastChange = Clock::now();
  uint32_t announced = UINT32_MAX;
  for (;;) {
    const uint32_t parent = parentNow();
    if (parent == self_) return walkHere(walk, publish);
    if (parent != announced) {
      spdlog::info("namespace: waiting for member {}'s copy (tree fan-out {})", parent,
                   options_.fanOut);
      announced = parent;
    }
    auto m = askManifest(parent);
    const auto states = peerStates();
    for (uint32_t i = 0; i < members_; ++i) seenUp_[i] = seenUp_[i] || states[i] == "up";
    const auto now = Clock::now();
    if (now - start > options_.stallBound) {
      // Members below this one that never came up within the bound: all
      // counted out at once (not one bound each: a member started alone
      // walks after one bound, not after one per member below it).
      std::vector<uint32_t> never;
      for (uint32_t i = 0; i < self_; ++i) {
        if (!seenUp_[i] && !out_[i] && states[i] != "up") never.push_back(i);
      }
      if (!never.empty()) {
        countOut(never, "not up within the bound");
        continue;
      }
    }
    if (!m.isOk()) {
      if (states[parent] == "refused") {
        countOut(parent, "the handshake with it failed (another secret?)");
      } else if (seenUp_[parent] && states[parent] != "up" && states[parent] != "suspect") {
        countOut(parent, "its connection was lost");
      } else if (failingSince[parent] == Clock::time_point::max()) {
        failingSince[parent] = now;
      } else if (now - failingSince[parent] > options_.stallBound) {
        countOut(parent, "no answer within the bound");
      }
      std::this_thread::sleep_for(options_.poll);
      continue;
    }
    failingSince[parent] = Clock::time_point::max();
    if (m->state == Manifest::kHolding) {
      auto ns = receive(parent, *m, adopt);
      if (ns.isOk()) {
        cache::MutexLock lock(mu_);
        origin_.parent = parent;
        origin_.walker = m->walker;
        origin_.imageBytes = m->imageBytes;
        origin_.waitedSeconds = std::chrono::duration<double>(Clock::now() - start).count();
        return ns;
      }
      spdlog::warn("namespace: receiving from member {}: {}", parent, ns.status().message());
      if (ns.status().code() == Status::Code::kCorruption) {
        countOut(parent, "its image failed its checks");
      }
      std::this_thread::sleep_for(options_.poll);
      continue;
    }
    // Waiting on a walk: relay its progress to this member's children.
    {
      cache::MutexLock lock(mu_);
      walker_ = m->walker;
      progress_ = m->progress;
    }
    const uint32_t w = m->walker;
    if (w < members_ && w != self_ && !out_[w]) {
      if (w != lastWalker || m->progress != lastProgress) {
        lastWalker = w;
        lastProgress = m->progress;
        lastChange = now;
      } else if (now - lastChange > options_.stallBound) {
        countOut(w, "its walk made no progress within the bound");
      }
      if (seenUp_[w] && states[w] != "up" && states[w] != "suspect") {
        countOut(w, "its connection was lost");
      }
    }
    std::this_thread::sleep_for(options_.poll);
  }
}

Result<DatasetNamespace> NamespaceExchange::receive(uint32_t parent, Manifest m,
                                                    const Adopt& adopt) {
  uint64_t have = 0;
  {
    cache::MutexLock lock(mu_);
    // A prefix held from this parent is kept (its relays' children read on);
    // from another, it starts over (another sender's bytes may differ).
    if (fd_ < 0 || state_ != Manifest::kHolding || fingerprint_ != m.fingerprint ||
        imageBytes_ != m.imageBytes || options_.pieceBytes != m.pieceBytes ||
        imageFrom_ != parent) {
      if (m.pieceBytes != options_.pieceBytes) {
        return Status::invalidArgument(
            fmt::format("its pieces are {} bytes, this member's {} (--chunk-size differs)",
                        m.pieceBytes, options_.pieceBytes));
      }
      resetImage();
      fd_ = memfd_create("epochfs-namespace-peer", MFD_CLOEXEC | MFD_ALLOW_SEALING);
      if (fd_ < 0) return Status::fromErrno(errno, "memfd_create");
      state_ = Manifest::kHolding;
      walker_ = m.walker;
      imageBytes_ = m.imageBytes;
      fingerprint_ = m.fingerprint;
      imageFrom_ = parent;
    }
    have = haveBytes_;
  }
  uint64_t known = m.haveBytes;
  auto lastAdvance = Clock::now();
  while (have < m.imageBytes) {
    const uint64_t end = std::min<uint64_t>(have + m.pieceBytes, m.imageBytes);
    if (end > known) {  // the parent has not got it yet: ask again shortly
      if (Clock::now() - lastAdvance > 2 * options_.stallBound) {
        return Status::timedOut("its copy stood still for " + ms(2 * options_.stallBound));
      }
      std::this_thread::sleep_for(options_.poll);
      auto again = askManifest(parent);
      if (!again.isOk()) return again.status();
      if (again->state != Manifest::kHolding || again->fingerprint != m.fingerprint ||
          again->imageBytes != m.imageBytes) {
        return Status::stale("it started over");
      }
      known = again->haveBytes;
      continue;
    }
    const uint32_t index = static_cast<uint32_t>(have / m.pieceBytes + 1);
    auto piece = cluster_.fetchFromNode(parent, imageIdentity(), index);
    if (!piece.isOk()) return piece.status();
    const auto& data = (*piece)->data;
    if (data.size() != end - have) return Status::corruption("a piece of the wrong length");
    cache::MutexLock lock(mu_);
    Status s = fullIo(true, fd_, const_cast<char*>(data.data()), data.size(), have);
    if (!s.isOk()) return s;
    have = haveBytes_ = end;
    lastAdvance = Clock::now();
  }
  int copy = -1;
  {
    cache::MutexLock lock(mu_);
    if (fcntl(fd_, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) != 0 &&
        errno != EPERM) {  // EPERM: sealed already (a second try over the same copy)
      return Status::fromErrno(errno, "seal namespace image");
    }
    sealed_ = true;
    copy = fcntl(fd_, F_DUPFD_CLOEXEC, 0);
    if (copy < 0) return Status::fromErrno(errno, "dup namespace image");
  }
  auto ns = adopt(copy, fmt::format("{:016x}", m.fingerprint));
  if (!ns.isOk()) {
    cache::MutexLock lock(mu_);
    resetImage();
    return Status::corruption("member " + std::to_string(parent) +
                              "'s image: " + ns.status().message());
  }
  return ns;
}

Result<DatasetNamespace> NamespaceExchange::walkHere(const Walk& walk, const Publish& publish) {
  const auto start = Clock::now();
  {
    cache::MutexLock lock(mu_);
    resetImage();
    state_ = Manifest::kWalking;
    walker_ = self_;
  }
  spdlog::info("namespace: this member walks the source for the job");
  auto ns = walk(&walkProgress_);
  if (!ns.isOk()) {
    cache::MutexLock lock(mu_);
    state_ = Manifest::kWaiting;
    return ns.status();
  }
  // The listing is done; encoding the image is the last phase without
  // progress of its own (seconds at 10 M files, within the bound).
  walkProgress_.fetch_add(1, std::memory_order_relaxed);
  if (Status s = hold(*ns, publish); !s.isOk()) {
    spdlog::warn("namespace: cannot serve it to the other members ({}); they will walk",
                 s.message());
  }
  cache::MutexLock lock(mu_);
  origin_.walked = true;
  origin_.parent = origin_.walker = self_;
  origin_.waitedSeconds = std::chrono::duration<double>(Clock::now() - start).count();
  return ns;
}

Status NamespaceExchange::hold(const DatasetNamespace& ns, const Publish& publish) {
  auto fd = publish(ns);
  if (!fd.isOk()) return fd.status();
  return holdSealed(*fd, ns.fingerprint());
}

Status NamespaceExchange::holdSealed(int fd, uint64_t fingerprint) {
  struct stat st;
  if (fstat(fd, &st) != 0) {
    const int err = errno;
    close(fd);
    return Status::fromErrno(err, "stat namespace image");
  }
  cache::MutexLock lock(mu_);
  resetImage();
  fd_ = fd;
  state_ = Manifest::kHolding;
  if (walker_ == UINT32_MAX) walker_ = self_;
  imageBytes_ = haveBytes_ = static_cast<uint64_t>(st.st_size);
  fingerprint_ = fingerprint;
  imageFrom_ = self_;
  sealed_ = true;  // publish() seals it
  origin_.imageBytes = imageBytes_;
  return Status::ok();
}

void NamespaceExchange::resetImage() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
  state_ = Manifest::kWaiting;
  imageBytes_ = haveBytes_ = fingerprint_ = 0;
  imageFrom_ = UINT32_MAX;
  sealed_ = false;
}

int NamespaceExchange::sealedImage() const {
  cache::MutexLock lock(mu_);
  if (!sealed_ || fd_ < 0) return -1;
  return fcntl(fd_, F_DUPFD_CLOEXEC, 0);
}

NamespaceExchange::Origin NamespaceExchange::origin() const {
  cache::MutexLock lock(mu_);
  return origin_;
}

}  // namespace epochfs::fusefs
