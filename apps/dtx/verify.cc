// Post-run checks of a database (verify.h). They read the tables node by
// node with plain READs; run them when no transaction is in flight.
#include "verify.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace smart::dtx {

namespace {

constexpr uint64_t kNodesPerRead = 64;

// Calls fn(first_node, count, bytes of replica r ...) for runs of nodes,
// every replica read into its own buffer. Returns "" or the read error.
std::string WalkNodes(Database& db, const TableInfo& t,
                      const std::function<std::string(uint64_t, uint64_t, const std::vector<const char*>&)>& fn) {
  Initiator& in = db.initiator();
  const size_t span = kNodesPerRead * t.node_bytes();
  // The initiator's cache has no free: these checks run a few times per
  // process, so each call takes its buffers anew.
  std::vector<char*> buffers;
  for (size_t r = 0; r < t.replicas.size(); ++r) {
    char* b = static_cast<char*>(in.alloc_cache(span));
    if (b == nullptr) return "the initiator cache is exhausted";
    buffers.push_back(b);
  }
  for (uint64_t n = 0; n < t.total_nodes(); n += kNodesPerRead) {
    const uint64_t count = std::min(kNodesPerRead, t.total_nodes() - n);
    for (size_t r = 0; r < t.replicas.size(); ++r) {
      Status s = in.read(buffers[r], NodeAddress(t, r, n), count * t.node_bytes(), Option::kSync);
      if (!s.ok()) return "reading table " + std::to_string(t.spec.id) + " on memory node " +
                          std::to_string(t.replicas[r]) + ": " + s.ToString();
    }
    std::vector<const char*> views(buffers.begin(), buffers.end());
    const std::string problem = fn(n, count, views);
    if (!problem.empty()) return problem;
  }
  return "";
}

std::string Where(const TableInfo& t, uint64_t node, int slot) {
  return "table " + std::to_string(t.spec.id) + " node " + std::to_string(node) + " slot " + std::to_string(slot);
}

// What a replica's slot holds, for a message: key, version, lock, validity.
std::string DescribeSlot(const TableInfo& t, const char* slot) {
  Record r;
  if (!DecodeSlot(slot, t.spec.value_bytes, &r)) return "bytes that fail the slot's checksum";
  if (!r.valid && r.key == 0) return "an empty slot (" + DescribeRecordLock(r.lock) + ")";
  return std::string(r.valid ? "" : "deleted ") + "key " + std::to_string(r.key) + " version " +
         std::to_string(r.version) + " (" + DescribeRecordLock(r.lock) + ")";
}

}  // namespace

std::string CompareReplicas(Database& db) {
  for (const TableInfo& t : db.tables()) {
    const std::string problem =
        WalkNodes(db, t, [&](uint64_t first, uint64_t count, const std::vector<const char*>& r) -> std::string {
          for (size_t b = 1; b < r.size(); ++b) {
            if (memcmp(r[0], r[b], count * t.node_bytes()) == 0) continue;
            for (uint64_t n = 0; n < count; ++n) {
              for (int i = 0; i <= kSlotsPerNode; ++i) {
                const size_t at = n * t.node_bytes() + static_cast<size_t>(i) * t.slot_bytes();
                const size_t len = i == kSlotsPerNode ? kNodeLinkBytes : t.slot_bytes();
                if (memcmp(r[0] + at, r[b] + at, len) != 0) {
                  return (i == kSlotsPerNode ? "table " + std::to_string(t.spec.id) + " node " +
                                                   std::to_string(first + n) + " overflow link"
                                             : Where(t, first + n, i)) +
                         ": the backup on memory node " + std::to_string(t.replicas[b]) +
                         " differs from the primary on memory node " + std::to_string(t.replicas[0]) +
                         (i == kSlotsPerNode ? std::string()
                                             : " (primary: " + DescribeSlot(t, r[0] + at) +
                                                   "; backup: " + DescribeSlot(t, r[b] + at) + ")");
                }
              }
            }
          }
          return "";
        });
    if (!problem.empty()) return problem;
  }
  return "";
}

std::string FindLeftLocks(Database& db) {
  for (const TableInfo& t : db.tables()) {
    const std::string problem =
        WalkNodes(db, t, [&](uint64_t first, uint64_t count, const std::vector<const char*>& r) -> std::string {
          for (size_t b = 0; b < r.size(); ++b) {
            for (uint64_t n = 0; n < count; ++n) {
              for (int i = 0; i < kSlotsPerNode; ++i) {
                const uint64_t lock = SlotLock(r[b] + n * t.node_bytes() + static_cast<size_t>(i) * t.slot_bytes());
                if (lock != 0) {
                  return Where(t, first + n, i) + " on memory node " + std::to_string(t.replicas[b]) + " is " +
                         DescribeRecordLock(lock);
                }
              }
            }
          }
          return "";
        });
    if (!problem.empty()) return problem;
  }
  return "";
}

std::string ForEachRecord(Database& db, uint16_t table, const std::function<void(const Record&)>& fn) {
  const TableInfo* t = db.table(table);
  if (t == nullptr) return "no table " + std::to_string(table);
  return WalkNodes(db, *t, [&](uint64_t first, uint64_t count, const std::vector<const char*>& r) -> std::string {
    for (uint64_t n = 0; n < count; ++n) {
      for (int i = 0; i < kSlotsPerNode; ++i) {
        Record rec;
        if (!DecodeSlot(r[0] + n * t->node_bytes() + static_cast<size_t>(i) * t->slot_bytes(), t->spec.value_bytes,
                        &rec)) {
          return Where(*t, first + n, i) + " does not decode (CRC mismatch)";
        }
        if (rec.valid) fn(rec);
      }
    }
    return "";
  });
}

}  // namespace smart::dtx
