#include "smart/epoch_view.h"

#include "smart/logging.h"
#include "smart/remote_lock.h"
#include "smart/membership.h"
#include "smart/util/peer_text.h"

namespace smart::membership {

namespace {

// The steady clock of every lease (smart/remote_lock.h), signed.
int64_t NowNs() { return static_cast<int64_t>(MonotonicNs()); }

}  // namespace

Status EpochView::Start(const EpochViewOptions& options, std::unique_ptr<EpochView>* out) {
  if (options.lease.count() < 3) return Status::InvalidArgument("epoch view: the lease must be at least 3 ms");
  Status s = CheckPathPart(options.cluster, "cluster name");
  if (!s.ok()) return s;
  std::unique_ptr<EpochView> v(new EpochView());
  v->options_ = options;
  // A read must end within the lease, or it cannot confirm anything.
  v->options_.etcd.request_timeout = std::min(v->options_.etcd.request_timeout, options.lease);
  v->options_.etcd.connect_timeout = std::min(v->options_.etcd.connect_timeout, options.lease);
  s = etcd::Client::Open(v->options_.etcd, &v->client_);
  if (!s.ok()) return s;
  s = v->ReadOnce();
  if (!s.ok()) return s;
  v->thread_ = std::thread([p = v.get()] { p->Loop(); });
  *out = std::move(v);
  return Status::OK();
}

EpochView::~EpochView() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

Status EpochView::ReadOnce() {
  const int64_t sent = NowNs();
  Epoch e;
  int64_t revision = 0;
  Status s = ReadEpoch(*client_, options_.cluster, &e, &revision);
  bool changed = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!s.ok()) {
      last_error_ = s;
      return s;
    }
    changed = revision != revision_;
    epoch_ = e;
    revision_ = revision;
    last_error_ = Status::OK();
    // etcd answered with this epoch after `sent`: no newer epoch can open
    // before sent + lease, since its proposer waits out a whole lease
    // counted from after it put the fencing phase.
    confirmed_until_ns_ = std::max(confirmed_until_ns_, sent + static_cast<int64_t>(options_.lease.count()) * 1'000'000);
  }
  confirmations_.fetch_add(1);
  if (changed && options_.on_change) options_.on_change(e, revision);
  return Status::OK();
}

void EpochView::Loop() {
  const auto period = options_.lease / 3;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait_for(lock, period, [this] { return stopping_; });
      if (stopping_) return;
    }
    Status s = ReadOnce();
    if (!s.ok()) {
      static LogRateLimit limit;
      uint64_t suppressed = 0;
      if (limit.allow(&suppressed))
        SMART_WARN("epoch view of cluster '%s': %s%s", PeerText(options_.cluster).c_str(), s.message().c_str(),
                   LogRateLimit::Suppressed(suppressed).c_str());
    }
  }
}

Status EpochView::Current(Epoch* epoch, int64_t* revision) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const int64_t now = NowNs();
  if (now >= confirmed_until_ns_) {
    std::string text = "epoch view of cluster '" + PeerText(options_.cluster) + "': not confirmed for " +
                       std::to_string((now - confirmed_until_ns_) / 1'000'000 + options_.lease.count()) +
                       " ms (the epoch lease is " + std::to_string(options_.lease.count()) + " ms)";
    if (!last_error_.ok()) text += "; the last read failed: " + last_error_.message();
    return Status::TimedOut(text);
  }
  *epoch = epoch_;
  if (revision) *revision = revision_;
  return Status::OK();
}

}  // namespace smart::membership
