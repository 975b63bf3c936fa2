/// @file
/// Which transport a client or a memory blade runs on. The transport
/// contract itself (smart/transport.h: devices, queue pairs, rdma-core's
/// work requests) is the providers' and the framework's, not installed.
#pragma once

#include <cstdint>

namespace smart {

/// The provider behind a Device.
enum class TransportKind : uint8_t { kVerbs = 1, kShm = 2 };  ///< verbs (rdma-core) or shm (same-host)
/// "verbs" or "shm".
const char* TransportKindName(TransportKind kind);

}  // namespace smart
