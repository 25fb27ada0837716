// The TEST-ONLY peer fault hook's spec parser (EPOCHFS_FAULT_PEER_FLIP).
#include "transport/peer_fault.h"

#include <gtest/gtest.h>

namespace epochfs::transport {
namespace {

// Pass: every documented mode parses, EVERY defaults to 1, "" is inactive.
TEST(PeerFault, ParsesModesAndEvery) {
  auto none = parsePeerFault("");
  ASSERT_TRUE(none.isOk());
  EXPECT_FALSE(none->active());
  auto w = parsePeerFault("wire");
  ASSERT_TRUE(w.isOk());
  EXPECT_EQ(w->mode, PeerFault::Mode::kWire);
  EXPECT_EQ(w->every, 1u);
  auto m = parsePeerFault("memory:3");
  ASSERT_TRUE(m.isOk());
  EXPECT_EQ(m->mode, PeerFault::Mode::kMemory);
  EXPECT_EQ(m->every, 3u);
  auto f = parsePeerFault("forge:1");
  ASSERT_TRUE(f.isOk());
  EXPECT_EQ(f->mode, PeerFault::Mode::kForge);
}

// Pass: a wrong spec is an InvalidArgument naming the variable, never a silent no-op.
TEST(PeerFault, RejectsBadSpecs) {
  for (const char* bad : {"flip", "wire:", "wire:0", "wire:x", "memory:-1", "forge:2x"}) {
    auto r = parsePeerFault(bad);
    ASSERT_FALSE(r.isOk()) << bad;
    EXPECT_EQ(r.status().code(), cache::Status::Code::kInvalidArgument) << bad;
    EXPECT_NE(r.status().message().find(kPeerFaultEnv), std::string::npos) << bad;
  }
}

}  // namespace
}  // namespace epochfs::transport
