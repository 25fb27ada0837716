// The admin client library (tools/admin_client/) against a fake daemon: a
// real Unix socket in a temporary directory whose server side plays a script
// (good replies, refusals, malformed frames, silence). No daemon, no mount.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "fusefs/admin_protocol.h"
#include "tools/admin_client/client.h"
#include "tools/admin_client/entry_batch.h"
#include "tools/admin_client/order_writer.h"
#include "tools/admin_client/path_field.h"
#include "tools/epochctl/ctl_client.h"

namespace epochfs::admin {
namespace {

using nlohmann::json;

// A listening socket whose accepted connections each run `script` (one at a
// time, on one thread); the connection is closed when the script returns.
class FakeDaemon {
 public:
  using Script = std::function<void(int fd)>;

  explicit FakeDaemon(Script script) : script_(std::move(script)) {
    char dir[] = "/tmp/epochfs-admin-client-XXXXXX";
    if (mkdtemp(dir) == nullptr) throw std::runtime_error("mkdtemp failed");
    dir_ = dir;
    path_ = dir_ + "/admin.sock";
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path_.c_str(), sizeof addr.sun_path - 1);
    listenFd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (listenFd_ < 0 || bind(listenFd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        listen(listenFd_, 4) != 0) {
      throw std::runtime_error(std::string("fake daemon socket: ") + std::strerror(errno));
    }
    thread_ = std::thread([this] {
      for (;;) {
        const int fd = accept4(listenFd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd < 0) return;  // shut down
        ++accepted_;
        script_(fd);
        close(fd);
      }
    });
  }
  ~FakeDaemon() {
    shutdown(listenFd_, SHUT_RDWR);  // wakes accept()
    thread_.join();
    close(listenFd_);
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  const std::string& dir() const { return dir_; }
  const std::string& path() const { return path_; }
  int accepted() const { return accepted_; }

 private:
  Script script_;
  std::string dir_;
  std::string path_;
  int listenFd_ = -1;
  std::atomic<int> accepted_{0};
  std::thread thread_;
};

json readRequest(int fd) {
  std::string body;
  if (!receiveMessage(fd, body)) return json();
  return json::parse(body, nullptr, false);
}

void writeRaw(int fd, const std::string& bytes) {
  ASSERT_EQ(send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
}

std::string header(uint32_t n) {
  return std::string{static_cast<char>(n), static_cast<char>(n >> 8), static_cast<char>(n >> 16),
                     static_cast<char>(n >> 24)};
}

// Answers every request of the connection with `reply(request)`.
FakeDaemon::Script answering(std::function<json(const json&)> reply) {
  return [reply](int fd) {
    for (json request = readRequest(fd); !request.is_null(); request = readRequest(fd)) {
      if (!sendMessage(fd, reply(request).dump())) return;
    }
  };
}

Client connectTo(const FakeDaemon& daemon) {
  auto client = Client::connect("/mnt/fake", daemon.path());
  if (!client) throw std::runtime_error(client.error().message);
  return std::move(*client);
}

TEST(AdminClient, ReturnsTheReplyAndKeepsTheConnection) {
  FakeDaemon daemon(answering([](const json& r) {
    return json{{"ok", true}, {"echo", r["cmd"]}};
  }));
  Client client = connectTo(daemon);
  EXPECT_EQ(client.mountpoint(), "/mnt/fake");
  EXPECT_EQ(client.socketPath(), daemon.path());
  for (const char* cmd : {kCmdStatus, kCmdStats}) {
    auto reply = client.call({{"cmd", cmd}});
    ASSERT_TRUE(reply) << reply.error().message;
    EXPECT_EQ((*reply)["echo"], cmd);
  }
  Client moved = std::move(client);  // the connection moves with it
  EXPECT_TRUE(moved.call({{"cmd", kCmdStatus}}));
}

TEST(AdminClient, RefusalsCarryTheDaemonsMessageAndCode) {
  FakeDaemon daemon(answering([](const json& r) {
    if (r["cmd"] == kCmdEvict) {
      return json{{"ok", false}, {"error", "admin only"}, {"code", "permission_denied"}};
    }
    if (r["cmd"] == kCmdLs) return json{{"ok", false}, {"error", "no such file"}};
    return json{{"ok", false}, {"error", 7}, {"code", 8}};  // fields of the wrong type
  }));
  Client client = connectTo(daemon);
  auto denied = client.call({{"cmd", kCmdEvict}});
  ASSERT_FALSE(denied);
  EXPECT_EQ(denied.error().kind, ErrorKind::kDenied);
  EXPECT_EQ(denied.error().message, "admin only");
  EXPECT_EQ(denied.error().code, "permission_denied");
  auto rejected = client.call({{"cmd", kCmdLs}});
  ASSERT_FALSE(rejected);
  EXPECT_EQ(rejected.error().kind, ErrorKind::kRejected);
  EXPECT_EQ(rejected.error().message, "no such file");
  EXPECT_EQ(rejected.error().code, "");
  auto odd = client.call({{"cmd", kCmdStatus}});
  ASSERT_FALSE(odd);
  EXPECT_EQ(odd.error().kind, ErrorKind::kRejected);
  EXPECT_EQ(odd.error().message, "failed");
}

TEST(AdminClient, ALengthOverTheCapIsAFailedConnection) {
  FakeDaemon daemon([](int fd) {
    readRequest(fd);
    writeRaw(fd, header(0xffffffffu));
  });
  Client client = connectTo(daemon);
  auto reply = client.call({{"cmd", kCmdStatus}});
  ASSERT_FALSE(reply);
  EXPECT_EQ(reply.error().kind, ErrorKind::kUnreachable);
  EXPECT_NE(reply.error().message.find("/mnt/fake: daemon not responding"), std::string::npos)
      << reply.error().message;
}

TEST(AdminClient, AnOversizedReplyIsRefusedUnread) {
  FakeDaemon daemon([](int fd) {
    readRequest(fd);
    const std::string body = "{\"ok\":true,\"pad\":\"" + std::string(kMaxMessageBytes, 'x') + "\"}";
    writeRaw(fd, header(static_cast<uint32_t>(body.size())));
    send(fd, body.data(), body.size(), MSG_NOSIGNAL);  // may stop when the client closes
  });
  Client client = connectTo(daemon);
  auto reply = client.call({{"cmd", kCmdStatus}});
  ASSERT_FALSE(reply);
  EXPECT_EQ(reply.error().kind, ErrorKind::kUnreachable);
}

TEST(AdminClient, AConnectionClosedMidMessageIsAFailedConnection) {
  FakeDaemon daemon([](int fd) {
    readRequest(fd);
    writeRaw(fd, header(100) + "{\"ok\": tr");
  });
  Client client = connectTo(daemon);
  auto reply = client.call({{"cmd", kCmdStatus}});
  ASSERT_FALSE(reply);
  EXPECT_EQ(reply.error().kind, ErrorKind::kUnreachable);
  EXPECT_NE(reply.error().message.find("connection closed"), std::string::npos)
      << reply.error().message;
}

TEST(AdminClient, ARepliesThatIsNotAJsonObjectIsAProtocolError) {
  for (const std::string body : {"not json", "[1, 2]", "{\"ok\": \"yes\"}"}) {
    FakeDaemon daemon([body](int fd) {
      readRequest(fd);
      sendMessage(fd, body);
    });
    Client client = connectTo(daemon);
    auto reply = client.call({{"cmd", kCmdStatus}});
    ASSERT_FALSE(reply) << body;
    EXPECT_EQ(reply.error().kind, ErrorKind::kProtocol) << body;
    EXPECT_EQ(reply.error().message, "malformed reply from the daemon");
  }
}

TEST(AdminClient, ASilentDaemonTimesOut) {
  FakeDaemon daemon([](int fd) {
    readRequest(fd);
    char c;
    while (recv(fd, &c, 1, 0) > 0) {
    }  // never answers; returns when the client closes
  });
  Client client = connectTo(daemon);
  const auto t0 = std::chrono::steady_clock::now();
  auto reply = client.call({{"cmd", kCmdStatus}}, 0.2);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_FALSE(reply);
  EXPECT_EQ(reply.error().kind, ErrorKind::kUnreachable);
  EXPECT_NE(reply.error().message.find("no reply within 0.2 s"), std::string::npos)
      << reply.error().message;
  EXPECT_GE(seconds, 0.15);
  EXPECT_LT(seconds, 5.0);
}

TEST(AdminClient, ARequestOverTheCapIsNotSent) {
  std::atomic<int> requests{0};
  FakeDaemon daemon([&requests](int fd) {
    while (!readRequest(fd).is_null()) ++requests;
  });
  Client client = connectTo(daemon);
  auto reply = client.call({{"cmd", kCmdWarmAdd}, {"pad", std::string(kMaxMessageBytes, 'x')}});
  ASSERT_FALSE(reply);
  EXPECT_EQ(reply.error().kind, ErrorKind::kProtocol);
  EXPECT_NE(reply.error().message.find("message cap"), std::string::npos);
  EXPECT_EQ(requests, 0);
}

TEST(AdminClient, NoSocketNoMountNoDirectory) {
  auto noSocket = Client::connect("/mnt/fake", "/nonexistent/admin.sock");
  ASSERT_FALSE(noSocket);
  EXPECT_EQ(noSocket.error().kind, ErrorKind::kUnreachable);
  EXPECT_NE(noSocket.error().message.find("/mnt/fake: daemon not responding"), std::string::npos)
      << noSocket.error().message;

  FakeDaemon daemon([](int) {});  // for its directory: no xattr there
  auto plain = Client::connect(daemon.dir());
  ASSERT_FALSE(plain);
  EXPECT_EQ(plain.error().kind, ErrorKind::kUnreachable);
  EXPECT_EQ(plain.error().message, daemon.dir() + ": not an epochfs mount");
  auto missing = Client::advertisedSocket(daemon.dir() + "/missing");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().message, daemon.dir() + "/missing: no such directory");
}

TEST(AdminClient, FindsTheSocketThroughTheMountRootsXattr) {
  FakeDaemon daemon(answering([](const json&) { return json{{"ok", true}}; }));
  // With the terminator, as some writers store it: it is not part of the path.
  if (setxattr(daemon.dir().c_str(), kAdminXattr, daemon.path().c_str(), daemon.path().size() + 1,
               0) != 0) {
    GTEST_SKIP() << "user xattrs not supported on " << daemon.dir() << ": " << std::strerror(errno);
  }
  auto advertised = Client::advertisedSocket(daemon.dir());
  ASSERT_TRUE(advertised) << advertised.error().message;
  EXPECT_EQ(*advertised, daemon.path());
  auto client = Client::connect(daemon.dir());
  ASSERT_TRUE(client) << client.error().message;
  EXPECT_TRUE(client->call({{"cmd", kCmdStatus}}));
}

TEST(AdminClient, OrderWriterBatchesUnderTheCapOnOneConnection) {
  std::mutex mu;
  std::vector<json> seen;  // guarded by mu
  size_t committed = 0;
  FakeDaemon daemon(answering([&](const json& r) {
    std::lock_guard<std::mutex> lock(mu);
    seen.push_back(r);
    if (r["cmd"] == kCmdOrderAppend) committed += r["entries"].size();
    if (r["cmd"] == kCmdOrderCommit) return json{{"ok", true}, {"entries", committed}};
    return json{{"ok", true}};
  }));
  Client client = connectTo(daemon);
  OrderWriter order(client);
  ASSERT_TRUE(order.begin(3, 1, 10));
  const size_t n = 5000;  // ~140 KB of entries: three messages
  for (size_t i = 0; i < n; ++i) {
    ASSERT_TRUE(order.append("train/class_" + std::to_string(i % 100) + "/img_" +
                             std::to_string(i) + ".jpg"));
  }
  auto tooLong = order.append(std::string(kMaxMessageBytes, 'y'));
  ASSERT_FALSE(tooLong);
  EXPECT_EQ(tooLong.error().kind, ErrorKind::kProtocol);
  EXPECT_EQ(tooLong.error().message.rfind("entry too long: yyy", 0), 0u);
  auto reply = order.commit();
  ASSERT_TRUE(reply) << reply.error().message;
  EXPECT_EQ((*reply)["entries"], n);
  EXPECT_EQ(daemon.accepted(), 1);

  std::lock_guard<std::mutex> lock(mu);
  ASSERT_GE(seen.size(), 4u);
  EXPECT_EQ(seen.front(),
            (json{{"cmd", kCmdOrderBegin}, {"epoch", 3}, {"rank", 1}, {"start", 10}}));
  EXPECT_EQ(seen.back()["cmd"], kCmdOrderCommit);
  for (size_t i = 1; i + 1 < seen.size(); ++i) {
    EXPECT_EQ(seen[i]["cmd"], kCmdOrderAppend);
    EXPECT_LE(seen[i].dump().size(), kMaxMessageBytes);
  }
  EXPECT_GE(seen.size(), 5u) << "5000 entries fit one message?";
}

TEST(AdminClient, OrderWriterStopsAtTheFirstRefusal) {
  FakeDaemon daemon(answering([](const json& r) {
    if (r["cmd"] == kCmdOrderCommit) return json{{"ok", false}, {"error", "entry 2 not found"}};
    return json{{"ok", true}};
  }));
  Client client = connectTo(daemon);
  OrderWriter order(client);
  ASSERT_TRUE(order.begin(1, 0, 0));
  ASSERT_TRUE(order.append("a"));
  ASSERT_TRUE(order.append(json{{"b64", base64Encode("\xff")}}));
  auto reply = order.commit();
  ASSERT_FALSE(reply);
  EXPECT_EQ(reply.error().kind, ErrorKind::kRejected);
  EXPECT_EQ(reply.error().message, "entry 2 not found");
}

TEST(AdminClient, PathsThatAreNotUtf8TravelAsBase64) {
  EXPECT_EQ(encodePath("train/a.jpg"), json("train/a.jpg"));
  const std::string raw = "caf\xe9/\xff.bin";
  const json field = encodePath(raw);
  ASSERT_TRUE(field.is_object());
  std::string back;
  ASSERT_TRUE(decodePath(field, &back));
  EXPECT_EQ(back, raw);
  ASSERT_TRUE(decodePath(json("plain"), &back));
  EXPECT_EQ(back, "plain");
  EXPECT_FALSE(decodePath(json(7), &back));
  EXPECT_FALSE(decodePath(json{{"b64", "not base64!"}}, &back));
}

TEST(AdminClient, EntryBatchKeepsARequestUnderTheCap) {
  EntryBatch batch;
  EXPECT_TRUE(batch.empty());
  const json entry(std::string(1000, 'p'));
  size_t taken = 0;
  while (batch.add(entry) == EntryBatch::Added::kYes) ++taken;
  EXPECT_GT(taken, 60u);
  const json request = {{"cmd", kCmdWarmAdd}, {"paths", batch.take()}};
  EXPECT_LE(request.dump().size(), kMaxMessageBytes);
  EXPECT_EQ(request["paths"].size(), taken);
  EXPECT_TRUE(batch.empty());
  EXPECT_EQ(batch.add(entry), EntryBatch::Added::kYes);  // room again after take()
  EXPECT_EQ(batch.add(json(std::string(kMaxMessageBytes, 'q'))), EntryBatch::Added::kTooLarge);
}

// epochctl's view: the kinds become docs/ADMIN.md's exit statuses.
TEST(AdminClient, EpochctlExitStatusesByKind) {
  EXPECT_EQ(ctl::toCtlError({ErrorKind::kUnreachable, "x", {}}).exitCode(), 3);
  EXPECT_EQ(ctl::toCtlError({ErrorKind::kDenied, "x", {}}).exitCode(), 4);
  EXPECT_EQ(ctl::toCtlError({ErrorKind::kRejected, "x", {}}).exitCode(), 1);
  EXPECT_EQ(ctl::toCtlError({ErrorKind::kProtocol, "x", {}}).exitCode(), 1);
  EXPECT_STREQ(ctl::toCtlError({ErrorKind::kRejected, "why", {}}).what(), "why");
  try {
    ctl::CtlClient client("/nonexistent-epochfs-mount");
    FAIL() << "connected to nothing";
  } catch (const ctl::CtlError& e) {
    EXPECT_EQ(e.exitCode(), 3);
    EXPECT_STREQ(e.what(), "/nonexistent-epochfs-mount: no such directory");
  }
}

}  // namespace
}  // namespace epochfs::admin
