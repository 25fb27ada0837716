// mac-bench: the cost of the payload MAC (transport/peer_auth.h PayloadMac,
// ChaCha20-Poly1305) over one chunk, on one core: what every peer request and
// reply pays on each side (docs/CLUSTER.md "Payload MAC").
//
// Prints one JSON line: {"chunk_bytes":B,"signs":n,"us_per_chunk":u,"gb_s":g}.
//
//   mac-bench [--chunk-size 1048576] [--signs 200]
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <vector>

#include "transport/peer_auth.h"

using namespace epochfs::transport;

int main(int argc, char** argv) {
  size_t chunkBytes = 1 << 20;
  int signs = 200;
  CLI::App app{"mac-bench: payload MAC cost per chunk", "mac-bench"};
  app.add_option("--chunk-size", chunkBytes, "Bytes per chunk")->check(CLI::Range(1, 1 << 30));
  app.add_option("--signs", signs, "Chunks signed")->check(CLI::Range(1, 1000000));
  CLI11_PARSE(app, argc, argv);

  PayloadMac mac(sessionKey("mac-bench-secret!", randomNonce(), randomNonce()));
  std::vector<char> data(chunkBytes, 'x');
  const char header[] = "header";
  Tag tag = mac.sign(2, 0, header, sizeof header, data.data(), data.size());  // warm up
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < signs; ++i) {
    tag = mac.sign(2, static_cast<uint64_t>(i), header, sizeof header, data.data(), data.size());
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!mac.verify(tag, 2, static_cast<uint64_t>(signs - 1), header, sizeof header, data.data(),
                  data.size())) {
    return 1;
  }
  std::printf("{\"chunk_bytes\":%zu,\"signs\":%d,\"us_per_chunk\":%.1f,\"gb_s\":%.2f}\n",
              chunkBytes, signs, s / signs * 1e6,
              static_cast<double>(signs) * chunkBytes / s / 1e9);
  return 0;
}
