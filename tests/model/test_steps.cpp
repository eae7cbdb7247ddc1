#include "rankscope/model/steps.h"

#include <gtest/gtest.h>

namespace rankscope {
namespace {

TEST(Steps, StepNumbersOfRangeNames) {
  EXPECT_EQ(step_number("ProfilerStep#0"), 0u);
  EXPECT_EQ(step_number("ProfilerStep#1042"), 1042u);
  for (const char* other : {"ProfilerStep#", "ProfilerStep#1a", "ProfilerStep 3", "profilerstep#3", "forward",
                            "ProfilerStep#1234567890123456789"}) {
    EXPECT_FALSE(step_number(other).has_value()) << other;
  }
}

TEST(Steps, Selections) {
  const auto both = parse_step_selection("3:5");
  ASSERT_TRUE(both);
  EXPECT_EQ(both->first, 3u);
  EXPECT_EQ(both->last, 5u);
  EXPECT_EQ(both->period, 0u);
  EXPECT_EQ(parse_step_selection("4")->first, 4u);
  EXPECT_EQ(parse_step_selection("4")->last, 4u);
  EXPECT_FALSE(parse_step_selection("4:")->last.has_value());
  EXPECT_FALSE(parse_step_selection(":4")->first.has_value());
  EXPECT_EQ(parse_step_selection("100:109/1000")->period, 1000u);
  EXPECT_TRUE(parse_step_selection("1:9/10").has_value()) << "nine of every ten steps";
  for (const char* text : {"3:5", "4:", ":4", "100:109/1000", ":1/5"}) {
    EXPECT_EQ(parse_step_selection(text)->text(), text);
  }
  for (const char* bad : {"", ":", "5:3", "a:b", "1:2:3", "1:2/", "1:2/0", "4:/10", "1:10/10", "0:9/10", "1:3/x", "/5"}) {
    EXPECT_FALSE(parse_step_selection(bad).has_value()) << bad;
  }
}

TEST(Steps, Membership) {
  const StepSelection window = *parse_step_selection("3:5");
  for (uint64_t n : {3, 4, 5}) EXPECT_TRUE(window.contains(n)) << n;
  for (uint64_t n : {0, 2, 6, 100}) EXPECT_FALSE(window.contains(n)) << n;
  EXPECT_TRUE(parse_step_selection("7:")->contains(1'000'000));
  EXPECT_TRUE(parse_step_selection(":2")->contains(0));
  EXPECT_FALSE(parse_step_selection(":2")->contains(3));
  // Ten steps every thousand: 100-109, 1100-1109, ...
  const StepSelection repeating = *parse_step_selection("100:109/1000");
  for (uint64_t n : {100, 109, 1100, 1109, 5105}) EXPECT_TRUE(repeating.contains(n)) << n;
  for (uint64_t n : {0, 99, 110, 1099, 1110, 5000}) EXPECT_FALSE(repeating.contains(n)) << n;
}

}  // namespace
}  // namespace rankscope
