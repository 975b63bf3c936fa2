// The commands both checkers run the same way, through the store interface
// of Checker (checker.h). Each returns the process's exit status.
//
// Writing commands (write_commands.cc): a writer logs, per key, only the
// operations it was told took effect (writer_log.h), so that check-log can
// compare the final state with them. Reading commands (read_commands.cc).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "smart/check/checker.h"
#include "smart/check/writer_log.h"
#include "smart/initiator.h"

namespace smart::check {

// A worker of a writing command: its key ids are first, first + step, ...
// below --to; it records in `log` (through `recorder`) each operation it
// was told succeeded.
using WriterWork = std::function<void(WriteRecorder& recorder, WriterLog& log, uint64_t first, uint64_t step)>;

// Runs `work` on every worker, merges the workers' logs into the one this
// writer saves (the first --log), and ends with the command's summary.
int RunWriters(Checker& c, const CheckOptions& o, const std::string& what, const WriterWork& work);

// insert: writes every id the checker writes `rounds` times, seq = round - 1.
int Insert(Checker& c, const CheckOptions& o, int rounds);
// update: every round writes seq = round to each id of the worker, in order.
int Update(Checker& c, const CheckOptions& o);
// delete: deletes each id once, but those that stay.
int Delete(Checker& c, const CheckOptions& o);
// churn: every round deletes or (re)inserts each id, as ChurnDeletes picks.
int Churn(Checker& c, const CheckOptions& o);

// read: readers sweep the ids for --duration seconds; every value is
// checked, and per key and writer the sequence number a task sees never goes
// down.
int Read(Checker& c, const CheckOptions& o);

// A unit of the store (a block, a leaf) torn on purpose, as a concurrent
// writer would leave it, to check that a reader detects it and reads again.
struct Tear {
  std::string unit;      // as the messages name it: "block", "leaf"
  uint64_t id = 0;       // the key id the reader searches, whose value is in the unit
  GlobalAddress where;   // the unit in remote memory
  size_t length = 0;
  // Turns `torn`, a copy of the whole unit `whole`, into the torn one; false
  // when it failed the checker (the command then ends).
  std::function<bool(const char* whole, char* torn)> tear;
  // Checks what the reader returned once the unit was whole again.
  std::function<void(const std::string& value)> check;
};

// torn: writes the torn unit, lets a reader run into it, restores the unit
// only after the reader has found it torn three times (it must not return
// meanwhile), and checks what the reader returned.
int TornRead(Checker& c, const Tear& t);

}  // namespace smart::check
