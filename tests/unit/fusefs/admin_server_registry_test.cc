// AdminServer::start serves only when the registered commands are exactly
// admin::kCommands, each registered once: a second registration of a name
// (which used to replace the first silently) or a missing one fails the start
// with the names, before anything listens.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "fusefs/admin/admin_server.h"
#include "fusefs/admin_protocol.h"

namespace epochfs::fusefs {
namespace {

class AdminRegistryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/epochfs-registry-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    socket_ = dir_ + "/admin.sock";
  }
  void TearDown() override {
    unlink(socket_.c_str());
    rmdir(dir_.c_str());
  }
  static AdminServer::Handler answer() {
    return [](const nlohmann::json&, AdminSession&) { return nlohmann::json::object(); };
  }
  static void registerAll(AdminServer& server) {
    for (const char* name : admin::kCommands) server.handle(name, answer());
  }
  bool listening() const {
    struct stat st;
    return stat(socket_.c_str(), &st) == 0;
  }

  std::string dir_, socket_;
};

TEST_F(AdminRegistryTest, EveryCommandOnceServes) {
  AdminServer server;
  registerAll(server);
  const cache::Status s = server.start(socket_);
  EXPECT_TRUE(s.isOk()) << s.toString();
  server.stop();
}

TEST_F(AdminRegistryTest, ANameRegisteredTwiceFailsTheStart) {
  AdminServer server;
  registerAll(server);
  server.handle(admin::kCmdPeers, answer());
  const cache::Status s = server.start(socket_);
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("'peers' registered twice"), std::string::npos) << s.message();
  EXPECT_FALSE(listening());
}

TEST_F(AdminRegistryTest, AMissingOrUndeclaredCommandFailsTheStart) {
  AdminServer missing;
  for (const char* name : admin::kCommands) {
    if (std::string(name) != admin::kCmdUpgrade) missing.handle(name, answer());
  }
  cache::Status s = missing.start(socket_);
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("'upgrade' not registered"), std::string::npos) << s.message();

  AdminServer extra;
  registerAll(extra);
  extra.handle("frobnicate", answer());
  s = extra.start(socket_);
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("'frobnicate' is not in admin_protocol.h"), std::string::npos)
      << s.message();
  EXPECT_FALSE(listening());
}

}  // namespace
}  // namespace epochfs::fusefs
