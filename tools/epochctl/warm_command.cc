#include "tools/epochctl/warm_command.h"

#include <unistd.h>

#include <chrono>
#include <sstream>
#include <thread>

#include "fusefs/admin_protocol.h"
#include "tools/epochctl/formatting.h"
#include "tools/epochctl/progress_bar.h"

namespace epochfs::ctl {

using nlohmann::json;

json runWarm(CtlClient& client, const PathList& paths, const WarmOptions& options) {
  if (paths.empty()) throw CtlError("warm needs PATH... or --list FILE");
  paths.sendBatches(client, {{"cmd", admin::kCmdWarmAdd}}, [](const json&) {});
  json start = {{"cmd", admin::kCmdWarmStart}};
  if (options.threads > 0) start["threads"] = options.threads;
  const json started = client.call(start);
  ProgressBar bar(stderr, isatty(STDERR_FILENO) != 0);
  json p;
  for (;;) {
    p = client.call({{"cmd", admin::kCmdWarmProgress}});
    const auto files = p.value("files_done", uint64_t{0});
    const auto filesTotal = p.value("files_total", uint64_t{0});
    const auto bytes = p.value("bytes_done", uint64_t{0});
    const auto bytesTotal = p.value("bytes_total", uint64_t{0});
    const double secs = p.value("seconds", 0.0);
    if (p.value("done", false)) {
      if (options.progress) bar.finish(files, filesTotal, bytes, bytesTotal, secs);
      break;
    }
    if (options.progress) bar.update(files, filesTotal, bytes, bytesTotal, secs);
    std::this_thread::sleep_for(std::chrono::duration<double>(options.pollSeconds));
  }
  const double secs = p.value("seconds", 0.0);
  return {{"files", p["files_done"]},
          {"files_total", p["files_total"]},
          {"bytes", p["bytes_done"]},
          {"bytes_total", p["bytes_total"]},
          {"skipped", started.value("skipped", uint64_t{0})},
          {"errors", p["errors"]},
          {"first_error", p["first_error"]},
          {"seconds", secs},
          {"bytes_per_s", secs > 0 ? p.value("bytes_done", 0.0) / secs : 0.0}};
}

std::string formatWarm(const json& r) {
  std::ostringstream o;
  o << "warmed " << r.value("files", uint64_t{0}) << " files, "
    << humanBytes(r.value("bytes", uint64_t{0})) << " in "
    << ProgressBar::clock(r.value("seconds", 0.0)) << " ("
    << humanBytes(static_cast<uint64_t>(r.value("bytes_per_s", 0.0))) << "/s)";
  if (r.value("skipped", uint64_t{0}) > 0) {
    o << "; skipped " << r["skipped"].get<uint64_t>() << " you may not read";
  }
  o << "\n";
  return o.str();
}

json runEvict(CtlClient& client, const PathList& paths, bool all, const std::string& tier) {
  if (all) {
    if (!paths.empty()) throw CtlError("evict takes PATH... or --all, not both");
    json r = client.call({{"cmd", admin::kCmdEvict}, {"all", true}, {"tier", tier}}, 120);
    r.erase("ok");
    return r;
  }
  if (paths.empty()) throw CtlError("evict needs PATH... or --all");
  uint64_t files = 0, chunks = 0, bytes = 0;
  paths.sendBatches(client, {{"cmd", admin::kCmdEvict}, {"tier", tier}}, [&](const json& r) {
    files += r.value("files", uint64_t{0});
    chunks += r.value("chunks", uint64_t{0});
    bytes += r.value("bytes", uint64_t{0});
  });
  return {{"all", false}, {"tier", tier}, {"files", files}, {"chunks", chunks}, {"bytes", bytes}};
}

std::string formatEvict(const json& r) {
  std::ostringstream o;
  const std::string tier = r.value("tier", "all");
  o << "evicted " << r.value("chunks", uint64_t{0}) << " chunks ("
    << humanBytes(r.value("bytes", uint64_t{0})) << ")";
  if (r["files"].is_number()) o << " of " << r["files"].get<uint64_t>() << " files";
  o << " from " << (tier == "all" ? "ram and disk" : tier)
    << " (the kernel page cache keeps its own copy until it drops it)\n";
  return o.str();
}

}  // namespace epochfs::ctl
