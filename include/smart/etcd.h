/// @file etcd.h
/// A small etcd v3 client over etcd's JSON gateway (HTTP/1.1, libcurl):
/// the calls membership needs (keys, leases, a compare-and-put transaction,
/// watches), each bounded in time, each failure a Status that names the
/// call and what went wrong.
///
/// Nothing of it is on the data path: membership changes are rare, and a
/// watch is one long request. A Client is not thread-safe: one per thread
/// (each keeps its own HTTP connection alive between calls).
///
/// Outcomes. A call that changes etcd (put, delete, transaction, lease
/// grant or revoke) and fails after its request may have reached etcd
/// (a timeout waiting for the answer, a connection cut mid-request, etcd's
/// own "request timed out") returns kOutcomeUnknown: it may have taken
/// effect. A call refused before it was sent (no connection) or refused by
/// etcd with a definite error returns kPeerFailed or the matching code.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "smart/status.h"

namespace smart::etcd {

/// One key as etcd returns it.
struct KeyValue {
  std::string key;    ///< the key's bytes
  std::string value;  ///< its value's bytes
  int64_t create_revision = 0;  ///< revision that created the key (0: absent)
  int64_t mod_revision = 0;     ///< revision of its last change
  int64_t version = 0;          ///< changes since it was created
  int64_t lease = 0;            ///< the lease it is attached to (0: none)
};

/// The answer to a range read.
struct RangeResult {
  std::vector<KeyValue> kvs;  ///< the keys found, in key order
  int64_t revision = 0;       ///< etcd's revision when it answered
  bool more = false;          ///< more keys matched than were returned
};

/// The answer to a compare-and-put transaction.
struct TxnResult {
  bool succeeded = false;  ///< the comparison held and the put was applied
  int64_t revision = 0;    ///< etcd's revision after the transaction
  /// When the comparison failed: the key as it is now (absent: create_revision 0).
  KeyValue current;
};

/// A granted lease.
struct Lease {
  int64_t id = 0;     ///< etcd's lease ID
  int64_t ttl_s = 0;  ///< seconds etcd granted
};

/// One change a watch reports.
struct WatchEvent {
  /// What happened to the key.
  enum class Type { kPut, kDelete };
  Type type = Type::kPut;  ///< what happened to the key
  KeyValue kv;  ///< for a delete: the key, and mod_revision of the delete
};

/// One message of a watch stream.
struct WatchBatch {
  bool created = false;   ///< the first message: the watch is in place
  bool canceled = false;  ///< etcd ended the watch (see cancel_reason)
  std::string cancel_reason;  ///< etcd's reason, when canceled
  int64_t compact_revision = 0;  ///< set when start_revision was compacted away
  int64_t revision = 0;          ///< etcd's revision when it sent this
  std::vector<WatchEvent> events;  ///< the changes, in revision order
};

/// How a Client reaches etcd.
struct ClientOptions {
  /// etcd's client URL, e.g. "http://127.0.0.1:2379" (one endpoint).
  std::string endpoint;
  /// Bound on making the TCP connection.
  std::chrono::milliseconds connect_timeout{1000};
  /// Bound on one call, connection included (not on a watch: see Watch()).
  std::chrono::milliseconds request_timeout{3000};
};

/// An etcd v3 client over the JSON gateway. Not thread-safe.
class Client {
 public:
  /// Checks the options (the endpoint must be an http:// URL); makes no
  /// connection yet.
  static Status Open(const ClientOptions& options, std::unique_ptr<Client>* out);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  /// The key's value; kNotFound when it is absent.
  Status Get(const std::string& key, KeyValue* out, int64_t* revision = nullptr);
  /// Every key that starts with `prefix` (at most `limit`, 0: no limit).
  Status GetPrefix(const std::string& prefix, RangeResult* out, int64_t limit = 0);
  /// Sets the key, attached to `lease` when not 0. *revision (if given):
  /// the revision of the put.
  Status Put(const std::string& key, const std::string& value, int64_t lease = 0,
             int64_t* revision = nullptr);
  /// Puts `value` only when the key's mod_revision is `expected_mod_revision`
  /// (0: only when the key is absent); out->succeeded says which. One
  /// proposer of several with the same expectation succeeds.
  Status PutIf(const std::string& key, int64_t expected_mod_revision, const std::string& value,
               int64_t lease, TxnResult* out);
  /// Deletes the key (or every key under a prefix when `prefix` is true);
  /// *deleted (if given): how many went.
  Status Delete(const std::string& key, bool prefix = false, int64_t* deleted = nullptr);

  /// A new lease of `ttl_s` seconds (etcd counts leases in whole seconds).
  Status GrantLease(int64_t ttl_s, Lease* out);
  /// Renews the lease once; *ttl_s: the seconds it now has. kLockLost when
  /// etcd no longer knows it (it lapsed or was revoked).
  Status KeepAlive(int64_t lease, int64_t* ttl_s = nullptr);
  /// Ends the lease now; its keys are deleted.
  Status RevokeLease(int64_t lease);

  /// Watches every key under `prefix` from `start_revision` (0: from now)
  /// and calls `on_batch` for each message, the first being `created`.
  /// Returns OK once `on_batch` returns false or *stop (checked at least
  /// every 100 ms) becomes true; kTimedOut once `max_duration` has passed;
  /// kPeerFailed when the stream breaks; kRetry when etcd cancels the watch
  /// (e.g. the start revision was compacted: the batch says which).
  Status Watch(const std::string& prefix, int64_t start_revision,
               const std::function<bool(const WatchBatch&)>& on_batch,
               std::chrono::milliseconds max_duration, const std::atomic<bool>* stop = nullptr);

  /// The endpoint this client talks to.
  const std::string& endpoint() const;
  /// Changes the bound on each call from now on (ClientOptions::request_timeout).
  void set_request_timeout(std::chrono::milliseconds timeout);

  struct Impl;

 private:
  explicit Client(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

/// The smallest key greater than every key that starts with `prefix`
/// (etcd's range_end for a prefix); "\0" for an empty prefix (every key).
std::string PrefixEnd(const std::string& prefix);

}  // namespace smart::etcd
