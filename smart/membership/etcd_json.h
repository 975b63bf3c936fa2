// The etcd JSON gateway's messages: the request bodies the client sends and
// the parsers of what etcd answers. Every parser takes text from another
// process and returns a Status naming what made no sense; none trusts a
// field to be present, of the right type or in range (fuzz: fuzz_etcd).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "smart/etcd.h"
#include "smart/status.h"

namespace smart::etcd::json {

// Base64 (the gateway's encoding of keys and values). Decode fails on
// anything that is not canonical base64.
std::string Base64(const std::string& bytes);
bool FromBase64(const std::string& text, std::string* bytes);

// Request bodies.
std::string RangeRequest(const std::string& key, const std::string& range_end, int64_t limit);
std::string PutRequest(const std::string& key, const std::string& value, int64_t lease);
std::string PutIfRequest(const std::string& key, int64_t expected_mod_revision,
                         const std::string& value, int64_t lease);
std::string DeleteRequest(const std::string& key, const std::string& range_end);
std::string LeaseGrantRequest(int64_t ttl_s);
std::string LeaseIdRequest(int64_t lease);
std::string WatchRequest(const std::string& key, const std::string& range_end,
                         int64_t start_revision);

// Parsers of answers. `what` names the call in errors ("etcd range").
Status ParseRange(const std::string& text, const char* what, RangeResult* out);
Status ParseHeaderRevision(const std::string& text, const char* what, int64_t* revision);
Status ParseDelete(const std::string& text, const char* what, int64_t* deleted);
Status ParseTxn(const std::string& text, const char* what, TxnResult* out);
Status ParseLeaseGrant(const std::string& text, const char* what, Lease* out);
// *ttl_s is 0 when etcd no longer knows the lease.
Status ParseKeepAlive(const std::string& text, const char* what, int64_t* ttl_s);
Status ParseWatchMessage(const std::string& text, WatchBatch* out);

// What a non-200 answer says, as a Status: etcd's message and gRPC code.
// Unavailable, deadline and "request timed out" errors of a call that
// changes etcd are kOutcomeUnknown when `mutating`.
Status ErrorStatus(long http_status, const std::string& body, const char* what, bool mutating);

// Splits a watch stream (one JSON object per line) into messages. A line
// longer than kMaxWatchMessage is an error, never cut.
class WatchStreamSplitter {
 public:
  static constexpr size_t kMaxWatchMessage = 16u << 20;
  // Feeds bytes; calls on_message for each complete line. Stops at the
  // first non-OK status on_message returns, or at an over-long line.
  Status Feed(const char* data, size_t len, const std::function<Status(const std::string&)>& on_message);
  size_t buffered() const { return partial_.size(); }
  // What came after the last newline (an error answer's body has none).
  std::string TakePartial() { return std::move(partial_); }

 private:
  std::string partial_;
};

}  // namespace smart::etcd::json
