// SMART-DTX transaction histories: what committed transactions read and
// wrote, one line per transaction, and a checker that proves such a history
// conflict-serializable (or shows why it is not).
//
// Line format (text, no trailing newline in the line itself):
//
//   T <tx_id> <access> <access> ...
//
// tx_id is a decimal u64, unique across every file of a run. An access is
//
//   r:<table>:<key>@<version>       a read of that version of the record
//   w:<table>:<key>@<version>       a write that produced that version
//   w:<table>:<key>@<version>+i     ... and inserted the record
//   w:<table>:<key>@<version>+d     ... and deleted it
//
// with table a decimal u16 and key and version decimal u64. Fields are
// separated by exactly one space; numbers have no sign and no leading zeros,
// so a line that parses is exactly the line FormatHistoryLine writes for it.
//
// Versions: a commit that writes a record sets the record's version to a
// value greater than the version it overwrote; versions of different
// records are unrelated. Some versions are written by no logged
// transaction (the initial load, a roll-back that moves the version
// forward); the checker treats them as written by nobody, but still in the
// record's version order: a reader of such a version read after the last
// logged write below it, so it gets a wr edge from that write's transaction.
//
// This header is standalone: it includes no other apps/dtx header, so tools
// and tests can use it without the rest of SMART-DTX.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace smart::dtx {

/// One read or write of a committed transaction.
struct HistoryAccess {
  uint16_t table = 0;
  uint64_t key = 0;
  uint64_t version = 0;  ///< read: the version read; write: the version the write produced
  bool write = false;
  bool inserted = false;  ///< a write that created the record (`+i`)
  bool deleted = false;   ///< a write that removed the record (`+d`)
};

/// One committed transaction: its id and its accesses in the order logged.
struct HistoryTx {
  uint64_t id = 0;
  std::vector<HistoryAccess> accesses;
};

/// The line for a transaction (without a newline). A read with `inserted` or
/// `deleted` set, or a write with both, has no line form: the flags are
/// left out (reads) or `+d` wins (writes), so the parser never sees them.
std::string FormatHistoryLine(uint64_t tx_id, const std::vector<HistoryAccess>& accesses);

/// Parses one line (without its newline) into *out. On a malformed line
/// returns false, leaves *out unspecified and sets *error (if not null) to
/// what is wrong and where (the field's position and text).
bool ParseHistoryLine(std::string_view line, HistoryTx* out, std::string* error);

/// The kinds of edges of the direct serialization graph.
enum class EdgeKind : uint8_t {
  kWriteWrite,  ///< ww: the writer of a version -> the writer of the next written version
  kWriteRead,   ///< wr: the writer of a version -> a reader of it or of a later unlogged version (none logged between)
  kReadWrite,   ///< rw (anti-dependency): a reader of a version -> the writer of the next written version
};

/// "ww", "wr" or "rw".
const char* EdgeKindName(EdgeKind kind);

/// One edge of a reported cycle: `from` must come before `to` in any serial
/// order because of their accesses to (table, key).
struct HistoryEdge {
  uint64_t from = 0;  ///< transaction id
  uint64_t to = 0;    ///< transaction id
  EdgeKind kind = EdgeKind::kWriteWrite;
  uint16_t table = 0;
  uint64_t key = 0;
  uint64_t from_version = 0;  ///< the version `from` wrote (ww, wr) or read (rw)
  uint64_t to_version = 0;    ///< the version `to` wrote (ww, rw) or read (wr)
};

/// Two or more transactions that claim to have written the same version of
/// a record: one of them overwrote the other's update without seeing it.
struct DuplicateWrite {
  uint16_t table = 0;
  uint64_t key = 0;
  uint64_t version = 0;
  std::vector<uint64_t> tx_ids;  ///< ascending, no repeats
};

/// What CheckHistory found.
struct HistoryReport {
  /// Serializable, no duplicate write and no duplicate transaction id.
  bool ok = true;
  size_t transactions = 0;
  size_t accesses = 0;
  size_t records = 0;  ///< distinct (table, key)
  size_t edges = 0;    ///< edges of the serialization graph (without self edges)
  /// Reads of a version that no logged transaction wrote (the initial load,
  /// a version a roll-back left): not a problem by themselves.
  size_t unlogged_reads = 0;
  /// Those of the unlogged reads whose version is greater than every logged
  /// write of the record (a roll-back after the last logged write): fine,
  /// counted because a large number would hint at writes missing from the log.
  size_t reads_past_last_write = 0;
  /// Transaction ids that appear on more than one line (ascending).
  std::vector<uint64_t> duplicate_tx_ids;
  std::vector<DuplicateWrite> duplicate_writes;  ///< ordered by table, key, version
  /// Transactions that lie on some cycle (those in strongly connected
  /// components of more than one transaction); 0 when serializable.
  size_t cyclic_transactions = 0;
  /// One cycle (a short one through the smallest cyclic component), empty
  /// when the graph has none: cycle[i].to == cycle[i + 1].from and the last
  /// edge returns to cycle[0].from.
  std::vector<HistoryEdge> cycle;
};

/// Builds the direct serialization graph of the committed transactions and
/// looks for cycles, duplicate writes and duplicate ids. Time O(A log A) and
/// memory O(A) in the number of accesses A; no recursion.
HistoryReport CheckHistory(const std::vector<HistoryTx>& history);

/// "T7 -rw(1:42 r@3 w@5)-> T9 -wr(1:8 w@4 r@4)-> T7".
std::string DescribeCycle(const std::vector<HistoryEdge>& cycle);

/// What is wrong, on one line ("" when report.ok): the cycle, the duplicate
/// writes and the duplicate ids, each list cut after `max_items` entries.
std::string DescribeProblems(const HistoryReport& report, size_t max_items = 10);

}  // namespace smart::dtx
