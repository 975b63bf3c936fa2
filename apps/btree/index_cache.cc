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
#include <algorithm>

#include "tree_internal.h"

namespace smart::btree {

size_t IndexCache::position(uint64_t min) const {
  return static_cast<size_t>(std::lower_bound(mins_.begin(), mins_.end(), min) - mins_.begin());
}

void IndexCache::erase_at(size_t i) {
  lru_.erase(entries_[i]->lru);
  mins_.erase(mins_.begin() + static_cast<std::ptrdiff_t>(i));
  entries_.erase(entries_.begin() + static_cast<std::ptrdiff_t>(i));
}

bool IndexCache::lookup(uint64_t key, GlobalAddress* leaf, uint64_t* min_key) {
  // The last cached page whose lower fence is at or below the key.
  const size_t i = static_cast<size_t>(std::upper_bound(mins_.begin(), mins_.end(), key) - mins_.begin());
  if (i == 0) return false;
  Entry& e = *entries_[i - 1];
  if (!e.header.covers(key)) return false;
  *leaf = InternalChild(e.image, e.header, key);
  *min_key = mins_[i - 1];
  if (e.lru != lru_.begin()) lru_.splice(lru_.begin(), lru_, e.lru);
  return true;
}

void IndexCache::insert(const char* page) {
  if (capacity_ == 0) return;
  const PageHeader h = DecodeHeader(page);
  size_t i = position(h.min);
  if (i < mins_.size() && mins_[i] == h.min) {
    // A newer copy of the same page (same lower fence).
    Entry& e = *entries_[i];
    memcpy(e.image, page, kPageSize);
    e.header = h;
    lru_.splice(lru_.begin(), lru_, e.lru);
    return;
  }
  std::unique_ptr<Entry> fresh;
  while (mins_.size() >= capacity_) {
    // Evict the least recently used page (its memory is reused).
    const size_t v = position(lru_.back()->header.min);
    lru_.pop_back();
    fresh = std::move(entries_[v]);
    mins_.erase(mins_.begin() + static_cast<std::ptrdiff_t>(v));
    entries_.erase(entries_.begin() + static_cast<std::ptrdiff_t>(v));
  }
  if (!fresh) fresh = std::make_unique<Entry>();
  memcpy(fresh->image, page, kPageSize);
  fresh->header = h;
  lru_.push_front(fresh.get());
  fresh->lru = lru_.begin();
  i = position(h.min);
  mins_.insert(mins_.begin() + static_cast<std::ptrdiff_t>(i), h.min);
  entries_.insert(entries_.begin() + static_cast<std::ptrdiff_t>(i), std::move(fresh));
}

void IndexCache::invalidate(uint64_t min_key) {
  const size_t i = position(min_key);
  if (i < mins_.size() && mins_[i] == min_key) erase_at(i);
}

}  // namespace smart::btree
