// The log sink: a host program routes the library's log lines.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "smart/logging.h"

namespace smart {
namespace {

class LoggingTest : public ::testing::Test {
 protected:
  void TearDown() override {
    SetLogSink(nullptr);
    SetVerbose(true);
  }
};

TEST_F(LoggingTest, ASinkReceivesEveryLineWithItsLevel) {
  std::vector<std::pair<LogLevel, std::string>> lines;
  SetLogSink([&](LogLevel level, const char* line) { lines.emplace_back(level, line); });
  SMART_INFO("one %d", 1);
  SMART_WARN("two %s", "2");
  SMART_ERROR("three");
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0], std::make_pair(LogLevel::kInfo, std::string("one 1")));
  EXPECT_EQ(lines[1], std::make_pair(LogLevel::kWarn, std::string("two 2")));
  EXPECT_EQ(lines[2], std::make_pair(LogLevel::kError, std::string("three")));
}

TEST_F(LoggingTest, QuietModeKeepsInfoLinesFromTheSink) {
  std::vector<std::string> lines;
  SetLogSink([&](LogLevel, const char* line) { lines.emplace_back(line); });
  SetVerbose(false);
  SMART_INFO("hidden");
  SMART_WARN("shown");
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0], "shown");
}

TEST_F(LoggingTest, AnEmptySinkRestoresStandardError) {
  int calls = 0;
  SetLogSink([&](LogLevel, const char*) { ++calls; });
  SetLogSink(nullptr);
  ::testing::internal::CaptureStderr();
  SMART_WARN("to stderr");
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(calls, 0);
  EXPECT_NE(err.find("[W] to stderr"), std::string::npos) << err;
}

}  // namespace
}  // namespace smart
