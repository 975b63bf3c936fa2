// Logging what another party sent or caused: its text made safe for a log
// line, and a bound on how often one kind of line is written.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>

namespace smart {

// At most this many bytes of a peer's text reach a log line or an error.
constexpr size_t kMaxPeerText = 256;

// `text` as it may go into one log line: printable ASCII as is, the
// backslash as \\, newline, carriage return and tab as \n, \r, \t, every
// other byte (ESC, other control bytes, bytes above 0x7e) as \xNN. Only the
// first `max` bytes of the text are shown; a longer text ends in
// "... (N bytes)".
std::string PeerText(const std::string& text, size_t max = kMaxPeerText);

// One kind of log line, written at most once per interval however often it
// happens (a flood of refused connections writes a line a second, not a
// line per connection). Thread-safe.
class LogRateLimit {
 public:
  explicit LogRateLimit(std::chrono::milliseconds interval = std::chrono::seconds(1)) : interval_(interval) {}
  // True when a line may be written now; then *suppressed holds how many
  // were held back since the last line written.
  bool allow(uint64_t* suppressed);
  // ", N more since the last line not logged" when n > 0, else "".
  static std::string Suppressed(uint64_t n);

 private:
  std::mutex mutex_;
  std::chrono::milliseconds interval_;
  std::chrono::steady_clock::time_point next_{};
  uint64_t suppressed_ = 0;
};

}  // namespace smart
