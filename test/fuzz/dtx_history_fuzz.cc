// Fuzz target: SMART-DTX's history lines (apps/dtx/history.h), which many
// client processes write and dtx_check_history reads back, torn or not. A
// line is either refused with a reason or is exactly the line
// FormatHistoryLine writes for what it parsed to (the format has one
// spelling per transaction). The accepted lines then go through
// CheckHistory, whose report must add up and whose cycle, if any, must be
// a cycle of edges the accepted transactions justify.
//
// Input: lines separated by '\n' (at most kMaxLines of them are used).
#include <cstring>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_check.h"
#include "history.h"

using namespace smart::dtx;

namespace {

constexpr size_t kMaxLines = 64;

bool Has(const HistoryTx& tx, uint16_t table, uint64_t key, uint64_t version, bool write) {
  for (const HistoryAccess& a : tx.accesses) {
    if (a.table == table && a.key == key && a.version == version && a.write == write) return true;
  }
  return false;
}

// Each edge of a reported cycle joins two different accepted transactions
// through accesses they made to its record, in version order.
void CheckCycle(const std::vector<HistoryTx>& history, const HistoryReport& report) {
  const std::vector<HistoryEdge>& cycle = report.cycle;
  if (cycle.empty()) return;
  FuzzCheck(cycle.size() >= 2, "a cycle of one edge (a self edge)");
  FuzzCheck(report.cyclic_transactions >= cycle.size(), "a cycle longer than the transactions on cycles");
  FuzzCheck(!report.ok, "a history with a cycle reported ok");
  std::map<uint64_t, const HistoryTx*> by_id;
  for (const HistoryTx& tx : history) by_id[tx.id] = &tx;
  for (size_t i = 0; i < cycle.size(); ++i) {
    const HistoryEdge& e = cycle[i];
    FuzzCheck(e.to == cycle[(i + 1) % cycle.size()].from, "a cycle's edges do not chain");
    FuzzCheck(by_id.count(e.from) == 1 && by_id.count(e.to) == 1, "a cycle names a transaction not in the history");
    // With a repeated id, an edge may join two lines of that id, or belong
    // to the other line of it.
    if (!report.duplicate_tx_ids.empty()) continue;
    FuzzCheck(e.from != e.to, "a self edge in a cycle");
    const HistoryTx& from = *by_id[e.from];
    const HistoryTx& to = *by_id[e.to];
    switch (e.kind) {
      case EdgeKind::kWriteWrite:
        FuzzCheck(Has(from, e.table, e.key, e.from_version, true) && Has(to, e.table, e.key, e.to_version, true) &&
                      e.from_version < e.to_version,
                  "a ww edge without the two writes in version order");
        break;
      case EdgeKind::kWriteRead:
        FuzzCheck(Has(from, e.table, e.key, e.from_version, true) && Has(to, e.table, e.key, e.to_version, false) &&
                      e.from_version <= e.to_version,
                  "a wr edge without a write and a read of it or of a later version");
        break;
      case EdgeKind::kReadWrite:
        FuzzCheck(Has(from, e.table, e.key, e.from_version, false) && Has(to, e.table, e.key, e.to_version, true) &&
                      e.from_version < e.to_version,
                  "an rw edge without a read and a later write");
        break;
      default:
        FuzzCheck(false, "a cycle edge of no known kind");
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  std::vector<HistoryTx> history;
  size_t accesses = 0;
  size_t pos = 0;
  for (size_t n = 0; n < kMaxLines && pos <= input.size(); ++n) {
    const size_t newline = input.find('\n', pos);
    const std::string_view line = input.substr(pos, newline == std::string_view::npos ? std::string_view::npos
                                                                                       : newline - pos);
    pos = newline == std::string_view::npos ? input.size() + 1 : newline + 1;
    HistoryTx tx;
    std::string error;
    if (!ParseHistoryLine(line, &tx, &error)) {
      FuzzCheck(!error.empty(), "a line refused without a reason");
      FuzzCheck(error.size() < 1000, "a refusal's reason is not brief");
      FuzzCheck(!ParseHistoryLine(line, &tx, nullptr), "a line refused with an error string, accepted without");
      continue;
    }
    FuzzCheck(FormatHistoryLine(tx.id, tx.accesses) == line, "an accepted line is not the line its parse formats to");
    for (const HistoryAccess& a : tx.accesses) {
      FuzzCheck(a.write || (!a.inserted && !a.deleted), "a read parsed with +i or +d");
      FuzzCheck(!(a.inserted && a.deleted), "a write parsed as both an insert and a delete");
    }
    accesses += tx.accesses.size();
    history.push_back(std::move(tx));
  }
  const HistoryReport report = CheckHistory(history);
  FuzzCheck(report.transactions == history.size() && report.accesses == accesses,
            "the report miscounts transactions or accesses");
  FuzzCheck(report.records <= accesses, "the report counts more records than accesses");
  FuzzCheck(report.reads_past_last_write <= report.unlogged_reads, "more reads past the last write than unlogged");
  FuzzCheck(report.ok == (report.cycle.empty() && report.duplicate_writes.empty() && report.duplicate_tx_ids.empty()),
            "ok does not match the problems found");
  FuzzCheck(report.cycle.empty() == (report.cyclic_transactions == 0), "a cyclic component without a cycle, or back");
  for (const DuplicateWrite& d : report.duplicate_writes) {
    FuzzCheck(d.tx_ids.size() >= 2, "a duplicate write by fewer than two transactions");
  }
  FuzzCheck(DescribeProblems(report).empty() == report.ok,
            "problems described for an ok report, or none for a bad one");
  CheckCycle(history, report);
  return 0;
}
