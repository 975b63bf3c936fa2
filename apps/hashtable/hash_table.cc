// SMART-HT: the public façade. A call hashes the key, picks the shard and
// the calling thread's context, and hands the work to Ops, whose files are
// listed in table_internal.h (lookup, operations, split, directory, build).
//
// Round trips: search 2 (bucket pairs, then the matching blocks), 1 with a
// speculative hit; update 3 (2 with a speculative hit); insert 3. Each file
// opens with the part of the design it carries out.
#include "hash_table.h"

#include <set>

#include "table_internal.h"

namespace smart::hashtable {

const Status& NotFoundStatus() {
  static const Status s = Status::NotFound("key not found");
  return s;
}

Status TooManyAttempts() { return Status::Internal("hash table: an operation kept retrying (table busy or corrupt)"); }

Status Ops::alloc_task_buffers(TaskBuffers& tb, TaskBuffers** out) {
  char* area = static_cast<char*>(in_.alloc_cache(4 * kBucketPairSize + kBlockAreaSize + kMaxBlockBytes + 128));
  if (area == nullptr) return Status::OutOfMemory("hash table: the initiator cache is exhausted");
  tb.buckets = area;
  tb.blocks = area + 4 * kBucketPairSize;
  tb.new_block = tb.blocks + kBlockAreaSize;
  tb.words = reinterpret_cast<uint64_t*>(tb.new_block + kMaxBlockBytes);
  *out = &tb;
  return Status::OK();
}

HashTable::HashTable(Initiator& initiator, const SmartConfig& config, int shards, const TableOptions& options)
    : initiator_(initiator), config_(config), options_(options), contexts_([this] { return make_context(); }) {
  this_task::require_outside("hash table: opening the table");
  if (shards < 1 || shards > kMaxNodes) throw Error("hash table: shard count must be within 1..256");
  if (options_.speculative_cache_entries & (options_.speculative_cache_entries - 1)) {
    throw Error("hash table: speculative_cache_entries must be a power of two");
  }
  const uint64_t keys_per_shard = (options_.expected_keys + static_cast<uint64_t>(shards) - 1) / static_cast<uint64_t>(shards);
  for (int i = 0; i < shards; ++i) {
    auto shard = std::make_unique<Shard>();
    OpenShard(initiator_, static_cast<node_t>(i), keys_per_shard, options_, shard.get());
    shards_.push_back(std::move(shard));
  }
}

HashTable::~HashTable() = default;

HashTable::ThreadContext& HashTable::context() { return contexts_.get(); }

// Called on the thread that will use the context, on its first operation.
std::unique_ptr<HashTable::ThreadContext> HashTable::make_context() {
  auto tc = std::make_unique<ThreadContext>(config_, shards_.size());
  BlockPoolOptions pool;
  pool.unit = kBlockUnit;
  pool.max_units = kMaxBlockUnits;
  pool.arena_bytes = kArenaBytes;
  pool.grace_ns = options_.reclaim_grace_ns;
  pool.tag_bits = kTagBits;
  pool.wrap_guard_ns = options_.tag_wrap_guard_ns;
  // Half the guard: the other half covers a CAS posted just inside it and
  // carried out late (a verbs request retransmitted, clocks that differ in
  // rate between the client that read and the one that reuses).
  if (options_.tag_wrap_guard_ns != 0) {
    tc->fresh_cycles = static_cast<uint64_t>(static_cast<double>(options_.tag_wrap_guard_ns / 2) *
                                             CyclesPerNanosecond());
  }
  tc->clock = Cycles();
  tc->blocks = std::make_unique<BlockPool>(initiator_, pool);
  if (options_.speculative_lookup && options_.speculative_cache_entries > 0) {
    tc->cache.resize(options_.speculative_cache_entries);
    tc->cache_mask = options_.speculative_cache_entries - 1;
  }
  return tc;
}

Status HashTable::search(std::string_view key, std::string* value) {
  int si;
  const KeyHash h = HashKeyAndShard(key, shards(), &si);
  ThreadContext& tc = context();
  // The cache entry is a likely miss: start loading it now.
  if (!tc.cache.empty()) __builtin_prefetch(&tc.cache[h.primary & tc.cache_mask]);
  Ops ops(initiator_, options_, tc);
  return ops.search(si, *shards_[si], key, h, value);
}

Status HashTable::write(std::string_view key, std::string_view value, WriteKind kind) {
  int si;
  const KeyHash h = HashKeyAndShard(key, shards(), &si);
  ThreadContext& tc = context();
  if (!tc.cache.empty()) __builtin_prefetch(&tc.cache[h.primary & tc.cache_mask]);
  Ops ops(initiator_, options_, tc);
  return ops.write(si, *shards_[si], key, h, value, kind);
}

Status HashTable::insert(std::string_view key, std::string_view value) {
  return write(key, value, WriteKind::kUpsert);
}

Status HashTable::load(std::string_view key, std::string_view value) { return write(key, value, WriteKind::kLoad); }

Status HashTable::load_batch(const std::string_view* keys, const std::string_view* values, size_t count) {
  // Grouped by shard (stable: a key given twice keeps its order).
  struct Entry {
    int si;
    Ops::LoadItem item;
  };
  std::vector<Entry> entries(count);
  for (size_t i = 0; i < count; ++i) {
    entries[i].item.key = keys[i];
    entries[i].item.value = values[i];
    entries[i].item.h = HashKeyAndShard(keys[i], shards(), &entries[i].si);
  }
  if (shards() > 1) {
    std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.si < b.si; });
  }
  Ops ops(initiator_, options_, context());
  Ops::LoadItem items[kLoadBatchKeys];
  for (size_t i = 0; i < count;) {
    const int si = entries[i].si;
    int n = 0;
    for (; i < count && entries[i].si == si && n < kLoadBatchKeys; ++i) items[n++] = entries[i].item;
    Status s = ops.load_batch(si, *shards_[si], items, n);
    if (!s.ok()) return s;
  }
  return Status::OK();
}

Status HashTable::update(std::string_view key, std::string_view value) {
  return write(key, value, WriteKind::kUpdate);
}

Status HashTable::read_modify_write(std::string_view key, const std::function<void(std::string*)>& modify) {
  int si;
  const KeyHash h = HashKeyAndShard(key, shards(), &si);
  Ops ops(initiator_, options_, context());
  return ops.read_modify_write(si, *shards_[si], key, h, modify);
}

Status HashTable::remove(std::string_view key) {
  int si;
  const KeyHash h = HashKeyAndShard(key, shards(), &si);
  Ops ops(initiator_, options_, context());
  return ops.remove(si, *shards_[si], key, h);
}

Status HashTable::count_copies(std::string_view key, int* copies) {
  const int si = ShardOf(key, shards());
  Ops ops(initiator_, options_, context());
  FindResult r;
  View v;
  Status s = ops.inspect(si, *shards_[si], key, &r, &v);
  *copies = s.ok() ? r.copies : 0;
  return s;
}

Status HashTable::locate(std::string_view key, Location* location) {
  const int si = ShardOf(key, shards());
  const Shard& sh = *shards_[si];
  Ops ops(initiator_, options_, context());
  FindResult r;
  View v;
  Status s = ops.inspect(si, sh, key, &r, &v);
  if (!s.ok()) return s;
  if (r.copies == 0) return NotFoundStatus();
  location->slot = GlobalAddress(sh.node, r.first.slot_offset);
  location->slot_value = r.first.slot_value;
  location->block = GlobalAddress(sh.node, SlotBlockOffset(r.first.slot_value));
  location->block_length = SlotBlockLength(r.first.slot_value);
  return Status::OK();
}

Status HashTable::capacity(int shard, uint64_t* slots, int* global_depth) {
  if (shard < 0 || shard >= shards()) return Status::InvalidArgument("hash table: no such shard");
  const Shard& sh = *shards_[shard];
  ThreadContext& tc = context();
  Ops ops(initiator_, options_, tc);
  Status s = ops.refresh_directory(shard, sh);
  if (!s.ok()) return s;
  const DirectoryCache& dc = tc.dirs[shard];
  std::set<uint64_t> subtables;
  for (uint64_t e : dc.entries) subtables.insert(DirEntryOffset(e));
  *slots = subtables.size() * sh.groups * kSlotsPerGroup;
  *global_depth = dc.global_depth;
  return Status::OK();
}

TableStats HashTable::stats() const { return SumStoreStats(contexts_); }

}  // namespace smart::hashtable
