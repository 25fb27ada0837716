// epochctl COMMAND MOUNTPOINT [...]: inspect and steer a running epochfs mount
// through its admin socket (docs/ADMIN.md). Every command takes --json (and
// --socket PATH to bypass the mount's xattr). Exit status: 0 ok, 1 the command
// failed, 3 not an epochfs mount / daemon not responding, 4 permission
// denied; the reason is one line on stderr.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <thread>

#include "fusefs/admin_protocol.h"
#include "tools/epochctl/counter_table.h"
#include "tools/epochctl/ctl_client.h"
#include "tools/epochctl/formatting.h"
#include "tools/epochctl/ls_command.h"
#include "tools/epochctl/model_command.h"
#include "tools/epochctl/mrc_command.h"
#include "tools/epochctl/order_command.h"
#include "tools/epochctl/path_list.h"
#include "tools/epochctl/placement_command.h"
#include "tools/epochctl/stats_watch.h"
#include "tools/epochctl/warm_command.h"

using nlohmann::json;
namespace ctl = epochfs::ctl;
namespace admin = epochfs::admin;

namespace {

uint64_t parseSize(const std::string& text) {
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    throw ctl::CtlError("malformed size '" + text + "'");
  }
  std::string suffix = text.substr(used);
  double mult = 1;
  if (!suffix.empty()) {
    const std::string units = "KMGT";
    const size_t u = units.find(static_cast<char>(std::toupper(suffix[0])));
    if (u == std::string::npos) throw ctl::CtlError("malformed size '" + text + "' (K, M, G, T)");
    mult = std::pow(1024.0, static_cast<double>(u + 1));
  }
  if (v < 0) throw ctl::CtlError("negative size '" + text + "'");
  return static_cast<uint64_t>(v * mult);
}

std::vector<uint64_t> parseSizes(const std::string& list) {
  std::vector<uint64_t> out;
  std::stringstream in(list);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (!item.empty()) out.push_back(parseSize(item));
  }
  return out;
}

}  // namespace

// `epochctl upgrade`: the worker exits for the supervisor to start the binary
// on disk again; waits until a new daemon answers "status" (60 s).
static json upgradeDaemon(ctl::CtlClient& client, const std::string& mountpoint,
                          const std::string& socket) {
  const json asked = client.call({{"cmd", admin::kCmdUpgrade}});
  const int64_t old = asked.value("restarting", int64_t{0});
  const auto t0 = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - t0 < std::chrono::seconds(60)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    try {
      ctl::CtlClient fresh(mountpoint, socket);
      json st = fresh.call({{"cmd", admin::kCmdStatus}});
      const int64_t pid = st.value("pid", int64_t{0});
      if (pid != 0 && pid != old) {
        return json{{"ok", true},
                    {"old_pid", old},
                    {"pid", pid},
                    {"version", st.value("version", std::string())}};
      }
    } catch (const ctl::CtlError&) {
      // between the two daemons: the socket is gone or not yet listening
    }
  }
  throw ctl::CtlError("no new daemon answered within 60 s after the upgrade request");
}

// `epochctl peers`: one line per cluster member.
static std::string formatPeers(const json& r) {
  if (!r.value("clustered", false)) return "not clustered: this mount has no peers\n";
  auto mib = [](const json& p, const char* k) {
    char b[32];
    std::snprintf(b, sizeof b, "%.1f", static_cast<double>(p.value(k, uint64_t{0})) / 1048576.0);
    return std::string(b);
  };
  std::string out = "node " + std::to_string(r.value("self", 0)) + " of " +
                    std::to_string(r.value("members", 0)) + ", replicas " +
                    std::to_string(r.value("replicas", 1)) + ", integrity " +
                    r.value("integrity", std::string("?")) + ", deadline " +
                    std::to_string(r.value("deadline_ms", 0)) + " ms" +
                    (r.value("fits", true) ? "" : "; the dataset does NOT fit the live caches") +
                    "\n";
  char line[512];
  std::snprintf(line, sizeof line, "%-4s %-24s %-10s %10s %10s %12s %12s %8s %8s %s\n", "ID",
                "ADDRESS", "STATE", "OWNED_MiB", "CACHE_MiB", "FETCHED_MiB", "SERVED_MiB", "ERRORS",
                "TIMEOUTS", "LAST ERROR");
  out += line;
  for (const auto& p : r.value("peers", json::array())) {
    const uint64_t errors = p.value("fetch_errors", uint64_t{0}) +
                            p.value("serve_errors", uint64_t{0}) +
                            p.value("auth_failures", uint64_t{0});
    std::snprintf(line, sizeof line, "%-4u %-24s %-10s %10s %10s %12s %12s %8llu %8llu %s\n",
                  p.value("id", 0u), p.value("address", std::string()).c_str(),
                  p.value("state", std::string()).c_str(), mib(p, "owned_bytes").c_str(),
                  mib(p, "capacity_bytes").c_str(), mib(p, "bytes_fetched").c_str(),
                  mib(p, "bytes_served").c_str(), static_cast<unsigned long long>(errors),
                  static_cast<unsigned long long>(p.value("timeouts", uint64_t{0})),
                  p.value("last_error", std::string()).c_str());
    out += line;
  }
  return out;
}

int main(int argc, char** argv) {
  // `model` needs no mount: everything after it goes to the Python model.
  if (argc >= 2 && std::string(argv[1]) == "model") return ctl::runModel(argc - 2, argv + 2);
  CLI::App app{"epochctl: inspect and steer an epochfs mount (docs/ADMIN.md)", "epochctl"};
  app.require_subcommand(1);
  app.set_version_flag("-V,--version", "epochctl " EPOCHFS_VERSION,
                       "Print epochctl's version and exit");
  std::string mountpoint, socket;
  bool asJson = false;
  std::vector<std::string> paths;
  std::string listFile;

  auto* status = app.add_subcommand("status", "Version, source, options, tiers, plan");
  auto* stats = app.add_subcommand("stats", "Reads and bytes by tier, source, prefetch, evictions");
  auto* refresh =
      app.add_subcommand("refresh", "Re-snapshot the source: apply and report what changed");
  auto* ls = app.add_subcommand("ls", "Residency of files/directories in the cache tiers");
  auto* warm = app.add_subcommand("warm", "Fetch files into the cache, with progress");
  auto* evict = app.add_subcommand("evict", "Drop files (or everything) from the cache tiers");
  auto* order = app.add_subcommand("order", "Register an epoch's read order (one entry per line)");
  auto* metrics = app.add_subcommand("metrics", "Prometheus text exposition of every counter");
  auto* mrc =
      app.add_subcommand("mrc", "Miss-ratio curve: hit ratio by cache size, LRU vs order-aware");
  auto* peers = app.add_subcommand("peers", "Cluster members (when clustered)");
  auto* placement =
      app.add_subcommand("placement", "Owner node of every file, and the map's version (cluster)");
  auto* unmount = app.add_subcommand("unmount", "Unmount and stop the daemon");
  auto* upgrade = app.add_subcommand(
      "upgrade", "Restart the daemon from the binary on disk, without unmounting (supervisor)");
  app.add_subcommand("model", "The paper's loading model and locality simulator (docs/MODEL.md)")
      ->allow_extras();
  for (auto* sub : {status, stats, refresh, ls, warm, evict, order, metrics, mrc, peers, placement,
                    unmount, upgrade}) {
    sub->add_option("mountpoint", mountpoint, "An epochfs mountpoint")->required();
    sub->add_flag("--json", asJson, "Machine-readable output");
    sub->add_option("--socket", socket, "Admin socket (default: from the mount's xattr)");
  }
  double watch = 0;
  long count = 0;
  stats->add_option("--watch", watch, "Redraw a live view every SECONDS")
      ->check(CLI::Range(0.1, 86400.0));
  stats->add_option("--count", count, "With --watch: stop after N views");
  bool schema = false;
  stats->add_flag("--schema", schema,
                  "The daemon's counter declarations: path, kind, unit, Prometheus family, help");
  bool dirOnly = false;
  ls->add_option("paths", paths, "Paths relative to the mount (default: its root)");
  ls->add_flag("-d,--directory", dirOnly, "Directories as one total, not their entries");
  unsigned threads = 0;
  bool quiet = false;
  warm->add_option("paths", paths, "Files or directories to warm");
  warm->add_option("--list", listFile, "File with one path per line (- for stdin)");
  warm->add_option("--threads", threads,
                   "Concurrent fetches in the daemon (default " +
                       std::to_string(admin::kDefaultWarmThreads) + ")")
      ->check(CLI::Range(1, 64));
  warm->add_flag("-q,--quiet", quiet, "No progress output");
  bool all = false;
  std::string tier = "all";
  evict->add_option("paths", paths, "Files or directories to evict");
  evict->add_option("--list", listFile, "File with one path per line (- for stdin)");
  evict->add_flag("--all", all, "Evict everything");
  evict->add_option("--tier", tier, "ram, disk or all (default)")
      ->check(CLI::IsMember({"all", "ram", "disk"}));
  ctl::OrderRequest orderRequest;
  std::string orderFile;
  bool clear = false;
  order->add_option("--epoch", orderRequest.epoch, "Epoch number");
  order->add_option("--rank", orderRequest.rank, "Reader stream (rank) on this node")
      ->check(CLI::Range(0, 1 << 20));
  order->add_option("--start", orderRequest.start, "Resume at this position of the order");
  order->add_option("file", orderFile, "File with one entry per line, or - for stdin");
  order->add_flag("--clear", clear, "Drop every registered order");
  ctl::MrcOptions mrcOptions;
  std::string sizes;
  mrc->add_option("--order", mrcOptions.orderFiles,
                  "An epoch's order file (repeat for several epochs)");
  mrc->add_option("--epochs", mrcOptions.epochs,
                  "Epochs to model (default: the orders, at least 2)")
      ->check(CLI::Range(1, 1000));
  mrc->add_option("--seed", mrcOptions.seed, "Seed for the reshuffled later epochs");
  mrc->add_option("--sizes", sizes,
                  "Cache sizes, e.g. 1G,2G,4G (default: --points up to the data)");
  mrc->add_option("--points", mrcOptions.points, "Number of cache sizes (default 12)")
      ->check(CLI::Range(1, 200));
  mrc->add_option("--png", mrcOptions.png, "Also draw the curve into this PNG (matplotlib)");
  CLI11_PARSE(app, argc, argv);

  const std::string cmd = app.get_subcommands().front()->get_name();
  try {
    if (cmd == "stats" && watch > 0) {
      return ctl::StatsWatch(mountpoint, socket, watch, count, asJson).run();
    }
    ctl::CtlClient client(mountpoint, socket);
    ctl::PathList pathList(mountpoint);
    for (const auto& p : paths) pathList.add(p);
    if (!listFile.empty()) pathList.addFromFile(listFile);
    json reply;
    std::string text;
    if (cmd == "order") {
      if (clear) {
        reply = client.call({{"cmd", admin::kCmdOrderClear}});
        text = "orders cleared\n";
      } else if (orderFile.empty()) {
        throw ctl::CtlError("order needs a FILE (or - for stdin), or --clear");
      } else {
        std::ifstream in;
        if (orderFile != "-") {
          in.open(orderFile);
          if (!in) throw ctl::CtlError("cannot read " + orderFile);
        }
        reply = ctl::sendOrder(client, orderRequest, orderFile == "-" ? std::cin : in);
        text = "registered " + std::to_string(reply.value("entries", 0)) + " entries for epoch " +
               std::to_string(orderRequest.epoch) + ", rank " + std::to_string(orderRequest.rank) +
               "\n";
      }
    } else if (cmd == "ls") {
      reply = ctl::runLs(client, pathList, dirOnly);
      text = ctl::formatLs(reply);
    } else if (cmd == "warm") {
      ctl::WarmOptions wo;
      wo.progress = !quiet && !asJson;
      wo.threads = threads;
      reply = ctl::runWarm(client, pathList, wo);
      text = ctl::formatWarm(reply);
    } else if (cmd == "evict") {
      reply = ctl::runEvict(client, pathList, all, tier);
      text = ctl::formatEvict(reply);
    } else if (cmd == "mrc") {
      if (!sizes.empty()) mrcOptions.sizes = parseSizes(sizes);
      reply = ctl::runMrc(client, mrcOptions);
      text = ctl::formatMrc(reply);
      if (!mrcOptions.png.empty()) {
        ctl::drawMrcPng(reply, mrcOptions.png);
        text += "plot: " + mrcOptions.png + "\n";
      }
    } else if (cmd == "refresh") {
      reply = client.call({{"cmd", admin::kCmdRefresh}}, 3600);
      text = ctl::formatRefresh(reply);
    } else if (cmd == "upgrade") {
      reply = upgradeDaemon(client, mountpoint, socket);
      text = "upgraded: pid " + std::to_string(reply.value("old_pid", 0)) + " -> " +
             std::to_string(reply.value("pid", 0)) + " (" + reply.value("version", "") + ")\n";
    } else if (cmd == "placement") {
      reply = ctl::runPlacement(client);
      text = ctl::formatPlacement(reply);
    } else if (cmd == "stats") {
      // The counters below the summary come from the daemon's declarations;
      // a daemon without the schema command just shows the summary.
      json declared = nullptr;
      try {
        declared = client.call({{"cmd", admin::kCmdSchema}})["metrics"];
      } catch (const ctl::CtlError&) {
        if (schema) throw;
      }
      const ctl::CounterTable table(declared, admin::kCmdStats);
      if (schema) {
        reply = json{{"metrics", declared}};
        text = table.describe();
      } else {
        reply = client.call({{"cmd", admin::kCmdStats}});
        text = ctl::formatStats(reply);
        if (declared.is_array()) text += "counters:\n" + table.render(reply);
      }
    } else if (cmd == "unmount") {
      reply = client.call({{"cmd", admin::kCmdUnmount}});
      text = "unmounting " + reply.value("unmounting", mountpoint) + "\n";
    } else {
      // status, metrics, peers: the reply is all there is.
      const char* command = cmd == "status"    ? admin::kCmdStatus
                            : cmd == "metrics" ? admin::kCmdMetrics
                                               : admin::kCmdPeers;
      reply = client.call({{"cmd", command}});
      if (cmd == "status") text = ctl::formatStatus(reply);
      if (cmd == "metrics") text = reply.value("text", "");
      if (cmd == "peers") text = formatPeers(reply);
    }
    reply.erase("ok");
    if (asJson) {
      std::cout << reply.dump(2, ' ', false, json::error_handler_t::replace) << "\n";
    } else {
      std::cout << text;
    }
    if (cmd == "warm" && reply.value("errors", uint64_t{0}) > 0) {
      throw ctl::CtlError(
          std::to_string(reply["errors"].get<uint64_t>()) +
          " files could not be warmed; first: " + reply.value("first_error", std::string("?")));
    }
  } catch (const ctl::CtlError& e) {
    std::fprintf(stderr, "epochctl: error: %s\n", e.what());
    // A thread may still be blocked on a mount that does not answer: leave
    // without exit-time work (destructors, sanitizer checks) that could wait on it.
    std::fflush(nullptr);
    if (e.exitCode() == ctl::CtlError::kNoDaemon) _exit(e.exitCode());
    return e.exitCode();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "epochctl: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
