// btree_backend: the memory blade of SMART-BT.
//
// Serves a pool of backend.json's capacity MiB on tcp_port (0: any free
// port) and prints "listening on port N". Its CPU does nothing for clients:
// the first client builds the tree's lock table and root leaf in the pool
// and every client finds them through the named root "btree".
#include <CLI/CLI.hpp>
#include <cinttypes>
#include <csignal>
#include <cstdio>
#include <cstring>

#include "smart/config.h"
#include "smart/logging.h"
#include "smart/target.h"

int main(int argc, char** argv) {
  using namespace smart;
  CLI::App app{"btree_backend: memory blade for the SMART-BT B+tree"};
  std::string config_path;
  int port = -1;
  uint64_t capacity = 0;
  app.add_option("CONFIG", config_path, "backend.json (default: config/backend.json)");
  app.add_option("--port", port, "TCP port to listen on (0: any free port); overrides tcp_port")->check(CLI::Range(0, 65535));
  app.add_option("--capacity", capacity, "MiB of memory to serve; overrides capacity")->check(CLI::Range(1, 1 << 30));
  std::string backing;
  app.add_option("--backing", backing, "where the pool lives: memfd, hugetlb, file:PATH or devdax:PATH; overrides backing");
  CLI11_PARSE(app, argc, argv);
  try {
    InstallTerminationHandlers();
    SmartConfig smart_config = SmartConfig::Load();
    const std::string path = config_path.empty() ? FindConfigFile("backend.json", nullptr) : config_path;
    BackendConfig backend = BackendConfig::LoadFile(path);
    if (port >= 0) backend.tcp_port = port;
    if (capacity > 0) backend.capacity = capacity;
    if (!backing.empty()) {
      backend.backing = backing;
      backend.dev_dax_path.clear();
    }
    Target target(smart_config, backend);
    target.start();
    printf("btree_backend: %" PRIu64 " MiB on %s, pool in %s, listening on port %d\n", backend.capacity,
           target.transport_description().c_str(), target.backing_description().c_str(), target.port());
    fflush(stdout);
    const int sig = WaitForTerminationSignal();
    SMART_INFO("btree_backend: %s, shutting down (%.1f MiB of the pool in use)", strsignal(sig),
               static_cast<double>(target.resident_bytes()) / (1 << 20));
    target.stop();
    return 0;
  } catch (const std::exception& e) {
    fprintf(stderr, "btree_backend: %s\n", e.what());
    return 1;
  }
}
