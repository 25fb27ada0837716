#include "fusefs/daemon/supervisor_link.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace epochfs::fusefs {

namespace {

int envFd(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return -1;
  char* end = nullptr;
  const long fd = std::strtol(v, &end, 10);
  if (*end != '\0' || fd < 0 || fcntl(static_cast<int>(fd), F_GETFD) < 0) return -1;
  return static_cast<int>(fd);
}

std::string envString(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : "";
}

}  // namespace

std::string toHex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out.push_back(digits[c >> 4]);
    out.push_back(digits[c & 15]);
  }
  return out;
}

std::string fromHex(const std::string& hex) {
  if (hex.size() % 2 != 0) return "";
  auto val = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  std::string out;
  for (size_t i = 0; i < hex.size(); i += 2) {
    const int hi = val(hex[i]), lo = val(hex[i + 1]);
    if (hi < 0 || lo < 0) return "";
    out.push_back(static_cast<char>(hi << 4 | lo));
  }
  return out;
}

std::string encodeHeldMount(const HeldMount& m) {
  std::string out = std::to_string(m.fd);
  out += ':';
  out += toHex(m.mountpoint);
  out += ':';
  out += toHex(m.initMessage);
  out += ':';
  out += std::to_string(m.owner);
  out += m.allowOther ? ":1:" : ":0:";
  out += toHex(m.order);
  return out;
}

std::optional<HeldMount> decodeHeldMount(const std::string& item) {
  std::vector<std::string> fields;
  for (size_t at = 0;;) {
    const size_t colon = item.find(':', at);
    fields.push_back(item.substr(at, colon == std::string::npos ? colon : colon - at));
    if (colon == std::string::npos) break;
    at = colon + 1;
  }
  if (fields.size() != 4 && fields.size() != 6) return std::nullopt;
  char* stop = nullptr;
  const long fd = std::strtol(fields[0].c_str(), &stop, 10);
  if (fields[0].empty() || *stop != '\0' || fd < 0 || fd > INT32_MAX) return std::nullopt;
  HeldMount m;
  m.fd = static_cast<int>(fd);
  m.mountpoint = fromHex(fields[1]);
  m.initMessage = fromHex(fields[2]);
  m.owner = static_cast<uid_t>(std::strtoul(fields[3].c_str(), nullptr, 10));
  if (fields.size() == 6) {
    m.allowOther = fields[4] == "1";
    m.order = fromHex(fields[5]);
  }
  if (m.mountpoint.empty() || m.initMessage.empty()) return std::nullopt;
  return m;
}

std::string encodeHeldMounts(const std::vector<HeldMount>& mounts) {
  std::string out;
  for (const HeldMount& m : mounts) {
    if (!out.empty()) out += ',';
    out += encodeHeldMount(m);
  }
  return out;
}

std::vector<HeldMount> decodeHeldMounts(const std::string& text) {
  std::vector<HeldMount> out;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find(',', at);
    if (end == std::string::npos) end = text.size();
    auto m = decodeHeldMount(text.substr(at, end - at));
    at = end + 1;
    if (m && fcntl(m->fd, F_GETFD) >= 0) out.push_back(std::move(*m));
  }
  return out;
}

std::unique_ptr<SupervisorLink> SupervisorLink::fromEnvironment() {
  const int channel = envFd(kEnvChannel);
  if (channel < 0) return nullptr;
  std::unique_ptr<SupervisorLink> link(new SupervisorLink());
  link->channel_ = channel;
  fcntl(channel, F_SETFD, FD_CLOEXEC);
  link->resume_ = decodeHeldMounts(envString(kEnvMounts));
  for (const HeldMount& m : link->resume_) fcntl(m.fd, F_SETFD, FD_CLOEXEC);
  link->fingerprint_ = envString(kEnvFingerprint);
  link->handoffFd_ = envFd(kEnvHandoff);
  if (link->handoffFd_ >= 0) fcntl(link->handoffFd_, F_SETFD, FD_CLOEXEC);
  link->namespaceFd_ = envFd(kEnvNamespaceFd);
  if (link->namespaceFd_ >= 0) fcntl(link->namespaceFd_, F_SETFD, FD_CLOEXEC);
  for (const char* name : {kEnvChannel, kEnvMounts, kEnvFingerprint, kEnvResumeMountpoint,
                           kEnvHandoff, kEnvNamespaceFd}) {
    unsetenv(name);
  }
  return link;
}

SupervisorLink::~SupervisorLink() {
  if (channel_ >= 0) close(channel_);
  if (handoffFd_ >= 0) close(handoffFd_);
  if (namespaceFd_ >= 0) close(namespaceFd_);
}

int SupervisorLink::takeNamespaceFd() {
  const int fd = namespaceFd_;
  namespaceFd_ = -1;
  return fd;
}

std::string SupervisorLink::takeHandoff() {
  std::string out;
  if (handoffFd_ < 0) return out;
  char buf[4096];
  ssize_t n;
  while ((n = read(handoffFd_, buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR)) {
    if (n > 0) out.append(buf, static_cast<size_t>(n));
  }
  explicit_bzero(buf, sizeof buf);
  close(handoffFd_);
  handoffFd_ = -1;
  return out;
}

void SupervisorLink::send(const std::string& message, int fd) {
  iovec iov{const_cast<char*>(message.data()), message.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  if (fd >= 0) {
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &fd, sizeof fd);
  }
  // Best effort: if the supervisor is gone there is nobody to tell.
  (void)sendmsg(channel_, &msg, MSG_NOSIGNAL);
}

void SupervisorLink::sendMount(const HeldMount& m) { send("mount\n" + encodeHeldMount(m), m.fd); }

void SupervisorLink::sendUnmounted(const std::string& mountpoint) {
  send("unmounted\n" + toHex(mountpoint));
}

void SupervisorLink::sendNamespace(int memfd) { send("namespace", memfd); }

void SupervisorLink::sendReady(const std::string& fingerprint) { send("ready\n" + fingerprint); }

void SupervisorLink::sendError(const std::string& reason) { send("error\n" + reason); }

}  // namespace epochfs::fusefs
