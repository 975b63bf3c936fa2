#include <algorithm>

#include "smart/etcd.h"
#include "smart/logging.h"
#include "smart/remote_lock.h"
#include "smart/membership.h"
#include "smart/util/peer_text.h"

namespace smart::membership {

namespace {

// The steady clock of every lease (smart/remote_lock.h), signed.
int64_t NowNs() { return static_cast<int64_t>(MonotonicNs()); }

// Leases longer than a day are not asked for (RegistrationOptions::lease is
// below that); a TTL above it is nonsense from etcd.
constexpr int64_t kMaxLeaseS = 86400;

// How long a lease of ttl_s seconds certainly holds from when its grant or
// renewal was sent: 90% of it, the rest a margin for clocks that run at
// different rates here and in etcd.
int64_t HeldNs(int64_t ttl_s) { return ttl_s * 900'000'000; }

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
      if (lease.ttl_s > kMaxLeaseS) {
        (void)r->client_->RevokeLease(lease.id);
        return Status::Internal("membership: etcd granted a lease of " + std::to_string(lease.ttl_s) +
                                " s for one of " + std::to_string(ttl_s) + " s");
      }
      r->granted_ = std::chrono::milliseconds(lease.ttl_s * 1000);
      r->valid_until_ns_ = sent + HeldNs(lease.ttl_s);
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
  if (renewer_.joinable()) renewer_.join();
  if (valid()) (void)client_->RevokeLease(lease_id_);  // best effort: otherwise it lapses
}

void Registration::StopRenewing() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) return;
    stopping_ = true;
  }
  wake_.notify_all();
  // From the renewal thread itself (an on_lost callback): it ends by itself.
  if (renewer_.joinable() && renewer_.get_id() != std::this_thread::get_id()) renewer_.join();
}

// Under mutex_: the time is read under the lock, so a renewal that comes
// back after valid() saw the lease run out finds it run out too, and never
// revives it (RenewLoop).
bool Registration::valid() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return lost_.ok() && NowNs() < valid_until_ns_;
}

Status Registration::status() const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!lost_.ok()) return lost_;
  if (NowNs() >= valid_until_ns_)
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
  const int64_t period_ns = granted_.count() * 1'000'000 / 3;
  int64_t next_ns = NowNs() + period_ns;
  const Status lapsed = Status::LockLost("membership: no renewal of lease " + std::to_string(lease_id_) +
                                         " was confirmed within the lease (" + std::to_string(granted_.count()) +
                                         " ms, less a 10% margin)");
  for (;;) {
    int64_t until_ns = 0;
    {
      // Wake for the next renewal, or when the lease runs out, whichever
      // comes first: a lapse is noticed at once, not a period later.
      std::unique_lock<std::mutex> lock(mutex_);
      const int64_t wake_ns = std::min(next_ns, valid_until_ns_);
      wake_.wait_for(lock, std::chrono::nanoseconds(std::max<int64_t>(0, wake_ns - NowNs())),
                     [this] { return stopping_; });
      if (stopping_) return;
      until_ns = valid_until_ns_;
    }
    const int64_t sent = NowNs();
    if (sent >= until_ns) {
      Lose(lapsed);
      return;
    }
    if (sent < next_ns) continue;  // woke early
    next_ns = sent + period_ns;
    // The call ends by the time the lease would run out, so that a hung
    // etcd cannot keep this thread from noticing.
    client_->set_request_timeout(std::chrono::milliseconds(
        std::max<int64_t>(1, std::min<int64_t>(options_.etcd.request_timeout.count(), (until_ns - sent) / 1'000'000))));
    int64_t ttl_s = 0;
    Status s = client_->KeepAlive(lease_id_, &ttl_s);
    if (s.code() == Status::Code::kLockLost || s.code() == Status::Code::kNotFound) {
      Lose(s);
      return;
    }
    if (s.ok() && ttl_s > granted_.count() / 1000) {
      Lose(Status::LockLost("membership: etcd renewed lease " + std::to_string(lease_id_) + " for " +
                            std::to_string(ttl_s) + " s, more than the " + std::to_string(granted_.count() / 1000) +
                            " s granted; taken as lost"));
      return;
    }
    if (!s.ok()) {
      SMART_WARN("membership: renewing lease %lld: %s", static_cast<long long>(lease_id_), s.message().c_str());
      continue;  // tried again next period, until the lease runs out
    }
    bool ran_out = false;
    {
      // The lease now runs ttl_s from when etcd renewed it, which is after
      // this renewal was sent: counting from the send is safe. A renewal
      // that comes back after the lease ran out here revives nothing.
      std::lock_guard<std::mutex> lock(mutex_);
      if (NowNs() >= valid_until_ns_) {
        ran_out = true;
      } else {
        valid_until_ns_ = sent + HeldNs(ttl_s);
      }
    }
    if (ran_out) {
      Lose(lapsed);
      return;
    }
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
