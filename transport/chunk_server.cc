#include "transport/chunk_server.h"

#include <spdlog/spdlog.h>

#include "cache/checksum.h"

namespace epochfs::transport {

using cache::Status;

namespace {

bool isRefusal(uint32_t code) {
  return code == static_cast<uint32_t>(Status::Code::kNotFound) ||
         code == static_cast<uint32_t>(Status::Code::kStale);
}

}  // namespace

ChunkServer::ChunkServer(const ClusterConfig& config, ServeFn serve,
                         std::atomic<uint64_t>& macCounter, std::vector<Stats*> statsByNode,
                         SendFn send)
    : cfg_(config),
      serve_(std::move(serve)),
      signing_(config.macPayloads),
      macCounter_(macCounter),
      stats_(std::move(statsByNode)),
      send_(std::move(send)) {}

ChunkServer::~ChunkServer() { stop(); }

void ChunkServer::start() {
  for (unsigned i = 0; i < std::max(1u, cfg_.serveThreads); ++i) {
    threads_.emplace_back([this] { serveMain(); });
  }
}

void ChunkServer::stop() {
  {
    cache::MutexLock lock(mu_);
    stop_ = true;
  }
  cv_.notifyAll();
  for (auto& t : threads_) t.join();
  threads_.clear();
}

bool ChunkServer::submit(Task task) {
  {
    cache::MutexLock lock(mu_);
    if (stop_ || queue_.size() >= cfg_.maxQueuedServes) return false;
    queue_.push_back(std::move(task));
  }
  cv_.notifyOne();
  return true;
}

void ChunkServer::serveMain() {
  for (;;) {
    Task t;
    {
      cache::MutexLock lock(mu_);
      cv_.wait(mu_, [&]() REQUIRES(mu_) { return stop_ || !queue_.empty(); });
      if (stop_) return;
      t = std::move(queue_.front());
      queue_.pop_front();
    }
    send_(answer(t));
  }
}

ChunkServer::Reply ChunkServer::answer(const Task& t) {
  Stats& asker = *stats_[t.remote];
  Reply out;
  out.connId = t.connId;
  wire::Reply& reply = out.header;
  reply.reqId = t.req.reqId;
  if (Clock::now() - t.arrived > std::chrono::milliseconds(t.req.deadlineMs)) {
    reply.code = static_cast<uint32_t>(Status::Code::kTimedOut);
  } else {
    cache::FileIdentity id{t.req.fileId, t.req.size, t.req.mtimeNs, t.req.ctimeNs, t.req.inode};
    auto r = serve_(id, t.req.chunkIndex);
    if (r.isOk()) {
      out.chunk = std::move(r).value();
      reply.checksum = out.chunk->checksum;
      reply.length = out.chunk->size();
    } else {
      reply.code = static_cast<uint32_t>(r.status().code());
    }
  }
  reply.counter = macCounter_.fetch_add(1);
  if (reply.code != 0) {
    asker.serveErrors.fetch_add(1, std::memory_order_relaxed);
    if (isRefusal(reply.code)) {
      // A peer naming a file outside this snapshot or another version of it.
      const uint64_t n = asker.serveRefused.fetch_add(1, std::memory_order_relaxed) + 1;
      if ((n & (n - 1)) == 0) {  // 1st, 2nd, 4th, ...: no log flood
        spdlog::warn("cluster: refused node {}'s request for file {:016x} ({}; {} refused so far)",
                     t.remote, t.req.fileId,
                     reply.code == static_cast<uint32_t>(Status::Code::kStale)
                         ? "another version"
                         : "not in this dataset",
                     n);
      }
    }
  } else {
    asker.served.fetch_add(1, std::memory_order_relaxed);
    asker.bytesServed.fetch_add(reply.length, std::memory_order_relaxed);
  }
  reply.tag = Tag{};
  if (out.chunk && out.chunk->size() > 0 && cfg_.fault.active() &&
      (chunksServed_.fetch_add(1, std::memory_order_relaxed) + 1) % cfg_.fault.every == 0) {
    out.chunk = injectFault(out.chunk, reply, t.mac, asker);
  } else if (signing_ && t.mac.valid()) {
    // Signed here, off the progress thread, with the session key the
    // progress thread copied into the task.
    reply.tag =
        t.mac.sign(wire::kToClient, reply.counter, &reply, sizeof reply,
                   out.chunk ? out.chunk->data.data() : nullptr, out.chunk ? out.chunk->size() : 0);
  }
  return out;
}

// TEST-ONLY: see peer_fault.h. The cached chunk is never modified: the
// corrupted bytes are a copy.
cache::ChunkRef ChunkServer::injectFault(const cache::ChunkRef& chunk, wire::Reply& reply,
                                         const PayloadMac& mac, Stats& asker) {
  const bool signing = signing_ && mac.valid();
  auto sign = [&](const cache::Chunk& c) {
    wire::Reply plain = reply;
    plain.tag = Tag{};
    return mac.sign(wire::kToClient, plain.counter, &plain, sizeof plain, c.data.data(), c.size());
  };
  auto bad = std::make_shared<cache::Chunk>();
  bad->key = chunk->key;
  bad->identity = chunk->identity;
  bad->checksum = chunk->checksum;
  bad->data = cache::ChunkBuffer::copyOf(chunk->data.data(), chunk->size());
  const uint64_t n = reply.counter;
  bad->data[(n * 7919) % bad->size()] ^= static_cast<char>(1u << (n % 8));
  switch (cfg_.fault.mode) {
    case PeerFault::Mode::kMemory:  // corrupted before signing: valid MAC, stale checksum
      if (signing) reply.tag = sign(*bad);
      break;
    case PeerFault::Mode::kForge:  // checksum fixed, MAC of the genuine bytes
      bad->checksum = cache::checksum(bad->data.data(), bad->size());
      if (signing) reply.tag = sign(*chunk);
      reply.checksum = bad->checksum;
      break;
    case PeerFault::Mode::kWire:  // corrupted after signing
    case PeerFault::Mode::kNone:
      if (signing) reply.tag = sign(*chunk);
      break;
  }
  asker.faultsInjected.fetch_add(1, std::memory_order_relaxed);
  return bad;
}

}  // namespace epochfs::transport
