#include "tools/bench/epochbench/bench_env.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <exception>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tools/bench/epochbench/case_mount.h"
#include "tools/bench/epochbench/system_util.h"
#include "tools/bench/epochbench/throttled_source.h"

namespace epochfs::bench {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// The protocol's stream: the original stdout. fd 1 itself is pointed at
// stderr, so nothing the children print (mkfs, losetup, cp) mixes into it.
std::FILE* g_out = nullptr;

void reply(const json& j) {
  std::fputs((j.dump() + "\n").c_str(), g_out);
  std::fflush(g_out);
}

json failure(const std::string& message) { return {{"ok", false}, {"error", message}}; }

struct Tree {
  uint64_t bytes = 0, files = 0, dirs = 0;
};

Tree measure(const std::string& root) {
  Tree t;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    if (e.is_directory()) {
      ++t.dirs;
    } else {
      ++t.files;
      if (e.is_regular_file()) t.bytes += e.file_size();
    }
  }
  return t;
}

// What the environment holds besides the source: the case mounts over it.
struct Env {
  ThrottledSource& source;
  const std::string& epochfs;
  std::unique_ptr<ScratchDir> scratch;  // their mountpoints; made at the first mount
  std::map<int, std::unique_ptr<CaseMount>> mounts;
  int next_id = 1;
};

json mountCase(std::istringstream& in, Env& env) {
  std::string name, arg, error;
  if (!(in >> name)) return failure("usage: mount CASE [EPOCHFS-ARG...]");
  std::vector<std::string> args;
  while (in >> arg) args.push_back(arg);
  try {
    if (!env.scratch) env.scratch = std::make_unique<ScratchDir>("/tmp/epochbench-env-");
  } catch (const std::exception& e) {
    return failure(e.what());
  }
  auto m = CaseMount::open(name, env.source.root(), env.epochfs, args, *env.scratch, &error);
  if (!m) return failure(error);
  for (pid_t pid : m->daemonPids()) {
    if (!env.source.throttle().addProcess(pid, &error)) return failure(error);
  }
  int id = env.next_id++;
  json reply = {{"ok", true}, {"id", id}, {"dir", m->root()}, {"pids", m->daemonPids()}};
  env.mounts[id] = std::move(m);
  return reply;
}

json handle(const std::string& line, Env& env) {
  ThrottledSource& source = env.source;
  std::istringstream in(line);
  std::string cmd;
  in >> cmd;
  std::string error;
  if (cmd == "join" || cmd == "leave") {
    long pid = 0;
    if (!(in >> pid) || pid <= 0) return failure("usage: " + cmd + " PID");
    bool ok = cmd == "join" ? source.throttle().addProcess(static_cast<pid_t>(pid), &error)
                            : source.throttle().removeProcess(static_cast<pid_t>(pid), &error);
    return ok ? json{{"ok", true}} : failure(error);
  }
  if (cmd == "read-bytes") {
    auto bytes = source.throttle().readBytes();
    return bytes ? json{{"ok", true}, {"bytes", *bytes}} : failure("no cgroup");
  }
  if (cmd == "drop-caches") {
    return dropPageCache(&error, 3) ? json{{"ok", true}} : failure(error);
  }
  if (cmd == "mount") return mountCase(in, env);
  if (cmd == "unmount") {
    int id = 0;
    if (!(in >> id) || env.mounts.erase(id) == 0) return failure("usage: unmount ID (of a mount)");
    return {{"ok", true}};
  }
  return failure("unknown command '" + cmd +
                 "' (join PID, leave PID, read-bytes, drop-caches, mount CASE [ARG...], "
                 "unmount ID, quit)");
}

}  // namespace

int runBenchEnv(const EnvOptions& options) {
  ::signal(SIGPIPE, SIG_IGN);  // a client gone mid-reply: tear down, do not die
  int protocol_fd = ::fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
  g_out = protocol_fd >= 0 ? ::fdopen(protocol_fd, "w") : nullptr;
  if (g_out == nullptr || ::dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
    std::perror("epochbench env: stdout");
    return 1;
  }
  auto fail = [](const std::string& message) {
    std::fprintf(stderr, "epochbench env: %s\n", message.c_str());
    reply(failure(message));
    return 1;
  };
  auto bps = parseByteSize(options.read_bps);
  if (!bps || *bps == 0) return fail("--rate: '" + options.read_bps + "' is not a size (100M)");
  auto room = parseByteSize(options.room);
  if (!room) return fail("--room: '" + options.room + "' is not a size (1G)");
  const std::string& sub = options.subdir;
  if (sub.empty() || sub == "." || sub == ".." || sub == "lost+found" ||
      sub.find('/') != std::string::npos) {
    return fail("--subdir: '" + sub + "' is not a plain directory name");
  }
  std::error_code ec;
  if (!fs::is_directory(options.data, ec))
    return fail("--data: " + options.data + " is no directory");
  std::unique_ptr<ThrottledSource> source;
  Tree tree;
  try {
    tree = measure(options.data);
    // Room for the data x 1.3, a 4 KiB block per file, the journal and metadata.
    source =
        ThrottledSource::create((tree.bytes + *room) * 13 / 10 + tree.files * 4096 + (256ull << 20),
                                tree.files + tree.dirs + 4096, *bps);
  } catch (const std::exception& e) {
    return fail(e.what());
  }
  const std::string data = source->root() + "/" + sub;
  std::fprintf(stderr, "epochbench env: copying %s (%llu files, %.1f MB) to %s\n",
               options.data.c_str(), static_cast<unsigned long long>(tree.files), tree.bytes / 1e6,
               data.c_str());
  if (runCommand({"cp", "-a", "--", options.data, data}, 3600) != 0) {
    return fail("cp -a " + options.data + " " + data + " failed");  // ~ThrottledSource undoes
  }
  ::sync();
  const BlkioThrottle& t = source->throttle();
  reply({{"ok", true},
         {"pid", ::getpid()},
         {"root", source->root()},
         {"data", data},
         {"loop_device", source->loopDevice()},
         {"device", t.deviceId()},
         {"image", source->image()},
         {"cgroup", t.path()},
         {"mechanism", t.mechanism()},
         {"read_bps", source->readBps()},
         {"bytes", tree.bytes},
         {"files", tree.files}});
  Env env{*source, options.epochfs, nullptr, {}, 1};
  bool quit = false;
  for (std::string line; !quit && std::getline(std::cin, line);) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (line.empty()) continue;
    if (line == "quit") {
      quit = true;
    } else {
      reply(handle(line, env));
    }
  }
  env.mounts.clear();  // unmounted, their daemons gone: the source is no longer busy
  env.scratch.reset();
  source.reset();  // the cgroup emptied and removed, unmounted, detached, image deleted
  if (quit) reply({{"ok", true}});
  return 0;
}

}  // namespace epochfs::bench
