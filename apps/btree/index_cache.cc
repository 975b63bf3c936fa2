// SMART-BT index cache: each thread keeps copies of level-1 pages (the
// parents of leaves), so that an operation on a cached range reads only its
// leaf. A cached page may be stale; that is safe because pages are never
// freed and a page's lower fence never changes: the child a stale copy
// names for a key still has a lower fence at or below the key, and the leaf
// read finds the way right through sibling links. An operation that had to
// move right invalidates the copy, and the next descent caches a fresh one.
//
// Bounded: at most `capacity` pages, and none added while the caches of
// all threads together hold their budget; the least recently used page is
// evicted when a new one comes in (any capacity, including 1, is correct;
// 0 turns the cache off). A thread whose cache is empty at the budget
// caches nothing until others shrink.
#include <algorithm>

#include "tree_internal.h"

namespace smart::btree {

IndexCache::~IndexCache() { used_->fetch_sub(pages_.size(), std::memory_order_relaxed); }

void IndexCache::erase(Map::iterator it) {
  used_->fetch_sub(1, std::memory_order_relaxed);
  lru_.erase(it->second.lru);
  pages_.erase(it);
}

bool IndexCache::lookup(uint64_t key, GlobalAddress* leaf, uint64_t* min_key) {
  // The last cached page whose lower fence is at or below the key.
  auto it = pages_.upper_bound(key);
  if (it == pages_.begin()) return false;
  --it;
  Entry& e = it->second;
  if (!e.header.covers(key)) return false;
  *leaf = InternalChild(e.image, e.header, key);
  *min_key = it->first;
  if (e.lru != lru_.begin()) lru_.splice(lru_.begin(), lru_, e.lru);
  return true;
}

void IndexCache::insert(const char* page) {
  if (capacity_ == 0) return;
  const PageHeader h = DecodeHeader(page);
  auto found = pages_.find(h.min);
  if (found != pages_.end()) {
    // A newer copy of the same page (same lower fence).
    Entry& e = found->second;
    memcpy(e.image, page, kPageSize);
    e.header = h;
    lru_.splice(lru_.begin(), lru_, e.lru);
    return;
  }
  const bool over_budget = used_->load(std::memory_order_relaxed) >= budget_;
  if (over_budget && pages_.empty()) return;
  // Evict the least recently used page: one at the budget, as many as it
  // takes at the capacity.
  bool evicted = false;
  while (!pages_.empty() && (pages_.size() >= capacity_ || (over_budget && !evicted))) {
    erase(lru_.back());
    evicted = true;
  }
  auto it = pages_.try_emplace(h.min).first;
  memcpy(it->second.image, page, kPageSize);
  it->second.header = h;
  lru_.push_front(it);
  it->second.lru = lru_.begin();
  used_->fetch_add(1, std::memory_order_relaxed);
}

void IndexCache::invalidate(uint64_t min_key) {
  auto it = pages_.find(min_key);
  if (it != pages_.end()) erase(it);
}

}  // namespace smart::btree
