// CRC-32C: the standard check value, and both paths agreeing on buffers of
// many lengths and alignments.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "smart/crc32c.h"

namespace smart {
namespace {

TEST(Crc32c, KnownValues) {
  EXPECT_EQ(Crc32c("123456789", 9), 0xe3069283u);
  EXPECT_EQ(Crc32cPortable("123456789", 9), 0xe3069283u);
  EXPECT_EQ(Crc32c("", 0), 0u);
  const std::vector<uint8_t> zeros(32, 0);
  EXPECT_EQ(Crc32c(zeros.data(), zeros.size()), 0x8a9136aau);  // RFC 3720 B.4
  const std::vector<uint8_t> ones(32, 0xff);
  EXPECT_EQ(Crc32c(ones.data(), ones.size()), 0x62a8ab43u);
}

TEST(Crc32c, PathsAgreeOnEveryLengthAndAlignment) {
  if (!Crc32cHasSse42()) GTEST_SKIP() << "no SSE4.2 on this CPU";
  std::mt19937 random(3);
  std::vector<uint8_t> buffer(4096 + 16);
  for (auto& b : buffer) b = static_cast<uint8_t>(random());
  for (size_t offset = 0; offset < 8; ++offset) {
    for (size_t length = 0; length <= 300; ++length) {
      ASSERT_EQ(Crc32cSse42(buffer.data() + offset, length), Crc32cPortable(buffer.data() + offset, length))
          << "offset " << offset << " length " << length;
    }
    ASSERT_EQ(Crc32cSse42(buffer.data() + offset, 4096), Crc32cPortable(buffer.data() + offset, 4096));
    // Crc32c (ISA-L from 128 bytes where built with it) agrees too.
    for (size_t length : {size_t{60}, size_t{127}, size_t{128}, size_t{1000}, size_t{4096}}) {
      ASSERT_EQ(Crc32c(buffer.data() + offset, length), Crc32cPortable(buffer.data() + offset, length)) << length;
    }
  }
}

TEST(Crc32c, OneFlippedBitChangesTheValue) {
  std::vector<uint8_t> block(256, 0x5a);
  const uint32_t whole = Crc32c(block.data(), block.size());
  for (size_t i = 0; i < block.size(); i += 17) {
    block[i] ^= 0x10;
    EXPECT_NE(Crc32c(block.data(), block.size()), whole) << "byte " << i;
    block[i] ^= 0x10;
  }
}

}  // namespace
}  // namespace smart
