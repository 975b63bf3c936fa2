// Operation histories for the linearizability checker
// (test/linearizability/): every operation a client issues, with its
// outcome and the interval in which it ran, one line per record:
//
//   client seq key kind input output call_ns return_ns
//
// kind is search, insert, update, delete or rmw; input is the value written
// ("-" for search, delete and rmw); output is "ok", "not-found", or the value
// a search read or an rmw wrote. Times are CLOCK_MONOTONIC nanoseconds, which every process on a host
// shares. Before an operation starts, its record is written with output "?"
// and return_ns "-"; when it returns, the record is written again, complete,
// with the same client and seq. A record never completed is an operation
// whose outcome nobody saw (its process died, or it failed with an error):
// it may have taken effect at any time after it was invoked. Values and keys
// hold no whitespace.
//
// Each record is one write(2) to a file opened with O_APPEND, so records of
// the threads of a process never interleave, and what a killed process
// wrote stays in the file.
#pragma once

#include <cstdint>
#include <string>

namespace smart::check {

class HistoryRecorder {
 public:
  // Appends to `path` (created if absent); with an empty path it records
  // nothing. Throws smart::Error when the file cannot be opened.
  explicit HistoryRecorder(const std::string& path);
  ~HistoryRecorder();
  HistoryRecorder(const HistoryRecorder&) = delete;
  HistoryRecorder& operator=(const HistoryRecorder&) = delete;

  struct Op {
    std::string client;  // e.g. "w1.5": process 1, worker 5
    uint64_t seq = 0;    // per client
    std::string key;
    const char* kind = "";
    std::string input;   // "-" when the operation writes no value
    uint64_t call_ns = 0;
  };
  // Records the invocation of `op` and sets its call time (now).
  void invoke(Op* op);
  // Records that `op` returned `output` ("ok", "not-found" or a value) now.
  void complete(const Op& op, const std::string& output);
  // False once a record could not be written (then the history is useless).
  bool ok() const { return ok_; }

 private:
  void write_line(const std::string& line);
  int fd_ = -1;
  bool ok_ = true;
};

}  // namespace smart::check
