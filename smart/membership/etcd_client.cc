// The etcd client's transport: one kept-alive libcurl handle per Client
// for the unary calls, a fresh one per watch (driven by the multi
// interface so a stop request is seen within 100 ms).
#include <curl/curl.h>

#include <mutex>

#include "smart/etcd.h"
#include "smart/membership/etcd_json.h"
#include "smart/util/peer_text.h"

namespace smart::etcd {

namespace {

// No answer etcd gives to these calls comes near this; a bigger one is
// refused rather than cut.
constexpr size_t kMaxAnswer = 64u << 20;

void GlobalInit() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct Sink {
  std::string* out;
  bool too_big = false;
};

size_t Collect(char* data, size_t size, size_t n, void* arg) {
  auto* sink = static_cast<Sink*>(arg);
  const size_t len = size * n;
  if (sink->out->size() + len > kMaxAnswer) {
    sink->too_big = true;
    return 0;
  }
  sink->out->append(data, len);
  return len;
}

// Whether any of the request left this host: a call that never sent a byte
// cannot have taken effect.
bool SentAnything(CURL* h) {
  long request_size = 0;
  curl_easy_getinfo(h, CURLINFO_REQUEST_SIZE, &request_size);
  return request_size > 0;
}

}  // namespace

struct Client::Impl {
  ClientOptions options;
  CURL* handle = nullptr;
  curl_slist* headers = nullptr;

  ~Impl() {
    if (handle) curl_easy_cleanup(handle);
    if (headers) curl_slist_free_all(headers);
  }

  void Prepare(CURL* h, const std::string& url, const std::string& body) {
    curl_easy_setopt(h, CURLOPT_URL, url.c_str());
    curl_easy_setopt(h, CURLOPT_POST, 1L);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body.data());
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(options.connect_timeout.count()));
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http");
    curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
  }

  // One unary call: POST `body` to `path`, the answer in *answer on HTTP 200.
  Status Call(const char* path, const std::string& body, const char* what, bool mutating, std::string* answer) {
    answer->clear();
    Prepare(handle, options.endpoint + path, body);
    curl_easy_setopt(handle, CURLOPT_TIMEOUT_MS, static_cast<long>(options.request_timeout.count()));
    Sink sink{answer};
    curl_easy_setopt(handle, CURLOPT_WRITEFUNCTION, Collect);
    curl_easy_setopt(handle, CURLOPT_WRITEDATA, &sink);
    const CURLcode rc = curl_easy_perform(handle);
    if (sink.too_big) {
      std::string text = std::string(what) + ": etcd's answer is larger than " + std::to_string(kMaxAnswer) +
                         " bytes; refused rather than cut";
      return mutating ? Status::OutcomeUnknown(text + " (it may have taken effect)") : Status::Internal(text);
    }
    if (rc != CURLE_OK) {
      std::string text = std::string(what) + " to " + options.endpoint + path + ": " + curl_easy_strerror(rc);
      if (!SentAnything(handle)) return Status::PeerFailed(text + " (nothing was sent)");
      if (mutating) return Status::OutcomeUnknown(text + " after the request was sent; it may have taken effect");
      return rc == CURLE_OPERATION_TIMEDOUT ? Status::TimedOut(text) : Status::PeerFailed(text);
    }
    long http = 0;
    curl_easy_getinfo(handle, CURLINFO_RESPONSE_CODE, &http);
    if (http != 200) return json::ErrorStatus(http, *answer, what, mutating);
    return Status::OK();
  }
};

Status Client::Open(const ClientOptions& options, std::unique_ptr<Client>* out) {
  if (options.endpoint.rfind("http://", 0) != 0 || options.endpoint.size() <= 7) {
    return Status::InvalidArgument("etcd endpoint '" + PeerText(options.endpoint) +
                                   "' is not an http:// URL (e.g. http://127.0.0.1:2379)");
  }
  if (options.connect_timeout.count() <= 0 || options.request_timeout.count() <= 0) {
    return Status::InvalidArgument("etcd client: connect and request timeouts must be positive");
  }
  GlobalInit();
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  while (!impl->options.endpoint.empty() && impl->options.endpoint.back() == '/') impl->options.endpoint.pop_back();
  impl->handle = curl_easy_init();
  impl->headers = curl_slist_append(nullptr, "Content-Type: application/json");
  if (!impl->handle || !impl->headers) return Status::OutOfMemory("etcd client: libcurl could not start");
  out->reset(new Client(std::move(impl)));
  return Status::OK();
}

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::~Client() = default;

const std::string& Client::endpoint() const { return impl_->options.endpoint; }

void Client::set_request_timeout(std::chrono::milliseconds timeout) {
  impl_->options.request_timeout = std::max(timeout, std::chrono::milliseconds(1));
}

std::string PrefixEnd(const std::string& prefix) {
  std::string end = prefix;
  while (!end.empty()) {
    if (static_cast<unsigned char>(end.back()) != 0xff) {
      end.back() = static_cast<char>(static_cast<unsigned char>(end.back()) + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');
}

Status Client::Get(const std::string& key, KeyValue* out, int64_t* revision) {
  std::string answer;
  Status s = impl_->Call("/v3/kv/range", json::RangeRequest(key, "", 0), "etcd get", false, &answer);
  if (!s.ok()) return s;
  RangeResult r;
  s = json::ParseRange(answer, "etcd get", &r);
  if (!s.ok()) return s;
  if (revision) *revision = r.revision;
  if (r.kvs.empty()) return Status::NotFound("etcd get: no key '" + PeerText(key) + "'");
  if (r.kvs.size() != 1 || r.kvs[0].key != key)
    return Status::Internal("etcd get of '" + PeerText(key) + "': etcd answered with another key");
  *out = std::move(r.kvs[0]);
  return Status::OK();
}

Status Client::GetPrefix(const std::string& prefix, RangeResult* out, int64_t limit) {
  std::string answer;
  Status s = impl_->Call("/v3/kv/range", json::RangeRequest(prefix, PrefixEnd(prefix), limit), "etcd range",
                         false, &answer);
  if (!s.ok()) return s;
  s = json::ParseRange(answer, "etcd range", out);
  if (!s.ok()) return s;
  for (const KeyValue& kv : out->kvs) {
    if (kv.key.compare(0, prefix.size(), prefix) != 0)
      return Status::Internal("etcd range of '" + PeerText(prefix) + "': etcd answered with key '" +
                              PeerText(kv.key) + "' outside it");
  }
  return Status::OK();
}

Status Client::Put(const std::string& key, const std::string& value, int64_t lease, int64_t* revision) {
  std::string answer;
  Status s = impl_->Call("/v3/kv/put", json::PutRequest(key, value, lease), "etcd put", true, &answer);
  if (!s.ok()) return s;
  int64_t rev = 0;
  s = json::ParseHeaderRevision(answer, "etcd put", &rev);
  if (!s.ok()) return Status::OutcomeUnknown(s.message() + " (the put may have taken effect)");
  if (revision) *revision = rev;
  return Status::OK();
}

Status Client::PutIf(const std::string& key, int64_t expected_mod_revision, const std::string& value,
                     int64_t lease, TxnResult* out) {
  if (expected_mod_revision < 0) return Status::InvalidArgument("etcd put-if: a negative revision");
  std::string answer;
  Status s = impl_->Call("/v3/kv/txn", json::PutIfRequest(key, expected_mod_revision, value, lease),
                         "etcd put-if", true, &answer);
  if (!s.ok()) return s;
  s = json::ParseTxn(answer, "etcd put-if", out);
  if (!s.ok()) return Status::OutcomeUnknown(s.message() + " (the put may have taken effect)");
  return Status::OK();
}

Status Client::Delete(const std::string& key, bool prefix, int64_t* deleted) {
  std::string answer;
  Status s = impl_->Call("/v3/kv/deleterange", json::DeleteRequest(key, prefix ? PrefixEnd(key) : ""),
                         "etcd delete", true, &answer);
  if (!s.ok()) return s;
  int64_t n = 0;
  s = json::ParseDelete(answer, "etcd delete", &n);
  if (!s.ok()) return Status::OutcomeUnknown(s.message() + " (the delete may have taken effect)");
  if (deleted) *deleted = n;
  return Status::OK();
}

Status Client::GrantLease(int64_t ttl_s, Lease* out) {
  if (ttl_s <= 0) return Status::InvalidArgument("etcd lease grant: the TTL must be at least 1 s");
  std::string answer;
  Status s = impl_->Call("/v3/lease/grant", json::LeaseGrantRequest(ttl_s), "etcd lease grant", true, &answer);
  if (!s.ok()) return s;
  s = json::ParseLeaseGrant(answer, "etcd lease grant", out);
  // A lease may have been granted; nobody renews it, so it lapses.
  if (!s.ok()) return Status::OutcomeUnknown(s.message() + " (a lease may have been granted; it lapses)");
  return Status::OK();
}

Status Client::KeepAlive(int64_t lease, int64_t* ttl_s) {
  std::string answer;
  Status s = impl_->Call("/v3/lease/keepalive", json::LeaseIdRequest(lease), "etcd lease keep-alive", false,
                         &answer);
  if (!s.ok()) return s;
  int64_t ttl = 0;
  s = json::ParseKeepAlive(answer, "etcd lease keep-alive", &ttl);
  if (!s.ok()) return s;
  if (ttl <= 0) return Status::LockLost("etcd lease " + std::to_string(lease) + " has lapsed or was revoked");
  if (ttl_s) *ttl_s = ttl;
  return Status::OK();
}

Status Client::RevokeLease(int64_t lease) {
  std::string answer;
  return impl_->Call("/v3/lease/revoke", json::LeaseIdRequest(lease), "etcd lease revoke", true, &answer);
}

Status Client::Watch(const std::string& prefix, int64_t start_revision,
                     const std::function<bool(const WatchBatch&)>& on_batch, std::chrono::milliseconds max_duration,
                     const std::atomic<bool>* stop) {
  const std::string body = json::WatchRequest(prefix, PrefixEnd(prefix), start_revision);
  CURL* h = curl_easy_init();
  CURLM* multi = curl_multi_init();
  if (!h || !multi) {
    if (h) curl_easy_cleanup(h);
    if (multi) curl_multi_cleanup(multi);
    return Status::OutOfMemory("etcd watch: libcurl could not start");
  }
  impl_->Prepare(h, impl_->options.endpoint + "/v3/watch", body);
  curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);

  struct State {
    json::WatchStreamSplitter splitter;
    const std::function<bool(const WatchBatch&)>* on_batch;
    Status status;
    bool done = false;  // on_batch asked to stop, or etcd canceled
    bool created = false;
  } state;
  state.on_batch = &on_batch;
  auto write = +[](char* data, size_t size, size_t n, void* arg) -> size_t {
    auto* st = static_cast<State*>(arg);
    Status s = st->splitter.Feed(data, size * n, [st](const std::string& message) {
      WatchBatch batch;
      Status ps = json::ParseWatchMessage(message, &batch);
      if (!ps.ok()) return ps;
      if (batch.created) st->created = true;
      if (batch.canceled) {
        st->done = true;
        (*st->on_batch)(batch);
        return Status::Retry("etcd watch of the prefix was canceled by etcd: " + PeerText(batch.cancel_reason) +
                             (batch.compact_revision ? " (compacted up to revision " +
                                                           std::to_string(batch.compact_revision) + ")"
                                                     : ""));
      }
      if (!(*st->on_batch)(batch)) {
        st->done = true;
        return Status::Retry("");  // a stop, not an error: mapped to OK below
      }
      return Status::OK();
    });
    if (!s.ok()) {
      if (!st->done) st->status = s;
      else if (!s.message().empty()) st->status = s;
      return 0;  // ends the transfer
    }
    return size * n;
  };
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, write);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &state);
  curl_multi_add_handle(multi, h);

  const auto deadline = std::chrono::steady_clock::now() + max_duration;
  Status result;
  for (;;) {
    int running = 0;
    curl_multi_perform(multi, &running);
    if (state.done || !state.status.ok()) {
      result = state.status;
      break;
    }
    if (running == 0) {
      int queued = 0;
      CURLMsg* msg = curl_multi_info_read(multi, &queued);
      const CURLcode rc = msg ? msg->data.result : CURLE_OK;
      long http = 0;
      curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &http);
      if (rc == CURLE_OK && http != 200 && http != 0) {
        result = json::ErrorStatus(http, state.splitter.TakePartial(), "etcd watch", false);
      } else {
        result = Status::PeerFailed("etcd watch to " + impl_->options.endpoint + ": the stream ended (" +
                                    curl_easy_strerror(rc) + ")");
      }
      break;
    }
    if (stop && stop->load(std::memory_order_acquire)) break;
    if (std::chrono::steady_clock::now() >= deadline) {
      result = Status::TimedOut("etcd watch: no stop within " + std::to_string(max_duration.count()) + " ms");
      break;
    }
    curl_multi_poll(multi, nullptr, 0, 100, nullptr);
  }
  curl_multi_remove_handle(multi, h);
  curl_easy_cleanup(h);
  curl_multi_cleanup(multi);
  return result;
}

}  // namespace smart::etcd
