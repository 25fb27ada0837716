#include "fusefs/daemon/daemon_registry.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

#include "fusefs/admin/admin_server.h"
#include "fusefs/admin_protocol.h"

namespace epochfs::fusefs {

using cache::Result;
using cache::Status;
using nlohmann::json;

namespace {

std::string sha256Hex(const std::string& data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  EVP_Digest(data.data(), data.size(), digest, &len, EVP_sha256(), nullptr);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned i = 0; i < len; ++i) {
    out += kHex[digest[i] >> 4];
    out += kHex[digest[i] & 0xF];
  }
  return out;
}

bool alive(pid_t pid) { return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM); }

// Each field on its own line, length-prefixed: no two different identities
// hash the same bytes.
void field(std::string& out, const std::string& v) {
  out += std::to_string(v.size());
  out += ':';
  out += v;
  out += '\n';
}

}  // namespace

Result<DaemonRegistry> DaemonRegistry::forDataset(const MountOptions& o,
                                                  const transport::s3::Credentials* credentials) {
  auto socket = AdminServer::defaultPath("");
  if (!socket.isOk()) return socket.status();
  const std::string dir = socket->substr(0, socket->rfind('/'));
  struct stat ns {};
  if (stat("/proc/self/ns/mnt", &ns) != 0) return Status::ioError("cannot stat /proc/self/ns/mnt");
  std::string id;
  field(id, std::to_string(geteuid()));
  field(id, std::to_string(ns.st_ino));
  field(id, o.source);
  if (o.s3) {
    field(id, o.s3->endpoint);
    field(id, o.s3->region);
    field(id, credentials ? credentials->accessKeyId : "");
    field(id, credentials ? credentials->secretAccessKey : "");
  }
  std::string key = sha256Hex(id);
  explicit_bzero(id.data(), id.size());
  return DaemonRegistry(dir, key.substr(0, 32));
}

DaemonRegistry::DaemonRegistry(DaemonRegistry&& other) noexcept
    : dir_(std::move(other.dir_)), key_(std::move(other.key_)), lockFd_(other.lockFd_) {
  other.lockFd_ = -1;
}

DaemonRegistry::~DaemonRegistry() { unlockStart(); }

Status DaemonRegistry::lockStart() {
  if (lockFd_ >= 0) return Status::ok();
  const std::string path = dir_ + "/shared-" + key_ + ".lock";
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return Status::ioError(path + ": " + std::strerror(errno));
  while (flock(fd, LOCK_EX) != 0) {
    if (errno != EINTR) {
      const int err = errno;
      close(fd);
      return Status::ioError(path + ": " + std::strerror(err));
    }
  }
  lockFd_ = fd;
  return Status::ok();
}

void DaemonRegistry::unlockStart() {
  if (lockFd_ < 0) return;
  close(lockFd_);  // the last descriptor of the open file: the lock goes with it
  lockFd_ = -1;
}

int DaemonRegistry::takeLock() { return std::exchange(lockFd_, -1); }

std::string DaemonRegistry::entryPath() const { return dir_ + "/shared-" + key_ + ".json"; }

std::optional<DaemonRegistry::Entry> DaemonRegistry::read() const {
  std::ifstream in(entryPath());
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  const json j = json::parse(text.str(), nullptr, false);
  if (!j.is_object() || !j.contains("socket") || !j["socket"].is_string() || !j.contains("pid") ||
      !j["pid"].is_number_integer()) {
    return std::nullopt;
  }
  Entry e{j["socket"].get<std::string>(), j["pid"].get<pid_t>(), j.value("shape", json())};
  if (!alive(e.pid)) return std::nullopt;
  return e;
}

Result<bool> DaemonRegistry::publish(const Entry& e) const {
  if (auto live = read(); live && live->pid != e.pid && live->socket != e.socket) return false;
  const std::string path = entryPath();
  const std::string tmp = path + ".tmp" + std::to_string(getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << json{{"socket", e.socket}, {"pid", e.pid}, {"shape", e.shape}}.dump();
    if (!out.flush()) return Status::ioError(tmp + ": cannot write");
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    unlink(tmp.c_str());
    return Status::ioError(path + ": " + std::strerror(err));
  }
  return true;
}

Status DaemonRegistry::join(const Entry& e, const std::string& mountpoint, bool allowOther,
                            std::optional<uid_t> owner, const std::string& order) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (e.socket.size() >= sizeof addr.sun_path) {
    return Status::invalidArgument("socket path too long");
  }
  std::memcpy(addr.sun_path, e.socket.c_str(), e.socket.size() + 1);
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::ioError(std::strerror(errno));
  // A mount takes well under a second; a daemon that hangs must not hang epochfs.
  timeval tv{30, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  const json request = {{"cmd", admin::kCmdJoin},
                        {"mountpoint", mountpoint},
                        {"allow_other", allowOther},
                        {"owner", owner ? json(*owner) : json(nullptr)},
                        {"order", order.empty() ? json(nullptr) : json(order)}};
  std::string reply;
  const bool sent =
      connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      admin::sendMessage(fd, request.dump(-1, ' ', false, json::error_handler_t::replace)) &&
      admin::receiveMessage(fd, reply);
  const int err = errno;
  close(fd);
  if (!sent) return Status::unavailable(std::string("no answer: ") + std::strerror(err));
  const json j = json::parse(reply, nullptr, false);
  if (!j.is_object()) return Status::unavailable("malformed reply");
  if (!j.value("ok", false)) return Status::unavailable(j.value("error", std::string("refused")));
  return Status::ok();
}

void DaemonRegistry::withdraw(const std::string& socket) const {
  std::ifstream in(entryPath());
  if (!in) return;
  std::stringstream text;
  text << in.rdbuf();
  const json j = json::parse(text.str(), nullptr, false);
  if (j.is_object() && j.value("socket", "") == socket) unlink(entryPath().c_str());
}

json daemonShape(const MountOptions& o) {
  json j = {{"source", o.source},
            {"supervise", o.supervise},
            {"ram_cache", o.ramCacheBytes},
            {"memory_limit", o.memoryLimitBytes},
            {"memory_watch", o.memoryWatch},
            {"huge_pages", static_cast<int>(o.hugePages)},
            {"cache_dir", o.cacheDir},
            {"disk_cache", o.diskCacheBytes},
            {"chunk_size", o.chunkSize},
            {"threads", o.threads},
            {"revalidate", o.revalidateSeconds},
            {"admin_socket", o.adminSocket},
            {"admin_group", o.adminGroup},
            {"metrics_port", o.metricsPort},
            {"prefetch_window", o.prefetchWindow},
            {"prefetch_memory", o.prefetchMemory},
            {"prefetch_threads", o.prefetchThreads},
            {"max_plan_entries", o.maxPlanEntries},
            {"inject_source_latency", o.injectSourceLatencyMs},
            {"peers", o.clusterPeers},
            {"hostfile", o.clusterHostfile},
            {"slurm", o.clusterSlurm},
            {"listen", o.clusterListen},
            {"node_id", o.clusterNodeId},
            {"cluster_port", o.clusterPort},
            {"replicas", o.replicas},
            {"secret_file", o.secretFile},
            {"peer_integrity", o.peerMac ? "mac" : "checksum"},
            {"peer_timeout", o.peerTimeoutMs}};
  if (o.s3) {
    j["s3_addressing"] = o.s3->addressing;
    j["s3_ca_file"] = o.s3->caFile;
    j["s3_max_requests"] = o.s3->maxRequests;
    j["s3_read_deadline"] = o.s3->readDeadlineSeconds;
  }
  return j;
}

std::string whyNotShared(const MountOptions& o) {
  if (o.ownDaemon) return "--own-daemon";
  if (o.pushPageCache != MountOptions::PushMode::kOff) {
    return "--push-page-cache (pages are pushed to one mount)";
  }
  return "";
}

std::string shapeDifference(const json& mine, const json& theirs) {
  if (!theirs.is_object()) return "the running daemon's options are unknown";
  for (const auto& [name, value] : mine.items()) {
    const auto it = theirs.find(name);
    if (it == theirs.end() || *it != value) {
      std::string why = "--";
      for (char c : name) why += c == '_' ? '-' : c;
      return why + " differs";
    }
  }
  return "";
}

}  // namespace epochfs::fusefs
