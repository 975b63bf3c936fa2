// btree_bench NR_THREAD NR_CORO: YCSB on SMART-BT (YCSB-E's scans
// included), through the key-value bench (smart/bench/kv_bench.h: flags,
// configs, blades, load, run, result line and CSV, exit status). What is
// SMART-BT's: the size of an embedded memory blade, the key-length check,
// the tree's techniques (HOCL, command combination, index cache), the round
// trips per operation it adds to the result line (name BPlusTree) and the
// counters it reports.
#include <memory>
#include <string>
#include <vector>

#include "btree.h"
#include "kv_adapter.h"
#include "page.h"
#include "smart/bench/kv_bench.h"

namespace {

using namespace smart;
using btree::BTree;
using btree::TreeStats;

// The counters the log shows after the run.
const std::vector<KvBenchCounterField<TreeStats>> kTreeCounters = {
    {"torn reads", &TreeStats::torn_reads},
    {"lock retries", &TreeStats::lock_retries},
    {"hand-overs", &TreeStats::handovers},
    {"leaf splits", &TreeStats::leaf_splits},
    {"index-cache hits", &TreeStats::cache_hits},
    {"index-cache invalidations", &TreeStats::cache_invalidations},
    {"speculative hits", &TreeStats::speculative_hits},
    {"speculative misses", &TreeStats::speculative_misses},
    {"moved right", &TreeStats::moved_right}};

class TreeRun : public KvBenchRunWithStats<TreeStats> {
 public:
  TreeRun(Initiator& initiator, int blades, const KvBenchSettings& s)
      : KvBenchRunWithStats(kTreeCounters), options_(Options(s)), tree_(initiator, s.smart, blades, options_),
        store_(tree_) {}

  KvStore& store() override { return store_; }
  std::string setup() const override {
    return std::string("HOCL ") + (options_.hocl ? "on" : "off") + ", command combination " +
           (options_.combine_commands ? "on" : "off") + ", index cache " + std::to_string(options_.index_cache_pages) +
           " pages";
  }
  std::string after_load() override {
    int height = 0;
    const Status s = tree_.height(&height);
    return "tree height " + std::to_string(s.ok() ? height : -1);
  }
  std::vector<KvBenchField> result_fields() const override {
    const btree::TreeStats st = tree_.stats();
    const uint64_t ops = st.operations - before().operations;
    const double round_trips =
        ops ? static_cast<double>(st.round_trips - before().round_trips) / static_cast<double>(ops) : 0;
    char value[32];
    snprintf(value, sizeof(value), "%.3f", round_trips);
    return {KvBenchField{"round trips per op", "round_trips_per_op", value}};
  }
 private:
  TreeStats stats() const override { return tree_.stats(); }
  static btree::TreeOptions Options(const KvBenchSettings& s) {
    btree::TreeOptions options;
    static_cast<StoreOptions&>(options) = s.store;
    options.hocl = s.hocl;
    options.combine_commands = s.combine_commands;
    options.index_cache_pages = s.index_cache_pages;
    return options;
  }

  btree::TreeOptions options_;
  BTree tree_;
  btree::BTreeStore store_;
};

class TreeBench : public KvBenchAppOf<TreeRun> {
 public:
  TreeBench()
      : KvBenchAppOf("btree_bench", "YCSB on SMART-BT (a Sherman-style B+tree on disaggregated memory)",
                     "the B+tree", /*scans=*/true) {}
  std::string refuses(const std::string&) const override { return ""; }
  void check(const KvBenchSettings& s) const override {
    if (s.ycsb.key_length > 20) {
      throw Error("key_length must be at most 20 for the B+tree (its keys are 64-bit numbers), got " +
                  std::to_string(s.ycsb.key_length));
    }
  }
  // Leaves at least about a third full, value blocks twice over (retired
  // ones wait out their grace period), and slack for lock tables and arenas
  // (pages are only backed when touched).
  uint64_t embedded_mib(const KvBenchSettings& s) const override {
    const uint64_t keys = s.ycsb.max_key;
    const uint64_t pages = keys / 15 + 1;
    uint64_t blocks = 0;
    if (static_cast<size_t>(s.ycsb.value_length) > btree::kInlineValueBytes) {
      blocks = 2 * keys * btree::BlockUnitsFor(static_cast<size_t>(s.ycsb.value_length)) * btree::kBlockUnit;
    }
    return (pages * btree::kPageSize + blocks) / (1 << 20) + 512;
  }
};

}  // namespace

int main(int argc, char** argv) { return smart::RunKvBench<TreeBench>(argc, argv); }
