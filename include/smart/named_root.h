/// @file
/// Named roots: how applications find their structures on a memory blade.
///
/// Each memory blade keeps a registry of up to kMaxNamedRoots names
/// ("hashtable", "btree", "dtx/smallbank", ...) in chunk 0 of its pool. The
/// first client to open a name claims it and builds its structure; the others
/// wait for the publish and attach. The build claim is a RemoteLock with a
/// lease: a builder renews it while it works, and when it dies, one waiter
/// takes the build over and starts again (the dead builder's half-built memory
/// is left behind). Publishing is one CAS that replaces the builder's lock
/// word with the root value, so a builder that lost its claim cannot publish.
/// Several applications share one blade under different names.
///
/// Registry entry (64 bytes):
///   word 0   hash of the name (0: entry free); claimed by CAS
///   word 1   state: 0 nobody builds; a lock word: being built by that owner;
///            bit 63 set: published, value in bits 0-62
///   word 2-3 reserved (0)
///   32-63    the name, NUL-padded (at most kMaxRootNameLength bytes)
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "smart/initiator.h"
#include "smart/remote_lock.h"
#include "smart/status.h"

namespace smart {

constexpr size_t kMaxRootNameLength = 32;  ///< longest name, in bytes
constexpr uint64_t kRootPublishedBit = uint64_t{1} << 63;  ///< set in a published state word

/// The outcome of NamedRoots::open: attach to a published value, or build.
class RootClaim {
 public:
  /// An empty claim, filled in by NamedRoots::open.
  RootClaim();
  ~RootClaim();
  /// Movable, not copyable.
  RootClaim(RootClaim&&) noexcept;
  /// Movable, not copyable.
  RootClaim& operator=(RootClaim&&) noexcept;

  /// True: this client holds the build claim and must build, then publish().
  bool must_build() const { return lock_ != nullptr; }
  /// The build claim was taken from a builder that died.
  bool took_over() const { return took_over_; }
  /// The published value (when !must_build()).
  uint64_t value() const { return value_; }

  /// Builder: keeps the claim alive during a long build. Call often; it
  /// writes only once a quarter of the lease has passed. kLockLost when the
  /// build was taken over (this client was paused longer than the lease).
  Status renew_if_due();
  /// Builder: publishes `value` (< 2^63) in one CAS and gives up the claim.
  /// kLockLost when another client took the build over.
  Status publish(uint64_t value);

 private:
  friend class NamedRoots;
  std::unique_ptr<RemoteLock> lock_;
  bool took_over_ = false;
  uint64_t value_ = 0;
};

/// One registry entry, as NamedRoots::list reports it.
struct NamedRootInfo {
  std::string name;  ///< the registered name
  bool published = false;  ///< a value was published
  uint64_t value = 0;      ///< when published
  uint64_t state = 0;      ///< the raw state word
};

/// The registry of names on memory blades: open (claim or attach), look up, list.
class NamedRoots {
 public:
  /// `options` sets the build claim's lease and how long open() waits.
  explicit NamedRoots(Initiator& initiator, const LeaseOptions& options = {});

  /// Finds `name` on memory node `node` (registering it if new) and either
  /// returns its published value or the build claim. Waits while another
  /// live client builds it. Errors: a bad name, a full registry, a corrupt
  /// entry, kTimedOut after options.max_wait_ns.
  Status open(node_t node, std::string_view name, RootClaim* claim);
  /// The published value of `name`; kNotFound when absent or not published.
  Status lookup(node_t node, std::string_view name, uint64_t* value);
  /// Every registered name on `node`.
  Status list(node_t node, std::vector<NamedRootInfo>* out);

  /// The hash that identifies `name` in a registry entry (never 0).
  static uint64_t HashName(std::string_view name);

 private:
  Status read_registry(node_t node);
  // Index of the entry of `name`, claiming a free one when `create`;
  // -1 when absent (and !create).
  Status find_entry(node_t node, std::string_view name, bool create, int* index);

  Initiator& initiator_;
  LeaseOptions options_;
  char* registry_ = nullptr;   // kMaxNamedRoots entries, registered cache
  uint64_t* scratch_ = nullptr;  // 64 bytes, registered cache
};

}  // namespace smart
