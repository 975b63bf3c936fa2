// SMART-DTX history lines and the serializability checker (history.h): the
// format round-trips, malformed lines are refused with a reason, serial
// histories pass, the classic anomalies are caught with a cycle that the
// history itself justifies, and the checker agrees with a brute-force one
// on random histories.
#include "history.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace smart::dtx {
namespace {

HistoryAccess R(uint16_t table, uint64_t key, uint64_t version) { return HistoryAccess{table, key, version, false}; }
HistoryAccess W(uint16_t table, uint64_t key, uint64_t version) { return HistoryAccess{table, key, version, true}; }

bool SameAccesses(const std::vector<HistoryAccess>& a, const std::vector<HistoryAccess>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].table != b[i].table || a[i].key != b[i].key || a[i].version != b[i].version ||
        a[i].write != b[i].write || a[i].inserted != b[i].inserted || a[i].deleted != b[i].deleted) {
      return false;
    }
  }
  return true;
}

// ---------------------------------------------------------------------------
// An independent reading of the edge definitions, used to check what the
// checker reports.

using RecordId = std::pair<uint16_t, uint64_t>;

// Every logged written version of each record.
std::map<RecordId, std::set<uint64_t>> WrittenVersions(const std::vector<HistoryTx>& h) {
  std::map<RecordId, std::set<uint64_t>> written;
  for (const HistoryTx& tx : h) {
    for (const HistoryAccess& a : tx.accesses) {
      if (a.write) written[{a.table, a.key}].insert(a.version);
    }
  }
  return written;
}

bool Has(const HistoryTx& tx, uint16_t table, uint64_t key, uint64_t version, bool write) {
  for (const HistoryAccess& a : tx.accesses) {
    if (a.table == table && a.key == key && a.version == version && a.write == write) return true;
  }
  return false;
}

// True when no logged write of the record lies strictly between lo and hi.
bool NoneBetween(const std::set<uint64_t>& written, uint64_t lo, uint64_t hi) {
  auto it = written.upper_bound(lo);
  return it == written.end() || *it >= hi;
}

// Does the history justify edge `a` -> `b` of this kind on this record?
bool EdgeHolds(const std::map<RecordId, std::set<uint64_t>>& written, const HistoryTx& a, const HistoryTx& b,
               EdgeKind kind, uint16_t table, uint64_t key, uint64_t va, uint64_t vb) {
  if (a.id == b.id) return false;
  auto it = written.find({table, key});
  static const std::set<uint64_t> kNoWrites;
  const std::set<uint64_t>& w = it == written.end() ? kNoWrites : it->second;
  switch (kind) {
    case EdgeKind::kWriteWrite:
      return Has(a, table, key, va, true) && Has(b, table, key, vb, true) && va < vb && NoneBetween(w, va, vb);
    case EdgeKind::kWriteRead:
      return Has(a, table, key, va, true) && Has(b, table, key, vb, false) &&
             (va == vb || (va < vb && w.count(vb) == 0 && NoneBetween(w, va, vb)));
    case EdgeKind::kReadWrite:
      return Has(a, table, key, va, false) && Has(b, table, key, vb, true) && va < vb && NoneBetween(w, va, vb);
  }
  return false;
}

// Checks a reported cycle edge by edge against the history; "" when it holds.
std::string CycleProblem(const std::vector<HistoryTx>& h, const std::vector<HistoryEdge>& cycle) {
  if (cycle.size() < 2) return "a cycle of " + std::to_string(cycle.size()) + " edges";
  std::map<uint64_t, const HistoryTx*> by_id;
  for (const HistoryTx& tx : h) by_id[tx.id] = &tx;
  const auto written = WrittenVersions(h);
  for (size_t i = 0; i < cycle.size(); ++i) {
    const HistoryEdge& e = cycle[i];
    if (e.to != cycle[(i + 1) % cycle.size()].from) return "edge " + std::to_string(i) + " does not chain";
    if (by_id.count(e.from) == 0 || by_id.count(e.to) == 0) return "edge " + std::to_string(i) + ": unknown tx";
    if (!EdgeHolds(written, *by_id[e.from], *by_id[e.to], e.kind, e.table, e.key, e.from_version, e.to_version)) {
      return "edge " + std::to_string(i) + " (" + DescribeCycle({e}) + ") is not in the history";
    }
  }
  return "";
}

// Brute force: every edge by comparing every pair of accesses, then Kahn's
// topological sort. True when the graph has a cycle.
bool BruteForceCycle(const std::vector<HistoryTx>& h) {
  const auto written = WrittenVersions(h);
  const size_t n = h.size();
  std::vector<std::set<size_t>> out(n);
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < n; ++j) {
      if (i == j) continue;
      for (const HistoryAccess& a : h[i].accesses) {
        for (const HistoryAccess& b : h[j].accesses) {
          if (a.table != b.table || a.key != b.key) continue;
          EdgeKind kind;
          if (a.write && b.write) {
            kind = EdgeKind::kWriteWrite;
          } else if (a.write) {
            kind = EdgeKind::kWriteRead;
          } else if (b.write) {
            kind = EdgeKind::kReadWrite;
          } else {
            continue;
          }
          if (EdgeHolds(written, h[i], h[j], kind, a.table, a.key, a.version, b.version)) out[i].insert(j);
        }
      }
    }
  }
  std::vector<size_t> in(n, 0), ready;
  for (size_t i = 0; i < n; ++i) {
    for (size_t j : out[i]) ++in[j];
  }
  for (size_t i = 0; i < n; ++i) {
    if (in[i] == 0) ready.push_back(i);
  }
  size_t done = 0;
  while (!ready.empty()) {
    const size_t v = ready.back();
    ready.pop_back();
    ++done;
    for (size_t w : out[v]) {
      if (--in[w] == 0) ready.push_back(w);
    }
  }
  return done != n;
}

std::set<uint64_t> CycleIds(const HistoryReport& r) {
  std::set<uint64_t> ids;
  for (const HistoryEdge& e : r.cycle) ids.insert(e.from);
  return ids;
}

std::set<EdgeKind> CycleKinds(const HistoryReport& r) {
  std::set<EdgeKind> kinds;
  for (const HistoryEdge& e : r.cycle) kinds.insert(e.kind);
  return kinds;
}

// ---------------------------------------------------------------------------
// The line format

TEST(DtxHistoryFormat, FormatsTheDocumentedLine) {
  std::vector<HistoryAccess> a{R(1, 42, 3), W(1, 42, 4), W(2, 9, 1), W(2, 10, 5)};
  a[2].inserted = true;
  a[3].deleted = true;
  EXPECT_EQ(FormatHistoryLine(7, a), "T 7 r:1:42@3 w:1:42@4 w:2:9@1+i w:2:10@5+d");
  EXPECT_EQ(FormatHistoryLine(0, {}), "T 0");
}

TEST(DtxHistoryFormat, RoundTrips) {
  constexpr uint64_t kMax = ~uint64_t{0};
  std::vector<std::vector<HistoryAccess>> cases = {
      {},
      {R(0, 0, 0)},
      {R(65535, kMax, kMax), W(65535, kMax, kMax)},
      {R(1, 10, 1), W(1, 10, 2), R(3, 99999, 12345678901234567890u)},
  };
  HistoryAccess insert = W(4, 5, 6), remove = W(4, 7, 8);
  insert.inserted = true;
  remove.deleted = true;
  cases.push_back({insert, remove, R(4, 5, 6)});
  std::mt19937_64 random(7);
  for (int i = 0; i < 200; ++i) {
    std::vector<HistoryAccess> a;
    const int n = static_cast<int>(random() % 12);
    for (int k = 0; k < n; ++k) {
      // Numbers of every length, up to the limits.
      HistoryAccess x{static_cast<uint16_t>(random() >> (random() % 64)), random() >> (random() % 64),
                      random() >> (random() % 64), (random() & 1) != 0};
      if (x.write) {
        x.inserted = random() % 4 == 0;
        x.deleted = !x.inserted && random() % 4 == 0;
      }
      a.push_back(x);
    }
    cases.push_back(a);
  }
  uint64_t id = 0;
  for (const std::vector<HistoryAccess>& a : cases) {
    id = id * 3 + 1;
    const std::string line = FormatHistoryLine(id, a);
    HistoryTx tx;
    std::string error;
    ASSERT_TRUE(ParseHistoryLine(line, &tx, &error)) << line << ": " << error;
    EXPECT_EQ(tx.id, id);
    EXPECT_TRUE(SameAccesses(tx.accesses, a)) << line;
    EXPECT_EQ(FormatHistoryLine(tx.id, tx.accesses), line);
  }
  HistoryTx tx;
  ASSERT_TRUE(ParseHistoryLine("T 18446744073709551615 w:65535:18446744073709551615@18446744073709551615", &tx,
                               nullptr));
  EXPECT_EQ(tx.id, kMax);
  EXPECT_EQ(tx.accesses[0].key, kMax);
}

TEST(DtxHistoryFormat, ParsingReplacesWhatWasThere) {
  HistoryTx tx{99, {R(1, 1, 1), R(2, 2, 2)}};
  ASSERT_TRUE(ParseHistoryLine("T 5 w:3:4@5", &tx, nullptr));
  EXPECT_EQ(tx.id, 5u);
  ASSERT_EQ(tx.accesses.size(), 1u);
  EXPECT_TRUE(tx.accesses[0].write);
}

TEST(DtxHistoryFormat, RejectsMalformedLinesAndSaysWhy) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "empty line"},
      {"T", "missing transaction id"},
      {"T ", "empty field 2"},
      {" T 5", "empty field 1"},
      {"X 5", "does not start with 'T '"},
      {"t 5", "does not start with 'T '"},
      {"T\t5", "does not start with 'T '"},
      {"TT 5", "does not start with 'T '"},
      {"T x", "transaction id 'x' is not a decimal number"},
      {"T -5", "is not a decimal number"},
      {"T +5", "is not a decimal number"},
      {"T 05", "leading zero"},
      {"T 5.0", "is not a decimal number"},
      {"T 99999999999999999999999", "transaction id '99999999999999999999999' is out of range"},
      {"T 18446744073709551616", "out of range"},
      {"T 5  r:1:2@3", "empty field 3"},
      {"T 5 r:1:2@3 ", "empty field 4"},
      {"T 5 r:1:2@3 garbage", "access 2 'garbage': not an access"},
      {"T 5 r:1:2@3x", "version '3x' is not a decimal number"},
      {"T 5 r:1:2@3\r", "version '3\\x0d' is not a decimal number"},
      {std::string("T 5 r:1:2@3\0", 12), "is not a decimal number"},
      {"T 5 x:1:2@3", "unknown access kind 'x'"},
      {"T 5 R:1:2@3", "unknown access kind 'R'"},
      {"T 5 rw:1:2@3", "not an access"},
      {"T 5 r", "not an access"},
      {"T 5 r1:2@3", "not an access"},
      {"T 5 r:1@3", "no ':' between table and key"},
      {"T 5 r:1:2", "no '@' before the version"},
      {"T 5 r:1:2:3@4", "key '2:3' is not a decimal number"},
      {"T 5 r:1:2@3@4", "version '3@4' is not a decimal number"},
      {"T 5 r::2@3", "table '' is empty"},
      {"T 5 r:1:@3", "key '' is empty"},
      {"T 5 r:1:2@", "version '' is empty"},
      {"T 5 r:65536:2@3", "table '65536' is out of range (max 65535)"},
      {"T 5 r:99999999999999999999999:2@3", "table '99999999999999999999999' is out of range"},
      {"T 5 r:1:99999999999999999999999@3", "key '99999999999999999999999' is out of range"},
      {"T 5 r:1:18446744073709551616@3", "key '18446744073709551616' is out of range"},
      {"T 5 w:1:2@99999999999999999999999", "version '99999999999999999999999' is out of range"},
      {"T 5 r:1:2@3+i", "a read has a suffix '+i'"},
      {"T 5 r:1:2@3+d", "a read has a suffix '+d'"},
      {"T 5 w:1:2@3+x", "unknown suffix '+x'"},
      {"T 5 w:1:2@3+", "unknown suffix '+'"},
      {"T 5 w:1:2@3+i+d", "unknown suffix '+i+d'"},
      {"T 5 w:1:2@3+ii", "unknown suffix '+ii'"},
      {"T 5 w:1:2@+i", "version '' is empty"},
      {"T 5 w:-1:2@3", "table '-1' is not a decimal number"},
      {"T 5 w:01:2@3", "table '01' has a leading zero"},
      {"T 5 r:1:2@3 w:1:2@4 w:1:2@x", "access 3 'w:1:2@x'"},
  };
  for (const auto& [line, why] : cases) {
    HistoryTx tx;
    std::string error;
    EXPECT_FALSE(ParseHistoryLine(line, &tx, &error)) << "accepted: " << line;
    EXPECT_NE(error.find(why), std::string::npos) << "line '" << line << "': error '" << error << "' lacks '" << why
                                                  << "'";
    EXPECT_FALSE(ParseHistoryLine(line, &tx, nullptr)) << "accepted without an error string: " << line;
  }
}

TEST(DtxHistoryFormat, QuotesGarbageReadablyAndBriefly) {
  HistoryTx tx;
  std::string error;
  const std::string line = "T 5 r:1:" + std::string(10000, '\xff') + "@3";
  ASSERT_FALSE(ParseHistoryLine(line, &tx, &error));
  EXPECT_LT(error.size(), 400u) << error;
  EXPECT_NE(error.find("\\xff"), std::string::npos) << error;
  EXPECT_EQ(error.find('\xff'), std::string::npos) << "raw bytes in the message";
}

// ---------------------------------------------------------------------------
// The checker on hand-made histories

TEST(DtxHistoryCheck, AnEmptyHistoryIsSerializable) {
  const HistoryReport r = CheckHistory({});
  EXPECT_TRUE(r.ok);
  EXPECT_EQ(r.transactions, 0u);
  EXPECT_EQ(DescribeProblems(r), "");
}

TEST(DtxHistoryCheck, ASerialHistoryPasses) {
  // x = (1, 10), y = (1, 11), z = (2, 10), loaded at version 1.
  const std::vector<HistoryTx> h = {
      {1, {R(1, 10, 1), W(1, 10, 2), R(1, 11, 1)}},
      {2, {R(1, 10, 2), R(1, 11, 1), W(1, 11, 2)}},
      {3, {R(1, 11, 2), R(2, 10, 1)}},
      {4, {R(1, 10, 2), W(1, 10, 3), R(2, 10, 1), W(2, 10, 2)}},
      {5, {R(1, 10, 3), R(1, 11, 2), R(2, 10, 2)}},
      {6, {W(1, 10, 4)}},  // a blind write
  };
  const HistoryReport r = CheckHistory(h);
  EXPECT_TRUE(r.ok) << DescribeProblems(r);
  EXPECT_EQ(r.transactions, 6u);
  EXPECT_EQ(r.accesses, 16u);
  EXPECT_EQ(r.records, 3u);
  EXPECT_GT(r.edges, 0u);
  EXPECT_TRUE(r.cycle.empty());
  EXPECT_EQ(r.cyclic_transactions, 0u);
  EXPECT_EQ(r.unlogged_reads, 5u);  // the loaded versions
  EXPECT_EQ(r.reads_past_last_write, 0u);
}

TEST(DtxHistoryCheck, ReadersOfTheSameVersionAreConcurrentNotConflicting) {
  const std::vector<HistoryTx> h = {
      {1, {R(1, 1, 5), R(1, 2, 5)}},
      {2, {R(1, 1, 5), R(1, 2, 5)}},
      {3, {R(1, 2, 5), R(1, 1, 5)}},
  };
  const HistoryReport r = CheckHistory(h);
  EXPECT_TRUE(r.ok) << DescribeProblems(r);
  EXPECT_EQ(r.edges, 0u);
}

TEST(DtxHistoryCheck, LostUpdateIsACycleOfRwAndWw) {
  // Both read x@1 and both write it: T1 makes 2, T2 makes 3 over T1's 2
  // without having seen it.
  const std::vector<HistoryTx> h = {
      {1, {R(1, 7, 1), W(1, 7, 2)}},
      {2, {R(1, 7, 1), W(1, 7, 3)}},
  };
  const HistoryReport r = CheckHistory(h);
  EXPECT_FALSE(r.ok);
  ASSERT_EQ(r.cycle.size(), 2u) << DescribeProblems(r);
  EXPECT_EQ(CycleIds(r), (std::set<uint64_t>{1, 2}));
  EXPECT_EQ(CycleKinds(r), (std::set<EdgeKind>{EdgeKind::kReadWrite, EdgeKind::kWriteWrite}));
  EXPECT_EQ(CycleProblem(h, r.cycle), "");
  EXPECT_EQ(r.cyclic_transactions, 2u);
  EXPECT_TRUE(r.duplicate_writes.empty());
  // The description names the transactions, the edges and the record.
  const std::string text = DescribeProblems(r);
  EXPECT_NE(text.find("cycle of 2 transactions"), std::string::npos) << text;
  EXPECT_NE(text.find("-rw(1:7 r@1 w@2)-> T1"), std::string::npos) << text;
  EXPECT_NE(text.find("-ww(1:7 w@2 w@3)-> T2"), std::string::npos) << text;
}

TEST(DtxHistoryCheck, WriteSkewIsACycleOfTwoAntiDependencies) {
  const std::vector<HistoryTx> h = {
      {1, {R(1, 1, 1), R(1, 2, 1), W(1, 1, 2)}},
      {2, {R(1, 1, 1), R(1, 2, 1), W(1, 2, 2)}},
  };
  const HistoryReport r = CheckHistory(h);
  EXPECT_FALSE(r.ok);
  ASSERT_EQ(r.cycle.size(), 2u) << DescribeProblems(r);
  EXPECT_EQ(CycleKinds(r), std::set<EdgeKind>{EdgeKind::kReadWrite});
  EXPECT_EQ(CycleProblem(h, r.cycle), "");
}

TEST(DtxHistoryCheck, FracturedReadOfAWriterThatDependsOnTheReaderIsACycle) {
  // T1 writes x and y; T2 sees T1's x but the y from before T1.
  const std::vector<HistoryTx> fractured = {
      {1, {R(1, 1, 1), W(1, 1, 2), R(1, 2, 1), W(1, 2, 2)}},
      {2, {R(1, 1, 2), R(1, 2, 1)}},
  };
  HistoryReport r = CheckHistory(fractured);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(CycleKinds(r), (std::set<EdgeKind>{EdgeKind::kWriteRead, EdgeKind::kReadWrite})) << DescribeProblems(r);
  EXPECT_EQ(CycleProblem(fractured, r.cycle), "");
  // Each reads what the other wrote.
  const std::vector<HistoryTx> circular = {
      {1, {W(1, 1, 2), R(1, 2, 2)}},
      {2, {W(1, 2, 2), R(1, 1, 2)}},
  };
  r = CheckHistory(circular);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(CycleKinds(r), std::set<EdgeKind>{EdgeKind::kWriteRead}) << DescribeProblems(r);
  EXPECT_EQ(CycleProblem(circular, r.cycle), "");
}

TEST(DtxHistoryCheck, ACycleOfThreeAmongBystandersIsFound) {
  // A serial history over three records, with bystanders.
  const std::vector<HistoryTx> h = {
      {10, {R(1, 9, 1)}},
      {1, {R(2, 3, 1), W(1, 1, 2)}},
      {2, {R(1, 1, 2), W(1, 2, 2)}},
      {11, {R(1, 1, 2), R(1, 2, 1)}},
      {3, {R(1, 2, 2)}},
      {4, {R(2, 3, 1), W(2, 3, 2)}},
      {5, {W(2, 3, 3)}},
      {6, {R(2, 3, 3), R(1, 2, 2)}},
  };
  HistoryReport r = CheckHistory(h);
  EXPECT_TRUE(r.ok) << DescribeProblems(r);
  // T1 reads T4's version of (2, 3) and T4 reads T2's version of (1, 2):
  // T1 -wr-> T2 -wr-> T4 -wr-> T1.
  std::vector<HistoryTx> cyclic = h;
  cyclic[1].accesses[0] = R(2, 3, 2);
  cyclic[5].accesses.push_back(R(1, 2, 2));
  r = CheckHistory(cyclic);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(CycleIds(r), (std::set<uint64_t>{1, 2, 4})) << DescribeProblems(r);
  EXPECT_EQ(CycleProblem(cyclic, r.cycle), "");
}

TEST(DtxHistoryCheck, TheReportedCycleIsAShortOne) {
  // T1 -ww-> T2 -ww-> ... -ww-> T5 -wr-> T1 on x and y, and inside that
  // component a write skew between T3 and T4: the report shows the latter.
  const std::vector<HistoryTx> h = {
      {1, {W(1, 1, 1), R(1, 2, 1)}},
      {2, {W(1, 1, 2)}},
      {3, {W(1, 1, 3), R(2, 1, 1), R(2, 2, 1), W(2, 1, 2)}},
      {4, {W(1, 1, 4), R(2, 1, 1), R(2, 2, 1), W(2, 2, 2)}},
      {5, {W(1, 1, 5), W(1, 2, 1)}},
  };
  const HistoryReport r = CheckHistory(h);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.cyclic_transactions, 5u);
  EXPECT_EQ(r.cycle.size(), 2u) << DescribeCycle(r.cycle);
  EXPECT_EQ(CycleIds(r), (std::set<uint64_t>{3, 4}));
  EXPECT_EQ(CycleProblem(h, r.cycle), "");
}

TEST(DtxHistoryCheck, DuplicateWritesAreReportedWithTheirTransactions) {
  const std::vector<HistoryTx> h = {
      {5, {R(1, 1, 1), W(1, 1, 2)}},
      {9, {W(1, 1, 2)}},
      {3, {W(1, 1, 2), W(2, 8, 4)}},
      {7, {W(2, 8, 4), W(2, 8, 4)}},  // a transaction that logged its write twice is one writer
      {8, {W(2, 9, 4), W(2, 9, 4)}},
  };
  const HistoryReport r = CheckHistory(h);
  EXPECT_FALSE(r.ok);
  ASSERT_EQ(r.duplicate_writes.size(), 2u);
  EXPECT_EQ(r.duplicate_writes[0].table, 1u);
  EXPECT_EQ(r.duplicate_writes[0].key, 1u);
  EXPECT_EQ(r.duplicate_writes[0].version, 2u);
  EXPECT_EQ(r.duplicate_writes[0].tx_ids, (std::vector<uint64_t>{3, 5, 9}));
  EXPECT_EQ(r.duplicate_writes[1].key, 8u);
  EXPECT_EQ(r.duplicate_writes[1].tx_ids, (std::vector<uint64_t>{3, 7}));
  const std::string text = DescribeProblems(r);
  EXPECT_NE(text.find("2 duplicate writes (lost updates): 1:1@2 by T3,T5,T9, 2:8@4 by T3,T7"), std::string::npos)
      << text;
}

TEST(DtxHistoryCheck, DuplicateTransactionIdsAreReported) {
  // Two lines of id 4 writing the same version are one repeated id, not a
  // lost update.
  const std::vector<HistoryTx> h = {{4, {R(1, 1, 1), W(1, 1, 2)}}, {4, {R(1, 2, 1), W(1, 1, 2)}}, {2, {}},
                                    {4, {}}, {2, {}}, {3, {}}};
  const HistoryReport r = CheckHistory(h);
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(r.duplicate_writes.empty());
  EXPECT_EQ(r.duplicate_tx_ids, (std::vector<uint64_t>{2, 4}));
  EXPECT_NE(DescribeProblems(r).find("2 transaction ids on more than one line: 2 4"), std::string::npos)
      << DescribeProblems(r);
}

TEST(DtxHistoryCheck, UnloggedVersionsAreWrittenByNobodyButKeepTheirPlace) {
  // x's versions: 1 loaded, 2 by T1, 4 by a roll-back nobody logged, 5 by
  // T3, 7 by a roll-back after the last logged write.
  const std::vector<HistoryTx> h = {
      {1, {R(1, 1, 1), W(1, 1, 2)}},
      {2, {R(1, 1, 4)}},
      {3, {R(1, 1, 4), W(1, 1, 5)}},
      {4, {R(1, 1, 7)}},
      {5, {R(1, 1, 7), R(1, 2, 3)}},  // (1, 2) is never written: its reads are not past a logged write
  };
  HistoryReport r = CheckHistory(h);
  EXPECT_TRUE(r.ok) << DescribeProblems(r);
  EXPECT_EQ(r.unlogged_reads, 6u);
  EXPECT_EQ(r.reads_past_last_write, 2u);
  // T2 read a version installed after T1's: it must follow T1, so T1
  // reading what T2 wrote closes a cycle although nobody logged version 4.
  std::vector<HistoryTx> cyclic = h;
  cyclic[0].accesses.push_back(R(2, 1, 2));
  cyclic[1].accesses.push_back(W(2, 1, 2));
  r = CheckHistory(cyclic);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(CycleIds(r), (std::set<uint64_t>{1, 2})) << DescribeProblems(r);
  EXPECT_EQ(CycleProblem(cyclic, r.cycle), "");
  EXPECT_NE(DescribeCycle(r.cycle).find("wr(1:1 w@2 r@4)"), std::string::npos) << DescribeCycle(r.cycle);
}

TEST(DtxHistoryCheck, InsertsAndDeletesAreWritesLikeAnyOther) {
  HistoryAccess insert = W(3, 1, 2), remove = W(3, 1, 3);
  insert.inserted = true;
  remove.deleted = true;
  const std::vector<HistoryTx> h = {{1, {insert}}, {2, {R(3, 1, 2), remove}}, {3, {R(3, 1, 3)}}};
  EXPECT_TRUE(CheckHistory(h).ok);
  std::vector<HistoryTx> bad = h;
  bad[0].accesses.push_back(R(3, 1, 3));  // T1 saw the delete that followed its own insert
  const HistoryReport r = CheckHistory(bad);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(CycleProblem(bad, r.cycle), "");
}

TEST(DtxHistoryCheck, ATransactionThatReadsTwoVersionsOfARecordIsCaught) {
  // A non-repeatable read inside one transaction: T1 saw x before and after T2.
  const std::vector<HistoryTx> h = {{1, {R(1, 1, 1), R(1, 1, 2)}}, {2, {R(1, 1, 1), W(1, 1, 2)}}};
  const HistoryReport r = CheckHistory(h);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(CycleProblem(h, r.cycle), "");
}

// ---------------------------------------------------------------------------
// Generated histories

// Runs `count` transactions one after another on `records` records (in two
// tables): each reads and writes a few records at their current versions,
// now and then a roll-back moves a record's version without a log line.
// The transactions come back shuffled, each with its accesses shuffled, and
// with unrelated unique ids, so the checker cannot lean on the order.
std::vector<HistoryTx> SerialHistory(size_t count, uint64_t records, uint64_t seed) {
  std::mt19937_64 random(seed);
  std::vector<uint64_t> version(records, 1);
  std::vector<HistoryTx> h;
  std::set<uint64_t> ids;
  auto table_of = [](uint64_t r) { return static_cast<uint16_t>(r % 2 + 1); };
  auto key_of = [](uint64_t r) { return r * 1000003; };
  for (size_t t = 0; t < count; ++t) {
    HistoryTx tx;
    do {
      tx.id = random() >> (random() % 40);
    } while (!ids.insert(tx.id).second);
    const int n = 1 + static_cast<int>(random() % 6);
    std::set<uint64_t> touched;
    for (int i = 0; i < n; ++i) {
      const uint64_t r = random() % records;
      if (!touched.insert(r).second) continue;
      const uint16_t table = table_of(r);
      const uint64_t key = key_of(r);
      switch (random() % 4) {
        case 0:
        case 1:  // read
          tx.accesses.push_back(R(table, key, version[r]));
          break;
        case 2: {  // read-modify-write, sometimes a delete or an insert
          tx.accesses.push_back(R(table, key, version[r]));
          HistoryAccess w = W(table, key, ++version[r]);
          w.deleted = random() % 8 == 0;
          w.inserted = !w.deleted && random() % 8 == 0;
          tx.accesses.push_back(w);
          break;
        }
        default:  // blind write
          tx.accesses.push_back(W(table, key, version[r] += 1 + random() % 3));
      }
    }
    std::shuffle(tx.accesses.begin(), tx.accesses.end(), random);
    h.push_back(std::move(tx));
    if (random() % 20 == 0) version[random() % records] += 2;  // an unlogged roll-back
  }
  std::shuffle(h.begin(), h.end(), random);
  return h;
}

TEST(DtxHistoryGenerated, ARandomSerialHistoryPasses) {
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    const std::vector<HistoryTx> h = SerialHistory(10000, 50, seed);
    const HistoryReport r = CheckHistory(h);
    EXPECT_TRUE(r.ok) << "seed " << seed << ": " << DescribeProblems(r);
    EXPECT_EQ(r.transactions, 10000u);
    EXPECT_EQ(r.records, 50u);
    EXPECT_GT(r.edges, 10000u);
  }
}

TEST(DtxHistoryGenerated, OneOlderReadVersionMakesItFail) {
  std::vector<HistoryTx> h = SerialHistory(10000, 50, 11);
  ASSERT_TRUE(CheckHistory(h).ok);
  // Find T reading y@v that W wrote, where W also overwrote x at u (a
  // read-modify-write) and T reads x too. Changing T's read of x to u gives
  // T -rw-> W (W wrote the version after u) against W -wr-> T: a cycle that
  // every reported cycle must go through, since all else is serial.
  std::map<std::tuple<uint16_t, uint64_t, uint64_t>, size_t> writer;  // (table, key, version) -> index in h
  for (size_t i = 0; i < h.size(); ++i) {
    for (const HistoryAccess& a : h[i].accesses) {
      if (a.write) writer[{a.table, a.key, a.version}] = i;
    }
  }
  size_t t_index = h.size(), w_index = 0, x_access = 0;
  uint64_t u = 0;
  for (size_t t = 0; t < h.size() && t_index == h.size(); ++t) {
    for (const HistoryAccess& y : h[t].accesses) {
      if (y.write) continue;
      auto wit = writer.find({y.table, y.key, y.version});
      if (wit == writer.end() || wit->second == t) continue;
      const HistoryTx& w = h[wit->second];
      for (const HistoryAccess& wx : w.accesses) {
        // W's read-modify-write of another record x: it read u, wrote u + 1.
        if (!wx.write || (wx.table == y.table && wx.key == y.key) || !Has(w, wx.table, wx.key, wx.version - 1, false)) {
          continue;
        }
        for (size_t k = 0; k < h[t].accesses.size(); ++k) {
          const HistoryAccess& x = h[t].accesses[k];
          if (!x.write && x.table == wx.table && x.key == wx.key && x.version > wx.version - 1) {
            t_index = t;
            w_index = wit->second;
            x_access = k;
            u = wx.version - 1;
          }
        }
      }
      if (t_index != h.size()) break;
    }
  }
  ASSERT_NE(t_index, h.size()) << "the generated history has no candidate";
  h[t_index].accesses[x_access].version = u;
  const HistoryReport r = CheckHistory(h);
  EXPECT_FALSE(r.ok);
  ASSERT_FALSE(r.cycle.empty());
  EXPECT_EQ(CycleProblem(h, r.cycle), "");
  const std::set<uint64_t> ids = CycleIds(r);
  EXPECT_EQ(ids.count(h[t_index].id), 1u) << DescribeCycle(r.cycle);
  EXPECT_EQ(ids.count(h[w_index].id), 1u) << DescribeCycle(r.cycle);
  EXPECT_TRUE(r.duplicate_writes.empty());
}

// Random histories that are mostly not serializable: few records, versions
// drawn at random (each written version by one transaction, some versions
// never written), compared with the brute-force checker.
TEST(DtxHistoryGenerated, AgreesWithBruteForceOnRandomHistories) {
  std::mt19937_64 random(3);
  int cyclic = 0, acyclic = 0;
  for (int round = 0; round < 3000; ++round) {
    const size_t n = 2 + random() % 6;
    const uint64_t records = 1 + random() % 3, versions = 2 + random() % 6;
    std::vector<HistoryTx> h(n);
    std::set<std::pair<uint64_t, uint64_t>> written;
    for (size_t i = 0; i < n; ++i) {
      h[i].id = 100 + i * 7;
      const int accesses = 1 + static_cast<int>(random() % 4);
      for (int k = 0; k < accesses; ++k) {
        const uint64_t r = random() % records, v = random() % versions;
        if (random() % 2 == 0 && written.insert({r, v}).second) {
          h[i].accesses.push_back(W(1, r, v));
        } else {
          h[i].accesses.push_back(R(1, r, v));
        }
      }
    }
    const HistoryReport report = CheckHistory(h);
    const bool expected = BruteForceCycle(h);
    ASSERT_EQ(!report.cycle.empty(), expected) << "round " << round << ": " << DescribeProblems(report);
    ASSERT_EQ(report.ok, !expected);
    if (expected) {
      ASSERT_EQ(CycleProblem(h, report.cycle), "") << "round " << round;
      ++cyclic;
    } else {
      ++acyclic;
    }
  }
  // Both outcomes were exercised.
  EXPECT_GT(cyclic, 300);
  EXPECT_GT(acyclic, 300);
}

TEST(DtxHistoryGenerated, AChainOfAMillionTransactionsNeedsNoRecursion) {
  // T1..Tn each overwrite x in turn (a ww chain n long); T1 also read y@1,
  // which Tn wrote: one cycle through all n transactions.
  constexpr size_t n = 1'000'000;
  std::vector<HistoryTx> h(n);
  for (size_t i = 0; i < n; ++i) {
    h[i].id = i + 1;
    h[i].accesses.push_back(W(1, 1, i + 1));
  }
  HistoryReport r = CheckHistory(h);
  EXPECT_TRUE(r.ok);
  h[0].accesses.push_back(R(1, 2, 1));
  h[n - 1].accesses.push_back(W(1, 2, 1));
  r = CheckHistory(h);
  EXPECT_FALSE(r.ok);
  ASSERT_EQ(r.cycle.size(), n);
  EXPECT_EQ(r.cyclic_transactions, n);
  EXPECT_EQ(r.cycle.back().kind, EdgeKind::kWriteRead);
}

}  // namespace
}  // namespace smart::dtx
