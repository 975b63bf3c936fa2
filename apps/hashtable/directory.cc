// SMART-HT directory cache: each thread keeps its own copy of every shard's
// directory, read whole on first use and re-read when a bucket header shows
// that a split moved a key's subtable (lookup.cc, handle_stale).
#include "table_internal.h"

namespace smart::hashtable {

Status Ops::refresh_directory(int si, const Shard& sh) {
  DirectoryCache& dc = tc_.dirs[si];
  if (dc.refreshing) {
    // Another task of this thread is reading it right now.
    while (dc.refreshing) this_task::yield();
    return Status::OK();
  }
  if (tc_.dir_buffer == nullptr) {
    tc_.dir_buffer = static_cast<char*>(in_.alloc_cache(kDirectorySize));
    if (tc_.dir_buffer == nullptr) return Status::OutOfMemory("hash table: the initiator cache is exhausted");
  }
  dc.refreshing = true;
  Status s = in_.read(tc_.dir_buffer, sh.directory, kDirectorySize, Option::kSync);
  if (s.ok()) {
    DirectoryHeader header;
    memcpy(&header, tc_.dir_buffer, sizeof(header));
    const int depth = static_cast<int>(header.depth_word & 0xff);
    if (header.magic != kDirectoryMagic || depth > kMaxGlobalDepth) {
      s = Status::Internal("hash table: the directory on memory node " + std::to_string(sh.node) + " is corrupt");
    } else {
      dc.entries.resize(size_t{1} << depth);
      memcpy(dc.entries.data(), tc_.dir_buffer + kDirectoryEntriesOffset, 8 * dc.entries.size());
      dc.global_depth = depth;
    }
  }
  dc.refreshing = false;
  return s;
}

}  // namespace smart::hashtable
