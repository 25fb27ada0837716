#include "transport/chunk_server.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>

namespace epochfs::transport {
namespace {

using cache::Status;
using namespace std::chrono_literals;

// Collects the replies the serve threads hand back.
struct Replies {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<ChunkServer::Reply> got;
  void add(ChunkServer::Reply r) {
    std::lock_guard<std::mutex> lock(mu);
    got.push_back(std::move(r));
    cv.notify_all();
  }
  // Hang detector only (generous): the replies come within milliseconds.
  bool waitFor(size_t n) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, 30s, [&] { return got.size() >= n; });
  }
};

cache::FileIdentity identity() { return cache::FileIdentity{42, 3000, 1, 2, 3}; }

ChunkServer::Task task(uint64_t reqId, uint32_t chunk, const PayloadMac& mac,
                       std::chrono::milliseconds deadline = 5000ms) {
  ChunkServer::Task t;
  t.connId = 7;
  t.remote = 1;
  t.req.reqId = reqId;
  const auto id = identity();
  t.req.fileId = id.fileId;
  t.req.size = id.size;
  t.req.mtimeNs = id.mtimeNs;
  t.req.ctimeNs = id.ctimeNs;
  t.req.inode = id.inode;
  t.req.chunkIndex = chunk;
  t.req.deadlineMs = static_cast<uint32_t>(deadline.count());
  t.arrived = ChunkServer::Clock::now();
  t.mac = mac;
  return t;
}

ClusterConfig config(unsigned threads, unsigned queue) {
  ClusterConfig c;
  c.serveThreads = threads;
  c.maxQueuedServes = queue;
  return c;
}

// Pass: a served chunk comes back as the very ChunkRef ServeFn returned (no
// copy), with its length, checksum and a tag that verifies over header and
// bytes under the session key; a file outside the snapshot is refused with
// NotFound and no data; both are counted for the asking node.
TEST(ChunkServer, ServesSignedChunksAndRefusesUnknownFiles) {
  const ClusterConfig cfg = config(2, 16);
  auto chunk =
      cache::makeChunk(cache::ChunkKey::make(1, 42, 0), identity(), std::vector<char>(1000, 'c'));
  std::atomic<uint64_t> counter{1};
  ChunkServer::Stats self, asker;
  Replies replies;
  ChunkServer server(
      cfg,
      [&](const cache::FileIdentity& id, uint32_t index) -> cache::Result<cache::ChunkRef> {
        if (!(id == identity()) || index != 0) return Status::notFound("not in the snapshot");
        return chunk;
      },
      counter, {&self, &asker}, [&](ChunkServer::Reply r) { replies.add(std::move(r)); });
  server.start();
  const PayloadMac mac(sessionKey("k-k-k-k-k-k-k-k-k", randomNonce(), randomNonce()));
  ASSERT_TRUE(server.submit(task(1, 0, mac)));
  ASSERT_TRUE(server.submit(task(2, 5, mac)));
  ASSERT_TRUE(replies.waitFor(2));
  server.stop();
  for (const auto& r : replies.got) {
    EXPECT_EQ(r.connId, 7u);
    wire::Reply plain = r.header;
    plain.tag = Tag{};
    if (r.header.reqId == 1) {
      ASSERT_EQ(r.chunk, chunk);  // the same buffer, sent as is
      EXPECT_EQ(r.header.code, 0u);
      EXPECT_EQ(r.header.length, 1000u);
      EXPECT_EQ(r.header.checksum, chunk->checksum);
      EXPECT_TRUE(mac.verify(r.header.tag, wire::kToClient, r.header.counter, &plain, sizeof plain,
                             chunk->data.data(), chunk->size()));
    } else {
      EXPECT_EQ(r.header.reqId, 2u);
      EXPECT_EQ(r.header.code, static_cast<uint32_t>(Status::Code::kNotFound));
      EXPECT_EQ(r.chunk, nullptr);
      EXPECT_TRUE(mac.verify(r.header.tag, wire::kToClient, r.header.counter, &plain, sizeof plain,
                             nullptr, 0));
    }
  }
  EXPECT_NE(replies.got[0].header.counter, replies.got[1].header.counter);
  EXPECT_EQ(asker.served.load(), 1u);
  EXPECT_EQ(asker.bytesServed.load(), 1000u);
  EXPECT_EQ(asker.serveErrors.load(), 1u);
  EXPECT_EQ(asker.serveRefused.load(), 1u);
  EXPECT_EQ(self.served.load(), 0u);
}

// Pass: a request whose deadline passed while queued is answered TimedOut
// without calling ServeFn.
TEST(ChunkServer, ExpiredRequestIsAnsweredWithoutWork) {
  const ClusterConfig cfg = config(1, 16);
  std::atomic<uint64_t> counter{1};
  ChunkServer::Stats self, asker;
  std::atomic<int> calls{0};
  Replies replies;
  ChunkServer server(
      cfg,
      [&](const cache::FileIdentity&, uint32_t) -> cache::Result<cache::ChunkRef> {
        ++calls;
        return Status::notFound("x");
      },
      counter, {&self, &asker}, [&](ChunkServer::Reply r) { replies.add(std::move(r)); });
  server.start();
  auto t = task(9, 0, PayloadMac(), 10ms);
  t.arrived -= 1s;
  ASSERT_TRUE(server.submit(t));
  ASSERT_TRUE(replies.waitFor(1));
  EXPECT_EQ(replies.got[0].header.code, static_cast<uint32_t>(Status::Code::kTimedOut));
  EXPECT_EQ(calls.load(), 0);
}

// Pass: with the serve thread busy, submit() accepts exactly maxQueuedServes
// more tasks and refuses the next; after release every accepted task is
// answered; after stop() nothing is accepted.
TEST(ChunkServer, QueueIsBounded) {
  const ClusterConfig cfg = config(1, 2);
  std::atomic<uint64_t> counter{1};
  ChunkServer::Stats self, asker;
  std::mutex gateMu;
  std::condition_variable gateCv;
  bool entered = false, open = false;
  Replies replies;
  ChunkServer server(
      cfg,
      [&](const cache::FileIdentity&, uint32_t) -> cache::Result<cache::ChunkRef> {
        std::unique_lock<std::mutex> lock(gateMu);
        entered = true;
        gateCv.notify_all();
        gateCv.wait(lock, [&] { return open; });
        return Status::notFound("x");
      },
      counter, {&self, &asker}, [&](ChunkServer::Reply r) { replies.add(std::move(r)); });
  server.start();
  ASSERT_TRUE(server.submit(task(1, 0, PayloadMac())));
  {
    std::unique_lock<std::mutex> lock(gateMu);
    ASSERT_TRUE(gateCv.wait_for(lock, 30s, [&] { return entered; }));
  }
  EXPECT_TRUE(server.submit(task(2, 0, PayloadMac())));
  EXPECT_TRUE(server.submit(task(3, 0, PayloadMac())));
  EXPECT_FALSE(server.submit(task(4, 0, PayloadMac())));
  {
    std::lock_guard<std::mutex> lock(gateMu);
    open = true;
  }
  gateCv.notify_all();
  ASSERT_TRUE(replies.waitFor(3));
  server.stop();
  EXPECT_FALSE(server.submit(task(5, 0, PayloadMac())));
  EXPECT_EQ(replies.got.size(), 3u);
}

}  // namespace
}  // namespace epochfs::transport
