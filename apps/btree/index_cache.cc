// SMART-BT index cache: each thread keeps copies of level-1 pages (the
// parents of leaves), so that an operation on a cached range reads only its
// leaf. A cached page may be stale; that is safe because pages are never
// freed and a page's lower fence never changes: the child a stale copy
// names for a key still has a lower fence at or below the key, and the leaf
// read finds the way right through sibling links. An operation that had to
// move right invalidates the copy, and the next descent caches a fresh one.
//
// Bounded: at most `capacity` pages; the least recently used one is evicted
// when a new one comes in (any capacity, including 1, is correct; 0 turns
// the cache off).
#include "tree_internal.h"

namespace smart::btree {

bool IndexCache::lookup(uint64_t key, GlobalAddress* leaf, uint64_t* min_key) {
  if (pages_.empty()) return false;
  auto it = pages_.upper_bound(key);
  if (it == pages_.begin()) return false;
  --it;
  Entry& e = it->second;
  if (!e.header.covers(key)) return false;
  *leaf = InternalChild(e.image.get(), e.header, key);
  *min_key = it->first;
  if (e.lru != lru_.begin()) lru_.splice(lru_.begin(), lru_, e.lru);
  return true;
}

void IndexCache::insert(const char* page) {
  if (capacity_ == 0) return;
  const PageHeader h = DecodeHeader(page);
  auto it = pages_.find(h.min);
  if (it != pages_.end()) {
    // A newer copy of the same page (same lower fence).
    memcpy(it->second.image.get(), page, kPageSize);
    it->second.header = h;
    lru_.splice(lru_.begin(), lru_, it->second.lru);
    return;
  }
  while (pages_.size() >= capacity_) {
    pages_.erase(lru_.back());
    lru_.pop_back();
  }
  Entry e;
  e.image.reset(new char[kPageSize]);
  memcpy(e.image.get(), page, kPageSize);
  e.header = h;
  lru_.push_front(h.min);
  e.lru = lru_.begin();
  pages_.emplace(h.min, std::move(e));
}

void IndexCache::invalidate(uint64_t min_key) {
  auto it = pages_.find(min_key);
  if (it == pages_.end()) return;
  lru_.erase(it->second.lru);
  pages_.erase(it);
}

}  // namespace smart::btree
