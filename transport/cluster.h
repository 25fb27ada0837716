// Cluster: this node's view of the job's daemons, seen from the cache as a
// cache::PeerSource. Joins the members over UCX (listener + one outbound
// endpoint per peer, mutual HMAC authentication before any data), places
// files by rendezvous hashing over the live members, fetches chunks of files
// other nodes own and serves this node's chunks to them. Only epochfs types
// cross this header: UCX and OpenSSL stay in transport/.
//
// Failure model: a peer that errors, refuses authentication or misses a
// request's deadline is taken out of placement (its files get new owners)
// and probed in the background; it rejoins when it answers. fetch() never
// blocks past the deadline; its errors make ChunkCache read the source.
//
// Thread-safety: every public method may be called from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cache/chunk.h"
#include "cache/peer_source.h"
#include "cache/status.h"
#include "transport/peer_fault.h"
#include "transport/placement_table.h"

namespace epochfs::transport {

// One member of the job: node id = its position in the member list, the same
// on every node.
struct Member {
  uint32_t id = 0;
  std::string host;
  uint16_t port = 0;
  std::string address() const { return host + ":" + std::to_string(port); }
};

struct ClusterConfig {
  std::vector<Member> members;  // every node, this one included, same order everywhere
  uint32_t selfId = 0;
  std::string listenHost = "0.0.0.0";
  uint16_t listenPort = 0;                   // 0: any free port (tests)
  unsigned replicas = 1;                     // owners per file
  std::chrono::milliseconds deadline{2000};  // per peer request
  std::string secret;                        // the job's shared secret (required)
  bool macPayloads = true;                   // false: --peer-integrity=checksum (XXH3 only)
  uint64_t capacityBytes = 0;                // this node's cache size, the placement weight
  // Every file of the snapshot with its size: placement bounds each node's
  // owned bytes by its capacity (placement_table.h). Empty: plain rendezvous.
  std::vector<FileBytes> files;
  // Called (on the progress thread, no lock held) after the live set and so
  // the placement changed; must not block long.
  std::function<void()> onPlacementChange;
  unsigned serveThreads = 4;  // threads answering peers (they may read the source)
  unsigned maxInFlightPerPeer = 64;
  unsigned maxQueuedServes = 1024;
  // Idle receive buffers kept for reuse (no zero-fill, no page faults for the
  // next reply); buffers come back when the chunks received into them go.
  uint64_t receivePoolBytes = 32ull << 20;
  // A peer whose replies fail their MAC or checksum `suspectAfter` times
  // within `failureWindow` is suspect (out of placement, not asked) for
  // `suspectFor`, doubling on each repeat up to `maxSuspectFor`; then it is
  // tried again.
  unsigned suspectAfter = 3;
  std::chrono::milliseconds failureWindow{10000};
  std::chrono::milliseconds suspectFor{5000};
  std::chrono::milliseconds maxSuspectFor{60000};
  // An inbound connection that has not authenticated by then is closed.
  std::chrono::milliseconds handshakeTimeout{5000};
  PeerFault fault;  // TEST-ONLY corruption of served chunks (peer_fault.h)
};

// What `epochctl peers` shows of one member.
struct PeerInfo {
  uint32_t id = 0;
  std::string address;
  std::string state;  // self, connecting, up, suspect, down, refused
  bool live = false;  // counted in placement
  uint64_t capacityBytes = 0;
  uint64_t ownedBytes = 0;  // bytes placement gives it (0 while not live)
  uint64_t fetches = 0, bytesFetched = 0, fetchErrors = 0, timeouts = 0;
  uint64_t served = 0, bytesServed = 0, serveErrors = 0;
  uint64_t authFailures = 0, connects = 0;
  // Replies from this peer whose payload MAC / XXH3 checksum failed (the
  // bytes were fetched elsewhere).
  uint64_t macFailures = 0, checksumFailures = 0;
  // Requests this node refused to serve to the peer (file not in this
  // node's snapshot, or another version of it), and ours the peer refused.
  uint64_t serveRefused = 0, fetchRefused = 0;
  uint64_t suspectCount = 0;    // times marked suspect for bad payloads
  uint64_t suspectForMs = 0;    // while suspect: ms until it is tried again
  uint64_t faultsInjected = 0;  // chunks this node corrupted for it (test hook)
  std::string lastError;
};

// Answers a peer's request for chunk `index` of the file at version `id`
// (file id + identity): the daemon maps the id to a path of its snapshot and
// calls ChunkCache::getForPeer. Called on the serve threads.
using ServeFn =
    std::function<cache::Result<cache::ChunkRef>(const cache::FileIdentity& id, uint32_t index)>;

class Cluster : public cache::PeerSource {
 public:
  // Starts the UCX worker, its progress thread and the listener, and begins
  // connecting to the other members (in the background).
  static cache::Result<std::unique_ptr<Cluster>> start(const ClusterConfig& config, ServeFn serve);

  ~Cluster() override = default;
  virtual std::vector<PeerInfo> peers() const = 0;
  // The owners of a file among the live members, best first.
  virtual std::vector<uint32_t> owners(uint64_t fileId) const = 0;
  // Whether the dataset fits the live members' capacity (PlacementTable::fits;
  // true without a file list), and the figures behind it.
  struct Fit {
    bool ready = true;  // the bounded-load table of the current live set is built
    bool fits = true;
    uint64_t datasetBytes = 0;
    uint64_t liveCapacityBytes = 0;
    unsigned replicas = 1;
  };
  virtual Fit fit() const = 0;
  virtual uint16_t listenPort() const = 0;
  virtual const ClusterConfig& config() const = 0;
  // Placement over `files` from now on, for a cluster started without them
  // (ClusterConfig::files empty: the namespace comes from a peer after the
  // cluster is up). Once; a later call is ignored. fit().ready is false until
  // the table over them for the live set is built.
  virtual void setFiles(std::vector<FileBytes> files) = 0;
  // Chunk `index` of file `id` from member `node` itself, whoever owns it
  // (the namespace's transfer down its tree). Same checks as fetch(); blocks
  // up to the deadline.
  virtual cache::Result<cache::ChunkRef> fetchFromNode(uint32_t node, const cache::FileIdentity& id,
                                                       uint32_t index) = 0;
};

}  // namespace epochfs::transport
