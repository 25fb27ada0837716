// epochctl COMMAND MOUNTPOINT [...]: inspect and steer a running epochfs mount
// through its admin socket. Every command takes --json.
#include <cstdio>
#include <fstream>
#include <iostream>

#include <CLI/CLI.hpp>

#include "tools/epochctl/admin_client.h"
#include "tools/epochctl/formatting.h"
#include "tools/epochctl/order_command.h"

using nlohmann::json;

int main(int argc, char** argv) {
  CLI::App app{"epochctl: inspect and steer an epochfs mount", "epochctl"};
  app.require_subcommand(1);
  std::string mountpoint;
  bool asJson = false;

  auto* status = app.add_subcommand("status", "Version, source, options, tiers");
  auto* stats = app.add_subcommand("stats", "Reads and bytes by tier, prefetch, source latency");
  auto* order = app.add_subcommand("order", "Register an epoch's read order (one entry per line)");
  for (auto* sub : {status, stats, order}) {
    sub->add_option("mountpoint", mountpoint, "An epochfs mountpoint")->required();
    sub->add_flag("--json", asJson, "Machine-readable output");
  }
  epochfs::ctl::OrderRequest orderRequest;
  std::string orderFile;
  bool clear = false;
  order->add_option("--epoch", orderRequest.epoch, "Epoch number");
  order->add_option("--rank", orderRequest.rank, "Reader stream (rank) on this node")
      ->check(CLI::Range(0, 1 << 20));
  order->add_option("--start", orderRequest.start, "Resume at this position of the order");
  order->add_option("file", orderFile, "File with one entry per line, or - for stdin");
  order->add_flag("--clear", clear, "Drop every registered order");
  CLI11_PARSE(app, argc, argv);

  try {
    epochfs::ctl::AdminClient client(mountpoint);
    const std::string cmd = app.get_subcommands().front()->get_name();
    json reply;
    if (cmd == "order") {
      if (clear) {
        reply = client.call({{"cmd", "order_clear"}});
      } else if (orderFile.empty()) {
        throw std::runtime_error("order needs a FILE (or - for stdin), or --clear");
      } else if (orderFile == "-") {
        reply = epochfs::ctl::sendOrder(client, orderRequest, std::cin);
      } else {
        std::ifstream in(orderFile);
        if (!in) throw std::runtime_error("cannot read " + orderFile);
        reply = epochfs::ctl::sendOrder(client, orderRequest, in);
      }
    } else {
      reply = client.call({{"cmd", cmd}});
    }
    reply.erase("ok");
    if (asJson) {
      std::cout << reply.dump(2) << "\n";
    } else if (cmd == "status") {
      std::cout << epochfs::ctl::formatStatus(reply);
    } else if (cmd == "stats") {
      std::cout << epochfs::ctl::formatStats(reply);
    } else if (clear) {
      std::cout << "orders cleared\n";
    } else {
      std::cout << "registered " << reply.value("entries", 0) << " entries for epoch "
                << orderRequest.epoch << ", rank " << orderRequest.rank << "\n";
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "epochctl: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
