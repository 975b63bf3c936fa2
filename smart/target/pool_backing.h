// Where a memory blade's pool lives (backend.json "backing"):
//
//   memfd         anonymous shared memory (the default; the transport maps it)
//   hugetlb       anonymous shared memory on reserved 2 MiB huge pages
//   file:PATH     a file mapped shared, on any filesystem (tmpfs, hugetlbfs,
//                 ext4...); the pool survives the memory blade's process
//   devdax:PATH   a device-DAX character device (persistent memory)
//
// MapPool maps every backing but memfd (which the transport makes itself)
// and says whether the mapping already held a pool that the memory blade
// should reopen instead of formatting.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace smart {

struct PoolBacking {
  enum class Kind { kMemfd, kHugetlb, kFile, kDevdax };
  Kind kind = Kind::kMemfd;
  std::string path;  // file and devdax
};

// Parses a "backing" value; throws smart::Error naming what is wrong.
PoolBacking ParsePoolBacking(const std::string& value, const std::string& source);

struct PoolMapping {
  char* addr = nullptr;
  size_t length = 0;  // mapped bytes (the pool, rounded up to the page size)
  int fd = -1;        // the mapped file or memfd, for the transport to share
  bool existing = false;  // the file held data before (a pool to reopen)
  std::string description;  // for the memory blade's startup line
};

// Maps `bytes` of pool with `backing` (not kMemfd). Throws smart::Error with
// what to change (reserve huge pages, a larger file, a real device).
PoolMapping MapPool(const PoolBacking& backing, uint64_t bytes);

}  // namespace smart
