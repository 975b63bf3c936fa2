/// @file
/// Constants and the global address shared by every layer of the framework.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace smart {

/// Index of a memory blade (memory node), 0 .. kMaxNodes-1.
using node_t = uint8_t;

/// Thread and task ids travel in 8-bit fields of a work request id, so both are
/// limited to 256 values. Task 0 is a thread's own (non-coroutine) context.
constexpr int kMaxThreads = 256;
constexpr int kMaxTasksPerThread = 256;  ///< tasks per thread, task 0 included
/// Memory blades a client can address (the node field of a GlobalAddress).
constexpr int kMaxNodes = 256;

constexpr size_t kCacheLineSize = 64;  ///< bytes in a CPU cache line
constexpr size_t kHugePageSize = 2u << 20;  ///< bytes in a 2 MiB huge page
constexpr int kChunkShift = 14;  ///< log2 of kChunkSize
constexpr size_t kChunkSize = size_t{1} << kChunkShift;  ///< 16 KiB
/// Root entries in the super chunk (SuperChunk::root_entries).
constexpr int kMaxRootEntries = 256;
/// Largest number of work requests a task batches behind one doorbell.
constexpr int kMaxBatchSize = 16;

/// Memory region ids inside a memory blade.
/// @name Memory regions of a memory blade
/// @{
constexpr uint8_t kMainMemoryRegion = 0;  ///< the pool
constexpr uint8_t kDeviceMemoryRegion = 1;  ///< on-NIC device memory, where the device has it
constexpr int kMemoryRegions = 2;  ///< number of region ids

/// A 64-bit remote pointer: byte offset (bits 0-47) into memory region
/// `mr_id` (bits 48-55) of memory node `node` (bits 56-63). All ones is null.
/// @}
union GlobalAddress {
  struct {
    uint64_t offset : 48;
    uint64_t mr_id : 8;
    uint64_t node : 8;
  };
  uint64_t raw;  ///< the whole 64-bit word

  /// The null address.
  constexpr GlobalAddress() : raw(~uint64_t{0}) {}
  /// From a raw 64-bit word.
  constexpr explicit GlobalAddress(uint64_t value) : raw(value) {}
  /// Byte `off` of region `mr` on node `n` (the offset keeps 48 bits).
  constexpr GlobalAddress(node_t n, uint64_t off, uint8_t mr = kMainMemoryRegion)
      : raw((uint64_t{n} << 56) | (uint64_t{mr} << 48) | (off & ((uint64_t{1} << 48) - 1))) {}

  /// The null address (all ones).
  static constexpr GlobalAddress Null() { return GlobalAddress(); }
  /// True for the null address.
  constexpr bool is_null() const { return raw == ~uint64_t{0}; }

  /// The address `delta` bytes further in the same region.
  GlobalAddress operator+(uint64_t delta) const { return GlobalAddress(node, offset + delta, mr_id); }
  /// Same node, region and offset.
  bool operator==(const GlobalAddress& o) const { return raw == o.raw; }
  /// Not operator==.
  bool operator!=(const GlobalAddress& o) const { return raw != o.raw; }

  /// "node N mr M offset 0x..." or "null", for messages.
  std::string to_string() const;
};
static_assert(sizeof(GlobalAddress) == 8);

/// Chunk 0 of every memory blade's main region: the allocation watermark and
/// the root entries through which applications find their structures.
struct SuperChunk {
  uint64_t max_chunk;    ///< number of chunks in the pool
  uint64_t alloc_chunk;  ///< next free chunk (chunk 0 is this header)
  uint64_t root_entries[kMaxRootEntries];  ///< application roots (Initiator::set_root_entry)
};
static_assert(sizeof(SuperChunk) == 2064);
/// Offset of SuperChunk::alloc_chunk, the word clients CAS to take chunks.
constexpr size_t kSuperChunkAllocOffset = offsetof(SuperChunk, alloc_chunk);
/// Offset of SuperChunk::root_entries.
constexpr size_t kRootEntryOffset = offsetof(SuperChunk, root_entries);

/// The rest of chunk 0 holds the pool's stamp and two tables the memory
/// blade keeps for its clients:
///   [3584, 3616)     the stamp (magic, capacity, chunk size) by which a
///                    restarted memory blade knows a file or devdax pool as
///                    its own and reopens it instead of formatting it;
///   [4 KiB, 8 KiB)   the registry of named roots (include/smart/named_root.h),
///                    kMaxNamedRoots entries of 64 bytes;
///   [8 KiB, 16 KiB)  the session table: one word per session slot, written
///                    only by the memory blade (alive bit | incarnation), so
///                    that a client can tell with one READ whether the holder
///                    of a lock is still connected.
constexpr size_t kPoolStampOffset = 3584;  ///< the stamp
constexpr size_t kNamedRootRegistryOffset = 4096;  ///< the named-root registry
constexpr int kMaxNamedRoots = 64;  ///< named roots a blade keeps
constexpr size_t kNamedRootEntrySize = 64;  ///< bytes of one registry entry
constexpr size_t kSessionTableOffset = 8192;  ///< the session table
/// Slot 0 is never handed out, so that no lock word of a live owner is 0.
constexpr int kMaxSessions = 1024;  ///< session slots per memory blade
static_assert(kNamedRootRegistryOffset >= sizeof(SuperChunk));
static_assert(kNamedRootRegistryOffset + kMaxNamedRoots * kNamedRootEntrySize <= kSessionTableOffset);
static_assert(kSessionTableOffset + 8 * kMaxSessions <= kChunkSize);

/// Session word: bit 63 set while the session is connected; bit 62 set by a
/// client that found a lock of this session's past its lease, asking the
/// memory blade to fence the session (end it: its queue pairs and memory
/// windows go); bits 0-13 the incarnation of the slot, bumped each time the
/// slot is handed out again.
constexpr uint64_t kSessionAliveBit = uint64_t{1} << 63;
constexpr uint64_t kSessionFenceBit = uint64_t{1} << 62;  ///< fence requested (see above)
constexpr int kSessionIncarnationBits = 14;  ///< width of the incarnation
constexpr uint64_t kSessionIncarnationMask = (uint64_t{1} << kSessionIncarnationBits) - 1;  ///< the incarnation bits of a session word
/// Offset in chunk 0 of session slot `slot`'s word.
inline uint64_t SessionWordAddress(int slot) { return kSessionTableOffset + 8 * static_cast<uint64_t>(slot); }

/// Who a client is to one memory blade: the session slot and incarnation the
/// blade gave it at the handshake. Lock words on that blade name their owner
/// with it.
struct SessionId {
  uint16_t slot = 0;         ///< 1 .. kMaxSessions-1; 0: not connected
  uint16_t incarnation = 0;  ///< kSessionIncarnationBits bits
};

/// How an operation is issued: queued only, queued and posted, or posted and
/// waited for together with everything the task queued before it.
enum class Option { kNone, kPost, kSync };

}  // namespace smart
