// The admin socket's rules under attack: callers are authorized by their
// SO_PEERCRED credentials (nobody may read stats but not evict; --admin-group
// members may steer but only warm/order files they can read), oversized
// messages are cut off, path traversal is refused, slow clients time out and
// a connection flood neither exhausts the daemon's descriptors nor stops the
// reads going through the mount.
#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <thread>

#include "fusefs/admin_protocol.h"
#include "tests/integration/admin_test_util.h"

namespace epochfs::itest {
namespace {

using nlohmann::json;

const Creds kNobody{65534, 65534, {}};

class AdminSecurityTest : public MountTest {
 protected:
  void makeDataset(int files = 12) {
    mkdirs(src_ + "/pub");
    for (int i = 0; i < files; ++i) {
      const std::string rel = "pub/f" + std::to_string(i) + ".bin";
      const std::string data =
          randomBytes(20000 + static_cast<size_t>(i) * 5000, static_cast<uint64_t>(i));
      writeFile(src_ + "/" + rel, data);
      files_.push_back(rel);
      content_[rel] = data;
    }
    mkdirs(src_ + "/private", 0700);
    writeFile(src_ + "/private/secret.bin", randomBytes(3000, 5), 0600);
    writeFile(src_ + "/pub/rootonly.bin", randomBytes(3000, 6), 0600);
  }
  uint64_t ramChunks() { return counter(stats(), "tiers.ram.chunks").value_or(0); }

  std::vector<std::string> files_;
  std::map<std::string, std::string> content_;
};

TEST_F(AdminSecurityTest, NobodyMayReadStatsButNotSteer) {
  makeDataset();
  ASSERT_EQ(chmod(root_.c_str(), 0755), 0);  // nobody must reach the mountpoint
  ASSERT_EQ(mount({"--allow-other", "--ram-cache", "64M"}).exitCode, 0);
  ASSERT_EQ(runCtl({"warm", mnt_, "pub", "-q"}).exitCode, 0);
  const uint64_t cached = ramChunks();
  ASSERT_GT(cached, 0u);

  // Read-only commands: allowed (the root is 0755).
  for (const char* cmd : {"stats", "status", "metrics", "peers"}) {
    ProcResult r = runCtl({cmd, mnt_, "--json"}, 30, kNobody);
    EXPECT_EQ(r.exitCode, 0) << cmd << ": " << r.describe();
    EXPECT_FALSE(jsonOf(r).is_discarded()) << cmd;
  }
  ProcResult ls = runCtl({"ls", mnt_, "--json"}, 30, kNobody);
  ASSERT_EQ(ls.exitCode, 0) << ls.describe();
  EXPECT_EQ(jsonOf(ls)["paths"][0].value("unreadable_dirs", 0), 1) << ls.out;  // private/
  ProcResult lsPrivate = runCtl({"ls", mnt_, "private"}, 30, kNobody);
  EXPECT_EQ(lsPrivate.exitCode, 4);
  EXPECT_TRUE(oneErrorLine(lsPrivate, "permission denied"));

  // Mutating commands: refused, and nothing happened.
  const std::string order = root_ + "/order";
  std::ofstream(order) << "pub/f1.bin\n";
  chmod(root_.c_str(), 0755);
  chmod(order.c_str(), 0644);
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"evict", mnt_, "--all"},
                                             {"evict", mnt_, "pub/f1.bin"},
                                             {"warm", mnt_, "pub"},
                                             {"refresh", mnt_},
                                             {"order", mnt_, order},
                                             {"order", mnt_, "--clear"},
                                             {"unmount", mnt_}}) {
    ProcResult r = runCtl(args, 30, kNobody);
    EXPECT_EQ(r.exitCode, 4) << args[0] << ": " << r.describe();
    EXPECT_TRUE(oneErrorLine(r, "permission denied")) << args[0];
  }
  EXPECT_EQ(ramChunks(), cached) << "a refused evict evicted";
  EXPECT_TRUE(isMounted(mnt_));
  EXPECT_GE(counter(stats(), "admin.denied").value_or(0), 7u);
}

TEST_F(AdminSecurityTest, ReadersMustBeAbleToReadTheMountRoot) {
  makeDataset();
  ASSERT_EQ(chmod(src_.c_str(), 0750), 0);
  ASSERT_EQ(chown(src_.c_str(), 0, 100), 0);  // group "users"
  ASSERT_EQ(chmod(root_.c_str(), 0755), 0);
  ASSERT_EQ(mount({"--allow-other"}).exitCode, 0);
  const std::string sock = adminSocketPath(mnt_);
  ASSERT_FALSE(sock.empty());
  // The mount itself hides its root from nobody; --socket goes straight to
  // the daemon, which checks the root's mode against the caller itself.
  ProcResult r = runCtl({"stats", mnt_}, 30, kNobody);
  EXPECT_EQ(r.exitCode, 4) << r.describe();
  r = runCtl({"stats", mnt_, "--socket", sock}, 30, kNobody);
  EXPECT_EQ(r.exitCode, 4) << r.describe();
  EXPECT_TRUE(oneErrorLine(r, "may not read the mount root"));
  // A member of the root's group may (groups come from /proc/PID/status).
  r = runCtl({"stats", mnt_, "--socket", sock, "--json"}, 30, Creds{65534, 65534, {100}});
  EXPECT_EQ(r.exitCode, 0) << r.describe();
}

TEST_F(AdminSecurityTest, AdminGroupMembersSteerOnlyFilesTheyCanRead) {
  makeDataset();
  ASSERT_EQ(getgrnam("users") != nullptr, true) << "needs the Debian group 'users'";
  ASSERT_EQ(chmod(root_.c_str(), 0755), 0);
  ASSERT_EQ(mount({"--allow-other", "--admin-group", "users"}).exitCode, 0);
  const Creds member{65534, 65534, {100}};

  ProcResult r = runCtl({"warm", mnt_, "pub/f1.bin", "--json"}, 30, member);
  EXPECT_EQ(r.exitCode, 0) << r.describe();
  r = runCtl({"warm", mnt_, "pub/rootonly.bin"}, 30, member);
  EXPECT_EQ(r.exitCode, 4) << r.describe();
  EXPECT_TRUE(oneErrorLine(r, "may not read pub/rootonly.bin"));
  // A directory: the unreadable file is skipped, the rest warmed.
  r = runCtl({"warm", mnt_, "pub", "--json"}, 30, member);
  ASSERT_EQ(r.exitCode, 0) << r.describe();
  EXPECT_EQ(jsonOf(r)["skipped"], 1);
  EXPECT_EQ(jsonOf(r)["files"], files_.size());
  r = runCtl({"warm", mnt_, "private"}, 30, member);
  EXPECT_EQ(r.exitCode, 4) << r.describe();
  // Orders: readable entries yes, an unreadable one fails the whole order.
  const std::string ok = root_ + "/ok", bad = root_ + "/bad";
  std::ofstream(ok) << "pub/f1.bin\npub/f2.bin\n";
  std::ofstream(bad) << "pub/f1.bin\nprivate/secret.bin\n";
  chmod(root_.c_str(), 0755);
  chmod(ok.c_str(), 0644);
  chmod(bad.c_str(), 0644);
  r = runCtl({"order", mnt_, ok}, 30, member);
  EXPECT_EQ(r.exitCode, 0) << r.describe();
  r = runCtl({"order", mnt_, bad}, 30, member);
  EXPECT_EQ(r.exitCode, 4) << r.describe();
  EXPECT_TRUE(oneErrorLine(r, "entry 1"));
  // Evict and refresh: members may.
  EXPECT_EQ(runCtl({"evict", mnt_, "--all"}, 30, member).exitCode, 0);
  EXPECT_EQ(runCtl({"refresh", mnt_}, 30, member).exitCode, 0);
  // Not a member: refused.
  r = runCtl({"evict", mnt_, "--all"}, 30, Creds{65534, 65534, {}});
  EXPECT_EQ(r.exitCode, 4);
}

// Sends `header` then `payload` (from a thread: the daemon may stop reading),
// returns the replies read until EOF.
std::vector<json> rawExchange(int fd, uint32_t announced, const std::string& payload) {
  std::thread writer([&] {
    unsigned char hdr[4] = {
        static_cast<unsigned char>(announced), static_cast<unsigned char>(announced >> 8),
        static_cast<unsigned char>(announced >> 16), static_cast<unsigned char>(announced >> 24)};
    if (send(fd, hdr, 4, MSG_NOSIGNAL) != 4) return;
    size_t off = 0;
    while (off < payload.size()) {
      ssize_t w = send(fd, payload.data() + off, payload.size() - off, MSG_NOSIGNAL);
      if (w <= 0) return;
      off += static_cast<size_t>(w);
    }
  });
  std::vector<json> replies;
  std::string msg;
  while (admin::receiveMessage(fd, msg)) replies.push_back(json::parse(msg, nullptr, false));
  shutdown(fd, SHUT_RDWR);
  writer.join();
  return replies;
}

TEST_F(AdminSecurityTest, OversizedMessagesAreCutOff) {
  makeDataset();
  ASSERT_EQ(mount().exitCode, 0);
  // 10 MiB: an error reply, then the connection is closed.
  int fd = connectAdmin(mnt_);
  ASSERT_GE(fd, 0);
  const std::string big(10u << 20, 'x');
  auto replies = rawExchange(fd, static_cast<uint32_t>(big.size()), big);
  close(fd);
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[0].value("ok", true), false);
  EXPECT_EQ(replies[0].value("code", ""), "too_large") << replies[0].dump();
  // Announcing 4 GiB without sending it: the same, at once.
  fd = connectAdmin(mnt_);
  ASSERT_GE(fd, 0);
  replies = rawExchange(fd, 0xffffffffu, "");
  close(fd);
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[0].value("code", ""), "too_large");
  // Exactly at the cap: served. One byte over: refused.
  std::string pad = json{{"cmd", admin::kCmdStatus}, {"pad", ""}}.dump();
  std::string atCap = json{{"cmd", admin::kCmdStatus},
                           {"pad", std::string(admin::kMaxMessageBytes - pad.size(), 'p')}}
                          .dump();
  ASSERT_EQ(atCap.size(), admin::kMaxMessageBytes);
  fd = connectAdmin(mnt_);
  ASSERT_TRUE(admin::sendMessage(fd, atCap));
  std::string reply;
  ASSERT_TRUE(admin::receiveMessage(fd, reply));
  EXPECT_TRUE(json::parse(reply).value("ok", false)) << reply.substr(0, 200);
  close(fd);
  fd = connectAdmin(mnt_);
  replies = rawExchange(fd, admin::kMaxMessageBytes + 1, atCap + " ");
  close(fd);
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[0].value("code", ""), "too_large");
  // The daemon is fine and counted them.
  auto s = stats();
  EXPECT_EQ(counter(s, "admin.oversized").value_or(0), 3u) << s.dump();
  for (const auto& rel : files_) EXPECT_EQ(readFile(mnt_ + "/" + rel).data, content_[rel]);
}

TEST_F(AdminSecurityTest, PathTraversalIsRefused) {
  makeDataset();
  ASSERT_EQ(symlink("/etc", (src_ + "/pub/etc_link").c_str()), 0);
  ASSERT_EQ(mount().exitCode, 0);
  const uint64_t sourceBefore = counter(stats(), "tiers.source.read_bytes").value_or(0);
  const std::vector<json> bad = {
      "../../etc/shadow",
      "/etc/shadow",
      "pub/../../etc/passwd",
      "a/../../x",
      "pub/etc_link/shadow",
      "pub/./f1.bin",
      "pub//f1.bin",
      "pub/f1.bin/",
      std::string("pub/f1.bin\0/../../etc/shadow", 28),
      std::string(60000, 'a'),
      std::string(5000, 'b'),
      json{{"b64", "Li4vLi4vZXRjL3NoYWRvdw=="}},  // ../../etc/shadow
      json{{"b64", "L2V0Yy9zaGFkb3c="}},          // /etc/shadow
      json{{"b64", "cHViAGY="}},                  // pub\0f
      json{{"b64", std::string(12000, 'A')}},
      json{{"path", "x"}},
      42,
  };
  for (const json& p : bad) {
    const std::string what = p.dump().substr(0, 60);
    for (const json& req : {json{{"cmd", admin::kCmdLs}, {"path", p}},
                            json{{"cmd", admin::kCmdWarmAdd}, {"paths", json::array({p})}},
                            json{{"cmd", admin::kCmdEvict}, {"paths", json::array({p})}}}) {
      json r = adminRequest(mnt_, req);
      EXPECT_FALSE(r.value("ok", true))
          << req["cmd"] << " " << what << " -> " << r.dump().substr(0, 200);
      EXPECT_NE(r.value("error", "").find("client:"), 0u) << "no daemon reply for " << what;
    }
    // As an order entry, over one connection.
    int fd = connectAdmin(mnt_);
    ASSERT_GE(fd, 0);
    std::string reply;
    ASSERT_TRUE(admin::sendMessage(fd, json{{"cmd", admin::kCmdOrderBegin}}.dump()));
    ASSERT_TRUE(admin::receiveMessage(fd, reply));
    ASSERT_TRUE(admin::sendMessage(
        fd, json{{"cmd", admin::kCmdOrderAppend}, {"entries", json::array({p})}}.dump(
                -1, ' ', false, json::error_handler_t::replace)));
    ASSERT_TRUE(admin::receiveMessage(fd, reply)) << "no reply to order entry " << what;
    EXPECT_FALSE(json::parse(reply).value("ok", true)) << "order entry " << what << ": " << reply;
    close(fd);
  }
  // The symlink itself is an entry of the dataset, not a door out of it.
  json r = adminRequest(mnt_, {{"cmd", admin::kCmdLs}, {"path", "pub/etc_link"}});
  ASSERT_TRUE(r.value("ok", false)) << r.dump();
  EXPECT_EQ(r["entry"]["type"], "symlink");
  EXPECT_EQ(r["entry"]["files"], 0);
  r = adminRequest(mnt_, {{"cmd", admin::kCmdWarmAdd}, {"paths", {"pub/etc_link"}}});
  EXPECT_FALSE(r.value("ok", true));
  // Through epochctl: the same refusals, one line each.
  for (const char* p : {"../../etc/shadow", "/etc/shadow", "a/../../x"}) {
    ProcResult c = runCtl({"ls", mnt_, p});
    EXPECT_EQ(c.exitCode, 1) << p << ": " << c.describe();
    EXPECT_TRUE(oneErrorLine(c, "refused")) << p;
  }
  EXPECT_EQ(counter(stats(), "tiers.source.read_bytes").value_or(0), sourceBefore)
      << "a refused request read from the source";
}

TEST_F(AdminSecurityTest, SilentClientsAreDisconnected) {
  makeDataset(1);
  ASSERT_EQ(mount().exitCode, 0);
  int fd = connectAdmin(mnt_);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(send(fd, "\x10\x00", 2, MSG_NOSIGNAL), 2);  // half a header, then silence
  const auto t0 = std::chrono::steady_clock::now();
  char c;
  EXPECT_EQ(recv(fd, &c, 1, 0), 0) << "the daemon should close it";
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GT(secs, 3.0);
  EXPECT_LT(secs, 8.0);
  close(fd);
  EXPECT_GE(counter(stats(), "admin.timeouts").value_or(0), 1u);
}

size_t openFds(pid_t pid) {
  size_t n = 0;
  DIR* d = opendir(("/proc/" + std::to_string(pid) + "/fd").c_str());
  if (!d) return 0;
  while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

TEST_F(AdminSecurityTest, ConnectionFloodDoesNotStopReads) {
  makeDataset(40);
  ASSERT_EQ(mount({"--ram-cache", "8M"}).exitCode, 0);
  const pid_t pid = daemonPid();
  ASSERT_GT(pid, 0);
  const size_t fdsBefore = openFds(pid);
  const std::string path = adminSocketPath(mnt_);

  std::atomic<bool> stop{false};
  std::atomic<uint64_t> reads{0}, bad{0};
  std::thread reader([&] {
    while (!stop.load()) {
      dropCaches();
      for (const auto& rel : files_) {
        auto r = readFile(mnt_ + "/" + rel);
        if (r.err != 0 || r.data != content_[rel]) ++bad;
        ++reads;
      }
    }
  });

  // 1,000 connections, held open and silent.
  std::vector<int> conns;
  size_t refusedAtConnect = 0;
  size_t maxFds = 0;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  for (int i = 0; i < 1000; ++i) {
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    ASSERT_GE(fd, 0);
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) ++refusedAtConnect;
    conns.push_back(fd);
    if (i % 100 == 0) maxFds = std::max(maxFds, openFds(pid));
  }
  const uint64_t readsAtFlood = reads.load();
  for (int i = 0; i < 30; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    maxFds = std::max(maxFds, openFds(pid));
  }
  EXPECT_GT(reads.load(), readsAtFlood) << "reads stopped during the flood";
  for (int fd : conns) close(fd);
  // The held slots time out (5 s); the admin socket answers again.
  json st;
  for (int i = 0; i < 100; ++i) {
    st = admin("stats");
    if (st.value("ok", false)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  stop = true;
  reader.join();
  ASSERT_TRUE(st.value("ok", false)) << st.dump();
  EXPECT_EQ(bad.load(), 0u);
  EXPECT_GT(reads.load(), files_.size());
  EXPECT_GT(counter(st, "admin.refused").value_or(0) + refusedAtConnect, 0u) << st.dump();
  // 64 admin connections, plus transient source reads of 16 FUSE workers and the accept.
  EXPECT_LE(maxFds, fdsBefore + 64 + 32) << "the daemon held more descriptors than its limit";
  RecordProperty("reads_during_flood", std::to_string(reads.load()));
  RecordProperty("refused_by_daemon", std::to_string(counter(st, "admin.refused").value_or(0)));
  RecordProperty("refused_at_connect", std::to_string(refusedAtConnect));
  RecordProperty("max_daemon_fds", std::to_string(maxFds));
}

}  // namespace
}  // namespace epochfs::itest
