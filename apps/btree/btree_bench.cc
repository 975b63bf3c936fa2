// btree_bench NR_THREAD NR_CORO: YCSB on SMART-BT (YCSB-E's scans
// included), through the key-value bench (smart/bench/kv_bench.h: flags,
// configs, blades, load, run, result line and CSV, exit status). What is
// SMART-BT's: the size of an embedded memory blade, the key-length check,
// the tree's techniques (HOCL, command combination, index cache), the round
// trips per operation it adds to the result line (name BPlusTree) and the
// counters it reports.
#include <cinttypes>
#include <memory>
#include <string>

#include "btree.h"
#include "kv_adapter.h"
#include "page.h"
#include "smart/bench/kv_bench.h"

namespace {

using namespace smart;
using btree::BTree;

class TreeRun : public KvBenchRun {
 public:
  TreeRun(Initiator& initiator, int blades, const KvBenchSettings& s)
      : options_(Options(s)), tree_(initiator, s.smart, blades, options_), store_(tree_) {}

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
  void run_starts() override { before_ = tree_.stats(); }
  std::vector<KvBenchField> result_fields() const override {
    const btree::TreeStats st = tree_.stats();
    const uint64_t ops = st.operations - before_.operations;
    const double round_trips =
        ops ? static_cast<double>(st.round_trips - before_.round_trips) / static_cast<double>(ops) : 0;
    char value[32];
    snprintf(value, sizeof(value), "%.3f", round_trips);
    return {KvBenchField{"round trips per op", "round_trips_per_op", value}};
  }
  std::string run_counters() const override {
    const btree::TreeStats st = tree_.stats();
    char text[512];
    snprintf(text, sizeof(text),
             "torn reads %" PRIu64 ", lock retries %" PRIu64 ", hand-overs %" PRIu64 ", leaf splits %" PRIu64
             ", index-cache hits %" PRIu64 " invalidations %" PRIu64 ", speculative hits %" PRIu64
             " misses %" PRIu64 ", moved right %" PRIu64,
             st.torn_reads - before_.torn_reads, st.lock_retries - before_.lock_retries,
             st.handovers - before_.handovers, st.leaf_splits - before_.leaf_splits,
             st.cache_hits - before_.cache_hits, st.cache_invalidations - before_.cache_invalidations,
             st.speculative_hits - before_.speculative_hits, st.speculative_misses - before_.speculative_misses,
             st.moved_right - before_.moved_right);
    return text;
  }

 private:
  static btree::TreeOptions Options(const KvBenchSettings& s) {
    btree::TreeOptions options;
    options.speculative_lookup = s.smart.use_speculative_lookup;
    options.hocl = s.hocl;
    options.combine_commands = s.combine_commands;
    options.index_cache_pages = s.index_cache_pages;
    return options;
  }

  btree::TreeOptions options_;
  BTree tree_;
  btree::BTreeStore store_;
  btree::TreeStats before_;
};

class TreeBench : public KvBenchApp {
 public:
  std::string program() const override { return "btree_bench"; }
  std::string about() const override { return "YCSB on SMART-BT (a Sherman-style B+tree on disaggregated memory)"; }
  std::string noun() const override { return "the B+tree"; }
  bool scans() const override { return true; }
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
  std::unique_ptr<KvBenchRun> open(Initiator& initiator, int blades, const KvBenchSettings& s) override {
    return std::make_unique<TreeRun>(initiator, blades, s);
  }
};

}  // namespace

int main(int argc, char** argv) {
  TreeBench app;
  return smart::RunKvBench(argc, argv, app);
}
