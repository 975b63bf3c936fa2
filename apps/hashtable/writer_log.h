// Writer logs for hashtable_check: each writer process records, per key, its
// last acknowledged write (sequence number and the interval, on the host's
// monotonic clock, during which the call ran), and a checker compares the
// table's final state with all writers' logs:
//   - the final value of a key is exactly some writer's last acknowledged
//     write of it (a value nobody was told about, or an older one, fails);
//   - no writer's last acknowledged write started after the final value's
//     write had returned (else that later acknowledged write was lost).
// All processes run on one host, so their monotonic clocks agree.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace smart::hashtable {

struct LoggedWrite {
  int writer = 0;
  uint64_t seq = 0;
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
};

// key id -> that writer's last acknowledged write.
using WriterLog = std::map<uint64_t, LoggedWrite>;

// Appends `log` to `path` as text lines "id writer seq start end". Throws
// smart::Error when the file cannot be written.
void SaveWriterLog(const std::string& path, const WriterLog& log);
// Reads every file into key id -> the writes logged for it (one per writer).
// Throws smart::Error naming the file and line that make no sense.
std::map<uint64_t, std::vector<LoggedWrite>> LoadWriterLogs(const std::vector<std::string>& paths);
// Checks a final value (writer, seq) of key `id` against the logged writes;
// returns "" when it is consistent, else what is wrong.
std::string CheckAgainstLog(uint64_t id, int writer, uint64_t seq, const std::vector<LoggedWrite>& writes);

}  // namespace smart::hashtable
