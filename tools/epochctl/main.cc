// epochctl COMMAND MOUNTPOINT [...]: inspect and steer a running epochfs mount
// through its admin socket. Every command takes --json.
#include <cstdio>
#include <iostream>

#include <CLI/CLI.hpp>

#include "tools/epochctl/admin_client.h"
#include "tools/epochctl/formatting.h"

using nlohmann::json;

int main(int argc, char** argv) {
  CLI::App app{"epochctl: inspect and steer an epochfs mount", "epochctl"};
  app.require_subcommand(1);
  std::string mountpoint;
  bool asJson = false;

  auto* status = app.add_subcommand("status", "Version, source, options, tiers");
  auto* stats = app.add_subcommand("stats", "Reads and bytes by tier, source latency");
  for (auto* sub : {status, stats}) {
    sub->add_option("mountpoint", mountpoint, "An epochfs mountpoint")->required();
    sub->add_flag("--json", asJson, "Machine-readable output");
  }
  CLI11_PARSE(app, argc, argv);

  try {
    epochfs::ctl::AdminClient client(mountpoint);
    const std::string cmd = app.get_subcommands().front()->get_name();
    json reply = client.call({{"cmd", cmd}});
    reply.erase("ok");
    if (asJson) {
      std::cout << reply.dump(2) << "\n";
    } else if (cmd == "status") {
      std::cout << epochfs::ctl::formatStatus(reply);
    } else {
      std::cout << epochfs::ctl::formatStats(reply);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "epochctl: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
