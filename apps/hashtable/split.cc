// SMART-HT growth (extendible hashing).
//
// A subtable whose candidate buckets are full is split under the shard's
// resize lock (a bit in the directory header): freeze every slot of the old
// subtable by CAS (writers then fail their CAS and back off; readers still
// read frozen slots), write the new subtable with the slots whose next
// directory bit is 1, rewrite the old one with the rest (new bucket headers,
// new empty-slot depth, new parity bit), and only then publish the new
// subtable in the directory. A client with a stale directory notices it from
// a bucket header that no longer accepts its key; a writer that read a slot
// before the split fails its CAS afterwards because the split changed every
// slot word (empty depth or parity).
#include <algorithm>

#include "table_internal.h"

namespace smart::hashtable {

Status Ops::split(int si, const Shard& sh, const KeyHash& h, uint64_t subtable, bool* busy) {
  *busy = false;
  if (tc_.split_busy) {
    *busy = true;
    return Status::OK();
  }
  if (tc_.split_buffer == nullptr) {
    tc_.split_buffer = static_cast<char*>(in_.alloc_cache(2 * kSplitWindowGroups * kGroupSize + 16 * 8));
    if (tc_.split_buffer == nullptr) return Status::OutOfMemory("hash table: the initiator cache is exhausted");
  }
  tc_.split_busy = true;
  Status s = split_locked(si, sh, h, subtable, busy);
  tc_.split_busy = false;
  return s;
}

Status Ops::split_locked(int si, const Shard& sh, const KeyHash& h, uint64_t subtable, bool* busy) {
  uint64_t* word = reinterpret_cast<uint64_t*>(tc_.split_buffer + 2 * kSplitWindowGroups * kGroupSize);
  const GlobalAddress header_addr = sh.directory;
  // Take the resize lock.
  Status s = in_.read(word, header_addr, 8, Option::kSync);
  if (!s.ok()) return s;
  const uint64_t unlocked = word[0];
  if (unlocked & kDirectoryLockBit) {
    *busy = true;
    return Status::OK();
  }
  s = in_.compare_and_swap(word, header_addr, unlocked, unlocked | kDirectoryLockBit, Option::kSync);
  if (!s.ok()) return s;
  if (word[0] != unlocked) {
    *busy = true;
    return Status::OK();
  }
  uint64_t depth_word = unlocked;
  Status result = split_under_lock(si, sh, h, subtable, &depth_word);
  // Unlock, with the depth after a possible doubling.
  word[0] = depth_word;
  s = in_.write(word, header_addr, 8, Option::kSync);
  if (!s.ok()) return s;
  return result;
}

Status Ops::split_under_lock(int si, const Shard& sh, const KeyHash& h, uint64_t subtable,
                             uint64_t* depth_word) {
  Status s = refresh_directory(si, sh);
  if (!s.ok()) return s;
  DirectoryCache& dc = tc_.dirs[si];
  if (static_cast<uint64_t>(dc.global_depth) != *depth_word) {
    return Status::Internal("hash table: the directory depth changed under the resize lock");
  }
  const uint64_t entry = dc.entries[h.dir_bits() & DepthMask(dc.global_depth)];
  if (DirEntryOffset(entry) != subtable) return Status::OK();  // already split by someone else
  const int depth = DirEntryDepth(entry);
  if (depth >= kMaxGlobalDepth) {
    return Status::OutOfMemory("hash table: a subtable of memory node " + std::to_string(sh.node) +
                               " is full at the largest directory depth (" + std::to_string(kMaxGlobalDepth) +
                               "); build the table with a larger expected key count");
  }
  const uint64_t suffix = h.dir_bits() & DepthMask(depth);
  uint64_t* word = reinterpret_cast<uint64_t*>(tc_.split_buffer + 2 * kSplitWindowGroups * kGroupSize);
  if (depth == dc.global_depth) {
    // Double the directory: copy the entries to the upper half, then
    // raise the depth (still locked).
    const size_t half = dc.entries.size();
    std::vector<uint64_t> doubled(dc.entries);
    doubled.insert(doubled.end(), dc.entries.begin(), dc.entries.end());
    s = write_entries(sh, doubled, half, half);
    if (!s.ok()) return s;
    dc.entries.swap(doubled);
    ++dc.global_depth;
    *depth_word = static_cast<uint64_t>(dc.global_depth);
    word[0] = *depth_word | kDirectoryLockBit;
    s = in_.write(word, sh.directory, 8, Option::kSync);
    if (!s.ok()) return s;
  }
  const Geometry geometry{depth, sh.groups};
  GlobalAddress fresh;
  s = in_.alloc_memory(sh.node, geometry.subtable_bytes(), &fresh);
  if (!s.ok()) return s;
  const uint64_t new_suffix = suffix | (uint64_t{1} << depth);
  const int new_depth = depth + 1;
  const size_t words_per_group = kGroupSize / 8;
  std::vector<uint64_t> image(sh.groups * words_per_group);
  char* window = tc_.split_buffer;
  char* other = tc_.split_buffer + kSplitWindowGroups * kGroupSize;
  // 1. Freeze the old subtable window by window and write the new one.
  for (uint64_t g0 = 0; g0 < sh.groups; g0 += kSplitWindowGroups) {
    const uint64_t groups = std::min<uint64_t>(kSplitWindowGroups, sh.groups - g0);
    const uint64_t bytes = groups * kGroupSize;
    s = in_.read(window, GlobalAddress(sh.node, subtable + g0 * kGroupSize), bytes, Option::kSync);
    if (!s.ok()) return s;
    auto* w = reinterpret_cast<uint64_t*>(window);
    s = freeze(sh, subtable + g0 * kGroupSize, w, groups);
    if (!s.ok()) return s;
    memcpy(&image[g0 * words_per_group], w, bytes);
    auto* n = reinterpret_cast<uint64_t*>(other);
    for (uint64_t b = 0; b < groups * kBucketsPerGroup; ++b) {
      n[b * 8] = EncodeBucketHeader(new_depth, new_suffix);
      for (int j = 0; j < kSlotsPerBucket; ++j) {
        const uint64_t slot = SlotUnfrozen(w[b * 8 + 1 + j]);
        const bool moves = !SlotEmpty(slot) && ((SlotDirBits(slot) >> depth) & 1);
        n[b * 8 + 1 + j] = moves ? SlotWithParity(slot, new_depth) : EmptySlot(new_depth);
      }
    }
    s = in_.write(other, fresh + g0 * kGroupSize, bytes, Option::kSync);
    if (!s.ok()) return s;
  }
  // 2. Rewrite the old subtable: new headers, moved slots emptied, kept
  // slots unfrozen with the new parity. Clients still directed here by
  // the directory find their moved keys rejected and wait for step 3.
  for (uint64_t g0 = 0; g0 < sh.groups; g0 += kSplitWindowGroups) {
    const uint64_t groups = std::min<uint64_t>(kSplitWindowGroups, sh.groups - g0);
    auto* w = reinterpret_cast<uint64_t*>(window);
    const uint64_t* old = &image[g0 * words_per_group];
    for (uint64_t b = 0; b < groups * kBucketsPerGroup; ++b) {
      w[b * 8] = EncodeBucketHeader(new_depth, suffix);
      for (int j = 0; j < kSlotsPerBucket; ++j) {
        const uint64_t slot = SlotUnfrozen(old[b * 8 + 1 + j]);
        const bool keeps = !SlotEmpty(slot) && !((SlotDirBits(slot) >> depth) & 1);
        w[b * 8 + 1 + j] = keeps ? SlotWithParity(slot, new_depth) : EmptySlot(new_depth);
      }
    }
    s = in_.write(window, GlobalAddress(sh.node, subtable + g0 * kGroupSize), groups * kGroupSize, Option::kSync);
    if (!s.ok()) return s;
  }
  // 3. Publish: every entry of the old subtable gets the new depth, half
  // of them the new subtable.
  for (size_t i = 0; i < dc.entries.size(); ++i) {
    if ((i & DepthMask(depth)) != suffix) continue;
    dc.entries[i] = ((i >> depth) & 1) ? EncodeDirEntry(fresh.offset, new_depth) : EncodeDirEntry(subtable, new_depth);
  }
  s = write_entries(sh, dc.entries, 0, dc.entries.size());
  if (!s.ok()) return s;
  ++tc_.stats.splits;
  return Status::OK();
}

Status Ops::write_entries(const Shard& sh, const std::vector<uint64_t>& entries, size_t from, size_t count) {
  // Through the split window buffers (2 windows = 24 KiB = 3072 entries).
  const size_t per_write = 2 * kSplitWindowGroups * kGroupSize / 8;
  for (size_t i = from; i < from + count; i += per_write) {
    const size_t n = std::min(per_write, from + count - i);
    memcpy(tc_.split_buffer, &entries[i], 8 * n);
    Status s = in_.write(tc_.split_buffer, sh.directory + (kDirectoryEntriesOffset + 8 * i), 8 * n, Option::kSync);
    if (!s.ok()) return s;
  }
  return Status::OK();
}

Status Ops::freeze(const Shard& sh, uint64_t offset, uint64_t* w, uint64_t groups) {
  uint64_t* results = reinterpret_cast<uint64_t*>(tc_.split_buffer + 2 * kSplitWindowGroups * kGroupSize);
  std::vector<int> pending;
  for (uint64_t b = 0; b < groups * kBucketsPerGroup; ++b) {
    for (int j = 0; j < kSlotsPerBucket; ++j) {
      const int index = static_cast<int>(b * 8 + 1 + j);
      if (!SlotFrozen(w[index])) pending.push_back(index);
    }
  }
  while (!pending.empty()) {
    std::vector<int> again;
    for (size_t i = 0; i < pending.size(); i += 16) {
      const size_t n = std::min<size_t>(16, pending.size() - i);
      for (size_t k = 0; k < n; ++k) {
        const int index = pending[i + k];
        Status s = in_.compare_and_swap(&results[k], GlobalAddress(sh.node, offset + 8 * static_cast<uint64_t>(index)),
                                        w[index], w[index] | kFrozenBit, k + 1 == n ? Option::kSync : Option::kNone);
        if (!s.ok()) return s;
      }
      for (size_t k = 0; k < n; ++k) {
        const int index = pending[i + k];
        if (results[k] == w[index]) {
          w[index] |= kFrozenBit;
        } else {
          w[index] = results[k];  // changed under us: freeze what is there now
          again.push_back(index);
        }
      }
    }
    pending.swap(again);
  }
  return Status::OK();
}

}  // namespace smart::hashtable
