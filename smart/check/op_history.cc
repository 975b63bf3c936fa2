#include "smart/check/op_history.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "smart/bench/bench.h"
#include "smart/status.h"

namespace smart::check {

HistoryRecorder::HistoryRecorder(const std::string& path) {
  if (path.empty()) return;
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) throw Error("cannot write the history " + path + ": " + strerror(errno));
}

HistoryRecorder::~HistoryRecorder() {
  if (fd_ >= 0) ::close(fd_);
}

void HistoryRecorder::write_line(const std::string& line) {
  if (fd_ < 0) return;
  // One write per record: O_APPEND places it whole at the end of the file.
  const ssize_t n = ::write(fd_, line.data(), line.size());
  if (n != static_cast<ssize_t>(line.size())) ok_ = false;
}

void HistoryRecorder::invoke(Op* op) {
  op->call_ns = NowNs();
  write_line(op->client + ' ' + std::to_string(op->seq) + ' ' + op->key + ' ' + op->kind + ' ' + op->input + " ? " +
             std::to_string(op->call_ns) + " -\n");
}

void HistoryRecorder::complete(const Op& op, const std::string& output) {
  const uint64_t return_ns = NowNs();
  write_line(op.client + ' ' + std::to_string(op.seq) + ' ' + op.key + ' ' + op.kind + ' ' + op.input + ' ' + output +
             ' ' + std::to_string(op.call_ns) + ' ' + std::to_string(return_ns) + '\n');
}

}  // namespace smart::check
