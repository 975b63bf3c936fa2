// TATP on SMART-DTX: a telecom subscriber database of five tables and seven
// transaction types, 80% read-only, with inserts and deletes of call
// forwarding rows.
//
// Keys (u64):
//   Subscriber           s_id
//   SecondarySubscriber  sub_nbr: the decimal digits of s_id, one per 4-bit
//                        nibble (SubNumber), mapping back to s_id
//   SpecialFacility      s_id << 8 | sf_type          (sf_type 1..4)
//   AccessInfo           s_id << 8 | ai_type          (ai_type 1..4)
//   CallForwarding       s_id << 16 | sf_type << 8 | start_time (0, 8, 16)
//
// Population (TATP specification): one subscriber and one secondary row per
// s_id; 1-4 access-info rows and 1-4 special facilities per subscriber
// (uniform count, distinct types), 85% of facilities active; 0-3 call
// forwarding rows per facility (uniform count, distinct start times),
// end_time start_time + 1..8. Deterministic: every call emits the same rows.
//
// Checked sum: a committed InsertCallForwarding adds one call forwarding
// row and a committed DeleteCallForwarding takes one, so the table's row
// count after a run is the population's plus the sum of the clients' deltas.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "catalog.h"
#include "database.h"
#include "transaction.h"
#include "txn_driver.h"

namespace smart::dtx::tatp {

constexpr uint16_t kSubscriber = 1;
constexpr uint16_t kSecondarySubscriber = 2;
constexpr uint16_t kSpecialFacility = 3;
constexpr uint16_t kAccessInfo = 4;
constexpr uint16_t kCallForwarding = 5;

constexpr uint32_t kSubscriberMagic = 0x53554253;  // "SUBS"
constexpr uint32_t kSecondaryMagic = 0x53425553;   // "SUBS" reversed

/// Subscriber value (40 bytes).
struct SubscriberRow {
  uint64_t sub_nbr;
  uint16_t bits;         ///< bit_1 .. bit_10
  uint8_t hex[5];        ///< hex_1 .. hex_10, two per byte
  uint8_t bytes[10];     ///< byte2_1 .. byte2_10
  uint8_t reserved[3];
  uint32_t msc_location;
  uint32_t vlr_location;
  uint32_t magic;        ///< kSubscriberMagic
};
static_assert(sizeof(SubscriberRow) == 40);

/// SecondarySubscriber value (8 bytes): the subscriber a number belongs to.
struct SecondaryRow {
  uint32_t s_id;
  uint32_t magic;  ///< kSecondaryMagic
};
static_assert(sizeof(SecondaryRow) == 8);

/// SpecialFacility value (8 bytes).
struct SpecialFacilityRow {
  uint8_t is_active;
  uint8_t error_cntl;
  uint8_t data_a;
  uint8_t data_b[5];
};
static_assert(sizeof(SpecialFacilityRow) == 8);

/// AccessInfo value (16 bytes).
struct AccessInfoRow {
  uint8_t data1;
  uint8_t data2;
  uint8_t data3[3];
  uint8_t data4[5];
  uint8_t reserved[6];
};
static_assert(sizeof(AccessInfoRow) == 16);

/// CallForwarding value (16 bytes).
struct CallForwardingRow {
  uint8_t end_time;      ///< 1..24, after the key's start_time
  uint8_t numberx[15];
};
static_assert(sizeof(CallForwardingRow) == 16);

enum class TxType {
  kGetSubscriberData,
  kGetNewDestination,
  kGetAccessData,
  kUpdateSubscriberData,
  kUpdateLocation,
  kInsertCallForwarding,
  kDeleteCallForwarding,
  kCount
};
const char* TxTypeName(TxType t);

struct Params {
  uint64_t subscribers = 100000;
};

uint64_t SubNumber(uint64_t s_id);
inline uint64_t FacilityKey(uint64_t s_id, unsigned sf_type) { return s_id << 8 | sf_type; }
inline uint64_t AccessKey(uint64_t s_id, unsigned ai_type) { return s_id << 8 | ai_type; }
inline uint64_t ForwardingKey(uint64_t s_id, unsigned sf_type, unsigned start_time) {
  return s_id << 16 | sf_type << 8 | start_time;
}

/// The five tables for `subscribers` subscribers (buckets about half full
/// at the population's average row counts).
std::vector<TableSpec> Tables(uint64_t subscribers);

/// Rows the population emits per table.
struct PopulationCounts {
  uint64_t subscribers = 0, secondary = 0, facilities = 0, active_facilities = 0, access_info = 0, forwarding = 0;
};
/// Emits every row; returns the counts.
PopulationCounts Populate(uint64_t subscribers, const RowSink& sink);

/// The mix: GetSubscriberData 35, GetNewDestination 10, GetAccessData 35,
/// UpdateSubscriberData 2, UpdateLocation 14, InsertCallForwarding 2,
/// DeleteCallForwarding 2 (percent).
TxType PickType(uint64_t* rng);
/// A subscriber by the specification's non-uniform NURand.
uint64_t PickSubscriber(const Params& p, uint64_t* rng);

/// Runs one transaction of `type`. *delta: call forwarding rows it added
/// (+1 an insert, -1 a delete) when it committed.
TxOutcome Run(Transaction& tx, TxType type, const Params& p, uint64_t* rng, int64_t* delta, Status* error);

/// Checks a database after a run: every table's row count (call forwarding:
/// the population's plus `forwarding_delta`), every subscriber's secondary
/// row and facilities, and that every call forwarding row belongs to an
/// existing facility with a valid start and end time. "" or what is wrong.
std::string Check(Database& db, uint64_t subscribers, int64_t forwarding_delta);

}  // namespace smart::dtx::tatp
