// SMART-HT growth (extendible hashing).
//
// A subtable whose candidate buckets are full is split under the shard's
// resize lock, a smart::RemoteLock in the directory header (owner and
// lease). The splitter records what it is doing in the header's split
// intent (old and new subtable, depth, suffix, phase) and then:
//   1. freezes every slot of the old subtable by CAS (writers then fail
//      their CAS and back off; readers still read frozen slots) and writes
//      the new subtable with the slots whose next directory bit is 1;
//   2. rewrites the old subtable with the rest (new bucket headers, new
//      empty-slot depth, new parity bit);
//   3. publishes the new subtable in the directory, and clears the intent.
// A client with a stale directory notices it from a bucket header that no
// longer accepts its key; a writer that read a slot before the split fails
// its CAS afterwards because the split changed every slot word (empty
// depth or parity).
//
// A dead splitter. Its lock is taken over once its lease expires, or as
// soon as the memory blade saw its session end (RemoteLock). Every new
// holder first finishes the split the intent describes, so no key is lost
// or duplicated: phase 1 is redone from the start (the old subtable is
// untouched but for frozen bits, and frozen slots keep their values); in
// phase 2 the new subtable is complete, so each bucket header is rewritten
// and each slot still frozen is moved by CAS (a slot that is no longer
// frozen was already rewritten and may hold a newer write); phase 3
// rewrites the directory entries. A splitter that was only paused finds its
// lock lost at its next renewal (before every write step) and stops.
#include <algorithm>
#include <set>

#include "smart/fault_injection.h"
#include "smart/logging.h"
#include "table_internal.h"

namespace smart::hashtable {

namespace {

constexpr size_t kLockScratchOffset = kResultsOffset + 16 * 8;  // 16 bytes
constexpr size_t kHeaderOffset = kLockScratchOffset + 16;       // a DirectoryHeader
constexpr size_t kBlocksOffset = kHeaderOffset + sizeof(DirectoryHeader);
constexpr size_t kBlocksBytes = 64 * 1024;  // blocks read by a deep split
constexpr size_t kSplitBufferSize = kBlocksOffset + kBlocksBytes;
constexpr int kCasBatch = 16;

}  // namespace

struct Ops::SplitPlan {
  uint64_t old_subtable = 0;
  uint64_t fresh = 0;
  int depth = 0;  // of the old subtable before the split
  uint64_t suffix = 0;
  int new_depth() const { return depth + 1; }
  uint64_t new_suffix() const { return suffix | (uint64_t{1} << depth); }
  // What an old slot (unfrozen) becomes in the new subtable, and in the
  // old one; `moves`: its key's directory bit `depth` is 1.
  uint64_t in_fresh(uint64_t slot, bool moves) const {
    return !SlotEmpty(slot) && moves ? SlotWithParity(slot, new_depth()) : EmptySlot(new_depth());
  }
  uint64_t in_old(uint64_t slot, bool moves) const {
    return !SlotEmpty(slot) && !moves ? SlotWithParity(slot, new_depth()) : EmptySlot(new_depth());
  }
};

Status Ops::split_buffer_ready() {
  if (tc_.split_buffer != nullptr) return Status::OK();
  tc_.split_buffer = static_cast<char*>(in_.alloc_cache(kSplitBufferSize));
  if (tc_.split_buffer == nullptr) return Status::OutOfMemory("hash table: the initiator cache is exhausted");
  return Status::OK();
}

RemoteLock& Ops::resize_lock(int si, const Shard& sh) {
  std::unique_ptr<RemoteLock>& lock = tc_.resize_locks[si];
  if (!lock) {
    auto* scratch = reinterpret_cast<uint64_t*>(tc_.split_buffer + kLockScratchOffset);
    lock = std::make_unique<RemoteLock>(in_, sh.directory + kResizeLockOffset, scratch, options_.lease);
  }
  return *lock;
}

namespace {

void LogTakeOver(const HashTable::Shard& sh, const LockAcquireInfo& info) {
  LogPrintf(LogLevel::kWarn, "hash table: took over the resize lock of memory node %d from %s (%s)", sh.node,
            DescribeLockWord(info.previous).c_str(), info.by_session ? "its session ended" : "its lease expired");
}

}  // namespace

Status Ops::with_resize_lock(int si, const Shard& sh, bool* busy, const std::function<Status(RemoteLock&)>& work) {
  *busy = false;
  if (tc_.split_busy) {
    *busy = true;
    return Status::OK();
  }
  Status s = split_buffer_ready();
  if (!s.ok()) return s;
  tc_.split_busy = true;
  RemoteLock& lock = resize_lock(si, sh);
  bool acquired = false;
  LockAcquireInfo info;
  s = lock.try_acquire(&acquired, &info);
  if (s.ok() && !acquired) *busy = true;
  if (s.ok() && acquired) {
    if (info.took_over) LogTakeOver(sh, info);
    FaultPoint("ht.split.locked");
    s = finish_abandoned_split(si, sh, lock);
    if (s.ok() && work) s = work(lock);
    // On an error the intent stays: the next holder finishes the split.
    const Status released = lock.release();
    if (s.ok()) s = released;
  }
  tc_.split_busy = false;
  if (s.code() == Status::Code::kLockLost) {
    // This client was slower than the lease (paused, descheduled) and
    // another took the split over: it stopped at its next step without
    // writing, and the new holder finishes the split. The operation that
    // wanted the split simply goes on.
    LogPrintf(LogLevel::kWarn, "hash table: the resize lock of memory node %d was taken over while this client held it; "
              "it abandoned its split to the new holder (%s)", sh.node, s.ToString().c_str());
    ++tc_.stats.splits_abandoned;
    *busy = true;
    return Status::OK();
  }
  return s;
}

Status Ops::split(int si, const Shard& sh, const KeyHash& h, uint64_t subtable, bool* busy) {
  return with_resize_lock(si, sh, busy, [&](RemoteLock& lock) { return split_under_lock(si, sh, h, subtable, lock); });
}

Status Ops::help_stalled_split(int si, const Shard& sh) {
  bool busy;
  return with_resize_lock(si, sh, &busy, nullptr);
}

Status Ops::finish_abandoned_split(int si, const Shard& sh, RemoteLock& lock) {
  auto* header_words = reinterpret_cast<uint64_t*>(tc_.split_buffer + kHeaderOffset);
  Status s = in_.read(header_words, sh.directory, sizeof(DirectoryHeader), Option::kSync);
  if (!s.ok()) return s;
  DirectoryHeader header;
  memcpy(&header, header_words, sizeof(header));
  const SplitIntent intent = DecodeSplitIntent(header.split_intent);
  if (intent.phase == 0) return Status::OK();
  SplitPlan plan;
  plan.old_subtable = header.split_old;
  plan.fresh = header.split_fresh;
  plan.depth = intent.depth;
  plan.suffix = intent.suffix;
  const uint64_t capacity = in_.remote_capacity(sh.node);
  const uint64_t bytes = Geometry{0, sh.groups}.subtable_bytes();
  if (intent.phase > 3 || plan.depth >= kMaxGlobalDepth || (plan.suffix >> plan.depth) != 0 ||
      plan.old_subtable == 0 || plan.fresh == 0 || plan.old_subtable + bytes > capacity ||
      plan.fresh + bytes > capacity || (plan.old_subtable & 0xff) != 0 || (plan.fresh & 0xff) != 0) {
    return Status::Internal("hash table: the split intent in the directory of memory node " + std::to_string(sh.node) +
                            " makes no sense (phase " + std::to_string(intent.phase) + ", depth " +
                            std::to_string(plan.depth) + ", old subtable " + std::to_string(plan.old_subtable) +
                            ", new " + std::to_string(plan.fresh) + "): the directory is corrupt");
  }
  LogPrintf(LogLevel::kWarn, "hash table: finishing a split on memory node %d that another client left in phase %d",
            sh.node, intent.phase);
  s = refresh_directory(si, sh);
  if (!s.ok()) return s;
  if (tc_.dirs[si].global_depth <= plan.depth) {
    return Status::Internal("hash table: the split intent on memory node " + std::to_string(sh.node) +
                            " is deeper than the directory: the directory is corrupt");
  }
  if (intent.phase == 1) {
    std::vector<uint64_t> image;
    std::vector<char> moves;
    s = split_copy(sh, lock, plan, &image, &moves);
    if (s.ok()) s = set_split_intent(sh, lock, plan, 2);
    if (s.ok()) s = split_rewrite(sh, lock, plan, image, moves);
  } else if (intent.phase == 2) {
    s = split_rewrite_in_place(sh, lock, plan);
  }
  if (s.ok()) s = set_split_intent(sh, lock, plan, 3);
  if (s.ok()) s = split_publish(si, sh, lock, plan);
  if (s.ok()) s = set_split_intent(sh, lock, plan, 0);
  if (s.ok()) ++tc_.stats.splits_recovered;
  return s;
}

Status Ops::split_under_lock(int si, const Shard& sh, const KeyHash& h, uint64_t subtable, RemoteLock& lock) {
  Status s = refresh_directory(si, sh);
  if (!s.ok()) return s;
  DirectoryCache& dc = tc_.dirs[si];
  const uint64_t entry = dc.entries[h.dir_bits() & DepthMask(dc.global_depth)];
  if (DirEntryOffset(entry) != subtable) return Status::OK();  // already split by someone else
  const int depth = DirEntryDepth(entry);
  const uint64_t subtable_bytes = Geometry{depth, sh.groups}.subtable_bytes();
  if (depth >= kMaxGlobalDepth) {
    return Status::OutOfMemory("hash table: a subtable of memory node " + std::to_string(sh.node) +
                               " is full at the largest directory depth (" + std::to_string(kMaxGlobalDepth) +
                               ", subtables of " + std::to_string(subtable_bytes >> 10) +
                               " KiB); build the table with a larger expected key count, so that its subtables are larger");
  }
  uint64_t* word = reinterpret_cast<uint64_t*>(tc_.split_buffer + kResultsOffset);
  if (depth == dc.global_depth) {
    // Double the directory (moving it first when its array is full): copy
    // the entries to the upper half, then raise the depth. A holder that
    // dies in between leaves an unused upper half. The work is on a copy:
    // another task of this thread may install its own refresh into `dc`
    // while this one waits for a completion.
    DirectoryCopy copy{dc.entries, dc.entries_at, dc.capacity_depth, dc.depth_word};
    if (dc.global_depth == dc.capacity_depth) {
      s = move_directory(sh, lock, &copy);
      if (!s.ok()) return s;
    }
    const size_t half = copy.entries.size();
    copy.entries.resize(2 * half);
    std::copy(copy.entries.begin(), copy.entries.begin() + static_cast<std::ptrdiff_t>(half),
              copy.entries.begin() + static_cast<std::ptrdiff_t>(half));
    s = write_entries(copy.at, lock, copy.entries, half, half);
    if (!s.ok()) return s;
    const int doubled_depth = DecodeDepthWord(copy.word).depth + 1;
    s = swap_depth_word(sh, lock, &copy, doubled_depth);
    if (!s.ok()) return s;
    dc.entries.swap(copy.entries);
    dc.global_depth = doubled_depth;
    dc.capacity_depth = copy.capacity_depth;
    dc.entries_at = copy.at;
    dc.depth_word = copy.word;
  }
  SplitPlan plan;
  plan.old_subtable = subtable;
  plan.depth = depth;
  plan.suffix = h.dir_bits() & DepthMask(depth);
  GlobalAddress fresh;
  s = in_.alloc_memory(sh.node, subtable_bytes, &fresh);
  if (!s.ok()) {
    std::set<uint64_t> subtables;
    for (uint64_t e : dc.entries) subtables.insert(DirEntryOffset(e));
    return Status::OutOfMemory("hash table: memory node " + std::to_string(sh.node) + " has no room for another subtable (" +
                               std::to_string(subtable_bytes >> 10) + " KiB) of the " + std::to_string(subtables.size()) +
                               " it holds, with " + std::to_string(in_.remote_capacity(sh.node) >> 20) +
                               " MiB in its pool: raise capacity in backend.json or add memory blades (" + s.ToString() + ")");
  }
  plan.fresh = fresh.offset;
  // The subtables first, then the phase that makes them meaningful.
  s = lock.renew();
  if (!s.ok()) return s;
  word[0] = plan.old_subtable;
  word[1] = plan.fresh;
  s = in_.write(word, sh.directory + offsetof(DirectoryHeader, split_old), 16, Option::kSync);
  if (!s.ok()) return s;
  s = set_split_intent(sh, lock, plan, 1);
  if (!s.ok()) return s;
  std::vector<uint64_t> image;
  std::vector<char> moves;
  s = split_copy(sh, lock, plan, &image, &moves);
  if (!s.ok()) return s;
  s = set_split_intent(sh, lock, plan, 2);
  if (!s.ok()) return s;
  s = split_rewrite(sh, lock, plan, image, moves);
  if (!s.ok()) return s;
  s = set_split_intent(sh, lock, plan, 3);
  if (!s.ok()) return s;
  s = split_publish(si, sh, lock, plan);
  if (!s.ok()) return s;
  s = set_split_intent(sh, lock, plan, 0);
  if (!s.ok()) return s;
  ++tc_.stats.splits;
  return Status::OK();
}

Status Ops::set_split_intent(const Shard& sh, RemoteLock& lock, const SplitPlan& plan, int phase) {
  Status s = lock.renew();
  if (!s.ok()) return s;
  uint64_t* word = reinterpret_cast<uint64_t*>(tc_.split_buffer + kResultsOffset);
  word[0] = phase == 0 ? 0 : EncodeSplitIntent(SplitIntent{phase, plan.depth, plan.suffix});
  return in_.write(word, sh.directory + kSplitIntentOffset, 8, Option::kSync);
}

Status Ops::moving_slots(const Shard& sh, const SplitPlan& plan, const uint64_t* w, size_t words, char* moves) {
  if (plan.depth < kSlotDirBits) {
    for (size_t i = 0; i < words; ++i) moves[i] = (SlotDirBits(SlotUnfrozen(w[i])) >> plan.depth) & 1;
    return Status::OK();
  }
  // Deeper than the slots' directory bits: hash the keys of the blocks.
  char* blocks = tc_.split_buffer + kBlocksOffset;
  std::vector<size_t> batch;
  size_t i = 0;
  while (i < words) {
    batch.clear();
    size_t used = 0;
    for (; i < words; ++i) {
      const uint64_t slot = SlotUnfrozen(w[i]);
      moves[i] = 0;
      if (i % 8 == 0 || SlotEmpty(slot)) continue;  // bucket header or empty
      if (SlotBlockLength(slot) == 0) {
        return Status::Internal("hash table: splitting a subtable of memory node " + std::to_string(sh.node) +
                                ": a slot names a block of no units: the table's remote memory is corrupt");
      }
      if (used + SlotBlockLength(slot) > kBlocksBytes) break;
      batch.push_back(i);
      used += SlotBlockLength(slot);
    }
    used = 0;
    for (size_t k = 0; k < batch.size(); ++k) {
      const uint64_t slot = SlotUnfrozen(w[batch[k]]);
      Status s = in_.read(blocks + used, GlobalAddress(sh.node, SlotBlockOffset(slot)), SlotBlockLength(slot),
                          k + 1 == batch.size() ? Option::kSync : Option::kNone);
      if (!s.ok()) return s;
      used += SlotBlockLength(slot);
    }
    used = 0;
    for (size_t index : batch) {
      const uint64_t slot = SlotUnfrozen(w[index]);
      const char* block = blocks + used;
      used += SlotBlockLength(slot);
      // A slot frozen by the split keeps its block from being reused, so
      // a block that fails its check here is corrupt, not torn.
      if (CheckBlock(block, SlotBlockLength(slot), SlotTag(slot)) != BlockCheck::kValid) {
        return Status::Internal("hash table: splitting a subtable of memory node " + std::to_string(sh.node) +
                                ": the block at offset " + std::to_string(SlotBlockOffset(slot)) +
                                " fails its checksum: the table's remote memory is corrupt");
      }
      moves[index] = (HashKey(BlockKey(block)).dir_bits() >> plan.depth) & 1;
    }
  }
  return Status::OK();
}

Status Ops::split_copy(const Shard& sh, RemoteLock& lock, const SplitPlan& plan, std::vector<uint64_t>* image,
                       std::vector<char>* moves) {
  const size_t words_per_group = kGroupSize / 8;
  image->assign(sh.groups * words_per_group, 0);
  moves->assign(sh.groups * words_per_group, 0);
  char* window = tc_.split_buffer;
  char* other = tc_.split_buffer + kWindowBytes;
  for (uint64_t g0 = 0; g0 < sh.groups; g0 += kSplitWindowGroups) {
    const uint64_t groups = std::min<uint64_t>(kSplitWindowGroups, sh.groups - g0);
    const uint64_t bytes = groups * kGroupSize;
    Status s = lock.renew();
    if (!s.ok()) return s;
    s = in_.read(window, GlobalAddress(sh.node, plan.old_subtable + g0 * kGroupSize), bytes, Option::kSync);
    if (!s.ok()) return s;
    auto* w = reinterpret_cast<uint64_t*>(window);
    s = freeze(sh, lock, plan.old_subtable + g0 * kGroupSize, w, groups);
    if (!s.ok()) return s;
    FaultPoint("ht.split.frozen");
    memcpy(&(*image)[g0 * words_per_group], w, bytes);
    char* m = &(*moves)[g0 * words_per_group];
    s = moving_slots(sh, plan, w, groups * words_per_group, m);
    if (!s.ok()) return s;
    auto* n = reinterpret_cast<uint64_t*>(other);
    for (uint64_t b = 0; b < groups * kBucketsPerGroup; ++b) {
      n[b * 8] = EncodeBucketHeader(plan.new_depth(), plan.new_suffix());
      for (int j = 0; j < kSlotsPerBucket; ++j) {
        const size_t i = b * 8 + 1 + j;
        n[i] = plan.in_fresh(SlotUnfrozen(w[i]), m[i]);
      }
    }
    // Renewed right before the write: a holder paused since the freeze
    // must not overwrite a new subtable that a new holder already filled.
    s = lock.renew();
    if (!s.ok()) return s;
    s = in_.write(other, GlobalAddress(sh.node, plan.fresh + g0 * kGroupSize), bytes, Option::kSync);
    if (!s.ok()) return s;
  }
  return Status::OK();
}

Status Ops::split_rewrite(const Shard& sh, RemoteLock& lock, const SplitPlan& plan, const std::vector<uint64_t>& image,
                          const std::vector<char>& moves) {
  // Clients still directed here by the directory find their moved keys
  // rejected by the new headers and wait for the publish.
  const size_t words_per_group = kGroupSize / 8;
  auto* w = reinterpret_cast<uint64_t*>(tc_.split_buffer);
  for (uint64_t g0 = 0; g0 < sh.groups; g0 += kSplitWindowGroups) {
    const uint64_t groups = std::min<uint64_t>(kSplitWindowGroups, sh.groups - g0);
    const uint64_t* old = &image[g0 * words_per_group];
    const char* m = &moves[g0 * words_per_group];
    for (uint64_t b = 0; b < groups * kBucketsPerGroup; ++b) {
      // The change count goes on (layout.h): readers compare it.
      w[b * 8] = EncodeBucketHeader(plan.new_depth(), plan.suffix) | (old[b * 8] & kHeaderCountMask);
      for (int j = 0; j < kSlotsPerBucket; ++j) {
        const size_t i = b * 8 + 1 + j;
        w[i] = plan.in_old(SlotUnfrozen(old[i]), m[i]);
      }
    }
    Status s = lock.renew();
    if (!s.ok()) return s;
    s = in_.write(w, GlobalAddress(sh.node, plan.old_subtable + g0 * kGroupSize), groups * kGroupSize, Option::kSync);
    if (!s.ok()) return s;
    FaultPoint("ht.split.rewriting");
  }
  return Status::OK();
}

Status Ops::split_rewrite_in_place(const Shard& sh, RemoteLock& lock, const SplitPlan& plan) {
  auto* w = reinterpret_cast<uint64_t*>(tc_.split_buffer);
  auto* results = reinterpret_cast<uint64_t*>(tc_.split_buffer + kResultsOffset);
  auto* headers = reinterpret_cast<uint64_t*>(tc_.split_buffer + kWindowBytes);
  const uint64_t header = EncodeBucketHeader(plan.new_depth(), plan.suffix);
  for (uint64_t g0 = 0; g0 < sh.groups; g0 += kSplitWindowGroups) {
    const uint64_t groups = std::min<uint64_t>(kSplitWindowGroups, sh.groups - g0);
    const uint64_t base = plan.old_subtable + g0 * kGroupSize;
    Status s = in_.read(w, GlobalAddress(sh.node, base), groups * kGroupSize, Option::kSync);
    if (!s.ok()) return s;
    // Headers first, so no slot is unfrozen under an old header.
    std::vector<uint64_t> stale_headers;
    for (uint64_t b = 0; b < groups * kBucketsPerGroup; ++b) {
      // A header already rewritten keeps its change count (layout.h).
      if (HeaderShape(w[b * 8]) != header) stale_headers.push_back(b);
    }
    for (size_t i = 0; i < stale_headers.size(); i += kCasBatch) {
      const size_t n = std::min<size_t>(kCasBatch, stale_headers.size() - i);
      s = lock.renew();
      if (!s.ok()) return s;
      for (size_t k = 0; k < n; ++k) {
        headers[k] = header | (w[stale_headers[i + k] * 8] & kHeaderCountMask);
        s = in_.write(&headers[k], GlobalAddress(sh.node, base + kBucketSize * stale_headers[i + k]), 8,
                      k + 1 == n ? Option::kSync : Option::kNone);
        if (!s.ok()) return s;
      }
    }
    std::vector<char> moves(groups * kGroupSize / 8);
    s = moving_slots(sh, plan, w, moves.size(), moves.data());
    if (!s.ok()) return s;
    std::vector<int> frozen;
    for (uint64_t b = 0; b < groups * kBucketsPerGroup; ++b) {
      for (int j = 0; j < kSlotsPerBucket; ++j) {
        const int index = static_cast<int>(b * 8 + 1 + j);
        if (SlotFrozen(w[index])) frozen.push_back(index);
      }
    }
    for (size_t i = 0; i < frozen.size(); i += kCasBatch) {
      const size_t n = std::min<size_t>(kCasBatch, frozen.size() - i);
      s = lock.renew();
      if (!s.ok()) return s;
      for (size_t k = 0; k < n; ++k) {
        const int index = frozen[i + k];
        // Nobody else changes a frozen slot; a CAS that fails found it
        // already moved, which is what this step wants.
        s = in_.compare_and_swap(&results[k], GlobalAddress(sh.node, base + 8 * static_cast<uint64_t>(index)), w[index],
                                 plan.in_old(SlotUnfrozen(w[index]), moves[index]),
                                 k + 1 == n ? Option::kSync : Option::kNone);
        if (!s.ok()) return s;
      }
    }
  }
  return Status::OK();
}

Status Ops::split_publish(int si, const Shard& sh, RemoteLock& lock, const SplitPlan& plan) {
  Status s = refresh_directory(si, sh);
  if (!s.ok()) return s;
  DirectoryCache& dc = tc_.dirs[si];
  // Every entry of the old subtable (one in 2^depth) gets the new depth,
  // half of them the new subtable; only those entries change, each by a CAS
  // from the value just read. Nobody else writes entries while this client
  // holds the lock, so a CAS that fails met a late write from a holder whose
  // lock was taken over: this client stops (kLockLost) and leaves the intent
  // for the next holder, who publishes from values it reads then.
  uint64_t* results = reinterpret_cast<uint64_t*>(tc_.split_buffer + kResultsOffset);
  uint64_t expected[kCasBatch];
  const size_t stride = size_t{1} << plan.depth;
  const GlobalAddress at = dc.entries_at;
  std::vector<size_t> changed;
  for (size_t i = plan.suffix; i < dc.entries.size(); i += stride) changed.push_back(i);
  for (size_t i = 0; i < changed.size(); i += kCasBatch) {
    const size_t n = std::min<size_t>(kCasBatch, changed.size() - i);
    s = lock.renew();
    if (!s.ok()) return s;
    for (size_t k = 0; k < n; ++k) {
      const size_t e = changed[i + k];
      const uint64_t desired = ((e >> plan.depth) & 1) ? EncodeDirEntry(plan.fresh, plan.new_depth())
                                                        : EncodeDirEntry(plan.old_subtable, plan.new_depth());
      expected[k] = dc.entries[e];
      dc.entries[e] = desired;
      s = in_.compare_and_swap(&results[k], at + 8 * e, expected[k], desired,
                               k + 1 == n ? Option::kSync : Option::kNone);
      if (!s.ok()) return s;
    }
    for (size_t k = 0; k < n; ++k) {
      if (results[k] != expected[k]) {
        return Status::LockLost("hash table: an entry of the directory of memory node " + std::to_string(sh.node) +
                                " changed under this splitter while it published a split");
      }
    }
    FaultPoint("ht.split.publishing");
  }
  return Status::OK();
}

Status Ops::freeze(const Shard& sh, RemoteLock& lock, uint64_t offset, uint64_t* w, uint64_t groups) {
  uint64_t* results = reinterpret_cast<uint64_t*>(tc_.split_buffer + kResultsOffset);
  std::vector<int> pending;
  for (uint64_t b = 0; b < groups * kBucketsPerGroup; ++b) {
    for (int j = 0; j < kSlotsPerBucket; ++j) {
      const int index = static_cast<int>(b * 8 + 1 + j);
      if (!SlotFrozen(w[index])) pending.push_back(index);
    }
  }
  while (!pending.empty()) {
    std::vector<int> again;
    for (size_t i = 0; i < pending.size(); i += kCasBatch) {
      const size_t n = std::min<size_t>(kCasBatch, pending.size() - i);
      // Fenced per batch: a holder that was taken over must not freeze
      // what a new holder already rewrote (nothing would unfreeze it).
      Status s = lock.renew();
      if (!s.ok()) return s;
      for (size_t k = 0; k < n; ++k) {
        const int index = pending[i + k];
        s = in_.compare_and_swap(&results[k], GlobalAddress(sh.node, offset + 8 * static_cast<uint64_t>(index)),
                                        w[index], w[index] | kFrozenBit, k + 1 == n ? Option::kSync : Option::kNone);
        if (!s.ok()) return s;
      }
      for (size_t k = 0; k < n; ++k) {
        const int index = pending[i + k];
        if (results[k] == w[index]) {
          w[index] |= kFrozenBit;
        } else {
          w[index] = results[k];  // changed under us: freeze what is there now
          if (!SlotFrozen(w[index])) again.push_back(index);
        }
      }
    }
    pending.swap(again);
  }
  return Status::OK();
}

}  // namespace smart::hashtable
