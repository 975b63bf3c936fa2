/// @file membership.h
/// Who is live, kept in etcd (include/smart/etcd.h): a process registers a
/// key (`<prefix>blades/<id>`, `<prefix>clients/<id>`) under a lease of its
/// own, and a background thread renews the lease. When the process dies or
/// stops, the lease lapses and etcd deletes the key: it leaves the
/// membership within one lease, and every watcher of the prefix sees it go.
///
/// A registration never comes back by itself. Once its lease may have
/// lapsed (etcd said so, or no renewal was confirmed for 90% of a lease
/// counted from when the last confirmed renewal was *sent*; the rest is a
/// margin for clock rates), valid() is false for good, and the owner must
/// stop acting as a member (a blade fences its sessions) and register
/// again as a new member. The renewal thread wakes when the lease runs out
/// and bounds each renewal by what is left of it, so on_lost runs then at
/// the latest.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "smart/etcd.h"
#include "smart/status.h"

namespace smart::membership {

/// What to register.
struct RegistrationOptions {
  etcd::ClientOptions etcd;  ///< how to reach etcd
  std::string key;    ///< the full key, e.g. "/smart/cluster1/blades/3"
  std::string value;  ///< what the members read (an address, region bases)
  /// The lease. etcd grants whole seconds and has a floor (2 s by default);
  /// the lease granted, not the one asked for, counts (granted_lease()).
  std::chrono::milliseconds lease{2000};
  /// How long to wait for the key to be free when another lease holds it
  /// (a member that died a moment ago under the same id); 0: fail at once.
  std::chrono::milliseconds wait_for_key{0};
  /// Called once, from the renewal thread, when the registration is lost.
  /// It may call StopRenewing(); it must not destroy the Registration.
  std::function<void(const Status& why)> on_lost;
};

/// A key held in etcd under a lease kept alive in the background.
class Registration {
 public:
  /// Grants the lease and creates the key under it. Fails (naming the
  /// holder) when the key exists under another lease past wait_for_key.
  static Status Start(const RegistrationOptions& options, std::unique_ptr<Registration>* out);
  /// Revokes the lease (the key goes at once) unless it was already lost.
  ~Registration();
  Registration(const Registration&) = delete;
  Registration& operator=(const Registration&) = delete;

  /// True while the lease certainly holds (see the file comment).
  bool valid() const;
  /// Why valid() became false; OK while valid.
  Status status() const;
  /// etcd's ID of the lease the key is under.
  int64_t lease_id() const { return lease_id_; }
  /// The lease etcd granted (whole seconds).
  std::chrono::milliseconds granted_lease() const { return granted_; }
  /// etcd's revision of the put that created the key.
  int64_t revision() const { return revision_; }
  /// Stops renewing, as a process that stopped would; the lease then
  /// lapses in etcd (for tests and for a blade that fences itself).
  void StopRenewing();

 private:
  Registration() = default;
  void RenewLoop();
  void Lose(const Status& why);

  RegistrationOptions options_;
  std::unique_ptr<etcd::Client> client_;
  int64_t lease_id_ = 0;
  int64_t revision_ = 0;
  std::chrono::milliseconds granted_{0};
  mutable std::mutex mutex_;
  // Nanoseconds (MonotonicNs) until which the lease certainly holds;
  // guarded by mutex_.
  int64_t valid_until_ns_ = 0;
  std::condition_variable wake_;
  bool stopping_ = false;
  Status lost_;
  std::thread renewer_;
};

/// One registered member: the key's last part is its id.
struct Member {
  std::string id;            ///< the key after the prefix
  std::string value;         ///< what the member registered
  int64_t lease = 0;         ///< the lease its key is under
  int64_t mod_revision = 0;  ///< etcd's revision of the key's last change
};

/// The members under `prefix` (e.g. "/smart/cluster1/blades/"), in id
/// order, and etcd's revision when it answered (to watch from).
Status ListMembers(etcd::Client& client, const std::string& prefix, std::vector<Member>* out,
                   int64_t* revision = nullptr);

/// Where a memory blade registers: `/smart/<cluster>/blades/<blade_id>`.
struct BladeMemberOptions {
  std::string etcd;        ///< etcd's client URL; empty: no membership
  std::string cluster = "default";  ///< the cluster's name (a path part)
  std::string blade_id;    ///< this blade's id in the cluster (a path part)
  std::string advertise;   ///< the host clients reach it at (empty: its bind address, or the host name)
  std::chrono::milliseconds lease{2000};  ///< the blade's lease
};

/// Checks that `part` (a cluster name, a blade id) can be one part of an
/// etcd key path: 1 to 128 bytes of printable ASCII, no '/' and no space.
/// `what` names it in the error.
Status CheckPathPart(const std::string& part, const char* what);

/// The key a blade of `cluster` with `blade_id` registers.
std::string BladeKey(const std::string& cluster, const std::string& blade_id);
/// The prefix under which the blades of `cluster` register.
std::string BladePrefix(const std::string& cluster);

/// Registers a started memory blade (its address, port, pool ID and size)
/// under its own lease. When the registration is lost, `on_lost` runs once
/// from the renewal thread: the blade must end every session at once (it
/// is out of the membership, and a newer epoch may go on without it).
/// Fails naming etcd when it cannot be reached, and refuses a cluster or
/// blade id that is empty or holds '/'.
Status JoinAsBlade(const BladeMemberOptions& options, const std::string& bind_address, int port,
                   const std::string& pool_id, uint64_t capacity_mib, const std::string& transport,
                   std::function<void(const Status&)> on_lost, std::unique_ptr<Registration>* out);

}  // namespace smart::membership
