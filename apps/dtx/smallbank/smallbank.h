// SmallBank on SMART-DTX: savings and checking accounts, six transaction
// types. Balances are integer cents, so a run can be checked exactly: the
// sum of all balances at the end equals the sum at load plus what the
// committed transactions added (deposits, savings) and took (checks).
#pragma once

#include <cstdint>
#include <vector>

#include "catalog.h"
#include "database.h"
#include "transaction.h"
#include "txn_driver.h"

namespace smart::dtx::smallbank {

constexpr uint16_t kSavings = 1;
constexpr uint16_t kChecking = 2;
constexpr int64_t kInitialBalance = 100000000;  // cents per account and table
constexpr int64_t kDepositCents = 130;
constexpr int64_t kSavingCents = 2020;
constexpr int64_t kPaymentCents = 500;
constexpr int64_t kCheckCents = 500;
constexpr int64_t kOverdraftPenaltyCents = 100;

enum class TxType { kAmalgamate, kBalance, kDepositChecking, kSendPayment, kTransactSaving, kWriteCheck, kCount };
const char* TxTypeName(TxType t);

struct Params {
  uint64_t accounts = 100000;
  uint64_t hot_accounts = 4000;
  int hot_percent = 90;  ///< share of picks from the hot accounts
};

/// The two tables, sized for `accounts` rows each (buckets at most half full).
std::vector<TableSpec> Tables(uint64_t accounts);
/// Every account in both tables at kInitialBalance.
void Populate(uint64_t accounts, const RowSink& sink);

/// The mix: Amalgamate 15, Balance 15, DepositChecking 15, SendPayment 25,
/// TransactSaving 15, WriteCheck 15 (percent).
TxType PickType(uint64_t* rng);
/// An account: hot_percent of picks uniform over the hot accounts, the rest
/// over all.
uint64_t PickAccount(const Params& p, uint64_t* rng);

/// Runs one transaction of `type`; *delta is the cents it added to the total
/// (negative: took) when it committed.
TxOutcome Run(Transaction& tx, TxType type, const Params& p, uint64_t* rng, int64_t* delta, Status* error);

}  // namespace smart::dtx::smallbank
