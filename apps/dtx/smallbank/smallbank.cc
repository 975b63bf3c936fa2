// SmallBank's tables, population and transactions (smallbank.h).
#include "smallbank.h"

#include <cstring>

namespace smart::dtx::smallbank {

namespace {

int64_t Get(Transaction& tx, int item) {
  int64_t v;
  memcpy(&v, tx.value(item), sizeof(v));
  return v;
}

void Set(Transaction& tx, int item, int64_t v) { memcpy(tx.value(item), &v, sizeof(v)); }

}  // namespace

const char* TxTypeName(TxType t) {
  switch (t) {
    case TxType::kAmalgamate: return "Amalgamate";
    case TxType::kBalance: return "Balance";
    case TxType::kDepositChecking: return "DepositChecking";
    case TxType::kSendPayment: return "SendPayment";
    case TxType::kTransactSaving: return "TransactSaving";
    case TxType::kWriteCheck: return "WriteCheck";
    default: return "?";
  }
}

std::vector<TableSpec> Tables(uint64_t accounts) {
  // Four rows per bucket of eight on average; overflow for the unlucky ones.
  const uint64_t buckets = accounts / 4 + 1;
  return {TableSpec{kSavings, "savings", 8, buckets, buckets / 8 + 16},
          TableSpec{kChecking, "checking", 8, buckets, buckets / 8 + 16}};
}

void Populate(uint64_t accounts, const RowSink& sink) {
  const int64_t balance = kInitialBalance;
  for (uint64_t a = 0; a < accounts; ++a) {
    sink(kSavings, a, &balance);
    sink(kChecking, a, &balance);
  }
}

TxType PickType(uint64_t* rng) {
  const uint64_t r = NextRandom(rng) % 100;
  if (r < 15) return TxType::kAmalgamate;
  if (r < 30) return TxType::kBalance;
  if (r < 45) return TxType::kDepositChecking;
  if (r < 70) return TxType::kSendPayment;
  if (r < 85) return TxType::kTransactSaving;
  return TxType::kWriteCheck;
}

uint64_t PickAccount(const Params& p, uint64_t* rng) {
  if (static_cast<int>(NextRandom(rng) % 100) < p.hot_percent) return NextRandom(rng) % p.hot_accounts;
  return NextRandom(rng) % p.accounts;
}

TxOutcome Run(Transaction& tx, TxType type, const Params& p, uint64_t* rng, int64_t* delta, Status* error) {
  *delta = 0;
  const uint64_t a = PickAccount(p, rng);
  uint64_t b = PickAccount(p, rng);
  while (b == a) b = PickAccount(p, rng);
  TxOutcome outcome = TxOutcome::kCommitted;
  tx.begin();
  switch (type) {
    case TxType::kAmalgamate: {
      // Moves everything a has to b's checking.
      const int sa = tx.write(kSavings, a);
      const int ca = tx.write(kChecking, a);
      const int cb = tx.write(kChecking, b);
      if (!ExecuteOrEnd(tx, &outcome, error)) return outcome;
      Set(tx, cb, Get(tx, cb) + Get(tx, sa) + Get(tx, ca));
      Set(tx, sa, 0);
      Set(tx, ca, 0);
      return CommitOutcome(tx, error);
    }
    case TxType::kBalance: {
      tx.read(kSavings, a);
      tx.read(kChecking, a);
      if (!ExecuteOrEnd(tx, &outcome, error)) return outcome;
      return CommitOutcome(tx, error);
    }
    case TxType::kDepositChecking: {
      const int ca = tx.write(kChecking, a);
      if (!ExecuteOrEnd(tx, &outcome, error)) return outcome;
      Set(tx, ca, Get(tx, ca) + kDepositCents);
      outcome = CommitOutcome(tx, error);
      if (outcome == TxOutcome::kCommitted || outcome == TxOutcome::kUnknown) *delta = kDepositCents;
      return outcome;
    }
    case TxType::kSendPayment: {
      const int ca = tx.write(kChecking, a);
      const int cb = tx.write(kChecking, b);
      if (!ExecuteOrEnd(tx, &outcome, error)) return outcome;
      if (Get(tx, ca) < kPaymentCents) {
        tx.abort();
        return TxOutcome::kLogicalAbort;
      }
      Set(tx, ca, Get(tx, ca) - kPaymentCents);
      Set(tx, cb, Get(tx, cb) + kPaymentCents);
      return CommitOutcome(tx, error);
    }
    case TxType::kTransactSaving: {
      const int sa = tx.write(kSavings, a);
      if (!ExecuteOrEnd(tx, &outcome, error)) return outcome;
      Set(tx, sa, Get(tx, sa) + kSavingCents);
      outcome = CommitOutcome(tx, error);
      if (outcome == TxOutcome::kCommitted || outcome == TxOutcome::kUnknown) *delta = kSavingCents;
      return outcome;
    }
    case TxType::kWriteCheck: {
      const int sa = tx.read(kSavings, a);
      const int ca = tx.write(kChecking, a);
      if (!ExecuteOrEnd(tx, &outcome, error)) return outcome;
      int64_t amount = kCheckCents;
      if (Get(tx, sa) + Get(tx, ca) < kCheckCents) amount += kOverdraftPenaltyCents;
      Set(tx, ca, Get(tx, ca) - amount);
      outcome = CommitOutcome(tx, error);
      if (outcome == TxOutcome::kCommitted || outcome == TxOutcome::kUnknown) *delta = -amount;
      return outcome;
    }
    default:
      break;
  }
  tx.abort();
  *error = Status::Internal("smallbank: an unknown transaction type");
  return TxOutcome::kError;
}

}  // namespace smart::dtx::smallbank
