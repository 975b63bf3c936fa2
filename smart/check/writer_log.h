// Writer logs for the integration checkers (hashtable_check, btree_check;
// the library smart_check, which is not part of the engine):
// each writer process records, per key, its last acknowledged operation (a
// write with its sequence number, or a delete) and the interval, on the
// host's monotonic clock, during which the call ran. A checker compares the
// final state with all writers' logs:
//   - a key that holds a value holds exactly some writer's last acknowledged
//     write of it (a value nobody was told about, or an older one, fails),
//     and no other writer's last acknowledged operation (write or delete)
//     started after that write had returned (else that operation was lost);
//   - a key that is absent had an acknowledged delete as some writer's last
//     operation, and no other writer's acknowledged write started after that
//     delete had returned (else the write was lost); a key nobody logged may
//     be absent.
// All processes run on one host, so their monotonic clocks agree.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace smart::check {

struct LoggedWrite {
  int writer = 0;
  uint64_t seq = 0;       // of a write; 0 for a delete
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  bool deleted = false;   // the operation was a delete
};

// key id -> that writer's last acknowledged operation.
using WriterLog = std::map<uint64_t, LoggedWrite>;

// Records a writer process's last acknowledged operation per key, merged
// from its workers (each fills its own WriterLog without locking), and saves
// them to a log file; with no path it records nothing.
class WriteRecorder {
 public:
  // Operations are logged as writer `writer`'s, to `path` (may be empty).
  WriteRecorder(int writer, std::string path) : writer_(writer), path_(std::move(path)) {}
  // A write of seq that started at start_ns (NowNs()) returned success now.
  void acknowledged(WriterLog* worker_log, uint64_t id, uint64_t seq, uint64_t start_ns);
  // A delete that started at start_ns returned success now.
  void deleted(WriterLog* worker_log, uint64_t id, uint64_t start_ns);
  // A worker's log; later operations of a key replace earlier ones.
  void merge(const WriterLog& worker_log);
  // Appends the records to the file. Throws smart::Error when it cannot.
  void save();

 private:
  const int writer_;
  const std::string path_;
  std::mutex mutex_;
  WriterLog all_;
};

// The checkers' churn command: whether writer `writer` deletes key `id` in
// round `round` (about one time in three) rather than writing it. A hash,
// so that writers on the same keys interleave deletes and writes
// differently, and a run can be repeated.
inline bool ChurnDeletes(int writer, uint64_t id, int round) {
  const uint64_t pick = (id * 0x9e3779b97f4a7c15ull) ^ (static_cast<uint64_t>(round) * 0xbf58476d1ce4e5b9ull) ^
                        (static_cast<uint64_t>(writer) * 0x94d049bb133111ebull);
  return (pick >> 29) % 3 == 0;
}

// Appends `log` to `path` as text lines "id writer seq start end kind", kind
// w (write) or d (delete). Throws smart::Error when the file cannot be
// written.
void SaveWriterLog(const std::string& path, const WriterLog& log);
// Reads every file into key id -> the operations logged for it (one per
// writer). Throws smart::Error naming the file and line that make no sense.
std::map<uint64_t, std::vector<LoggedWrite>> LoadWriterLogs(const std::vector<std::string>& paths);
// Checks a final value (writer, seq) of key `id` against the logged
// operations; returns "" when it is consistent, else what is wrong.
std::string CheckAgainstLog(uint64_t id, int writer, uint64_t seq, const std::vector<LoggedWrite>& writes);
// Checks that key `id` may be absent after the logged operations; returns ""
// when it may, else the acknowledged write that was lost.
std::string CheckAbsentAgainstLog(uint64_t id, const std::vector<LoggedWrite>& writes);

}  // namespace smart::check
