// smart_membership: the cluster membership kept in etcd, from the shell.
//
//   smart_membership register --etcd URL --key KEY --value TEXT [--lease-ms N]
//       holds KEY under a lease until SIGINT/SIGTERM (then revokes it);
//       exits 3 when the lease is lost (a stop longer than the lease)
//   smart_membership list --etcd URL --prefix PREFIX
//   smart_membership watch --etcd URL --prefix PREFIX [--until-deleted KEY] [--timeout-ms N]
//   smart_membership remove --etcd URL --key KEY       (revokes the member's lease)
//   smart_membership bench --etcd URL [--calls N]      (latency of each call)
//   smart_membership epoch show|init|remove|add|follow --etcd URL --cluster C ...
//       the cluster's epoch (smart/replica_set.h): init places --shards
//       shards with --replicas copies on the registered blades (or
//       --blades); remove and add propose the next epoch without or with
//       --blade, against --expect-revision (default: the epoch just read);
//       follow prints each epoch read under a client's epoch lease
//       (--lease-ms), and when the view lapses and is current again
//
// Exit status: 0 done, 1 a failure (named on stderr), 2 a usage error,
// 3 a registration lost, 4 a watch timed out, 5 an epoch proposal lost to
// another.
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "smart/command_line.h"
#include "smart/epoch_view.h"
#include "smart/etcd.h"
#include "smart/membership.h"
#include "smart/replica_set.h"
#include "smart/util/peer_text.h"

namespace {

using namespace smart;
using Clock = std::chrono::steady_clock;

std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop.store(true); }

int Fail(const char* what, const Status& s) {
  fprintf(stderr, "smart_membership %s: %s\n", what, s.ToString().c_str());
  return 1;
}

int Register(const etcd::ClientOptions& eo, const std::string& key, const std::string& value, int lease_ms,
             int wait_ms) {
  membership::RegistrationOptions o;
  o.etcd = eo;
  o.key = key;
  o.value = value;
  o.lease = std::chrono::milliseconds(lease_ms);
  o.wait_for_key = std::chrono::milliseconds(wait_ms);
  std::atomic<bool> lost{false};
  o.on_lost = [&lost](const Status&) { lost.store(true); };
  std::unique_ptr<membership::Registration> reg;
  Status s = membership::Registration::Start(o, &reg);
  if (!s.ok()) return Fail("register", s);
  printf("registered %s lease %lld (%lld ms) revision %lld\n", PeerText(key).c_str(),
         static_cast<long long>(reg->lease_id()), static_cast<long long>(reg->granted_lease().count()),
         static_cast<long long>(reg->revision()));
  fflush(stdout);
  while (!g_stop.load() && !lost.load()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  if (lost.load()) {
    fprintf(stderr, "smart_membership register: %s\n", reg->status().ToString().c_str());
    return 3;
  }
  reg.reset();
  printf("unregistered %s\n", PeerText(key).c_str());
  return 0;
}

int List(etcd::Client& c, const std::string& prefix) {
  std::vector<membership::Member> members;
  int64_t revision = 0;
  Status s = membership::ListMembers(c, prefix, &members, &revision);
  if (!s.ok()) return Fail("list", s);
  for (const auto& m : members)
    printf("%s\t%s\tlease %lld\n", PeerText(m.id).c_str(), PeerText(m.value).c_str(),
           static_cast<long long>(m.lease));
  printf("# %zu members at revision %lld\n", members.size(), static_cast<long long>(revision));
  return 0;
}

int Watch(etcd::Client& c, const std::string& prefix, const std::string& until_deleted, int timeout_ms) {
  const auto start = Clock::now();
  bool seen = false;
  Status s = c.Watch(
      prefix, 0,
      [&](const etcd::WatchBatch& b) {
        if (b.created) {
          printf("watching %s from revision %lld\n", PeerText(prefix).c_str(), static_cast<long long>(b.revision));
          fflush(stdout);
        }
        for (const auto& e : b.events) {
          const bool del = e.type == etcd::WatchEvent::Type::kDelete;
          const long long ms =
              std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
          printf("%s %s %s (revision %lld, %lld ms)\n", del ? "DELETE" : "PUT", PeerText(e.kv.key).c_str(),
                 del ? "" : PeerText(e.kv.value).c_str(), static_cast<long long>(e.kv.mod_revision), ms);
          if (del && e.kv.key == until_deleted) seen = true;
        }
        fflush(stdout);
        return !seen;
      },
      std::chrono::milliseconds(timeout_ms), &g_stop);
  if (s.code() == Status::Code::kTimedOut) {
    fprintf(stderr, "smart_membership watch: %s\n", s.ToString().c_str());
    return 4;
  }
  if (!s.ok()) return Fail("watch", s);
  return 0;
}

// Revokes the member's lease, so that the member finds out at its next
// renewal (deleting the key alone would leave it renewing a lease that
// holds nothing); a key under no lease is deleted.
int Remove(etcd::Client& c, const std::string& key) {
  etcd::KeyValue kv;
  Status s = c.Get(key, &kv);
  if (!s.ok()) return Fail("remove", s);
  if (kv.lease != 0) {
    s = c.RevokeLease(kv.lease);
  } else {
    int64_t deleted = 0;
    s = c.Delete(key, false, &deleted);
  }
  if (!s.ok()) return Fail("remove", s);
  printf("removed %s%s\n", PeerText(key).c_str(), kv.lease != 0 ? " (its lease revoked)" : "");
  return 0;
}

// Median, P90, P99 of each call, the calls taken in turn.
int Bench(etcd::Client& c, int calls) {
  const std::string key = "/smart-membership-bench/key";
  const std::string value(64, 'v');
  etcd::Lease lease;
  Status s = c.GrantLease(60, &lease);
  if (!s.ok()) return Fail("bench", s);
  int64_t rev = 0;
  s = c.Put(key, value, lease.id, &rev);
  if (!s.ok()) return Fail("bench", s);
  const char* names[] = {"range", "put", "put-if", "keep-alive"};
  std::vector<double> us[4];
  for (int i = 0; i < calls && !g_stop.load(); ++i) {
    for (int k = 0; k < 4; ++k) {
      const auto t0 = Clock::now();
      etcd::KeyValue kv;
      etcd::TxnResult txn;
      switch (k) {
        case 0: s = c.Get(key, &kv); break;
        case 1: s = c.Put(key, value, lease.id, &rev); break;
        case 2:
          s = c.PutIf(key, rev, value, lease.id, &txn);
          if (s.ok() && !txn.succeeded) s = Status::Internal("put-if lost against nobody");
          if (s.ok()) rev = txn.revision;
          break;
        case 3: s = c.KeepAlive(lease.id); break;
      }
      if (!s.ok()) return Fail("bench", s);
      us[k].push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    }
  }
  (void)c.RevokeLease(lease.id);
  printf("call\tcalls\tp50_us\tp90_us\tp99_us\n");
  for (int k = 0; k < 4; ++k) {
    auto& v = us[k];
    if (v.empty()) continue;
    std::sort(v.begin(), v.end());
    auto at = [&v](double q) { return v[std::min(v.size() - 1, static_cast<size_t>(q * v.size()))]; };
    printf("%s\t%zu\t%.0f\t%.0f\t%.0f\n", names[k], v.size(), at(0.5), at(0.9), at(0.99));
  }
  return 0;
}

void PrintEpoch(const membership::Epoch& e, int64_t revision) {
  printf("epoch %llu %s at revision %lld: %s\n", static_cast<unsigned long long>(e.number),
         e.phase == membership::EpochPhase::kOpen ? "open" : "fencing", static_cast<long long>(revision),
         membership::EncodeEpoch(e).c_str());
}

struct EpochArgs {
  std::string cluster = "default";
  std::string action;  // show, init, remove, add
  std::string blade;
  std::vector<std::string> blades;
  int replicas = 1;
  int shards = 1;
  int64_t expect_revision = -1;
  int lease_ms = 1000;
  int for_ms = 0;
};

// Follows the epoch until SIGINT/SIGTERM or --for-ms, printing each epoch
// read and each lapse of the view and its return.
int Follow(const etcd::ClientOptions& eo, const EpochArgs& a) {
  membership::EpochViewOptions o;
  o.etcd = eo;
  o.cluster = a.cluster;
  o.lease = std::chrono::milliseconds(a.lease_ms);
  o.on_change = [](const membership::Epoch& e, int64_t revision) {
    PrintEpoch(e, revision);
    fflush(stdout);
  };
  std::unique_ptr<membership::EpochView> view;
  Status s = membership::EpochView::Start(o, &view);
  if (!s.ok()) return Fail("epoch follow", s);
  const auto end = Clock::now() + std::chrono::milliseconds(a.for_ms);
  bool current = true;
  while (!g_stop.load() && (a.for_ms == 0 || Clock::now() < end)) {
    membership::Epoch e;
    int64_t revision = 0;
    s = view->Current(&e, &revision);
    if (current && !s.ok()) {
      printf("lapsed: %s\n", s.message().c_str());
    } else if (!current && s.ok()) {
      printf("current again: ");
      PrintEpoch(e, revision);
    }
    fflush(stdout);
    current = s.ok();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return 0;
}

int EpochCommand(etcd::Client& c, const EpochArgs& a) {
  membership::Epoch current, next;
  int64_t revision = 0;
  Status s;
  if (a.action == "follow") return Fail("epoch follow", Status::Internal("follow is run by Follow()"));
  if (a.action != "init") {
    s = membership::ReadEpoch(c, a.cluster, &current, &revision);
    if (!s.ok()) return Fail("epoch", s);
    if (a.action == "show") {
      PrintEpoch(current, revision);
      return 0;
    }
    // Another proposal already replaced the epoch this one was meant for.
    if (a.expect_revision >= 0 && revision != a.expect_revision) {
      printf("lost: ");
      PrintEpoch(current, revision);
      return 5;
    }
  }
  if (a.action == "init") {
    std::vector<std::string> blades = a.blades;
    if (blades.empty()) {
      std::vector<membership::Member> members;
      s = membership::ListMembers(c, membership::BladePrefix(a.cluster), &members);
      if (!s.ok()) return Fail("epoch init", s);
      for (const auto& m : members) blades.push_back(m.id);
    }
    s = membership::FirstEpoch(blades, a.shards, a.replicas, &next);
    revision = 0;
  } else if (a.action == "remove") {
    s = membership::RemoveBlade(current, a.blade, &next);
  } else {
    s = membership::AddBlade(current, a.blade, &next);
  }
  if (!s.ok()) return Fail(("epoch " + a.action).c_str(), s);
  if (a.expect_revision >= 0) revision = a.expect_revision;
  bool won = false;
  membership::Epoch there;
  int64_t at = 0;
  s = membership::ProposeEpoch(c, a.cluster, next, revision, &won, &there, &at);
  if (!s.ok()) return Fail(("epoch " + a.action).c_str(), s);
  if (!won) {
    printf("lost: ");
    PrintEpoch(there, at);
    return 5;
  }
  printf("won: ");
  PrintEpoch(next, at);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"smart_membership: the cluster membership kept in etcd (register, list, watch, remove, bench)"};
  app.require_subcommand(1);
  std::string endpoint = "http://127.0.0.1:2379";
  int timeout_ms = 3000;
  app.add_option("--etcd", endpoint, "etcd's client URL (default http://127.0.0.1:2379)");
  app.add_option("--request-timeout-ms", timeout_ms, "bound on one call to etcd (default 3000)")
      ->check(CLI::Range(1, 600000));
  std::string key, value, prefix, until;
  int lease_ms = 2000, wait_ms = 0, watch_ms = 60000, calls = 1000;
  auto* reg = app.add_subcommand("register", "hold a key under a lease until SIGINT/SIGTERM (exit 3: lease lost)");
  reg->add_option("--key", key, "the key")->required();
  reg->add_option("--value", value, "its value")->required();
  reg->add_option("--lease-ms", lease_ms, "the lease (etcd grants whole seconds, at least 2; default 2000)")
      ->check(CLI::Range(1, 3600000));
  reg->add_option("--wait-ms", wait_ms, "wait this long for a key another lease holds (default 0)")
      ->check(CLI::Range(0, 3600000));
  auto* list = app.add_subcommand("list", "print every member under a prefix");
  list->add_option("--prefix", prefix, "the prefix, e.g. /smart/c1/blades/")->required();
  auto* watch = app.add_subcommand("watch", "print changes under a prefix (exit 4: --timeout-ms passed)");
  watch->add_option("--prefix", prefix, "the prefix")->required();
  watch->add_option("--until-deleted", until, "exit 0 once this key is deleted");
  watch->add_option("--timeout-ms", watch_ms, "give up after this long (default 60000)")
      ->check(CLI::Range(1, 86400000));
  auto* remove = app.add_subcommand("remove", "remove a member: revoke the lease its key is under (an operator's removal)");
  remove->add_option("--key", key, "the key")->required();
  EpochArgs ea;
  auto* epoch = app.add_subcommand("epoch", "the cluster's epoch: show, init, remove BLADE, add BLADE (exit 5: lost), follow");
  epoch->add_option("ACTION", ea.action, "show, init, remove, add or follow")
      ->required()
      ->check(CLI::IsMember({"show", "init", "remove", "add", "follow"}));
  epoch->add_option("--cluster", ea.cluster, "the cluster's name (default: default)");
  epoch->add_option("--blade", ea.blade, "the blade to remove or add");
  epoch->add_option("--blades", ea.blades, "init: the blades, in order (default: those registered)")->delimiter(',');
  epoch->add_option("--replicas", ea.replicas, "init: copies of each shard (default 1)")->check(CLI::Range(1, 3));
  epoch->add_option("--shards", ea.shards, "init: shards (default 1)")->check(CLI::Range(1, 65536));
  epoch->add_option("--expect-revision", ea.expect_revision,
                    "propose only if the epoch's revision is this (default: the one just read)")
      ->check(CLI::Range(int64_t{0}, INT64_MAX));
  epoch->add_option("--lease-ms", ea.lease_ms, "follow: the clients' epoch lease (default 1000)")
      ->check(CLI::Range(3, 3600000));
  epoch->add_option("--for-ms", ea.for_ms, "follow: stop after this long (default: until SIGINT/SIGTERM)")
      ->check(CLI::Range(0, 86400000));
  auto* bench = app.add_subcommand("bench", "time each call (range, put, put-if, keep-alive), in turn");
  bench->add_option("--calls", calls, "calls of each kind (default 1000)")->check(CLI::Range(1, 10000000));
  SMART_PARSE_COMMAND_LINE(app, argc, argv);

  signal(SIGINT, OnSignal);
  signal(SIGTERM, OnSignal);
  etcd::ClientOptions eo;
  eo.endpoint = endpoint;
  eo.request_timeout = std::chrono::milliseconds(timeout_ms);
  if (reg->parsed()) return Register(eo, key, value, lease_ms, wait_ms);
  std::unique_ptr<etcd::Client> client;
  Status s = etcd::Client::Open(eo, &client);
  if (!s.ok()) {
    fprintf(stderr, "smart_membership: %s\n", s.ToString().c_str());
    return kUsageError;
  }
  if (list->parsed()) return List(*client, prefix);
  if (watch->parsed()) return Watch(*client, prefix, until, watch_ms);
  if (remove->parsed()) return Remove(*client, key);
  if (epoch->parsed()) {
    if ((ea.action == "remove" || ea.action == "add") && ea.blade.empty()) {
      fprintf(stderr, "smart_membership epoch %s: needs --blade\n", ea.action.c_str());
      return kUsageError;
    }
    if (ea.action == "follow") return Follow(eo, ea);
    return EpochCommand(*client, ea);
  }
  return Bench(*client, calls);
}
