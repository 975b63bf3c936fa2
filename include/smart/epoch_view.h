/// @file epoch_view.h
/// A client's view of its cluster's epoch (smart/replica_set.h), held
/// under a lease: the view is read from etcd every third of the lease, and
/// it is *current* only while the last read that confirmed it was sent less
/// than one lease ago. A client works on a replicated structure only while
/// its view is current, so a client cut off from etcd, or stopped, cannot
/// go on in an epoch that has since been replaced: a proposer waits out the
/// clients' lease before a new epoch opens (apps/hashtable/REPLICATION.md).
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

#include "smart/etcd.h"
#include "smart/replica_set.h"
#include "smart/status.h"

namespace smart::membership {

/// What to follow.
struct EpochViewOptions {
  etcd::ClientOptions etcd;          ///< how to reach etcd
  std::string cluster = "default";   ///< whose epoch
  /// The clients' epoch lease (`epoch_lease_ms`); the view is read every
  /// third of it.
  std::chrono::milliseconds lease{1000};
  /// Called from the view's thread with each epoch it reads at a new
  /// mod_revision (a new number or phase), and that revision.
  std::function<void(const Epoch& epoch, int64_t revision)> on_change;
};

/// The epoch as last read, current while its lease holds.
class EpochView {
 public:
  /// Reads the epoch once (kNotFound when the cluster has none yet) and
  /// starts following it.
  static Status Start(const EpochViewOptions& options, std::unique_ptr<EpochView>* out);
  ~EpochView();
  EpochView(const EpochView&) = delete;
  EpochView& operator=(const EpochView&) = delete;

  /// The epoch last read and its mod_revision, when the view is current;
  /// otherwise kTimedOut, naming how long since the last confirmed read
  /// was sent and why the last read failed. A client works only while the
  /// view is current and the epoch's phase is open.
  Status Current(Epoch* epoch, int64_t* revision = nullptr) const;
  /// Reads confirmed so far (each one renews the lease).
  uint64_t confirmations() const { return confirmations_.load(); }

 private:
  EpochView() = default;
  void Loop();
  Status ReadOnce();

  EpochViewOptions options_;
  std::unique_ptr<etcd::Client> client_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  Epoch epoch_;
  int64_t revision_ = 0;
  Status last_error_;
  int64_t confirmed_until_ns_ = 0;  // steady clock; guarded by mutex_
  std::atomic<uint64_t> confirmations_{0};
  std::thread thread_;
};

}  // namespace smart::membership
