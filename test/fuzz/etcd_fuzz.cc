// Fuzz target: what etcd's JSON gateway answers (the membership's view of
// the cluster comes from it), and the epoch record other clients put there.
// The first byte picks the parser (range, txn, lease grant, keep-alive,
// watch message, error, the watch stream split at the second byte, or the
// epoch record); the rest is the text. Every answer is either
// refused with a Status or parsed into values that keep the parsers'
// promises; none crashes, throws or is cut.
#include <string>

#include "fuzz_check.h"
#include "smart/membership/etcd_json.h"
#include "smart/replica_set.h"
#include "smart/util/peer_text.h"

namespace {

using namespace smart;
using namespace smart::etcd;

void CheckKv(const KeyValue& kv) {
  FuzzCheck(kv.create_revision >= 0 && kv.mod_revision >= 0 && kv.version >= 0, "a negative revision accepted");
}

void Check(uint8_t which, uint8_t cut, const std::string& text) {
  switch (which % 8) {
    case 0: {
      RangeResult r;
      if (json::ParseRange(text, "fuzz", &r).ok()) {
        FuzzCheck(r.revision >= 0, "a negative header revision accepted");
        for (const KeyValue& kv : r.kvs) CheckKv(kv);
      }
      break;
    }
    case 1: {
      TxnResult t;
      if (json::ParseTxn(text, "fuzz", &t).ok()) {
        FuzzCheck(t.revision > 0, "a transaction without a revision accepted");
        CheckKv(t.current);
        FuzzCheck(!t.succeeded || t.current.key.empty(), "a successful transaction with a failure's read");
      }
      break;
    }
    case 2: {
      Lease l;
      if (json::ParseLeaseGrant(text, "fuzz", &l).ok())
        FuzzCheck(l.id > 0 && l.ttl_s > 0, "a lease without an ID or TTL accepted");
      break;
    }
    case 3: {
      int64_t ttl = -1;
      if (json::ParseKeepAlive(text, "fuzz", &ttl).ok()) FuzzCheck(ttl >= 0, "a negative TTL accepted");
      break;
    }
    case 4: {
      WatchBatch b;
      if (json::ParseWatchMessage(text, &b).ok()) {
        FuzzCheck(b.revision >= 0 && b.compact_revision >= 0, "a negative watch revision accepted");
        for (const WatchEvent& e : b.events) CheckKv(e.kv);
      }
      break;
    }
    case 5: {
      Status s = json::ErrorStatus(400 + cut, text, "fuzz", cut & 1);
      FuzzCheck(!s.ok(), "an error answer taken as success");
      // PeerText shows at most kMaxPeerText bytes of it, each at most \xNN.
      FuzzCheck(s.message().size() < 4 * kMaxPeerText + 256, "an error message that repeats all of the peer's text");
      break;
    }
    case 6: {
      // The stream in two pieces: what comes out is the same as in one.
      json::WatchStreamSplitter one, two;
      std::string a, b;
      auto into = [](std::string* out) {
        return [out](const std::string& m) {
          out->append(m).push_back('\n');
          return Status::OK();
        };
      };
      const bool ok1 = one.Feed(text.data(), text.size(), into(&a)).ok();
      const size_t at = text.empty() ? 0 : cut % (text.size() + 1);
      const bool ok2 = two.Feed(text.data(), at, into(&b)).ok() &&
                       two.Feed(text.data() + at, text.size() - at, into(&b)).ok();
      FuzzCheck(ok1 == ok2, "a stream accepted whole but not in two pieces, or the other way");
      if (ok1) FuzzCheck(a == b && one.buffered() == two.buffered(), "a stream split differently in two pieces");
      break;
    }
    case 7: {
      membership::Epoch e;
      if (membership::ParseEpoch(text, &e).ok()) {
        FuzzCheck(membership::CheckEpoch(e).ok(), "an epoch accepted that breaks a rule");
        for (size_t s = 0; s < e.shards.size(); ++s) {
          std::string primary;
          FuzzCheck(e.Primary(s, &primary).ok(), "an accepted epoch with a shard that has no primary");
        }
        membership::Epoch back;
        FuzzCheck(membership::ParseEpoch(membership::EncodeEpoch(e), &back).ok() && back.number == e.number &&
                      back.members == e.members && back.shards.size() == e.shards.size(),
                  "an accepted epoch that does not read back the same");
      }
      break;
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  Check(data[0], data[1], std::string(reinterpret_cast<const char*>(data) + 2, size - 2));
  return 0;
}
