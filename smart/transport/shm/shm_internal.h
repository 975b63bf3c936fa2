// What the two files of the shm provider's setup side share
// (shm_transport.cc: devices, regions, queues; shm_handover.cc: the memfd
// hand-over to clients).
#pragma once

#include <errno.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>

#include "smart/transport/shm/shm_transport.h"

namespace smart::shm {

inline uint64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// "WHAT: strerror(errno)".
inline std::string Errno(const char* what) { return std::string(what) + ": " + strerror(errno); }

// Says once per process when MADV_HUGEPAGE cannot take effect on shared
// memory (shm_transport.cc).
void HintHugePages(size_t bytes);

// A region of local memory known to the device. Regions made by
// allocate_shared_region own a memfd and its mapping.
class ShmRegion final : public MemoryRegion {
 public:
  ShmRegion(ShmDevice* device, char* addr, size_t length, int memfd);
  ~ShmRegion() override {
    device_->unregister_local(lkey_);
    if (memfd_ >= 0) {
      munmap(addr_, length_);
      close(memfd_);
    }
  }
  int memfd() const { return memfd_; }
  // The memfd cannot shrink or grow (PoolSealed): safe to hand to users
  // other than the blade's.
  bool sealed() const { return sealed_; }

 private:
  ShmDevice* device_;
  int memfd_;
  bool sealed_;
};

}  // namespace smart::shm
