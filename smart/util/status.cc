#include "smart/status.h"

#include <cstdio>

#include "smart/common.h"

namespace smart {

const char* StatusCodeName(Status::Code code) {
  switch (code) {
    case Status::Code::kOk:
      return "OK";
    case Status::Code::kInvalidArgument:
      return "invalid argument";
    case Status::Code::kRemoteAccess:
      return "remote access error";
    case Status::Code::kWorkRequestError:
      return "work request error";
    case Status::Code::kPeerFailed:
      return "peer failed";
    case Status::Code::kOutOfMemory:
      return "out of memory";
    case Status::Code::kNotFound:
      return "not found";
    case Status::Code::kRetry:
      return "retry";
    case Status::Code::kLockLost:
      return "lock lost";
    case Status::Code::kTimedOut:
      return "timed out";
    case Status::Code::kInternal:
      return "internal error";
    case Status::Code::kOutcomeUnknown:
      return "outcome unknown";
  }
  return "unknown";
}

const std::string& Status::message() const {
  static const std::string empty;
  return state_ ? state_->message : empty;
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  return std::string(StatusCodeName(state_->code)) + ": " + state_->message;
}

std::string GlobalAddress::to_string() const {
  if (is_null()) return "null";
  char buf[64];
  snprintf(buf, sizeof(buf), "node %u mr %u offset 0x%llx", static_cast<unsigned>(node),
           static_cast<unsigned>(mr_id), static_cast<unsigned long long>(offset));
  return buf;
}

}  // namespace smart
