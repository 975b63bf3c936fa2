#include "smart/util/memory.h"

#include <errno.h>
#include <sys/mman.h>

#include <cstring>
#include <string>

#include "smart/common.h"
#include "smart/status.h"

namespace smart {

void* AllocateBuffer(size_t bytes, bool* huge_pages) {
  *huge_pages = false;
  if (bytes % kHugePageSize == 0) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
    if (p != MAP_FAILED) {
      *huge_pages = true;
      return p;
    }
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    throw Error("cannot map " + std::to_string(bytes >> 20) + " MiB of memory: " + strerror(errno));
  }
  madvise(p, bytes, MADV_HUGEPAGE);
  return p;
}

void FreeBuffer(void* addr, size_t bytes) {
  if (addr != nullptr) munmap(addr, bytes);
}

}  // namespace smart
