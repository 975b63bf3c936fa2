// SMART-BT reads: checked page reads, the descent from the root, search
// (index cache, speculative one-line lookup) and ordered scan.
//
// Round trips. A search with an index-cache hit reads its leaf (1); with a
// speculative hit it reads one 64-byte line (1); a miss of both reads one
// page per level. A value in a block costs one more READ.
//
// Moving right. Every page carries fences [min, max) and a sibling link. A
// reader whose key lies at or beyond a page's max (the page split after its
// parent was read) follows the sibling; a key below a page's min means the
// way there was wrong altogether (a root that is no longer the root), and
// the descent starts again from a freshly read root pointer.
#include <algorithm>

#include "smart/fault_injection.h"
#include "tree_internal.h"

namespace smart::btree {

Status RetryBound::status() const {
  return Status::TimedOut("B+tree: gave up after " + std::to_string(retrying_ns_ / 1000000) + " ms and " +
                          std::to_string(attempts_) + " attempts: " + why);
}

bool RetryBound::next_slow() {
  FaultPoint("bt.retry");
  const uint64_t now = MonotonicNs();
  if (last_ns_ != 0) retrying_ns_ += std::min(now - last_ns_, kCountedGapNs);
  last_ns_ = now;
  return retrying_ns_ <= options_.retry_timeout_ns;
}

Status Ops::read_page(GlobalAddress page, char* buf) {
  RetryBound bound(options_);
  for (;;) {
    Status s = in_.read(buf, page, kPageSize, Option::kNone);
    if (s.ok()) s = sync();
    if (!s.ok()) return s;
    if (__builtin_expect(PageConsistent(buf), 1)) return Status::OK();
    ++tc_.stats.torn_reads;
    bound.why = "a page keeps failing its check (torn or not a page)";
    if (!bound.next()) return Status::TimedOut("B+tree: page " + page.to_string() + ": " + bound.status().message());
    this_task::yield();
  }
}

Status Ops::root(bool refresh, GlobalAddress* out) {
  if (!refresh && !tc_.root.is_null()) {
    *out = tc_.root;
    return Status::OK();
  }
  TaskBuffers* tb = nullptr;
  Status s = task_buffers(&tb);
  if (!s.ok()) return s;
  s = in_.read(tb->words, tree_.root_word_, 8, Option::kNone);
  if (s.ok()) s = sync();
  if (!s.ok()) return s;
  const GlobalAddress root(tb->words[0]);
  if (root.is_null() || root.node >= tree_.nodes_ || (root.offset & (kPageSize - 1)) != 0) {
    return Status::Internal("B+tree: the root pointer holds " + root.to_string() + ", not a page");
  }
  tc_.root = root;
  *out = root;
  return Status::OK();
}

Status Ops::descend(uint64_t key, int level, char* buf, Path* path, GlobalAddress* page) {
  RetryBound bound(options_);
  bool refresh = false;
  for (;;) {
    GlobalAddress addr;
    Status s = root(refresh, &addr);
    if (!s.ok()) return s;
    path->root = addr;
    path->root_level = -1;
    for (auto& a : path->at) a = GlobalAddress();
    bool restart = false;
    while (!restart) {
      s = read_page(addr, buf);
      if (!s.ok()) return s;
      const PageHeader h = DecodeHeader(buf);
      if (path->root_level < 0) {
        // A root that split may no longer be the root: read the pointer
        // again, once. (It stays the root until a new one is installed,
        // possibly never if its splitter died: then its sibling links
        // lead on.)
        if (!refresh && !h.sibling.is_null()) {
          refresh = true;
          restart = true;
          break;
        }
        path->root_level = h.level;
        if (h.level < level) return Status::NotFound("B+tree: the tree is lower than the level sought");
      }
      if (key < h.min || h.level < level) {
        restart = true;
        break;
      }
      if (h.right_of(key)) {
        ++tc_.stats.moved_right;
        // The page above (read from the blade, not a cached copy) lacked
        // this separator: the writer repairs it (repair_links).
        MissingLink& link = h.level > 0 ? path->internal_link : path->leaf_link;
        if (link.left.is_null()) link = MissingLink{addr, h.max, h.sibling, h.level};
        // Sibling links that never reach the key's page (a cycle) are no
        // tree: bounded like any other retry.
        bound.why = "sibling links keep leading to pages whose fences exclude the key";
        if (!bound.next()) return bound.status();
        addr = h.sibling;
        continue;
      }
      if (h.level == 1) tc_.cache.insert(buf);
      path->at[h.level] = addr;
      if (h.level == level) {
        *page = addr;
        return Status::OK();
      }
      addr = InternalChild(buf, h, key);
    }
    if (path->root_level >= 0) {
      refresh = true;
      bound.why = "descents keep reaching pages whose fences exclude the key";
      if (!bound.next()) return bound.status();
      this_task::yield();
    }
  }
}

Status Ops::find_leaf(uint64_t key, char* buf, Path* path, GlobalAddress* leaf, bool* read, bool* from_cache,
                      uint64_t* cached) {
  *from_cache = false;
  *read = false;
  if (tc_.cache.lookup(key, leaf, cached)) {
    ++tc_.stats.cache_hits;
    *from_cache = true;
    return Status::OK();
  }
  Status s = descend(key, 0, buf, path, leaf);
  *read = s.ok();
  return s;
}

Status Ops::entry_value(const LeafEntry& e, TaskBuffers& tb, std::string* value, bool* torn) {
  *torn = false;
  if (!e.in_block()) {
    value->assign(reinterpret_cast<const char*>(&e.value), e.inline_length());
    return Status::OK();
  }
  const uint32_t units = e.block_units();
  const GlobalAddress block(e.value);
  if (units == 0 || block.is_null() || block.node >= tree_.nodes_) {
    *torn = true;
    return Status::OK();
  }
  Status s = in_.read(tb.block, block, units * kBlockUnit, Option::kNone);
  if (s.ok()) s = sync();
  if (!s.ok()) return s;
  std::string_view v;
  if (!DecodeBlock(tb.block, units, e.key, e.block_tag(), &v)) {
    ++tc_.stats.torn_reads;
    *torn = true;
    return Status::OK();
  }
  value->assign(v.data(), v.size());
  return Status::OK();
}

void Ops::speculative_put(uint64_t key, GlobalAddress page, int entry) {
  if (tc_.speculative.empty()) return;
  const uint64_t mixed = MixKey(key);
  SpeculativeEntry& e = tc_.speculative[mixed & tc_.speculative_mask];
  if (!e.store(mixed, page, EntryLine(entry))) e.word = 0;
}

void Ops::speculative_erase(uint64_t key) {
  if (tc_.speculative.empty()) return;
  const uint64_t mixed = MixKey(key);
  SpeculativeEntry& e = tc_.speculative[mixed & tc_.speculative_mask];
  if (e.holds(mixed)) e.word = 0;
}

Status Ops::search(uint64_t key, std::string* value) {
  TaskBuffers* tb = nullptr;
  Status s = task_buffers(&tb);
  if (!s.ok()) return s;
  if (!tc_.speculative.empty()) {
    const uint64_t mixed = MixKey(key);
    SpeculativeEntry& e = tc_.speculative[mixed & tc_.speculative_mask];
    if (e.holds(mixed)) {
      s = in_.read(tb->line, e.page() + kLineSize * static_cast<uint64_t>(e.line()), kLineSize, Option::kNone);
      if (s.ok()) s = sync();
      if (!s.ok()) return s;
      if (LineIntact(tb->line) && (LineVersion(tb->line) & kLeafVersionFlag)) {
        for (int j = 0; j < kEntriesPerLine; ++j) {
          const uint16_t meta = Load16(tb->line + 8 + 2 * j);
          if (!(meta & kMetaValid) || Load64(tb->line + kLineHeadBytes + kEntrySize * j) != key) continue;
          LeafEntry entry;
          entry.key = key;
          entry.value = Load64(tb->line + kLineHeadBytes + 8 + kEntrySize * j);
          entry.meta = meta;
          bool torn = false;
          s = entry_value(entry, *tb, value, &torn);
          if (!s.ok()) return s;
          if (!torn) {
            ++tc_.stats.speculative_hits;
            return Status::OK();
          }
        }
      }
      ++tc_.stats.speculative_misses;
      e.word = 0;
    }
  }
  RetryBound bound(options_);
  Path path;
  GlobalAddress leaf;
  bool read = false, from_cache = false;
  uint64_t cached = 0;
  s = find_leaf(key, tb->page, &path, &leaf, &read, &from_cache, &cached);
  if (!s.ok()) return s;
  for (;;) {
    if (!read) {
      s = read_page(leaf, tb->page);
      if (!s.ok()) return s;
    }
    read = false;
    const PageHeader h = DecodeHeader(tb->page);
    if (!h.is_leaf() || key < h.min) {
      // The cached way is wrong: start from the root.
      if (from_cache) {
        tc_.cache.invalidate(cached);
        ++tc_.stats.cache_invalidations;
        from_cache = false;
      }
      s = descend(key, 0, tb->page, &path, &leaf);
      if (!s.ok()) return s;
      read = true;
    } else if (h.right_of(key)) {
      ++tc_.stats.moved_right;
      if (from_cache) {
        tc_.cache.invalidate(cached);
        ++tc_.stats.cache_invalidations;
        from_cache = false;
      }
      leaf = h.sibling;
    } else {
      const int e = FindLeafKey(tb->page, key);
      if (e < 0) return NotFoundStatus();
      bool torn = false;
      s = entry_value(ReadLeafEntry(tb->page, e), *tb, value, &torn);
      if (!s.ok()) return s;
      if (!torn) {
        if (options_.speculative_lookup) speculative_put(key, leaf, e);
        return Status::OK();
      }
    }
    bound.why = "the key's leaf keeps moving or its value block keeps failing its check";
    if (!bound.next()) return bound.status();
  }
}

Status Ops::scan(uint64_t start, size_t count, std::vector<std::pair<uint64_t, std::string>>* out) {
  out->clear();
  if (count == 0) return Status::OK();
  TaskBuffers* tb = nullptr;
  Status s = task_buffers(&tb);
  if (!s.ok()) return s;
  RetryBound bound(options_);
  Path path;
  GlobalAddress leaf;
  bool read = false, from_cache = false;
  uint64_t cached = 0;
  s = find_leaf(start, tb->page, &path, &leaf, &read, &from_cache, &cached);
  if (!s.ok()) return s;
  uint64_t next = start;  // every key below it is in *out already
  LeafEntry entries[kPageEntries];
  std::vector<std::pair<uint64_t, std::string>> page_out;
  for (;;) {
    if (!read) {
      s = read_page(leaf, tb->page);
      if (!s.ok()) return s;
    }
    read = false;
    const PageHeader h = DecodeHeader(tb->page);
    if (!h.is_leaf() || next < h.min) {
      if (from_cache) tc_.cache.invalidate(cached);
      from_cache = false;
      s = descend(next, 0, tb->page, &path, &leaf);
      if (!s.ok()) return s;
      read = true;
      bound.why = "a scan keeps finding leaves whose fences exclude its position";
      if (!bound.next()) return bound.status();
      continue;
    }
    if (h.right_of(next)) {
      if (from_cache) tc_.cache.invalidate(cached);
      from_cache = false;
      leaf = h.sibling;
      bound.why = "a scan's sibling links keep leading to leaves whose fences exclude its position";
      if (!bound.next()) return bound.status();
      continue;
    }
    from_cache = false;
    const int n = CollectLeafEntries(tb->page, entries);
    std::sort(entries, entries + n, [](const LeafEntry& a, const LeafEntry& b) { return a.key < b.key; });
    page_out.clear();
    bool torn = false;
    for (int i = 0; i < n && out->size() + page_out.size() < count; ++i) {
      if (entries[i].key < next || !h.covers(entries[i].key)) continue;
      std::string value;
      s = entry_value(entries[i], *tb, &value, &torn);
      if (!s.ok()) return s;
      if (torn) break;
      page_out.emplace_back(entries[i].key, std::move(value));
    }
    if (torn) {
      // A value block changed under the scan: read this leaf again.
      bound.why = "a value block keeps failing its check during a scan";
      if (!bound.next()) return bound.status();
      continue;
    }
    for (auto& kv : page_out) out->push_back(std::move(kv));
    if (out->size() >= count || h.unbounded || h.sibling.is_null()) return Status::OK();
    next = h.max;
    leaf = h.sibling;
  }
}

}  // namespace smart::btree
