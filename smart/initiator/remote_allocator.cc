// Remote memory allocation and root entries. Chunks come from the memory
// blade's super chunk by remote CAS on its watermark; smaller blocks are
// split from chunks buddy-style into per-thread free lists.
#include <algorithm>

#include "smart/initiator/initiator_impl.h"

namespace smart {

namespace {

int SizeClass(size_t size) {
  int c = 0;
  size_t block = 8;
  while (block < size) {
    block <<= 1;
    ++c;
  }
  return c;
}

// One task per thread at a time runs the allocator: its cached view of the
// super chunk and its free lists are shared by the thread's tasks.
class AllocatorLock {
 public:
  explicit AllocatorLock(ThreadState* ts) : ts_(ts), task_(this_task::id()) {
    while (ts_->allocator_busy) {
      ts_->allocator_waiters.push_back(task_);
      this_task::wait();
    }
    ts_->allocator_busy = true;
  }
  ~AllocatorLock() {
    ts_->allocator_busy = false;
    while (!ts_->allocator_waiters.empty()) {
      const int next = ts_->allocator_waiters.front();
      ts_->allocator_waiters.pop_front();
      if (next != task_) {
        this_task::notify(next);
        break;
      }
    }
  }

 private:
  ThreadState* ts_;
  int task_;
};

}  // namespace

Status Initiator::alloc_memory(node_t node, size_t size, GlobalAddress* out) {
  *out = GlobalAddress::Null();
  if (size == 0) return Status::InvalidArgument("alloc_memory: size 0");
  Impl& im = *impl_;
  ThreadState* ts = im.state();
  if (node >= ts->lanes.size()) return Status::InvalidArgument("alloc_memory: node not below max_nodes");
  if (!ts->lanes[node].ready || ts->lanes[node].generation != im.generation.load()) {
    Status s = im.resolve_lane(ts, node);
    if (!s.ok()) return s;
  }
  const int task = this_task::id();
  TaskContext* t = im.task_context(ts, task);
  if (t->scratch == nullptr) return Status::OutOfMemory("alloc_memory: the local cache is exhausted");
  AllocatorLock lock(ts);
  NodeAllocator& a = ts->allocators[node];

  // Takes `count` contiguous chunks with a CAS on the super chunk watermark.
  auto take_chunks = [&](uint64_t count, GlobalAddress* result) -> Status {
    auto& reuse = a.free_chunks[count];
    if (!reuse.empty()) {
      *result = reuse.back();
      reuse.pop_back();
      return Status::OK();
    }
    if (!a.super_chunk_cached) {
      Status s = read(t->scratch, GlobalAddress(node, 0), 16, Option::kSync);
      if (!s.ok()) return s;
      a.max_chunk = t->scratch[0];
      a.alloc_chunk = t->scratch[1];
      a.super_chunk_cached = true;
    }
    for (;;) {
      if (a.alloc_chunk + count > a.max_chunk || a.alloc_chunk + count < a.alloc_chunk) {
        return Status::OutOfMemory("memory node " + std::to_string(node) + " is full: " +
                                   std::to_string(a.alloc_chunk) + " of " + std::to_string(a.max_chunk) +
                                   " chunks (16 KiB each) are taken; raise capacity in backend.json");
      }
      const uint64_t expected = a.alloc_chunk;
      Status s = compare_and_swap(t->scratch, GlobalAddress(node, kSuperChunkAllocOffset), expected,
                                  expected + count, Option::kSync);
      if (!s.ok()) return s;
      if (t->scratch[0] == expected) {
        a.alloc_chunk = expected + count;
        *result = GlobalAddress(node, expected * kChunkSize);
        return Status::OK();
      }
      a.alloc_chunk = t->scratch[0];  // another client moved it: retry from there
    }
  };

  if (size >= kChunkSize) {
    return take_chunks((size + kChunkSize - 1) / kChunkSize, out);
  }
  const int cls = SizeClass(size);
  // Find the smallest class with a free block, splitting down from it.
  int from = cls;
  while (from < NodeAllocator::kClasses && a.free_lists[from].empty()) ++from;
  GlobalAddress block;
  if (from == NodeAllocator::kClasses) {
    Status s = take_chunks(1, &block);
    if (!s.ok()) return s;
    from = NodeAllocator::kClasses - 1;
  } else {
    block = a.free_lists[from].back();
    a.free_lists[from].pop_back();
  }
  while (from > cls) {
    --from;
    a.free_lists[from].push_back(block + (size_t{8} << from));  // upper half stays free
  }
  *out = block;
  return Status::OK();
}

void Initiator::free_memory(GlobalAddress addr, size_t size) {
  if (addr.is_null() || size == 0) return;
  ThreadState* ts = impl_->state();
  if (addr.node >= ts->allocators.size()) return;
  NodeAllocator& a = ts->allocators[addr.node];
  if (size >= kChunkSize) {
    a.free_chunks[(size + kChunkSize - 1) / kChunkSize].push_back(addr);
  } else {
    a.free_lists[SizeClass(size)].push_back(addr);
  }
}

Status Initiator::set_root_entry(node_t node, int index, uint64_t value) {
  if (index < 0 || index >= kMaxRootEntries) {
    return Status::InvalidArgument("root entry index " + std::to_string(index) + " is not in 0..255");
  }
  ThreadState* ts = impl_->state();
  TaskContext* t = impl_->task_context(ts, this_task::id());
  if (t->scratch == nullptr) return Status::OutOfMemory("set_root_entry: the local cache is exhausted");
  t->scratch[0] = value;
  return write(t->scratch, GlobalAddress(node, kRootEntryOffset + 8 * static_cast<uint64_t>(index)), 8,
               Option::kSync);
}

Status Initiator::get_root_entry(node_t node, int index, uint64_t* value) {
  if (index < 0 || index >= kMaxRootEntries) {
    return Status::InvalidArgument("root entry index " + std::to_string(index) + " is not in 0..255");
  }
  ThreadState* ts = impl_->state();
  TaskContext* t = impl_->task_context(ts, this_task::id());
  if (t->scratch == nullptr) return Status::OutOfMemory("get_root_entry: the local cache is exhausted");
  Status s = read(t->scratch, GlobalAddress(node, kRootEntryOffset + 8 * static_cast<uint64_t>(index)), 8,
                  Option::kSync);
  if (s.ok()) *value = t->scratch[0];
  return s;
}

}  // namespace smart
