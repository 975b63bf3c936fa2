// SMART-HT directory: each thread keeps its own copy of every shard's
// directory, read on first use and re-read when a bucket header shows that
// a split moved a key's subtable (lookup.cc, handle_stale). Only the
// entries in use (2^global depth) are read, through a fixed buffer. Under
// the resize lock, a split writes entries (write_entries) and, when the
// global depth reaches the entry array's capacity, moves the entries to an
// array 2^kDirectoryGrowthBits times larger (move_directory).
#include "smart/fault_injection.h"
#include "smart/logging.h"
#include "table_internal.h"

namespace smart::hashtable {

namespace {
constexpr size_t kDirectoryReadBytes = 128 * 1024;
}

Status Ops::refresh_directory(int si, const Shard& sh) {
  DirectoryCache& dc = tc_.dirs[si];
  // Another task of this thread may be reading it right now. Its copy may
  // predate a change this task must see (a splitter's own doubling, a split
  // it waits for), so wait for it and read again.
  while (dc.refreshing) this_task::yield();
  if (tc_.dir_buffer == nullptr) {
    tc_.dir_buffer = static_cast<char*>(in_.alloc_cache(kDirectoryReadBytes));
    if (tc_.dir_buffer == nullptr) return Status::OutOfMemory("hash table: the initiator cache is exhausted");
  }
  dc.refreshing = true;
  // The buffer is the thread's: one refresh at a time among its tasks.
  while (tc_.dir_buffer_busy) this_task::yield();
  tc_.dir_buffer_busy = true;
  Status s = in_.read(tc_.dir_buffer, sh.directory, sizeof(DirectoryHeader), Option::kSync);
  DirectoryShape shape;
  uint64_t header_word = 0;
  if (s.ok()) {
    DirectoryHeader header;
    memcpy(&header, tc_.dir_buffer, sizeof(header));
    header_word = header.depth_word;
    shape = DecodeDepthWord(header.depth_word);
    if (header.magic != kDirectoryMagic || !DepthWordValid(shape, in_.remote_capacity(sh.node))) {
      s = Status::Internal("hash table: the directory on memory node " + std::to_string(sh.node) +
                           " is corrupt (header word " + std::to_string(header.depth_word) + ")");
    }
  }
  FaultPoint("ht.directory.read");
  const int depth = shape.depth;
  const GlobalAddress at = shape.entries_offset == 0 ? sh.directory + kDirectoryEntriesOffset
                                                     : GlobalAddress(sh.node, shape.entries_offset);
  if (s.ok()) {
    // Entries above the depth read here may change (a doubling copies
    // entries up before it raises the depth); those below only by splits,
    // which a bucket header then reports.
    std::vector<uint64_t> entries(size_t{1} << depth);
    const size_t per_read = kDirectoryReadBytes / 8;
    for (size_t i = 0; i < entries.size() && s.ok(); i += per_read) {
      const size_t n = std::min(per_read, entries.size() - i);
      s = in_.read(tc_.dir_buffer, at + 8 * i, 8 * n, Option::kSync);
      if (s.ok()) memcpy(&entries[i], tc_.dir_buffer, 8 * n);
    }
    // The directory only grows (in depth, or in capacity when it moves),
    // so a copy of a smaller shape than the one installed is older: a task
    // of this thread installed a newer one (a splitter's own doubling)
    // while this read was under way, and it stays.
    const bool newer = shape.capacity_depth > dc.capacity_depth ||
                       (shape.capacity_depth == dc.capacity_depth && depth >= dc.global_depth);
    if (s.ok() && (dc.global_depth < 0 || newer)) {
      dc.entries.swap(entries);
      dc.global_depth = depth;
      dc.capacity_depth = shape.capacity_depth;
      dc.entries_at = at;
      dc.depth_word = header_word;
    }
  }
  tc_.dir_buffer_busy = false;
  dc.refreshing = false;
  return s;
}

Status Ops::swap_depth_word(const Shard& sh, RemoteLock& lock, DirectoryCopy* copy, int depth) {
  const uint64_t offset = copy->at.offset == sh.directory.offset + kDirectoryEntriesOffset ? 0 : copy->at.offset;
  const uint64_t desired = EncodeDepthWord(DirectoryShape{depth, copy->capacity_depth, offset});
  Status s = lock.renew();
  if (!s.ok()) return s;
  uint64_t* word = reinterpret_cast<uint64_t*>(tc_.split_buffer + kResultsOffset);
  s = in_.compare_and_swap(word, sh.directory, copy->word, desired, Option::kSync);
  if (!s.ok()) return s;
  if (word[0] != copy->word) {
    return Status::LockLost("hash table: the directory of memory node " + std::to_string(sh.node) +
                            " changed under this splitter (its resize lock was taken over)");
  }
  copy->word = desired;
  return Status::OK();
}

Status Ops::move_directory(const Shard& sh, RemoteLock& lock, DirectoryCopy* copy) {
  if (copy->capacity_depth >= kMaxGlobalDepth) return Status::OK();  // the caller reports the limit
  const int capacity_depth = std::min(kMaxGlobalDepth, copy->capacity_depth + kDirectoryGrowthBits);
  const uint64_t bytes = uint64_t{8} << capacity_depth;
  GlobalAddress array;
  Status s = in_.alloc_memory(sh.node, bytes, &array);
  if (!s.ok()) {
    return Status::OutOfMemory("hash table: memory node " + std::to_string(sh.node) + " has no room for a directory of " +
                               std::to_string(bytes >> 20) + " MiB (2^" + std::to_string(capacity_depth) +
                               " entries) to grow past " + std::to_string(copy->entries.size()) + " subtable entries, with " +
                               std::to_string(in_.remote_capacity(sh.node) >> 20) +
                               " MiB in its pool: raise capacity in backend.json or add memory blades (" + s.ToString() + ")");
  }
  // The entries first, then the word that points readers at them; a holder
  // that dies in between leaves an unused array. The old array stays as it
  // is: a client that still reads it finds stale entries, which bucket
  // headers report like any other stale directory.
  s = write_entries(array, lock, copy->entries, 0, copy->entries.size());
  if (!s.ok()) return s;
  copy->at = array;
  copy->capacity_depth = capacity_depth;
  s = swap_depth_word(sh, lock, copy, DecodeDepthWord(copy->word).depth);
  if (!s.ok()) return s;
  ++tc_.stats.directory_moves;
  LogPrintf(LogLevel::kInfo, "hash table: the directory of memory node %d moved to an array of 2^%d entries",
            sh.node, capacity_depth);
  return Status::OK();
}

Status Ops::write_entries(GlobalAddress at, RemoteLock& lock, const std::vector<uint64_t>& entries, size_t from,
                          size_t count) {
  // Through the two split windows (24 KiB = 3072 entries at a time).
  const size_t per_write = 2 * kWindowBytes / 8;
  for (size_t i = from; i < from + count; i += per_write) {
    const size_t n = std::min(per_write, from + count - i);
    memcpy(tc_.split_buffer, &entries[i], 8 * n);
    Status s = lock.renew();
    if (!s.ok()) return s;
    s = in_.write(tc_.split_buffer, at + 8 * i, 8 * n, Option::kSync);
    if (!s.ok()) return s;
  }
  return Status::OK();
}

}  // namespace smart::hashtable
