#include "smart/etcd.h"
#include "smart/logging.h"
#include "smart/remote_lock.h"
#include "smart/membership.h"
#include "smart/util/peer_text.h"

namespace smart::membership {

namespace {

// The steady clock of every lease (smart/remote_lock.h), signed.
int64_t NowNs() { return static_cast<int64_t>(MonotonicNs()); }

}  // namespace

Status Registration::Start(const RegistrationOptions& options, std::unique_ptr<Registration>* out) {
  if (options.key.empty()) return Status::InvalidArgument("membership: an empty key");
  if (options.lease.count() <= 0) return Status::InvalidArgument("membership: the lease must be positive");
  std::unique_ptr<Registration> r(new Registration());
  r->options_ = options;
  Status s = etcd::Client::Open(options.etcd, &r->client_);
  if (!s.ok()) return s;

  const int64_t ttl_s = (options.lease.count() + 999) / 1000;
  const auto wait_until = std::chrono::steady_clock::now() + options.wait_for_key;
  for (;;) {
    etcd::Lease lease;
    const int64_t sent = NowNs();
    s = r->client_->GrantLease(ttl_s, &lease);
    if (!s.ok()) {
      // A grant whose answer was lost leaves a lease nobody renews: it
      // lapses by itself, holding nothing.
      return Status(s.code(), "membership: registering '" + PeerText(options.key) + "': " + s.message());
    }
    etcd::TxnResult txn;
    s = r->client_->PutIf(options.key, 0, options.value, lease.id, &txn);
    if (!s.ok()) {
      (void)r->client_->RevokeLease(lease.id);  // best effort; it lapses anyway
      return Status(s.code(), "membership: registering '" + PeerText(options.key) + "': " + s.message());
    }
    if (txn.succeeded) {
      r->lease_id_ = lease.id;
      r->revision_ = txn.revision;
      r->granted_ = std::chrono::milliseconds(lease.ttl_s * 1000);
      r->valid_until_ns_.store(sent + lease.ttl_s * 1'000'000'000, std::memory_order_release);
      break;
    }
    (void)r->client_->RevokeLease(lease.id);
    if (std::chrono::steady_clock::now() >= wait_until) {
      return Status::InvalidArgument("membership: '" + PeerText(options.key) + "' is held by lease " +
                                     std::to_string(txn.current.lease) + " (value '" +
                                     PeerText(txn.current.value) +
                                     "'): another member has this id, or one that died has not lapsed yet");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  r->renewer_ = std::thread([p = r.get()] { p->RenewLoop(); });
  *out = std::move(r);
  return Status::OK();
}

Registration::~Registration() {
  StopRenewing();
  if (valid()) (void)client_->RevokeLease(lease_id_);  // best effort: otherwise it lapses
}

void Registration::StopRenewing() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) return;
    stopping_ = true;
  }
  wake_.notify_all();
  if (renewer_.joinable()) renewer_.join();
}

bool Registration::valid() const {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!lost_.ok()) return false;
  }
  return NowNs() < valid_until_ns_.load(std::memory_order_acquire);
}

Status Registration::status() const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!lost_.ok()) return lost_;
  if (NowNs() >= valid_until_ns_.load(std::memory_order_acquire))
    return Status::LockLost("membership: no renewal of lease " + std::to_string(lease_id_) +
                            " was confirmed within the lease");
  return Status::OK();
}

void Registration::Lose(const Status& why) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!lost_.ok()) return;
    lost_ = why;
  }
  SMART_WARN("membership: '%s' left the membership: %s", PeerText(options_.key).c_str(), why.message().c_str());
  if (options_.on_lost) options_.on_lost(why);
}

void Registration::RenewLoop() {
  const auto period = granted_ / 3;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait_for(lock, period, [this] { return stopping_; });
      if (stopping_) return;
    }
    if (NowNs() >= valid_until_ns_.load(std::memory_order_acquire)) {
      Lose(Status::LockLost("membership: no renewal of lease " + std::to_string(lease_id_) +
                            " was confirmed within the lease (" + std::to_string(granted_.count()) + " ms)"));
      return;
    }
    const int64_t sent = NowNs();
    int64_t ttl_s = 0;
    Status s = client_->KeepAlive(lease_id_, &ttl_s);
    if (s.code() == Status::Code::kLockLost || s.code() == Status::Code::kNotFound) {
      Lose(s);
      return;
    }
    if (!s.ok()) {
      SMART_WARN("membership: renewing lease %lld: %s", static_cast<long long>(lease_id_), s.message().c_str());
      continue;  // tried again next period, until the lease runs out
    }
    // The lease now runs ttl_s from when etcd renewed it, which is after
    // this renewal was sent: counting from the send is safe.
    const int64_t until = sent + ttl_s * 1'000'000'000;
    if (until > valid_until_ns_.load(std::memory_order_acquire))
      valid_until_ns_.store(until, std::memory_order_release);
  }
}

Status ListMembers(etcd::Client& client, const std::string& prefix, std::vector<Member>* out, int64_t* revision) {
  out->clear();
  etcd::RangeResult range;
  Status s = client.GetPrefix(prefix, &range);
  if (!s.ok()) return s;
  if (range.more) return Status::Internal("membership: etcd returned part of '" + PeerText(prefix) + "'");
  for (etcd::KeyValue& kv : range.kvs) {
    Member m;
    m.id = kv.key.substr(prefix.size());
    m.value = std::move(kv.value);
    m.lease = kv.lease;
    m.mod_revision = kv.mod_revision;
    out->push_back(std::move(m));
  }
  if (revision) *revision = range.revision;
  return Status::OK();
}

}  // namespace smart::membership
