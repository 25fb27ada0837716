// docs/RELIABILITY.md case 14, last part, between real daemons: node 0
// mounts its own view of the dataset (hard links to the same files, so the
// same identities) in which some files were replaced (another version:
// another inode and contents) and some added (ids no other node's snapshot
// has). Its peers must refuse those requests (Stale / NotFound), count them,
// and every node must still read its own version's bytes from the source.
#include <unistd.h>

#include <set>

#include "tests/cluster/cluster_mount_fixture.h"

namespace epochfs::itest {
namespace {

class PeerVersionTest : public ClusterMountTest {};

// Pass: every byte node 0 reads matches its own source view and every byte
// node 1 reads matches the shared source; node 0 counts in fetch_refused
// exactly the replaced or added files that another node owns; the owners
// count the same number in serve_refused (for node 0), node 0 refuses
// node 1's requests for the replaced files it owns; both kinds of refusal
// are logged.
TEST_F(PeerVersionTest, AnotherVersionOrAnUnknownFileIsRefusedAndReadFromTheSource) {
  makeDataset(48);
  const std::string view = root_ + "/src0";
  for (int c = 0; c < 4; ++c) mkdirs(view + "/class" + std::to_string(c));
  for (const auto& [rel, h] : hashes_) {
    ASSERT_EQ(link((src_ + "/" + rel).c_str(), (view + "/" + rel).c_str()), 0) << rel;
  }
  std::set<std::string> replaced, added;
  int k = 0;
  for (const auto& [rel, h] : hashes_) {
    if (k++ % 4 != 0) continue;  // every 4th file: another version in node 0's view
    ASSERT_EQ(unlink((view + "/" + rel).c_str()), 0);
    writeFile(view + "/" + rel,
              randomBytes(50000 + static_cast<size_t>(k), 777 + static_cast<uint64_t>(k)));
    replaced.insert(rel);
  }
  for (int i = 0; i < 8; ++i) {
    const std::string rel =
        "class" + std::to_string(i % 4) + "/only-on-node0-" + std::to_string(i) + ".bin";
    writeFile(view + "/" + rel, randomBytes(30000, 900 + static_cast<uint64_t>(i)));
    added.insert(rel);
  }
  std::map<std::string, uint64_t> viewHashes;
  for (const auto& rel : regularFiles(view))
    viewHashes[rel] = xxh3(readFile(view + "/" + rel).data);
  nodeSource_[0] = view;
  // Each node walks its own view (one walk per job would give all node 0's).
  ASSERT_TRUE(startCluster(3, 64 << 20, {"--namespace-walk", "each"}));

  // Owners as node 0 sees them (every node sees the same live set).
  std::map<std::string, int> owner;
  const auto placement = admin("placement", mnts_[0]);
  for (const auto& e : placement["entries"]) owner[e[0].get<std::string>()] = e[1].get<int>();
  ASSERT_EQ(owner.size(), viewHashes.size()) << placement.dump();
  uint64_t wantRefusedForNode0 = 0, wantRefusedByNode0 = 0;
  for (const auto& rel : replaced) {
    if (owner[rel] != 0) ++wantRefusedForNode0;
    if (owner[rel] == 0) ++wantRefusedByNode0;  // node 1 asks node 0 for its version
  }
  for (const auto& rel : added) wantRefusedForNode0 += owner[rel] != 0;
  ASSERT_GT(wantRefusedForNode0, 0u);

  for (const auto& [rel, h] : viewHashes) {
    ReadResult r = readFile(mnts_[0] + "/" + rel);
    EXPECT_EQ(r.err, 0) << rel;
    EXPECT_EQ(xxh3(r.data), h) << "node 0 read wrong bytes of " << rel;
  }
  readEpoch(mnts_[1], 5);  // node 1: the shared source's version

  const auto p0 = admin("peers", mnts_[0]);
  uint64_t fetchRefused = 0;
  for (const auto& p : p0["peers"]) fetchRefused += p.value("fetch_refused", uint64_t{0});
  EXPECT_EQ(fetchRefused, wantRefusedForNode0) << p0.dump();
  uint64_t servedRefused = 0;
  for (int n : {1, 2}) {
    servedRefused += admin("peers", mnts_[static_cast<size_t>(n)])["peers"][0].value(
        "serve_refused", uint64_t{0});
  }
  EXPECT_EQ(servedRefused, wantRefusedForNode0);
  EXPECT_EQ(p0["peers"][1].value("serve_refused", uint64_t{0}), wantRefusedByNode0) << p0.dump();
  std::string logs;
  for (int n = 0; n < 3; ++n) {
    std::ifstream in(root_ + "/log" + std::to_string(n));
    logs.append(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  EXPECT_NE(logs.find("another version"), std::string::npos);
  EXPECT_NE(logs.find("not in this dataset"), std::string::npos);
}

}  // namespace
}  // namespace epochfs::itest
