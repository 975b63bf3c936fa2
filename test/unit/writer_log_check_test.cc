// The integration checkers' oracle (apps/hashtable/writer_log.h): what final
// state of a key the writers' logged operations allow.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <unistd.h>

#include "smart/status.h"
#include "smart/check/writer_log.h"

namespace smart::check {
namespace {

LoggedWrite Write(int writer, uint64_t seq, uint64_t start, uint64_t end) { return {writer, seq, start, end, false}; }
LoggedWrite Delete(int writer, uint64_t start, uint64_t end) { return {writer, 0, start, end, true}; }

TEST(WriterLogCheck, AValueMustBeItsWritersLastAcknowledgedWrite) {
  const std::vector<LoggedWrite> ops = {Write(0, 0, 10, 20), Write(1, 3, 30, 40)};
  EXPECT_EQ(CheckAgainstLog(7, 1, 3, ops), "");
  EXPECT_NE(CheckAgainstLog(7, 1, 2, ops).find("last acknowledged operation was its write 3"), std::string::npos);
  EXPECT_NE(CheckAgainstLog(7, 2, 3, ops).find("logged no write"), std::string::npos);
  // Writer 0's write returned before writer 1's started: it cannot be last.
  EXPECT_NE(CheckAgainstLog(7, 0, 0, ops).find("writer 1's write 3 started"), std::string::npos);
}

TEST(WriterLogCheck, OverlappingOperationsMayEndInEitherOrder) {
  const std::vector<LoggedWrite> ops = {Write(0, 1, 10, 50), Write(1, 1, 20, 30), Delete(2, 25, 60)};
  EXPECT_EQ(CheckAgainstLog(3, 0, 1, ops), "");
  EXPECT_EQ(CheckAgainstLog(3, 1, 1, ops), "");
  EXPECT_EQ(CheckAbsentAgainstLog(3, ops), "");
}

TEST(WriterLogCheck, AValueAfterAnAcknowledgedDeleteThatStartedLaterIsALostDelete) {
  const std::vector<LoggedWrite> ops = {Write(0, 1, 10, 20), Delete(1, 30, 40)};
  EXPECT_NE(CheckAgainstLog(3, 0, 1, ops).find("writer 1's delete started"), std::string::npos);
  EXPECT_NE(CheckAgainstLog(3, 1, 0, ops).find("last acknowledged operation was its delete"), std::string::npos);
  EXPECT_EQ(CheckAbsentAgainstLog(3, ops), "");
}

TEST(WriterLogCheck, AnAbsentKeyNeedsADeleteNoWriteStartedAfter) {
  EXPECT_EQ(CheckAbsentAgainstLog(3, {}), "");
  EXPECT_NE(CheckAbsentAgainstLog(3, {Write(0, 0, 10, 20)}).find("no delete was"), std::string::npos);
  // Deleted, then written again by another writer after the delete returned.
  const std::vector<LoggedWrite> reinserted = {Delete(0, 10, 20), Write(1, 2, 30, 40)};
  EXPECT_NE(CheckAbsentAgainstLog(3, reinserted).find("writer 1's write 2 started after every acknowledged delete"),
            std::string::npos);
  // A later delete by a third writer allows absence again; a delete that
  // follows another delete is no conflict.
  std::vector<LoggedWrite> deleted_again = reinserted;
  deleted_again.push_back(Delete(2, 50, 60));
  EXPECT_EQ(CheckAbsentAgainstLog(3, deleted_again), "");
  EXPECT_EQ(CheckAbsentAgainstLog(3, {Delete(0, 10, 20), Delete(1, 30, 40)}), "");
}

TEST(WriterLogCheck, LogsRoundTripAndBadLinesAreNamed) {
  char dir[] = "/tmp/writer_log_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/w.log";
  WriterLog log;
  log[5] = Write(2, 9, 100, 200);
  log[6] = Delete(2, 300, 400);
  SaveWriterLog(path, log);
  auto loaded = LoadWriterLogs({path});
  ASSERT_EQ(loaded.size(), 2u);
  EXPECT_EQ(loaded[5][0].seq, 9u);
  EXPECT_FALSE(loaded[5][0].deleted);
  EXPECT_TRUE(loaded[6][0].deleted);
  EXPECT_EQ(loaded[6][0].end_ns, 400u);
  for (const std::string bad : {"1 2 3 4 5", "1 2 3 4 5 x", "1 2 3 9 5 w", "1 2 3 4 5 w extra"}) {
    std::ofstream(path) << "5 2 9 100 200 w\n" << bad << "\n";
    try {
      LoadWriterLogs({path});
      ADD_FAILURE() << "\"" << bad << "\" was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(path + ":2:"), std::string::npos) << e.what();
    }
  }
  unlink(path.c_str());
  rmdir(dir);
}

}  // namespace
}  // namespace smart::check
