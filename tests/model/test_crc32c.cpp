#include "rankscope/model/crc32c.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace rankscope {
namespace {

TEST(Crc32c, MatchesPublishedCheckValue) {
  // The CRC-32C check value from the iSCSI specification (RFC 3720, B.4).
  EXPECT_EQ(crc32c("123456789", 9), 0xE3069283u);
  EXPECT_EQ(crc32c_portable("123456789", 9), 0xE3069283u);
  EXPECT_EQ(crc32c("", 0), 0u);
}

TEST(Crc32c, InstructionAndTableAgreeOnEveryLengthAndAlignment) {
  std::mt19937 random(7);
  std::vector<unsigned char> data(4096 + 16);
  for (auto& byte : data) byte = static_cast<unsigned char>(random());
  for (size_t offset = 0; offset < 8; ++offset) {
    for (size_t size : {0, 1, 7, 8, 9, 63, 64, 65, 1000, 4096}) {
      EXPECT_EQ(crc32c(data.data() + offset, size), crc32c_portable(data.data() + offset, size))
          << "offset " << offset << " size " << size;
    }
  }
}

TEST(Crc32c, ContinuesAcrossPieces) {
  const char text[] = "the quick brown fox jumps over the lazy dog";
  const uint32_t whole = crc32c(text, sizeof(text) - 1);
  const uint32_t first = crc32c(text, 10);
  EXPECT_EQ(crc32c(text + 10, sizeof(text) - 11, first), whole);
}

}  // namespace
}  // namespace rankscope
