/// @file
/// CRC-32C (Castagnoli), the checksum applications keep in their blocks so
/// that a one-sided reader can tell a torn or recycled block from a whole one.
/// Standard parameters: Crc32c("123456789", 9) == 0xE3069283.
#pragma once

#include <cstddef>
#include <cstdint>

namespace smart {

/// The SSE4.2 instruction where the CPU has it, else a table.
uint32_t Crc32c(const void* data, size_t length);
/// Each path on its own (tests and benchmarks); Crc32cSse42 needs SSE4.2.
uint32_t Crc32cPortable(const void* data, size_t length);
/// The SSE4.2 path; the CPU must have SSE4.2.
uint32_t Crc32cSse42(const void* data, size_t length);
/// True when the CPU has the SSE4.2 CRC-32C instruction.
bool Crc32cHasSse42();

}  // namespace smart
