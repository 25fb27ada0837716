// `epochctl mrc`: the model's curves on traces whose answers are known, and
// its predictions against hit ratios measured on real mounts: three RAM-tier
// sizes, two epochs read in their registered orders (and, for LRU, with no
// order), the page cache dropped before each epoch, source bytes counted from
// outside the daemon by /proc/PID/io rchar (cross-checked with the daemon's
// tiers.source.read_bytes).
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>

#include "fusefs/admin_protocol.h"
#include "tests/integration/admin_shapes.h"
#include "tests/integration/admin_test_util.h"

namespace epochfs::itest {
namespace {

using nlohmann::json;
constexpr uint64_t kMiB = 1 << 20;

// prefix + n (GCC 12 warns falsely on "literal" + std::to_string(n) at -O3).
std::string numbered(const char* prefix, uint64_t n) {
  std::string s = prefix;
  s += std::to_string(n);
  return s;
}

class AdminMrcTest : public MountTest {
 protected:
  std::string writeOrder(const std::string& name, const std::vector<std::string>& order) {
    const std::string path = root_ + "/" + name;
    std::ofstream o(path);
    for (const auto& f : order) o << f << "\n";
    return path;
  }
  json mrcJson(const std::vector<std::string>& args) {
    std::vector<std::string> a = {"mrc", mnt_, "--json"};
    a.insert(a.end(), args.begin(), args.end());
    ProcResult r = runCtl(a, 300);
    EXPECT_EQ(r.exitCode, 0) << r.describe();
    json j = jsonOf(r);
    EXPECT_EQ(shapeErrors(j, shapes::mrc()), "");
    return j;
  }
  std::vector<std::string> files_;
};

TEST_F(AdminMrcTest, CurvesOfKnownTraces) {
  // Ten files of exactly one chunk, read in the same order every epoch.
  for (int i = 0; i < 10; ++i) {
    writeFile(src_ + numbered("/f", i), randomBytes(kMiB, static_cast<uint64_t>(i)));
    files_.push_back(numbered("f", i));
  }
  ASSERT_EQ(mount().exitCode, 0);
  const std::string o = writeOrder("cyclic", files_);
  json j = mrcJson({"--order", o, "--order", o, "--order", o, "--sizes", "5M,9M,10M"});
  ASSERT_EQ(j["points"].size(), 3u);
  EXPECT_EQ(j["epochs"], 3);
  EXPECT_EQ(j["unique_bytes"], 10 * kMiB);
  EXPECT_EQ(j["accessed_bytes"], 30 * kMiB);
  const json& half = j["points"][0];
  // A cyclic scan larger than the cache: LRU never hits.
  EXPECT_EQ(half["lru"]["warm"], 0.0);
  EXPECT_EQ(j["points"][1]["lru"]["warm"], 0.0);
  // The clairvoyant policy keeps 5 of 10 chunks and never admits the rest.
  EXPECT_NEAR(half["belady"]["warm"].get<double>(), 0.5, 1e-9);
  // Order-aware (each epoch's order known) keeps what it has: 4-5 of 10.
  EXPECT_GE(half["order_aware"]["warm"].get<double>(), 0.39);
  EXPECT_LE(half["order_aware"]["warm"].get<double>(), 0.51);
  // Everything fits: every policy hits every warm access.
  for (const char* p : {"lru", "order_aware", "belady"}) {
    EXPECT_EQ(j["points"][2][p]["warm"], 1.0) << p;
    EXPECT_NEAR(j["points"][2][p]["all"].get<double>(), 2.0 / 3.0, 1e-9) << p;
  }

  // Random orders: LRU's curve is monotone; each policy is within [0, 1].
  std::vector<std::string> shuffled = files_;
  std::mt19937_64 rng(1);
  std::vector<std::string> orders;
  for (int e = 0; e < 4; ++e) {
    std::shuffle(shuffled.begin(), shuffled.end(), rng);
    orders.push_back(writeOrder(numbered("o", e), shuffled));
  }
  j = mrcJson({"--order", orders[0], "--order", orders[1], "--order", orders[2], "--order",
               orders[3], "--points", "10"});
  double prev = -1;
  for (const json& p : j["points"]) {
    const double lru = p["lru"]["warm"];
    EXPECT_GE(lru, prev - 1e-12);
    prev = lru;
    for (const char* k : {"lru", "order_aware", "belady"}) {
      EXPECT_GE(p[k]["warm"].get<double>(), 0.0);
      EXPECT_LE(p[k]["warm"].get<double>(), 1.0);
    }
  }
}

TEST_F(AdminMrcTest, RegisteredOrderAndPlot) {
  for (int i = 0; i < 30; ++i) {
    writeFile(src_ + numbered("/f", i), randomBytes(50000 + static_cast<size_t>(i) * 30000, 7));
    files_.push_back(numbered("f", i));
  }
  ASSERT_EQ(mount({"--ram-cache", "4M"}).exitCode, 0);
  ProcResult none = runCtl({"mrc", mnt_});
  EXPECT_EQ(none.exitCode, 1);
  EXPECT_TRUE(oneErrorLine(none, "no order registered"));
  ASSERT_EQ(runCtl({"order", mnt_, writeOrder("o", files_)}).exitCode, 0);
  json j = mrcJson({"--points", "5"});
  EXPECT_EQ(j["source"], "registered");
  EXPECT_EQ(j["entries"], 60);  // the order and one reshuffle of it
  EXPECT_EQ(j["ram_capacity_bytes"], 4 * kMiB);
  bool ramPoint = false;
  for (const json& p : j["points"]) ramPoint |= p["cache_bytes"] == 4 * kMiB;
  EXPECT_TRUE(ramPoint) << "the mount's RAM size is one of the points";

  if (system("/usr/bin/python3 -c 'import matplotlib' 2>/dev/null") != 0) {
    GTEST_SKIP() << "python3-matplotlib not installed: --png not tested";
  }
  const std::string png = root_ + "/mrc.png";
  ProcResult r = runCtl({"mrc", mnt_, "--png", png}, 120);
  ASSERT_EQ(r.exitCode, 0) << r.describe();
  EXPECT_NE(r.out.find("order-aware"), std::string::npos) << r.out;
  std::ifstream in(png, std::ios::binary);
  std::string head(8, '\0');
  in.read(head.data(), 8);
  EXPECT_EQ(head, std::string("\x89PNG\r\n\x1a\n", 8));
}

// chunk_shards: a hex digit per chunk asked for, the same for a file named by
// path or by its file id; unknown paths answer null; bad requests get an error.
TEST_F(AdminMrcTest, ChunkShardsNamesEachChunksShard) {
  writeFile(src_ + "/a.bin", randomBytes(3 * kMiB + 5, 1));
  ASSERT_EQ(mount().exitCode, 0);
  ASSERT_EQ(runCtl({"order", mnt_, writeOrder("o", {"a.bin"})}).exitCode, 0);
  const json page =
      adminRequest(mnt_, {{"cmd", admin::kCmdPlanEntries}, {"rank", 0}, {"offset", 0}});
  ASSERT_EQ(page["entries"].size(), 1u) << page.dump();
  const uint64_t fileId = page["entries"][0][0];
  json r = adminRequest(mnt_, {{"cmd", admin::kCmdChunkShards},
                               {"files", {{"a.bin", 0, 4}, {fileId, 1, 3}, {"missing", 0, 1}}}});
  ASSERT_TRUE(r.value("ok", false)) << r.dump();
  EXPECT_EQ(r["max_shards"], 16);
  ASSERT_EQ(r["shards"].size(), 3u);
  const std::string byPath = r["shards"][0], byId = r["shards"][1];
  ASSERT_EQ(byPath.size(), 4u);
  EXPECT_EQ(byId, byPath.substr(1));
  EXPECT_EQ(byPath.find_first_not_of("0123456789abcdef"), std::string::npos) << byPath;
  EXPECT_TRUE(r["shards"][2].is_null());

  for (const json& bad : {json{{"cmd", admin::kCmdChunkShards}, {"files", "a.bin"}},
                          json{{"cmd", admin::kCmdChunkShards}, {"files", {{"a.bin", 4}}}},
                          json{{"cmd", admin::kCmdChunkShards}, {"files", {{"a.bin", -1, 4}}}},
                          json{{"cmd", admin::kCmdChunkShards}, {"files", {{"../x", 0, 1}}}}}) {
    r = adminRequest(mnt_, bad);
    EXPECT_FALSE(r.value("ok", true)) << bad.dump();
    EXPECT_EQ(r.value("code", ""), "invalid") << r.dump();
  }
  for (const json& big :
       {json{{"cmd", admin::kCmdChunkShards}, {"files", {{"a.bin", 0, 16385}}}},
        json{{"cmd", admin::kCmdChunkShards}, {"files", {{fileId, 4294967295u, 2}}}},
        json{{"cmd", admin::kCmdChunkShards},
             {"files", {{fileId, 0, 5}, {fileId, 0, ~uint64_t{0} - 4}}}}}) {
    r = adminRequest(mnt_, big);
    EXPECT_EQ(r.value("code", ""), "too_large") << r.dump();
  }
}

// The agreement the issue asks for: predicted vs measured byte hit ratio of
// the second epoch, within 2 percentage points, at three cache sizes (and a
// sharded fourth).
class AdminMrcAgreementTest : public AdminMrcTest {
 protected:
  void SetUp() override {
    AdminMrcTest::SetUp();
    if (IsSkipped()) return;
    std::mt19937_64 rng(42);
    std::uniform_int_distribution<size_t> small(16 << 10, 600 << 10), large(kMiB + 1, 3 * kMiB);
    for (int i = 0; i < 300; ++i) {
      const std::string dir = numbered("c", i % 6);
      mkdirs(src_ + "/" + dir);
      const std::string rel = dir + numbered("/s", i) + ".bin";
      const size_t n = i % 30 == 0 ? large(rng) : small(rng);  // a few multi-chunk files
      writeFile(src_ + "/" + rel, randomBytes(n, static_cast<uint64_t>(i)));
      files_.push_back(rel);
      bytes_ += n;
    }
    for (int e = 0; e < 2; ++e) {
      std::vector<std::string> o = files_;
      std::shuffle(o.begin(), o.end(), rng);
      orders_.push_back(o);
      orderFiles_.push_back(writeOrder(numbered("epoch", e), o));
    }
  }

  struct Measured {
    double rcharHit = 0, statsHit = 0;
  };
  // Mounts with `cache` bytes of RAM, reads both epochs in order (registered
  // when `registered`), returns the second epoch's measured hit ratios.
  Measured measure(uint64_t cache, bool registered) {
    const std::string mnt = root_ + numbered("/m", cache) + (registered ? "o" : "l");
    mkdirs(mnt);
    ProcResult m =
        mountAt(src_, mnt, {"--ram-cache", std::to_string(cache), "--prefetch-window", "0"});
    EXPECT_EQ(m.exitCode, 0) << m.describe();
    const pid_t pid = daemonPid(mnt);
    Measured out;
    for (int e = 0; e < 2; ++e) {
      if (registered) {
        ProcResult r = runCtl({"order", mnt, "--epoch", std::to_string(e), orderFiles_[e]});
        EXPECT_EQ(r.exitCode, 0) << r.describe();
      }
      dropCaches(mnt);
      const auto io0 = procIo(pid);
      const json s0 = admin("stats", mnt);
      uint64_t read = 0;
      for (const auto& rel : orders_[e]) read += readFile(mnt + "/" + rel, 1 << 20).data.size();
      const auto io1 = procIo(pid);
      const json s1 = admin("stats", mnt);
      EXPECT_EQ(read, bytes_);
      if (e == 1) {
        const double rchar = static_cast<double>(io1.at("rchar") - io0.at("rchar"));
        const double src = static_cast<double>(counter(s1, "tiers.source.read_bytes").value_or(0) -
                                               counter(s0, "tiers.source.read_bytes").value_or(0));
        out.rcharHit = 1.0 - rchar / static_cast<double>(read);
        out.statsHit = 1.0 - src / static_cast<double>(read);
      }
    }
    EXPECT_TRUE(unmount(mnt));
    return out;
  }

  std::vector<std::string> files_;
  uint64_t bytes_ = 0;
  std::vector<std::vector<std::string>> orders_;
  std::vector<std::string> orderFiles_;
};

TEST_F(AdminMrcAgreementTest, PredictionsMatchMeasuredHitRatios) {
  ASSERT_EQ(mount().exitCode, 0);  // for `epochctl mrc` (sizes via the mount)
  // Three sizes under 64 MiB, where the RAM tier is one LRU list: a fifth,
  // two fifths and three fifths of the data. A fourth, two thirds of the data,
  // has two shards: the model partitions chunks as the mount does (which
  // chunks share a shard depends on the chunk keys, which include the
  // dataset's path, a new temporary directory each run; chunk_shards tells).
  const uint64_t sizes[] = {bytes_ / 5, bytes_ * 2 / 5,
                            std::min<uint64_t>(bytes_ * 3 / 5, 63 * kMiB), bytes_ * 2 / 3};
  ASSERT_GT(sizes[3], 64 * kMiB) << "dataset too small for a sharded size";
  std::string list;
  for (uint64_t s : sizes) {
    if (!list.empty()) list += ',';
    list += std::to_string(s);
  }
  json pred = mrcJson({"--order", orderFiles_[0], "--order", orderFiles_[1], "--sizes", list});
  ASSERT_EQ(pred["points"].size(), 4u);
  EXPECT_EQ(pred["shard_partition"], "mount");
  {
    // The registered order (file ids, not paths) gives the same partition.
    ASSERT_EQ(runCtl({"order", mnt_, orderFiles_[0]}).exitCode, 0);
    const json registered = mrcJson({"--sizes", list});
    const json given = mrcJson({"--order", orderFiles_[0], "--sizes", list});
    EXPECT_EQ(registered["shard_partition"], "mount");
    EXPECT_EQ(registered["points"], given["points"]);
  }
  RecordProperty("dataset_bytes", std::to_string(bytes_));
  for (size_t i = 0; i < 4; ++i) {
    const json& p = pred["points"][i];
    ASSERT_EQ(p["cache_bytes"], sizes[i]);
    const double tolerance = 0.02;  // the criterion: 2 points
    EXPECT_EQ(p["shards"], i < 3 ? 1 : 2);
    const double orderAware = p["order_aware"]["warm"], lru = p["lru"]["warm"];
    const Measured withOrder = measure(sizes[i], true);
    const Measured plain = measure(sizes[i], false);
    const std::string tag = std::to_string(sizes[i] / kMiB) + "MiB";
    RecordProperty("order_aware_" + tag, std::to_string(orderAware) + " predicted, " +
                                             std::to_string(withOrder.rcharHit) + " rchar, " +
                                             std::to_string(withOrder.statsHit) + " stats");
    RecordProperty("lru_" + tag, std::to_string(lru) + " predicted, " +
                                     std::to_string(plain.rcharHit) + " rchar, " +
                                     std::to_string(plain.statsHit) + " stats");
    char figures[256];
    std::snprintf(figures, sizeof figures,
                  "cache %s (%d shard%s): order-aware predicted %.2f%% measured %.2f%% (rchar) "
                  "%.2f%% (stats); LRU predicted %.2f%% measured %.2f%% (rchar) %.2f%% (stats)",
                  tag.c_str(), p["shards"].get<int>(), i < 3 ? "" : "s", 100 * orderAware,
                  100 * withOrder.rcharHit, 100 * withOrder.statsHit, 100 * lru,
                  100 * plain.rcharHit, 100 * plain.statsHit);
    SCOPED_TRACE(figures);  // shown with a failing comparison below
    EXPECT_NEAR(withOrder.rcharHit, orderAware, tolerance) << tag;
    // Without an order the tier is LRU until it sees epochs (the second one
    // here), then it evicts what the epoch has read first (EpochDetector):
    // LRU's curve is its floor, the optimum its ceiling.
    const double belady = p["belady"]["warm"];
    EXPECT_GE(plain.rcharHit, lru - tolerance) << tag;
    EXPECT_LE(plain.rcharHit, belady + tolerance) << tag;
    EXPECT_NEAR(withOrder.statsHit, withOrder.rcharHit, 0.005) << tag;
    EXPECT_NEAR(plain.statsHit, plain.rcharHit, 0.005) << tag;
    EXPECT_GT(orderAware, 0.05) << "a trivial curve proves nothing";
  }
}

}  // namespace
}  // namespace epochfs::itest
