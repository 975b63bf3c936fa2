/// @file
/// Error reporting: setup code throws smart::Error; the data path returns
/// smart::Status and never throws.
#pragma once

#include <memory>
#include <stdexcept>
#include <string>

namespace smart {

/// Thrown by setup code (configuration, connection, registration) with a
/// message a user can act on.
class Error : public std::runtime_error {
 public:
  /// An error with message `what`.
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

/// The outcome of a data-path call: OK, or a code with a message. A Status
/// that is dropped unread is a compile-time warning ([[nodiscard]]).
class [[nodiscard]] Status {
 public:
  /// What kind of failure a Status reports.
  enum class Code : uint8_t {
    kOk = 0,  ///< success
    kInvalidArgument,   ///< a bad address, size or option, caught before posting
    kRemoteAccess,      ///< the memory blade refused the access (rkey, bounds)
    kWorkRequestError,  ///< any other failed completion
    kPeerFailed,        ///< the memory blade died or the queue pair is broken
    kOutOfMemory,       ///< remote or local memory exhausted
    kNotFound,  ///< the key, name or entry does not exist
    kRetry,             ///< the caller lost a race and should retry
    kLockLost,          ///< another client took over a lock this one held
    kTimedOut,          ///< waited longer than the configured bound
    kInternal,  ///< a bug or a state the framework cannot explain
    /// The operation may or may not have taken effect (a write was posted and
    /// its completion failed, a commit's writes did not all complete): read
    /// the data to learn which. Never reported for an operation known to
    /// have failed, nor for one known to have succeeded.
    kOutcomeUnknown,
  };

  Status() = default;  ///< OK; costs one null pointer
  /// A status with `code` and `message`.
  Status(Code code, std::string message)
      : state_(std::make_shared<const State>(State{code, std::move(message)})) {}

  /// @name Factories: a status of each code, with a message
  //@{
  /// A status of the code the factory is named after.
  static Status OK() { return Status(); }
  static Status InvalidArgument(std::string m) { return Status(Code::kInvalidArgument, std::move(m)); }
  static Status RemoteAccess(std::string m) { return Status(Code::kRemoteAccess, std::move(m)); }
  static Status WorkRequestError(std::string m) { return Status(Code::kWorkRequestError, std::move(m)); }
  static Status PeerFailed(std::string m) { return Status(Code::kPeerFailed, std::move(m)); }
  static Status OutOfMemory(std::string m) { return Status(Code::kOutOfMemory, std::move(m)); }
  static Status NotFound(std::string m) { return Status(Code::kNotFound, std::move(m)); }
  static Status LockLost(std::string m) { return Status(Code::kLockLost, std::move(m)); }
  static Status TimedOut(std::string m) { return Status(Code::kTimedOut, std::move(m)); }
  static Status Retry(std::string m) { return Status(Code::kRetry, std::move(m)); }
  static Status Internal(std::string m) { return Status(Code::kInternal, std::move(m)); }
  static Status OutcomeUnknown(std::string m) { return Status(Code::kOutcomeUnknown, std::move(m)); }

  //@}
  /// True on success.
  bool ok() const { return state_ == nullptr; }
  /// Same as ok().
  explicit operator bool() const { return ok(); }
  /// The code; kOk on success.
  Code code() const { return state_ ? state_->code : Code::kOk; }
  /// The message; empty on success.
  const std::string& message() const;
  /// "OK", or the code's name, ": " and the message.
  std::string ToString() const;

 private:
  struct State {
    Code code;
    std::string message;
  };
  std::shared_ptr<const State> state_;
};

/// A readable name of `code` ("invalid argument", "peer failed", ...), as ToString() prints it.
const char* StatusCodeName(Status::Code code);

}  // namespace smart
