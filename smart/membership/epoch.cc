// The epoch record: shard placement, the record's rules and JSON form, and
// reading and proposing it in etcd.
#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>

#include "smart/membership.h"
#include "smart/replica_set.h"
#include "smart/util/peer_text.h"

namespace smart::membership {

using nlohmann::json;

namespace {

// The longest epoch text read back (65536 shards of 3 ids fit with room).
constexpr size_t kMaxEpochText = 16u << 20;

const char* StateName(MemberState s) { return s == MemberState::kVoting ? "voting" : "catching-up"; }
const char* PhaseName(EpochPhase p) { return p == EpochPhase::kOpen ? "open" : "fencing"; }

Status Bad(const std::string& why) { return Status::InvalidArgument("epoch: " + why); }

}  // namespace

Status Epoch::Primary(size_t shard, std::string* blade) const {
  if (shard >= shards.size())
    return Status::InvalidArgument("epoch " + std::to_string(number) + " has no shard " + std::to_string(shard));
  for (const std::string& b : shards[shard].blades) {
    auto it = members.find(b);
    if (it != members.end() && it->second == MemberState::kVoting) {
      *blade = b;
      return Status::OK();
    }
  }
  return Status::Internal("epoch " + std::to_string(number) + ": shard " + std::to_string(shard) +
                          " has no voting member");
}

Status PlaceShards(const std::vector<std::string>& blades, size_t shards, int replicas,
                   std::vector<ReplicaSet>* out) {
  if (replicas < 1 || replicas > kMaxReplicas)
    return Bad("replicas must be 1 to " + std::to_string(kMaxReplicas) + ", not " + std::to_string(replicas));
  if (shards < 1 || shards > kMaxShards)
    return Bad("shards must be 1 to " + std::to_string(kMaxShards) + ", not " + std::to_string(shards));
  if (blades.size() < static_cast<size_t>(replicas))
    return Bad(std::to_string(replicas) + " replicas need as many blades; there are " +
               std::to_string(blades.size()));
  std::set<std::string> seen;
  for (const std::string& b : blades) {
    Status s = CheckPathPart(b, "blade id");
    if (!s.ok()) return s;
    if (!seen.insert(b).second) return Bad("blade '" + PeerText(b) + "' is named twice");
  }
  out->assign(shards, ReplicaSet());
  for (size_t s = 0; s < shards; ++s) {
    for (int k = 0; k < replicas; ++k) (*out)[s].blades.push_back(blades[(s + k) % blades.size()]);
  }
  return Status::OK();
}

Status FirstEpoch(const std::vector<std::string>& blades, size_t shards, int replicas, Epoch* out) {
  Epoch e;
  e.number = 1;
  e.phase = EpochPhase::kOpen;
  e.replicas = replicas;
  Status s = PlaceShards(blades, shards, replicas, &e.shards);
  if (!s.ok()) return s;
  for (const std::string& b : blades) e.members[b] = MemberState::kVoting;
  *out = std::move(e);
  return Status::OK();
}

Status CheckEpoch(const Epoch& e) {
  if (e.number < 1) return Bad("the number must be 1 or more");
  if (e.replicas < 1 || e.replicas > kMaxReplicas) return Bad("replicas must be 1 to " + std::to_string(kMaxReplicas));
  if (e.members.empty()) return Bad("no members");
  if (e.shards.empty() || e.shards.size() > kMaxShards)
    return Bad("shards must be 1 to " + std::to_string(kMaxShards) + ", not " + std::to_string(e.shards.size()));
  for (const auto& [name, state] : e.members) {
    Status s = CheckPathPart(name, "blade id");
    if (!s.ok()) return s;
  }
  for (size_t i = 0; i < e.shards.size(); ++i) {
    const std::vector<std::string>& set = e.shards[i].blades;
    const std::string where = "shard " + std::to_string(i);
    if (set.empty() || set.size() > static_cast<size_t>(e.replicas))
      return Bad(where + " has " + std::to_string(set.size()) + " blades, not 1 to " + std::to_string(e.replicas));
    bool voting = false;
    for (size_t j = 0; j < set.size(); ++j) {
      auto it = e.members.find(set[j]);
      if (it == e.members.end()) return Bad(where + " names '" + PeerText(set[j]) + "', not a member");
      if (std::find(set.begin(), set.begin() + j, set[j]) != set.begin() + j)
        return Bad(where + " names '" + PeerText(set[j]) + "' twice");
      voting = voting || it->second == MemberState::kVoting;
    }
    if (!voting) return Bad(where + " has no voting member");
  }
  return Status::OK();
}

Status RemoveBlade(const Epoch& current, const std::string& dead, Epoch* next) {
  Status checked = CheckEpoch(current);
  if (!checked.ok()) return checked;
  if (current.members.count(dead) == 0) return Bad("'" + PeerText(dead) + "' is not a member");
  Epoch e = current;
  e.number = current.number + 1;
  e.phase = EpochPhase::kFencing;
  e.members.erase(dead);
  for (size_t i = 0; i < e.shards.size(); ++i) {
    auto& set = e.shards[i].blades;
    set.erase(std::remove(set.begin(), set.end(), dead), set.end());
    bool voting = false;
    for (const std::string& b : set) voting = voting || e.members.at(b) == MemberState::kVoting;
    if (!voting)
      return Status::InvalidArgument("epoch: '" + PeerText(dead) + "' holds the last voting copy of shard " +
                                     std::to_string(i) + "; removing it would lose the shard");
  }
  Status s = CheckEpoch(e);
  if (!s.ok()) return s;
  *next = std::move(e);
  return Status::OK();
}

Status AddBlade(const Epoch& current, const std::string& blade, Epoch* next) {
  Status s = CheckEpoch(current);
  if (s.ok()) s = CheckPathPart(blade, "blade id");
  if (!s.ok()) return s;
  if (current.members.count(blade) != 0) return Bad("'" + PeerText(blade) + "' is already a member");
  Epoch e = current;
  e.number = current.number + 1;
  e.phase = EpochPhase::kFencing;
  e.members[blade] = MemberState::kCatchingUp;
  for (ReplicaSet& set : e.shards) {
    if (set.blades.size() < static_cast<size_t>(e.replicas)) set.blades.push_back(blade);
  }
  s = CheckEpoch(e);
  if (!s.ok()) return s;
  *next = std::move(e);
  return Status::OK();
}

std::string EncodeEpoch(const Epoch& e) {
  json members = json::object();
  for (const auto& [name, state] : e.members) members[name] = StateName(state);
  json shards = json::array();
  for (const ReplicaSet& set : e.shards) shards.push_back(set.blades);
  return json{{"epoch", e.number},
              {"phase", PhaseName(e.phase)},
              {"replicas", e.replicas},
              {"members", members},
              {"shards", shards}}
      .dump();
}

Status ParseEpoch(const std::string& text, Epoch* out) {
  if (text.size() > kMaxEpochText) return Bad("the record is over " + std::to_string(kMaxEpochText) + " bytes");
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Bad("the record is not a JSON object: " + PeerText(text));
  Epoch e;
  auto number = j.find("epoch");
  if (number == j.end() || !number->is_number_unsigned()) return Bad("no epoch number");
  e.number = number->get<uint64_t>();
  auto phase = j.find("phase");
  if (phase == j.end() || !(*phase == "open" || *phase == "fencing")) return Bad("the phase is not open or fencing");
  e.phase = *phase == "open" ? EpochPhase::kOpen : EpochPhase::kFencing;
  auto replicas = j.find("replicas");
  if (replicas == j.end() || !replicas->is_number_unsigned() || replicas->get<uint64_t>() > kMaxReplicas)
    return Bad("replicas is not 1 to " + std::to_string(kMaxReplicas));
  e.replicas = static_cast<int>(replicas->get<uint64_t>());
  auto members = j.find("members");
  if (members == j.end() || !members->is_object()) return Bad("members is not an object");
  for (auto it = members->begin(); it != members->end(); ++it) {
    if (*it == "voting") {
      e.members[it.key()] = MemberState::kVoting;
    } else if (*it == "catching-up") {
      e.members[it.key()] = MemberState::kCatchingUp;
    } else {
      return Bad("member '" + PeerText(it.key()) + "' is neither voting nor catching-up");
    }
  }
  auto shards = j.find("shards");
  if (shards == j.end() || !shards->is_array() || shards->size() > kMaxShards)
    return Bad("shards is not a list of at most " + std::to_string(kMaxShards));
  for (const json& set : *shards) {
    if (!set.is_array() || set.size() > kMaxReplicas) return Bad("a shard's set is not a list of blade ids");
    ReplicaSet r;
    for (const json& b : set) {
      if (!b.is_string()) return Bad("a shard's set holds something other than a blade id");
      r.blades.push_back(b.get<std::string>());
    }
    e.shards.push_back(std::move(r));
  }
  Status s = CheckEpoch(e);
  if (!s.ok()) return s;
  *out = std::move(e);
  return Status::OK();
}

std::string EpochKey(const std::string& cluster) { return "/smart/" + cluster + "/epoch"; }

Status ReadEpoch(etcd::Client& client, const std::string& cluster, Epoch* out, int64_t* mod_revision) {
  etcd::KeyValue kv;
  Status s = client.Get(EpochKey(cluster), &kv);
  if (!s.ok()) return s;
  s = ParseEpoch(kv.value, out);
  if (!s.ok()) return Status::Internal("the epoch of cluster '" + PeerText(cluster) + "' in etcd: " + s.message());
  *mod_revision = kv.mod_revision;
  return Status::OK();
}

Status ProposeEpoch(etcd::Client& client, const std::string& cluster, const Epoch& next,
                    int64_t expected_mod_revision, bool* won, Epoch* current, int64_t* revision) {
  *won = false;
  Status s = CheckEpoch(next);
  if (!s.ok()) return s;
  if ((expected_mod_revision == 0) != (next.number == 1))
    return Bad("the first epoch is number 1, proposed only where there is none");
  etcd::TxnResult txn;
  s = client.PutIf(EpochKey(cluster), expected_mod_revision, EncodeEpoch(next), 0, &txn);
  if (!s.ok()) return s;
  *won = txn.succeeded;
  if (revision) *revision = txn.succeeded ? txn.revision : txn.current.mod_revision;
  if (!txn.succeeded && current != nullptr) {
    if (txn.current.create_revision == 0) return Status::NotFound("cluster '" + PeerText(cluster) + "' has no epoch");
    s = ParseEpoch(txn.current.value, current);
    if (!s.ok()) return Status::Internal("the epoch of cluster '" + PeerText(cluster) + "' in etcd: " + s.message());
  }
  return Status::OK();
}

}  // namespace smart::membership
