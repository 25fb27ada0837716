// NamespaceExchange: one walk per job (docs/CLUSTER.md "One walk per job").
//
// The lowest member not counted out walks (or lists) the source; every
// other member receives the namespace image (fusefs/namespace_image.h, the
// hand-over's format) from its parent in a tree of fan-out k over the members
// not counted out, in id order: position p's parent is position (p-1)/k. The
// image travels through the peer protocol (transport/cluster.h: authenticated,
// checksummed like every chunk) as the reserved file kFileId: chunk 0 is a
// manifest (state, walker, the walker's progress, the image's length, the
// prefix of it this member holds, the fingerprint), chunk i >= 1 the image's
// (i-1)-th piece. A member serves the pieces it holds while it is still
// receiving the rest, so the tree is pipelined.
//
// Succession: a member counts out (i) its parent, or the walker a manifest
// names, once that member was up and is not any more (a crash), (ii) a parent
// that refused the handshake (another job's secret), (iii) every member below
// it never up within `stallBound` of its start, at once, (iv) a parent up but
// not answering for `stallBound`, (v) a walker whose progress has stood still
// for `stallBound`, (vi) a parent whose image failed its checks. It then recomputes the tree;
// when it is the lowest member left, it walks. A parent always has a lower id than its child,
// whatever each one has counted out, so no two members wait on each other. A received image is
// decoded, its checksum checked and its fingerprint compared with the manifest's before use.
//
// Threading: obtain() and hold() on the daemon's start thread; serve() on the
// cluster's serve threads, at any time (before obtain(): "not yet").
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cache/chunk.h"
#include "cache/mutex.h"
#include "cache/status.h"
#include "fusefs/dataset_namespace.h"
#include "transport/cluster.h"

namespace epochfs::fusefs {

class NamespaceExchange {
 public:
  // File id of the image on the wire (XXH3 of a path is never 0 in practice;
  // the serve callback checks this id before the file index).
  static constexpr uint64_t kFileId = 0;

  struct Manifest;  // chunk 0 of kFileId (namespace_exchange.cc)

  struct Options {
    unsigned fanOut = 4;
    std::chrono::milliseconds stallBound{30000};
    std::chrono::milliseconds poll{50};
    uint32_t pieceBytes = 4u << 20;
    // More progress of the walk than its entries (an object store's listing:
    // its requests and bytes); unset: none.
    std::function<uint64_t()> sourceProgress;
  };
  // The walk or listing; sets `*progress` as it goes where it can.
  using Walk = std::function<cache::Result<DatasetNamespace>(std::atomic<uint64_t>* progress)>;
  // A sealed memfd holding `ns`'s image (NamespaceHandover::publish).
  using Publish = std::function<cache::Result<int>(const DatasetNamespace& ns)>;
  // The namespace in sealed memfd `fd` (closed by it), if its fingerprint is
  // the hex string given (NamespaceHandover::adopt).
  using Adopt =
      std::function<cache::Result<DatasetNamespace>(int fd, const std::string& fingerprint)>;

  // Where this member's namespace came from (status.dataset).
  struct Origin {
    bool walked = false;
    uint32_t parent = 0;  // the member it came from (walked: this one)
    uint32_t walker = 0;
    uint64_t imageBytes = 0;
    double waitedSeconds = 0;  // from obtain() until the namespace was decoded
    std::vector<uint32_t> countedOut;
  };

  NamespaceExchange(transport::Cluster& cluster, Options options);
  ~NamespaceExchange();
  NamespaceExchange(const NamespaceExchange&) = delete;
  NamespaceExchange& operator=(const NamespaceExchange&) = delete;

  // Walks, or receives the namespace from the tree (waits as long as it takes).
  cache::Result<DatasetNamespace> obtain(const Walk& walk, const Publish& publish,
                                         const Adopt& adopt);
  // Serves `ns` to the tree from now on (a namespace got another way: the
  // supervisor's hand-over).
  cache::Status hold(const DatasetNamespace& ns, const Publish& publish);
  // The same for an image already in sealed memfd `fd` (owned from here),
  // of the namespace whose fingerprint is `fingerprint`.
  cache::Status holdSealed(int fd, uint64_t fingerprint);
  // Chunk `index` of kFileId for a peer.
  cache::Result<cache::ChunkRef> serve(const cache::FileIdentity& id, uint32_t index) const;
  Origin origin() const;
  // A descriptor of the whole image held (sealed), for the supervisor's
  // hand-over without a second copy; -1 while there is none.
  int sealedImage() const;

 private:
  // The member this one waits on now, or selfId when it is to walk.
  uint32_t parentNow() const;
  void countOut(uint32_t member, const char* why) EXCLUDES(mu_);
  void countOut(const std::vector<uint32_t>& members, const char* why) EXCLUDES(mu_);
  // Peer states now, by member id ("up", "down", ...).
  std::vector<std::string> peerStates() const;
  cache::Result<Manifest> askManifest(uint32_t parent);
  // Receives the image from `parent` whose manifest is `m`; an error sends the
  // caller back to choosing a parent.
  cache::Result<DatasetNamespace> receive(uint32_t parent, Manifest m, const Adopt& adopt);
  cache::Result<DatasetNamespace> walkHere(const Walk& walk, const Publish& publish);
  void resetImage() REQUIRES(mu_);
  Manifest manifestNow() const REQUIRES(mu_);

  transport::Cluster& cluster_;
  const Options options_;
  const uint32_t self_;
  const size_t members_;
  std::vector<bool> out_;     // counted out (start thread)
  std::vector<bool> seenUp_;  // was up at some poll (start thread)
  std::atomic<uint64_t> walkProgress_{0};

  mutable cache::Mutex mu_;  // what serve() and origin() read
  Origin origin_ GUARDED_BY(mu_);
  int fd_ GUARDED_BY(mu_) = -1;        // the image: a memfd, written as it arrives
  uint8_t state_ GUARDED_BY(mu_) = 0;  // Manifest::State
  uint32_t walker_ GUARDED_BY(mu_) = UINT32_MAX;
  uint64_t progress_ GUARDED_BY(mu_) = 0;  // the walker's, as last relayed
  uint64_t imageBytes_ GUARDED_BY(mu_) = 0;
  uint64_t haveBytes_ GUARDED_BY(mu_) = 0;
  uint64_t fingerprint_ GUARDED_BY(mu_) = 0;
  // The member the image (or its prefix) came from.
  uint32_t imageFrom_ GUARDED_BY(mu_) = UINT32_MAX;
  bool sealed_ GUARDED_BY(mu_) = false;  // fd_ holds the whole image and is sealed
};

}  // namespace epochfs::fusefs
