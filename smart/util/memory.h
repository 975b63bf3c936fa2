// Large anonymous buffers: 2 MiB huge pages when the system has them
// reserved, normal pages (with transparent huge pages requested) otherwise.
#pragma once

#include <cstddef>

namespace smart {

// Throws smart::Error when the memory cannot be mapped.
void* AllocateBuffer(size_t bytes, bool* huge_pages);
void FreeBuffer(void* addr, size_t bytes);

}  // namespace smart
