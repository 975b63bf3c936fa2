// The value formats of hashtable_check (apps/hashtable/check_support.h,
// Bump from smart/check/contend.h): its read-modify-write must bump a value
// exactly as the linearizability checker's model does
// (test/linearizability/model.go, Bump, and its test
// TestBumpCountsUpATrailingNumber), or every history with one would fail.
#include <gtest/gtest.h>

#include "check_support.h"

namespace smart::hashtable::check {
namespace {

TEST(HashTableCheckValues, BumpCountsUpATrailingNumberAsTheModelDoes) {
  const std::pair<const char*, const char*> cases[] = {
      {"w1:5:3", "w1:5:3+1"}, {"w1:5:3+1", "w1:5:3+2"}, {"a+9", "a+10"},
      {"a+", "a++1"},         {"a+01", "a+01+1"},       {"", "+1"},
      {"a+18446744073709551615", "a+0"},  // wraps, as Go's uint64 does
      {"a+18446744073709551616", "a+18446744073709551616+1"},  // not a uint64: a new counter
      {"a+-1", "a+-1+1"},
  };
  for (const auto& [in, want] : cases) EXPECT_EQ(Bump(in), want) << in;
}

TEST(HashTableCheckValues, ABumpedValueIsNoPlainValue) {
  int writer;
  uint64_t id, seq;
  EXPECT_TRUE(ParseValue(Value(2, 7, 3), &writer, &id, &seq));
  EXPECT_FALSE(ParseValue(Bump(Value(2, 7, 3)), &writer, &id, &seq));
}

}  // namespace
}  // namespace smart::hashtable::check
