/// @file replica_set.h
/// Where a replicated structure's shards live, and the epoch that says so.
///
/// A *replica set* is an ordered list of distinct memory blades holding one
/// shard: the first voting one is its primary, the others backups. The
/// *epoch* is the record, kept in etcd under `/smart/<cluster>/epoch`, of
/// the members (each voting or catching up), every shard's set and the
/// phase (fencing, then open). It changes only by a compare-and-put against
/// the revision the proposer read, so of several proposers one wins
/// (apps/hashtable/REPLICATION.md). The framework places shards, not the
/// structure, so that every replicated structure places them the same way.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "smart/etcd.h"
#include "smart/status.h"

namespace smart::membership {

/// The most copies of a shard.
inline constexpr int kMaxReplicas = 3;
/// The most shards one epoch places.
inline constexpr size_t kMaxShards = 65536;

/// A member's part in the epoch.
enum class MemberState {
  kVoting,      ///< holds a full copy of every shard it is in
  kCatchingUp,  ///< being filled; written to by every change, read by none
};

/// Where the epoch is in its switch.
enum class EpochPhase {
  kFencing,  ///< the older epoch's sessions are being fenced; no client works
  kOpen,     ///< clients work
};

/// One shard's blades, the primary's position first.
struct ReplicaSet {
  std::vector<std::string> blades;  ///< distinct blade ids, 1 to the epoch's replicas
};

/// The epoch record.
struct Epoch {
  uint64_t number = 0;                          ///< 1 for the first epoch, one more each change
  EpochPhase phase = EpochPhase::kOpen;         ///< where the switch to this epoch is
  int replicas = 1;                             ///< copies each shard is meant to have
  std::map<std::string, MemberState> members;   ///< every blade of the epoch
  std::vector<ReplicaSet> shards;               ///< shard s's set at index s

  /// The primary of `shard`: the first voting member of its set.
  Status Primary(size_t shard, std::string* blade) const;
};

/// Shard s gets blades s, s+1, ..., s+replicas-1 (mod n) of `blades`, in
/// that order: each blade is primary of about shards/n shards, and a dead
/// blade's shards have their other copies on different survivors.
Status PlaceShards(const std::vector<std::string>& blades, size_t shards, int replicas,
                   std::vector<ReplicaSet>* out);

/// The first epoch: every blade voting, shards placed, phase open.
Status FirstEpoch(const std::vector<std::string>& blades, size_t shards, int replicas, Epoch* out);

/// Every promise of an epoch record (names, states, sets of distinct
/// members with at least one voting, sizes); the error names what broke.
Status CheckEpoch(const Epoch& epoch);

/// The next epoch without `dead`: it leaves every set (the others keep
/// their order), phase fencing. Refused when `dead` holds the last voting
/// copy of a shard: removing it would lose that shard.
Status RemoveBlade(const Epoch& current, const std::string& dead, Epoch* next);

/// The next epoch with `blade` added as catching-up to every set that has
/// fewer than `replicas` blades (at the end), phase fencing.
Status AddBlade(const Epoch& current, const std::string& blade, Epoch* next);

/// The epoch as the JSON text kept in etcd.
std::string EncodeEpoch(const Epoch& epoch);
/// The epoch from its JSON text, checked with CheckEpoch: text that is not
/// a valid epoch is refused, naming why.
Status ParseEpoch(const std::string& text, Epoch* out);

/// The key of `cluster`'s epoch.
std::string EpochKey(const std::string& cluster);

/// Reads `cluster`'s epoch and its mod_revision (to propose against);
/// kNotFound when there is none yet.
Status ReadEpoch(etcd::Client& client, const std::string& cluster, Epoch* out, int64_t* mod_revision);

/// Puts `next` as `cluster`'s epoch if the epoch's mod_revision is still
/// `expected_mod_revision` (0: only if there is none). *won says whether it
/// was put; when not, *current (if given) is the epoch that is there.
/// `next` must pass CheckEpoch; number 1 is proposed only where there is
/// no epoch. That `next` is one more than the epoch it replaces is the
/// caller's to keep (RemoveBlade and AddBlade do).
Status ProposeEpoch(etcd::Client& client, const std::string& cluster, const Epoch& next,
                    int64_t expected_mod_revision, bool* won, Epoch* current = nullptr,
                    int64_t* revision = nullptr);

}  // namespace smart::membership
