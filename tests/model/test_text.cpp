#include "rankscope/model/text.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include "rankscope/model/error.h"
#include "rankscope/model/shard.h"

namespace rankscope {
namespace {

TEST(Text, Integers) {
  EXPECT_EQ(parse_integer<int32_t>("42"), 42);
  EXPECT_EQ(parse_integer<int32_t>("-7"), -7);
  for (const char* bad : {"", " 1", "1 ", "1x", "0x10", "2147483648"}) {
    EXPECT_FALSE(parse_integer<int32_t>(bad).has_value()) << bad;
  }
  EXPECT_FALSE(parse_integer<uint64_t>("-1").has_value());
}

TEST(Text, EnvironmentIntegers) {
  unsetenv("RANKSCOPE_TEST_INTEGER");
  EXPECT_EQ(env_integer<int>("RANKSCOPE_TEST_INTEGER", 5), 5);
  setenv("RANKSCOPE_TEST_INTEGER", "12", 1);
  EXPECT_EQ(env_integer<int>("RANKSCOPE_TEST_INTEGER", 5), 12);
  setenv("RANKSCOPE_TEST_INTEGER", "12ms", 1);
  EXPECT_EQ(env_integer<int>("RANKSCOPE_TEST_INTEGER", 5), 5);
  setenv("RANKSCOPE_TEST_INTEGER", "", 1);
  EXPECT_EQ(env_integer<int>("RANKSCOPE_TEST_INTEGER", 5), 5);
  unsetenv("RANKSCOPE_TEST_INTEGER");
}

TEST(Text, RankListsParse) {
  EXPECT_EQ(parse_rank_list("0-3,8"), (std::vector<int32_t>{0, 1, 2, 3, 8}));
  EXPECT_EQ(parse_rank_list("5,1,1-2"), (std::vector<int32_t>{1, 2, 5}));
  EXPECT_EQ(parse_rank_list("7"), (std::vector<int32_t>{7}));
  for (const char* bad : {"", "a", "3-1", "1,", "-2", "1-", "0-99999999999"}) {
    EXPECT_THROW(parse_rank_list(bad), Error) << bad;
  }
  try {
    parse_rank_list("x", "RANKSCOPE_RANKS");
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "RANKSCOPE_RANKS: 'x' is not a list of ranks like 0-3,8");
  }
}

TEST(Text, RankListsPrintAsTheyParse) {
  EXPECT_EQ(format_rank_list({}), "none");
  EXPECT_EQ(format_rank_list({3}), "3");
  EXPECT_EQ(format_rank_list({0, 1}), "0,1");
  EXPECT_EQ(format_rank_list({0, 1, 2, 3, 8, 10, 11}), "0-3,8,10,11");
  for (const std::vector<int32_t>& ranks : std::vector<std::vector<int32_t>>{{0, 1}, {0, 1, 2, 3, 8}, {2, 4, 5, 6, 9}}) {
    EXPECT_EQ(parse_rank_list(format_rank_list(ranks)), ranks);
  }
}

TEST(Text, UtcTimesToTheNanosecond) {
  EXPECT_EQ(format_utc_time(0), "1970-01-01T00:00:00.000000000Z");
  EXPECT_EQ(format_utc_time(1'716'398'122'123'456'789), "2024-05-22T17:15:22.123456789Z");
  EXPECT_EQ(format_utc_time(-1), "1969-12-31T23:59:59.999999999Z");
}

TEST(Text, ShardFileNames) {
  EXPECT_EQ(shard_file_name(7), "rank-00007.shard");
  EXPECT_EQ(shard_file_name(123456, ".finalized"), "rank-123456.finalized");
  EXPECT_EQ(shard_file_rank("rank-00007.shard"), 7);
  EXPECT_EQ(shard_file_rank("rank-00007.finalized", ".finalized"), 7);
  for (const char* other : {"rank-00007.shard.partial", "rank-.shard", "rank--1.shard", "trace-0.shard", "rank-7x.shard"}) {
    EXPECT_FALSE(shard_file_rank(other).has_value()) << other;
  }
  EXPECT_TRUE(is_shard_file("trace-0.shard"));
  EXPECT_FALSE(is_shard_file(".shard"));
  EXPECT_FALSE(is_shard_file("rank-00001.shard.partial"));
}

}  // namespace
}  // namespace rankscope
