// SMART-HT directory cache: each thread keeps its own copy of every shard's
// directory, read on first use and re-read when a bucket header shows that
// a split moved a key's subtable (lookup.cc, handle_stale). Only the
// entries in use (2^global depth) are read, through a fixed buffer.
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
  int depth = 0;
  if (s.ok()) {
    DirectoryHeader header;
    memcpy(&header, tc_.dir_buffer, sizeof(header));
    depth = static_cast<int>(header.depth_word & 0xff);
    if (header.magic != kDirectoryMagic || depth > kMaxGlobalDepth || header.depth_word > 0xff) {
      s = Status::Internal("hash table: the directory on memory node " + std::to_string(sh.node) +
                           " is corrupt (header word " + std::to_string(header.depth_word) + ")");
    }
  }
  if (s.ok()) {
    // Entries above the depth read here may change (a doubling copies
    // entries up before it raises the depth); those below only by splits,
    // which a bucket header then reports.
    std::vector<uint64_t> entries(size_t{1} << depth);
    const size_t per_read = kDirectoryReadBytes / 8;
    for (size_t i = 0; i < entries.size() && s.ok(); i += per_read) {
      const size_t n = std::min(per_read, entries.size() - i);
      s = in_.read(tc_.dir_buffer, sh.directory + (kDirectoryEntriesOffset + 8 * i), 8 * n, Option::kSync);
      if (s.ok()) memcpy(&entries[i], tc_.dir_buffer, 8 * n);
    }
    if (s.ok()) {
      dc.entries.swap(entries);
      dc.global_depth = depth;
    }
  }
  tc_.dir_buffer_busy = false;
  dc.refreshing = false;
  return s;
}

}  // namespace smart::hashtable
