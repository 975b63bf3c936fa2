// connect_bench: what authentication adds to connecting. A memory blade in
// this process (shm, loopback TCP) without a key and one with a key; one
// client connects to each and disconnects, --rounds times, alternating so
// that both see the same machine load. Reports the median and the 90th
// percentile of Initiator::connect for each, and the difference of medians.
#include <CLI/CLI.hpp>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <vector>

#include "smart/bench/bench.h"
#include "smart/command_line.h"
#include "smart/initiator.h"
#include "smart/logging.h"
#include "smart/resource/auth.h"
#include "smart/target.h"

namespace {

using namespace smart;

std::unique_ptr<Target> StartBlade(const SmartConfig& config) {
  BackendConfig backend;
  backend.source = "connect_bench";
  backend.capacity = 16;
  backend.tcp_port = 0;
  auto target = std::make_unique<Target>(config, backend);
  target->start();
  return target;
}

double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(p * static_cast<double>(v.size() - 1))];
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"connect_bench: the time to connect to a memory blade, without and with a key (shm, loopback)"};
  int rounds = 200;
  int qps = 1;
  app.add_option("--rounds", rounds, "connects to each blade")->check(CLI::Range(3, 100000));
  app.add_option("--qps", qps, "queue pairs per connection")->check(CLI::Range(1, 64));
  SMART_PARSE_COMMAND_LINE(app, argc, argv);
  try {
    SetVerbose(false);
    SmartConfig config = SmartConfig::Load();
    config.transport = TransportChoice::kShm;
    config.initiator_cache_size = 16;
    char dir[] = "/tmp/smart-connect-bench.XXXXXX";
    if (mkdtemp(dir) == nullptr) throw Error("mkdtemp failed");
    const std::string key_path = std::string(dir) + "/smart.key";
    WriteNewKeyFile(key_path);
    SmartConfig plain = config;
    plain.auth = AuthConfig{};
    SmartConfig keyed = config;
    keyed.auth = AuthConfig{};
    keyed.auth.key_file = key_path;
    auto plain_blade = StartBlade(plain);
    auto keyed_blade = StartBlade(keyed);
    Initiator plain_client(plain), keyed_client(keyed);
    std::vector<double> plain_us, keyed_us;
    auto time_connect = [qps](Initiator& client, int port, std::vector<double>* out) {
      const auto start = std::chrono::steady_clock::now();
      client.connect(0, "127.0.0.1", port, qps);
      out->push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
      client.disconnect(0);
    };
    for (int i = 0; i < rounds; ++i) {
      time_connect(plain_client, plain_blade->port(), &plain_us);
      time_connect(keyed_client, keyed_blade->port(), &keyed_us);
    }
    unlink(key_path.c_str());
    rmdir(dir);
    printf("connect without a key: median %.1f us, p90 %.1f us (%d connects, %d queue pair(s))\n",
           Percentile(plain_us, 0.5), Percentile(plain_us, 0.9), rounds, qps);
    printf("connect with a key:    median %.1f us, p90 %.1f us\n", Percentile(keyed_us, 0.5),
           Percentile(keyed_us, 0.9));
    printf("authentication adds:   %.1f us to the median connect\n",
           Percentile(keyed_us, 0.5) - Percentile(plain_us, 0.5));
    return 0;
  } catch (const std::exception& e) {
    fprintf(stderr, "connect_bench: %s\n", e.what());
    return 1;
  }
}
