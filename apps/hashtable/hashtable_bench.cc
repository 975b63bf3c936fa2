// hashtable_bench NR_THREAD NR_CORO: YCSB on SMART-HT, through the
// key-value bench (smart/bench/kv_bench.h: flags, configs, blades, load,
// run, result line and CSV, exit status). What is SMART-HT's: the size of an
// embedded memory blade, the block-size check, the table's options and the
// counters it reports.
#include <memory>
#include <string>
#include <vector>

#include "hash_table.h"
#include "kv_adapter.h"
#include "layout.h"
#include "smart/bench/kv_bench.h"

namespace {

using namespace smart;
using hashtable::TableStats;
using hashtable::HashTable;

// The counters the log shows after the run.
const std::vector<KvBenchCounterField<TableStats>> kTableCounters = {
    {"torn reads", &TableStats::torn_reads}, {"CAS failures", &TableStats::cas_failures},
    {"writes superseded", &TableStats::writes_superseded}, {"splits", &TableStats::splits},
    {"speculative hits", &TableStats::speculative_hits}, {"speculative misses", &TableStats::speculative_misses},
    {"speculative reads below their slot", &TableStats::speculative_looks_below},
    {"blocks retired", &TableStats::blocks_retired}, {"blocks reused", &TableStats::blocks_reused}};

class TableRun : public KvBenchRunWithStats<TableStats> {
 public:
  TableRun(Initiator& initiator, int blades, const KvBenchSettings& s)
      : KvBenchRunWithStats(kTableCounters), table_(initiator, s.smart, blades, Options(s)), store_(table_) {}

  KvStore& store() override { return store_; }
  std::string after_load() override {
    return std::to_string(table_.stats().loads_batched) + " settled in shared round trips";
  }
 private:
  TableStats stats() const override { return table_.stats(); }
  static hashtable::TableOptions Options(const KvBenchSettings& s) {
    hashtable::TableOptions options;
    static_cast<StoreOptions&>(options) = s.store;
    options.expected_keys = s.ycsb.max_key;
    return options;
  }

  HashTable table_;
  hashtable::HashTableStore store_;
};

class TableBench : public KvBenchAppOf<TableRun> {
 public:
  TableBench()
      : KvBenchAppOf("hashtable_bench", "YCSB on SMART-HT (a RACE-style hash table on disaggregated memory)",
                     "the hash table", /*scans=*/false) {}
  std::string refuses(const std::string& flag) const override {
    if (flag == "--index-cache-pages") return "the hash table has no index to cache (a B+tree flag)";
    return "the hash table takes no locks: its writes are one CAS on a slot (a B+tree flag)";
  }
  void check(const KvBenchSettings& s) const override {
    if (hashtable::BlockUnits(s.ycsb.key_length, s.ycsb.value_length) >
        static_cast<size_t>(hashtable::kMaxBlockUnits)) {
      throw Error("key_length + value_length must fit in a 4032-byte block");
    }
  }
  // Buckets, blocks with room to grow, and slack for retired blocks and
  // splits (pages are only backed when touched).
  uint64_t embedded_mib(const KvBenchSettings& s) const override {
    const hashtable::Geometry g = hashtable::GeometryFor(s.ycsb.max_key);
    const uint64_t buckets = (uint64_t{1} << g.depth) * g.subtable_bytes();
    const uint64_t blocks =
        s.ycsb.max_key * hashtable::BlockUnits(s.ycsb.key_length, s.ycsb.value_length) * hashtable::kBlockUnit;
    return (2 * buckets + 2 * blocks) / (1 << 20) + 1024;
  }
};

}  // namespace

int main(int argc, char** argv) { return smart::RunKvBench<TableBench>(argc, argv); }
