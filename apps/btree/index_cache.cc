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
#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

#include "tree_internal.h"

namespace smart::btree {

IndexCache::~IndexCache() {
  used_->fetch_sub(size_, std::memory_order_relaxed);
  for (Slot* chunk : chunks_) std::free(chunk);
}

uint32_t IndexCache::take_slot() {
  if (!free_.empty()) {
    const uint32_t s = free_.back();
    free_.pop_back();
    return s;
  }
  const auto s = static_cast<uint32_t>(links_.size());
  if (s % kChunkSlots == 0) {
    void* chunk = std::aligned_alloc(kHugePageSize, kHugePageSize);
    if (chunk == nullptr) throw std::bad_alloc();
    madvise(chunk, kHugePageSize, MADV_HUGEPAGE);
    chunks_.push_back(static_cast<Slot*>(chunk));
  }
  links_.emplace_back();
  new (&slot(s)) Slot;
  return s;
}

void IndexCache::unlink(uint32_t s) {
  Link& l = links_[s];
  (l.newer == kNoSlot ? newest_ : links_[l.newer].older) = l.older;
  (l.older == kNoSlot ? oldest_ : links_[l.older].newer) = l.newer;
  l = Link{};
}

void IndexCache::make_newest(uint32_t s) {
  links_[s].older = newest_;
  if (newest_ != kNoSlot) links_[newest_].newer = s;
  newest_ = s;
  if (oldest_ == kNoSlot) oldest_ = s;
}

void IndexCache::touch(uint32_t s) {
  if (s == newest_) return;
  unlink(s);
  make_newest(s);
}

ptrdiff_t IndexCache::sorted_floor(uint64_t key) const {
  const auto group = std::upper_bound(summary_.begin(), summary_.end(), key) - summary_.begin();
  if (group == 0) return -1;
  const auto first = sorted_.begin() + static_cast<ptrdiff_t>((group - 1) * kGroup);
  const auto last = sorted_.end() - first > static_cast<ptrdiff_t>(kGroup) ? first + kGroup : sorted_.end();
  return (std::upper_bound(first, last, key) - sorted_.begin()) - 1;
}

uint32_t IndexCache::find(uint64_t min) {
  const ptrdiff_t i = sorted_floor(min);
  if (i >= 0 && sorted_[static_cast<size_t>(i)] == min) return sorted_slots_[static_cast<size_t>(i)];
  auto it = recent_.find(min);
  return it == recent_.end() ? kNoSlot : it->second;
}

void IndexCache::remove(uint64_t min) {
  uint32_t s = kNoSlot;
  const ptrdiff_t i = sorted_floor(min);
  if (i >= 0 && sorted_[static_cast<size_t>(i)] == min && sorted_slots_[static_cast<size_t>(i)] != kNoSlot) {
    s = std::exchange(sorted_slots_[static_cast<size_t>(i)], kNoSlot);
    ++gone_;
  } else if (auto it = recent_.find(min); it != recent_.end()) {
    s = it->second;
    recent_.erase(it);
  }
  if (s == kNoSlot) return;
  unlink(s);
  free_.push_back(s);
  --size_;
  used_->fetch_sub(1, std::memory_order_relaxed);
  // Mostly gone: compact, so that searches do not wade through the dead.
  if (gone_ > 64 && gone_ * 4 > sorted_.size()) merge();
}

void IndexCache::merge() {
  std::vector<uint64_t> keys;
  std::vector<uint32_t> slots;
  keys.reserve(size_);
  slots.reserve(size_);
  const auto keep = [&](uint64_t key, uint32_t s) {
    keys.push_back(key);
    slots.push_back(s);
  };
  auto r = recent_.begin();
  for (size_t i = 0; i < sorted_.size(); ++i) {
    for (; r != recent_.end() && r->first < sorted_[i]; ++r) keep(r->first, r->second);
    if (sorted_slots_[i] != kNoSlot) keep(sorted_[i], sorted_slots_[i]);
  }
  for (; r != recent_.end(); ++r) keep(r->first, r->second);
  sorted_ = std::move(keys);
  sorted_slots_ = std::move(slots);
  summary_.clear();
  for (size_t i = 0; i < sorted_.size(); i += kGroup) summary_.push_back(sorted_[i]);
  recent_.clear();
  gone_ = 0;
}

bool IndexCache::lookup(uint64_t key, GlobalAddress* leaf, uint64_t* min_key) {
  // The last cached page whose lower fence is at or below the key: the
  // greater of the sorted array's and the recent pages' candidates.
  uint64_t min = 0;
  uint32_t s = kNoSlot;
  const ptrdiff_t i = sorted_floor(key);
  if (i >= 0) {
    min = sorted_[static_cast<size_t>(i)];
    s = sorted_slots_[static_cast<size_t>(i)];
  }
  if (!recent_.empty()) {
    auto it = recent_.upper_bound(key);
    if (it != recent_.begin() && (--it, i < 0 || it->first > min)) {
      min = it->first;
      s = it->second;
    }
  }
  // (A page that went since is a miss, even if one further left is cached.)
  if (s == kNoSlot) return false;
  const Slot& e = slot(s);
  if (!e.header.covers(key)) return false;
  *leaf = InternalChild(e.image, e.header, key);
  *min_key = min;
  touch(s);
  return true;
}

void IndexCache::insert(const char* page) {
  if (capacity_ == 0) return;
  const PageHeader h = DecodeHeader(page);
  if (const uint32_t s = find(h.min); s != kNoSlot) {
    // A newer copy of the same page (same lower fence).
    Slot& e = slot(s);
    memcpy(e.image, page, kPageSize);
    e.header = h;
    touch(s);
    return;
  }
  const bool over_budget = used_->load(std::memory_order_relaxed) >= budget_;
  if (over_budget && size_ == 0) return;
  // Evict the least recently used page: one at the budget, as many as it
  // takes at the capacity.
  bool evicted = false;
  while (size_ > 0 && (size_ >= capacity_ || (over_budget && !evicted))) {
    remove(slot(oldest_).header.min);
    evicted = true;
  }
  const uint32_t s = take_slot();
  Slot& e = slot(s);
  memcpy(e.image, page, kPageSize);
  e.header = h;
  make_newest(s);
  ++size_;
  used_->fetch_add(1, std::memory_order_relaxed);
  // A key that went from the sorted array comes back in its place (searched
  // again: an eviction above may have merged the array since find()).
  const ptrdiff_t i = sorted_floor(h.min);
  if (i >= 0 && sorted_[static_cast<size_t>(i)] == h.min) {
    sorted_slots_[static_cast<size_t>(i)] = s;
    --gone_;
    return;
  }
  recent_.emplace(h.min, s);
  if (recent_.size() > 64 + sorted_.size() / 32) merge();
}

void IndexCache::invalidate(uint64_t min_key) { remove(min_key); }

}  // namespace smart::btree
