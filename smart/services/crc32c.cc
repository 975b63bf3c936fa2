// CRC-32C: the SSE4.2 crc32 instruction, 8 bytes a step, or a table; with
// ISA-L, its folding implementation for blocks of 128 bytes and more, where
// it is 1.4-2.8x faster (test/bench/crc32c_bench.cc); below that the plain
// instruction loop wins.
#include "smart/crc32c.h"

#include <nmmintrin.h>
#ifdef SMART_HAVE_ISAL
#include <isa-l/crc.h>
#endif

#include <cstring>

namespace smart {

namespace {

// Table-driven CRC-32C for machines without SSE4.2.
struct Crc32cTable {
  uint32_t t[256];
  Crc32cTable() {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82f63b78u : c >> 1;
      t[i] = c;
    }
  }
};

}  // namespace

uint32_t Crc32cPortable(const void* data, size_t length) {
  static const Crc32cTable table;
  const auto* p = static_cast<const uint8_t*>(data);
  uint32_t c = ~0u;
  for (size_t i = 0; i < length; ++i) c = table.t[(c ^ p[i]) & 0xff] ^ (c >> 8);
  return ~c;
}

__attribute__((target("sse4.2"))) uint32_t Crc32cSse42(const void* data, size_t length) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint64_t c = ~0u;
  size_t i = 0;
  for (; i + 8 <= length; i += 8) {
    uint64_t word;
    memcpy(&word, p + i, 8);
    c = _mm_crc32_u64(c, word);
  }
  uint32_t c32 = static_cast<uint32_t>(c);
  // A block's checked length is 64k - 4: its tail is one 4-byte step (the
  // same CRC as four 1-byte steps).
  if (i + 4 <= length) {
    uint32_t word;
    memcpy(&word, p + i, 4);
    c32 = _mm_crc32_u32(c32, word);
    i += 4;
  }
  for (; i < length; ++i) c32 = _mm_crc32_u8(c32, p[i]);
  return ~c32;
}


namespace {
// Decided once at load time, so that Crc32c pays no guard on each call.
const bool g_has_sse42 = [] {
  __builtin_cpu_init();
  return __builtin_cpu_supports("sse4.2") != 0;
}();
}  // namespace

bool Crc32cHasSse42() { return g_has_sse42; }

uint32_t Crc32c(const void* data, size_t length) {
#ifdef SMART_HAVE_ISAL
  if (length >= 128) {
    // ISA-L takes and returns the register without the final inversion.
    return ~crc32_iscsi(static_cast<unsigned char*>(const_cast<void*>(data)), static_cast<int>(length), ~0u);
  }
#endif
  return g_has_sse42 ? Crc32cSse42(data, length) : Crc32cPortable(data, length);
}

}  // namespace smart
