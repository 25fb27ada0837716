// `epochctl model`: the paper's model and the locality simulator, run by the
// real epochctl binary (it execs the Python model found next to it). No mount.
#include <unistd.h>

#include <cmath>
#include <sstream>

#include "tests/integration/mount_fixture.h"

namespace epochfs::itest {
namespace {

std::string epochctl() { return std::string(EPOCHFS_BIN_DIR) + "/epochctl"; }

// Cells of a markdown table row "| a | b | ... |", trimmed.
std::vector<std::string> cells(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream in(line);
  std::string cell;
  std::getline(in, cell, '|');
  while (std::getline(in, cell, '|')) {
    const size_t b = cell.find_first_not_of(' '), e = cell.find_last_not_of(' ');
    if (b != std::string::npos) out.push_back(cell.substr(b, e - b + 1));
  }
  return out;
}

bool haveNumpy() {
  return runProcess({"/usr/bin/python3", "-c", "import numpy"}, 60).exitCode == 0;
}

// Pass: `epochctl model --paper` exits 0 and its imbalance table gives, for
// local batch 32, 64 and 128, a median at 1,024 learners within 1 percentage
// point of the paper's 6.9 / 4.8 / 3.4 %; the 256-node / 1,024-learner
// comparison shows the plain cache moving > 99 % of the cached bytes and
// locality-aware loading cutting it more than 10-fold at every batch size.
TEST(EpochctlModelTest, PaperImbalanceWithinOnePointAnd256NodeComparison) {
  if (!haveNumpy()) GTEST_SKIP() << "numpy not importable by /usr/bin/python3";
  ProcResult r = runProcess({epochctl(), "model", "--paper", "--max-nodes", "16"}, 120);
  ASSERT_EQ(r.exitCode, 0) << r.describe();
  const std::map<int, double> paper = {{32, 6.9}, {64, 4.8}, {128, 3.4}};
  std::map<int, double> median1024, reduction;
  bool inImbalance = false, inComparison = false;
  std::stringstream out(r.out);
  std::string line;
  while (std::getline(out, line)) {
    if (line.rfind("| local batch | paper |", 0) == 0) inImbalance = true, inComparison = false;
    if (line.rfind("| local batch | plain distributed cache |", 0) == 0) {
      inComparison = true, inImbalance = false;
    }
    if (line.rfind("| nodes |", 0) == 0) inImbalance = inComparison = false;  // the sweep
    if (line.empty() || line[0] != '|') continue;
    const auto c = cells(line);
    if (c.empty() || !std::isdigit(static_cast<unsigned char>(c[0][0]))) continue;
    const int batch = std::stoi(c[0]);
    if (inImbalance && c.size() >= 7) median1024[batch] = std::stod(c[6]);  // "7.0 %"
    if (inComparison && c.size() >= 4) {
      EXPECT_GT(std::stod(c[1]), 99.0) << line;
      reduction[batch] = std::stod(c[3]);  // "28x"
    }
  }
  for (const auto& [batch, want] : paper) {
    ASSERT_TRUE(median1024.count(batch)) << "no imbalance row for local batch " << batch << "\n"
                                         << r.out;
    EXPECT_LE(std::fabs(median1024[batch] - want), 1.0) << "local batch " << batch;
    ASSERT_TRUE(reduction.count(batch)) << "no 1,024-learner row for local batch " << batch;
    EXPECT_GT(reduction[batch], 10.0) << "local batch " << batch;
  }
  EXPECT_NE(r.out.find("256 nodes x 4 learners (1,024 learners)"), std::string::npos) << r.out;
}

// Pass: `epochctl model --help` is the model's own help under this name, and
// the model is found with a working directory outside the checkout.
TEST(EpochctlModelTest, FoundFromAnyDirectory) {
  ProcResult r = runProcess({"/bin/sh", "-c", "cd / && exec " + epochctl() + " model --help"}, 60);
  ASSERT_EQ(r.exitCode, 0) << r.describe();
  EXPECT_NE(r.out.find("usage: epochctl model"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--paper"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace epochfs::itest
