#include "smart/util/peer_text.h"

#include <cstdio>

namespace smart {

std::string PeerText(const std::string& text, size_t max) {
  std::string out;
  const size_t shown = text.size() < max ? text.size() : max;
  out.reserve(shown + 16);
  for (size_t i = 0; i < shown; ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c > 0x7e) {
      char buf[8];
      snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  if (shown < text.size()) out += "... (" + std::to_string(text.size()) + " bytes)";
  return out;
}

bool LogRateLimit::allow(uint64_t* suppressed) {
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lock(mutex_);
  if (now < next_) {
    ++suppressed_;
    return false;
  }
  next_ = now + interval_;
  *suppressed = suppressed_;
  suppressed_ = 0;
  return true;
}

std::string LogRateLimit::Suppressed(uint64_t n) {
  if (n == 0) return "";
  return ", " + std::to_string(n) + " more since the last line not logged";
}

}  // namespace smart
