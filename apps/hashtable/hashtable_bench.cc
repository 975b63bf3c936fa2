// hashtable_bench NR_THREAD NR_CORO: YCSB on SMART-HT, through the
// key-value bench (smart/bench/kv_bench.h: flags, configs, blades, load,
// run, result line and CSV, exit status). What is SMART-HT's: the size of an
// embedded memory blade, the block-size check, the table's options and the
// counters it reports.
#include <cinttypes>
#include <memory>
#include <string>

#include "hash_table.h"
#include "kv_adapter.h"
#include "layout.h"
#include "smart/bench/kv_bench.h"

namespace {

using namespace smart;
using hashtable::HashTable;

class TableRun : public KvBenchRun {
 public:
  TableRun(Initiator& initiator, int blades, const KvBenchSettings& s)
      : table_(initiator, s.smart, blades, Options(s)), store_(table_) {}

  KvStore& store() override { return store_; }
  std::string after_load() override {
    return std::to_string(table_.stats().loads_batched) + " settled in shared round trips";
  }
  void run_starts() override { before_ = table_.stats(); }
  std::string run_counters() const override {
    const hashtable::TableStats st = table_.stats();
    char text[512];
    snprintf(text, sizeof(text),
             "torn reads %" PRIu64 ", CAS failures %" PRIu64 " (writes superseded %" PRIu64 "), splits %" PRIu64
             ", speculative hits %" PRIu64 " misses %" PRIu64 " (%" PRIu64 " looked below their slot)"
             ", blocks retired %" PRIu64 " reused %" PRIu64,
             st.torn_reads - before_.torn_reads, st.cas_failures - before_.cas_failures,
             st.writes_superseded - before_.writes_superseded, st.splits - before_.splits,
             st.speculative_hits - before_.speculative_hits, st.speculative_misses - before_.speculative_misses,
             st.speculative_looks_below - before_.speculative_looks_below, st.blocks_retired - before_.blocks_retired,
             st.blocks_reused - before_.blocks_reused);
    return text;
  }

 private:
  static hashtable::TableOptions Options(const KvBenchSettings& s) {
    hashtable::TableOptions options;
    options.expected_keys = s.ycsb.max_key;
    options.speculative_lookup = s.smart.use_speculative_lookup;
    return options;
  }

  HashTable table_;
  hashtable::HashTableStore store_;
  hashtable::TableStats before_;
};

class TableBench : public KvBenchApp {
 public:
  std::string program() const override { return "hashtable_bench"; }
  std::string about() const override { return "YCSB on SMART-HT (a RACE-style hash table on disaggregated memory)"; }
  std::string noun() const override { return "the hash table"; }
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
  std::unique_ptr<KvBenchRun> open(Initiator& initiator, int blades, const KvBenchSettings& s) override {
    return std::make_unique<TableRun>(initiator, blades, s);
  }
};

}  // namespace

int main(int argc, char** argv) {
  TableBench app;
  return smart::RunKvBench(argc, argv, app);
}
