// AppendCsvLine: result files that several benches append to at once.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "smart/bench/bench.h"
#include "smart/status.h"

namespace smart {
namespace {

std::vector<std::string> Lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

TEST(CsvOutput, ANewFileGetsItsHeaderOnceEvenWithWritersRacing) {
  constexpr int kRounds = 30, kWriters = 8;
  for (int round = 0; round < kRounds; ++round) {
    const std::string path = ::testing::TempDir() + "/race_" + std::to_string(round) + ".csv";
    std::remove(path.c_str());
    std::atomic<int> ready{0};
    std::vector<std::thread> writers;
    for (int w = 0; w < kWriters; ++w) {
      writers.emplace_back([&, w] {
        ready.fetch_add(1);
        while (ready.load() < kWriters) {
        }
        AppendCsvLine(path, "row, " + std::to_string(w), "name, value");
      });
    }
    for (std::thread& t : writers) t.join();
    const std::vector<std::string> lines = Lines(path);
    ASSERT_EQ(lines.size(), static_cast<size_t>(kWriters + 1)) << "round " << round;
    EXPECT_EQ(lines[0], "name, value");
    for (size_t i = 1; i < lines.size(); ++i) EXPECT_EQ(lines[i].rfind("row, ", 0), 0u) << lines[i];
    std::remove(path.c_str());
  }
}

TEST(CsvOutput, AnExistingFileGetsNoSecondHeaderAndNoPathWritesNothing) {
  const std::string path = ::testing::TempDir() + "/existing.csv";
  std::remove(path.c_str());
  AppendCsvLine(path, "a, 1", "name, value");
  AppendCsvLine(path, "b, 2", "name, value");
  EXPECT_EQ(Lines(path), (std::vector<std::string>{"name, value", "a, 1", "b, 2"}));
  AppendCsvLine("", "c, 3", "name, value");  // no file: nothing, no error
  EXPECT_THROW(AppendCsvLine(::testing::TempDir() + "/no/such/dir/x.csv", "d, 4"), Error);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace smart
