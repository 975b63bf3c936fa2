// The main() that every application's memory-blade program shares.
#include <CLI/CLI.hpp>
#include <unistd.h>

#include <atomic>
#include <cinttypes>
#include <mutex>
#include <csignal>
#include <cstdio>
#include <cstring>

#include "smart/command_line.h"
#include "smart/config.h"
#include "smart/logging.h"
#include "smart/membership.h"
#include "smart/target.h"
#include "smart/task.h"

namespace smart {

int RunMemoryBladeMain(int argc, char** argv, const char* program, const char* description) {
  EnableStackOverflowReports();
  CLI::App app{std::string(program) + ": " + description};
  std::string config_path;
  int port = -1;
  uint64_t capacity = 0;
  std::string backing;
  std::string bind;
  app.add_option("CONFIG", config_path,
                 "backend.json to use (default: " + ConfigFileSearch("backend.json", nullptr) + ")");
  app.add_option("--port", port, "TCP port to listen on (0: any free port); overrides tcp_port")->check(CLI::Range(0, 65535));
  app.add_option("--bind", bind,
                 "address to listen on (127.0.0.1, 0.0.0.0, ::, a host's address); overrides bind. Beyond loopback "
                 "a key (auth.key_file) or an explicit \"auth\": \"none\" is required");
  app.add_option("--capacity", capacity, "MiB of memory to serve; overrides capacity")->check(CLI::Range(1, 1 << 30));
  app.add_option("--backing", backing, "where the pool lives: memfd, hugetlb, file:PATH or devdax:PATH; overrides backing");
  membership::BladeMemberOptions member;
  int lease_ms = 2000;
  app.add_option("--etcd", member.etcd,
                 "join the membership kept in etcd at this URL (e.g. http://127.0.0.1:2379) as --blade-id; "
                 "without it the blade runs alone and needs no etcd");
  app.add_option("--cluster", member.cluster, "the cluster's name in etcd (default: default)");
  auto* id_option = app.add_option("--blade-id", member.blade_id, "this blade's id in the cluster (with --etcd)");
  app.add_option("--advertise", member.advertise,
                 "the host clients reach this blade at, as registered (default: the bind address, or the host "
                 "name when it binds every address)");
  app.add_option("--lease-ms", lease_ms,
                 "the blade's lease in etcd: a blade that dies or stops leaves the membership this long after its "
                 "last renewal (etcd grants whole seconds, at least 2; default 2000)")
      ->check(CLI::Range(1, 3600000));
  SMART_PARSE_COMMAND_LINE(app, argc, argv);
  if (!member.etcd.empty() && id_option->count() == 0) {
    fprintf(stderr, "%s: --etcd needs --blade-id\n", program);
    return kUsageError;
  }
  member.lease = std::chrono::milliseconds(lease_ms);
  // A configuration that cannot be read or makes no sense: exit 2, as a
  // usage error; what fails after (the port, the pool): exit 1.
  SmartConfig smart_config;
  BackendConfig backend;
  std::string path;
  try {
    smart_config = SmartConfig::Load();
    path = config_path.empty() ? FindConfigFile("backend.json", nullptr) : config_path;
    backend = BackendConfig::LoadFile(path);
    if (port >= 0) backend.tcp_port = port;
    if (!bind.empty()) backend.bind = bind;
    if (capacity > 0) backend.capacity = capacity;
    if (!backing.empty()) {
      backend.backing = backing;
      backend.dev_dax_path.clear();
    }
  } catch (const std::exception& e) {
    fprintf(stderr, "%s: %s\n", program, e.what());
    return kUsageError;
  }
  try {
    InstallTerminationHandlers();
    Target target(smart_config, backend);
    target.start();
    printf("%s: %" PRIu64 " MiB on %s, pool in %s (pool ID %s), listening on port %d at %s, %s\n", program,
           backend.capacity, target.transport_description().c_str(), target.backing_description().c_str(),
           target.pool_id_text().c_str(), target.port(), target.listen_address().c_str(),
           target.authenticates() ? "clients must prove the key" : "no key");
    fflush(stdout);
    // The membership: once the blade's registration is lost (it stopped
    // past its lease, or etcd removed it), it ends every session at once
    // and exits 3; a newer epoch may go on without it.
    // Target::stop() runs on one thread at a time: the renewal thread's
    // (a lost registration) and this one's (a signal during it) take turns.
    std::mutex stop_mutex;
    auto stop_target = [&target, &stop_mutex] {
      std::lock_guard<std::mutex> lock(stop_mutex);
      target.stop();
    };
    std::atomic<bool> lost{false};
    // Declared after what its callback uses, so destroyed before it.
    std::unique_ptr<membership::Registration> registration;
    if (!member.etcd.empty()) {
      Status s = membership::JoinAsBlade(
          member, backend.bind, target.port(), target.pool_id_text(), backend.capacity,
          TransportKindName(target.transport()),
          [&stop_target, &lost](const Status& why) {
            lost.store(true);
            SMART_ERROR("memory blade: out of the membership (%s); ending every session", why.message().c_str());
            stop_target();
            kill(getpid(), SIGTERM);
          },
          &registration);
      if (!s.ok()) {
        fprintf(stderr, "%s: joining the membership: %s\n", program, s.ToString().c_str());
        stop_target();
        return 1;
      }
      printf("%s: joined cluster %s as blade %s in etcd at %s (lease %lld ms)\n", program, member.cluster.c_str(),
             member.blade_id.c_str(), member.etcd.c_str(),
             static_cast<long long>(registration->granted_lease().count()));
      fflush(stdout);
    }
    // SIGHUP: read the keys again (a rotation; docs/security.md).
    InstallReloadHandler();
    int sig;
    while ((sig = WaitForTerminationOrReload()) == SIGHUP) {
      try {
        SmartConfig reread_smart = SmartConfig::Load();
        target.reload_keys(reread_smart, BackendConfig::LoadFile(path));
      } catch (const std::exception& e) {
        SMART_ERROR("%s: SIGHUP: the keys were not reloaded, the old ones stay: %s", program, e.what());
      }
    }
    SMART_INFO("%s: %s, shutting down (%.1f MiB of the pool in use)", program, strsignal(sig),
               static_cast<double>(target.resident_bytes()) / (1 << 20));
    if (lost.load()) {
      stop_target();
      fprintf(stderr, "%s: %s\n", program, registration->status().ToString().c_str());
      return 3;
    }
    registration.reset();  // leaves the membership at once, before the sessions end
    stop_target();
    return 0;
  } catch (const std::exception& e) {
    fprintf(stderr, "%s: %s\n", program, e.what());
    return 1;
  }
}

}  // namespace smart
