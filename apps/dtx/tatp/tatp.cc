// TATP's tables, population, transactions and check (tatp.h).
#include "tatp.h"

#include <algorithm>
#include <cstring>

#include "verify.h"

namespace smart::dtx::tatp {

namespace {

constexpr unsigned kStartTimes[3] = {0, 8, 16};

template <typename Row>
Row ValueOf(Transaction& tx, int item) {
  Row row;
  memcpy(&row, tx.value(item), sizeof(row));
  return row;
}

template <typename Row>
void SetValue(Transaction& tx, int item, const Row& row) {
  memcpy(tx.value(item), &row, sizeof(row));
}

template <typename Row>
Row RecordValue(const Record& r) {
  Row row;
  memcpy(&row, r.value, sizeof(row));
  return row;
}

TxOutcome GiveUp(Transaction& tx) {
  tx.abort();
  return TxOutcome::kLogicalAbort;
}

// Puts `values` in a random order (Fisher-Yates).
template <size_t N, typename T>
void Shuffle(T (&values)[N], uint64_t* rng) {
  for (size_t i = N - 1; i > 0; --i) std::swap(values[i], values[NextRandom(rng) % (i + 1)]);
}

void RandomBytes(uint8_t* out, size_t n, uint64_t* rng) {
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<uint8_t>(NextRandom(rng));
}

// Reads the secondary row of `s`'s number: the subscriber it maps to, in
// *s_id. False: the transaction ended (outcome set).
bool LookUpNumber(Transaction& tx, uint64_t s, uint64_t* s_id, TxOutcome* outcome, Status* error) {
  const int sec = tx.read(kSecondarySubscriber, SubNumber(s));
  if (!ExecuteOrEnd(tx, outcome, error)) return false;
  const SecondaryRow row = ValueOf<SecondaryRow>(tx, sec);
  if (row.magic != kSecondaryMagic) {
    tx.abort();
    *error = Status::Internal("tatp: the secondary row of number " + std::to_string(SubNumber(s)) +
                              " does not hold a subscriber (magic " + std::to_string(row.magic) + ")");
    *outcome = TxOutcome::kError;
    return false;
  }
  *s_id = row.s_id;
  return true;
}

}  // namespace

const char* TxTypeName(TxType t) {
  switch (t) {
    case TxType::kGetSubscriberData: return "GetSubscriberData";
    case TxType::kGetNewDestination: return "GetNewDestination";
    case TxType::kGetAccessData: return "GetAccessData";
    case TxType::kUpdateSubscriberData: return "UpdateSubscriberData";
    case TxType::kUpdateLocation: return "UpdateLocation";
    case TxType::kInsertCallForwarding: return "InsertCallForwarding";
    case TxType::kDeleteCallForwarding: return "DeleteCallForwarding";
    default: return "?";
  }
}

uint64_t SubNumber(uint64_t s_id) {
  uint64_t out = 0;
  for (int shift = 0; s_id != 0; shift += 4, s_id /= 10) out |= (s_id % 10) << shift;
  return out;
}

std::vector<TableSpec> Tables(uint64_t subscribers) {
  // Four rows per bucket of eight at the population's averages (2.5
  // facilities and access rows, 3.75 call forwarding rows per subscriber).
  // Spare overflow nodes: an eighth of the buckets, for the unlucky ones at
  // load. Call forwarding rows come and go (inserts and deletes keep their
  // number steady) but a linked node is never unlinked, and each bucket's
  // row count wanders: over a long run almost every bucket once holds more
  // than eight rows and keeps a node. So that table gets one spare per
  // bucket on top (three clients for 3 s at 0.7 M txn/s each used up the
  // eighth).
  auto spec = [](uint16_t id, const char* name, size_t value_bytes, uint64_t rows, bool churns) {
    const uint64_t buckets = rows / 4 + 1;
    return TableSpec{id, name, value_bytes, buckets, buckets / 8 + 16 + (churns ? buckets : 0)};
  };
  return {spec(kSubscriber, "subscriber", sizeof(SubscriberRow), subscribers, false),
          spec(kSecondarySubscriber, "secondary_subscriber", sizeof(SecondaryRow), subscribers, false),
          spec(kSpecialFacility, "special_facility", sizeof(SpecialFacilityRow), subscribers * 5 / 2, false),
          spec(kAccessInfo, "access_info", sizeof(AccessInfoRow), subscribers * 5 / 2, false),
          spec(kCallForwarding, "call_forwarding", sizeof(CallForwardingRow), subscribers * 15 / 4, true)};
}

PopulationCounts Populate(uint64_t subscribers, const RowSink& sink) {
  PopulationCounts c;
  uint64_t rng = 0x7a7a5eed;  // the same rows on every call
  for (uint64_t s = 0; s < subscribers; ++s) {
    SubscriberRow sub{};
    sub.sub_nbr = SubNumber(s);
    sub.bits = static_cast<uint16_t>(NextRandom(&rng) & 0x3ff);
    RandomBytes(sub.hex, sizeof(sub.hex), &rng);
    RandomBytes(sub.bytes, sizeof(sub.bytes), &rng);
    sub.msc_location = static_cast<uint32_t>(NextRandom(&rng));
    sub.vlr_location = static_cast<uint32_t>(NextRandom(&rng));
    sub.magic = kSubscriberMagic;
    sink(kSubscriber, s, &sub);
    ++c.subscribers;
    const SecondaryRow sec{static_cast<uint32_t>(s), kSecondaryMagic};
    sink(kSecondarySubscriber, SubNumber(s), &sec);
    ++c.secondary;

    unsigned types[4] = {1, 2, 3, 4};
    Shuffle(types, &rng);
    const unsigned access_rows = 1 + NextRandom(&rng) % 4;
    for (unsigned i = 0; i < access_rows; ++i) {
      AccessInfoRow ai{};
      ai.data1 = static_cast<uint8_t>(NextRandom(&rng));
      ai.data2 = static_cast<uint8_t>(NextRandom(&rng));
      RandomBytes(ai.data3, sizeof(ai.data3), &rng);
      RandomBytes(ai.data4, sizeof(ai.data4), &rng);
      sink(kAccessInfo, AccessKey(s, types[i]), &ai);
      ++c.access_info;
    }

    Shuffle(types, &rng);
    const unsigned facilities = 1 + NextRandom(&rng) % 4;
    for (unsigned i = 0; i < facilities; ++i) {
      SpecialFacilityRow sf{};
      sf.is_active = NextRandom(&rng) % 100 < 85 ? 1 : 0;
      sf.error_cntl = static_cast<uint8_t>(NextRandom(&rng));
      sf.data_a = static_cast<uint8_t>(NextRandom(&rng));
      RandomBytes(sf.data_b, sizeof(sf.data_b), &rng);
      sink(kSpecialFacility, FacilityKey(s, types[i]), &sf);
      ++c.facilities;
      c.active_facilities += sf.is_active;
      unsigned starts[3] = {kStartTimes[0], kStartTimes[1], kStartTimes[2]};
      Shuffle(starts, &rng);
      const unsigned forwards = NextRandom(&rng) % 4;
      for (unsigned f = 0; f < forwards; ++f) {
        CallForwardingRow cf{};
        cf.end_time = static_cast<uint8_t>(starts[f] + 1 + NextRandom(&rng) % 8);
        RandomBytes(cf.numberx, sizeof(cf.numberx), &rng);
        sink(kCallForwarding, ForwardingKey(s, types[i], starts[f]), &cf);
        ++c.forwarding;
      }
    }
  }
  return c;
}

TxType PickType(uint64_t* rng) {
  const uint64_t r = NextRandom(rng) % 100;
  if (r < 35) return TxType::kGetSubscriberData;
  if (r < 45) return TxType::kGetNewDestination;
  if (r < 80) return TxType::kGetAccessData;
  if (r < 82) return TxType::kUpdateSubscriberData;
  if (r < 96) return TxType::kUpdateLocation;
  if (r < 98) return TxType::kInsertCallForwarding;
  return TxType::kDeleteCallForwarding;
}

uint64_t PickSubscriber(const Params& p, uint64_t* rng) {
  // NURand(A, 0, N-1): A by the population's size, as the specification says.
  const uint64_t a = p.subscribers <= 1000000 ? 65535 : p.subscribers <= 10000000 ? 1048575 : 2097151;
  return ((NextRandom(rng) % p.subscribers) | (NextRandom(rng) & a)) % p.subscribers;
}

TxOutcome Run(Transaction& tx, TxType type, const Params& p, uint64_t* rng, int64_t* delta, Status* error) {
  *delta = 0;
  const uint64_t s = PickSubscriber(p, rng);
  const unsigned sf_type = 1 + NextRandom(rng) % 4;
  const unsigned start_time = kStartTimes[NextRandom(rng) % 3];
  TxOutcome outcome = TxOutcome::kCommitted;
  tx.begin();
  switch (type) {
    case TxType::kGetSubscriberData: {
      tx.read(kSubscriber, s);
      if (!ExecuteOrEnd(tx, &outcome, error)) return outcome;
      return CommitOutcome(tx, error);
    }
    case TxType::kGetAccessData: {
      tx.read(kAccessInfo, AccessKey(s, 1 + NextRandom(rng) % 4));
      if (!ExecuteOrEnd(tx, &outcome, error)) return outcome;  // a missing row: a logical abort
      return CommitOutcome(tx, error);
    }
    case TxType::kGetNewDestination: {
      // The numbers a call to s at start_time ending after end_time is
      // forwarded to. Like upstream, every row up to start_time must exist.
      const unsigned end_time = 1 + NextRandom(rng) % 24;
      const int sf = tx.read(kSpecialFacility, FacilityKey(s, sf_type));
      if (!ExecuteOrEnd(tx, &outcome, error)) return outcome;
      if (!ValueOf<SpecialFacilityRow>(tx, sf).is_active) return GiveUp(tx);
      int forwards[3];
      int n = 0;
      for (unsigned st : kStartTimes) {
        if (st <= start_time) forwards[n++] = tx.read(kCallForwarding, ForwardingKey(s, sf_type, st));
      }
      if (!ExecuteOrEnd(tx, &outcome, error)) return outcome;
      bool found = false;
      for (int i = 0; i < n; ++i) found |= ValueOf<CallForwardingRow>(tx, forwards[i]).end_time > end_time;
      if (!found) return GiveUp(tx);
      return CommitOutcome(tx, error);
    }
    case TxType::kUpdateSubscriberData: {
      const int sub = tx.write(kSubscriber, s);
      const int sf = tx.write(kSpecialFacility, FacilityKey(s, sf_type));
      if (!ExecuteOrEnd(tx, &outcome, error)) return outcome;
      SubscriberRow row = ValueOf<SubscriberRow>(tx, sub);
      row.bits = static_cast<uint16_t>((row.bits & ~1u) | (NextRandom(rng) & 1));
      SetValue(tx, sub, row);
      SpecialFacilityRow f = ValueOf<SpecialFacilityRow>(tx, sf);
      f.data_a = static_cast<uint8_t>(NextRandom(rng));
      SetValue(tx, sf, f);
      return CommitOutcome(tx, error);
    }
    case TxType::kUpdateLocation: {
      uint64_t s_id;
      if (!LookUpNumber(tx, s, &s_id, &outcome, error)) return outcome;
      const int sub = tx.write(kSubscriber, s_id);
      if (!ExecuteOrEnd(tx, &outcome, error)) return outcome;
      SubscriberRow row = ValueOf<SubscriberRow>(tx, sub);
      row.vlr_location = static_cast<uint32_t>(NextRandom(rng));
      SetValue(tx, sub, row);
      return CommitOutcome(tx, error);
    }
    case TxType::kInsertCallForwarding: {
      uint64_t s_id;
      if (!LookUpNumber(tx, s, &s_id, &outcome, error)) return outcome;
      tx.read(kSpecialFacility, FacilityKey(s_id, sf_type));
      const int cf = tx.insert(kCallForwarding, ForwardingKey(s_id, sf_type, start_time));
      if (!ExecuteOrEnd(tx, &outcome, error)) return outcome;  // no such facility: a logical abort
      if (tx.exists(cf)) return GiveUp(tx);             // the row is there already
      CallForwardingRow row{};
      row.end_time = static_cast<uint8_t>(start_time + 1 + NextRandom(rng) % 8);
      RandomBytes(row.numberx, sizeof(row.numberx), rng);
      SetValue(tx, cf, row);
      outcome = CommitOutcome(tx, error);
      if (outcome == TxOutcome::kCommitted || outcome == TxOutcome::kUnknown) *delta = 1;
      return outcome;
    }
    case TxType::kDeleteCallForwarding: {
      uint64_t s_id;
      if (!LookUpNumber(tx, s, &s_id, &outcome, error)) return outcome;
      tx.remove(kCallForwarding, ForwardingKey(s_id, sf_type, start_time));
      if (!ExecuteOrEnd(tx, &outcome, error)) return outcome;  // no such row: a logical abort
      outcome = CommitOutcome(tx, error);
      if (outcome == TxOutcome::kCommitted || outcome == TxOutcome::kUnknown) *delta = -1;
      return outcome;
    }
    default:
      break;
  }
  tx.abort();
  *error = Status::Internal("tatp: an unknown transaction type");
  return TxOutcome::kError;
}

std::string Check(Database& db, uint64_t subscribers, int64_t forwarding_delta) {
  PopulationCounts loaded = Populate(subscribers, [](uint16_t, uint64_t, const void*) {});
  std::vector<uint8_t> facilities(subscribers, 0);  // bit t-1: facility t exists
  std::string problem, wrong;  // what could not be read; what makes no sense
  auto fail = [&](const std::string& what) {
    if (wrong.empty()) wrong = what;
  };
  uint64_t subs = 0, secs = 0, sfs = 0, ais = 0, cfs = 0;
  problem = ForEachRecord(db, kSubscriber, [&](const Record& r) {
    ++subs;
    const SubscriberRow row = RecordValue<SubscriberRow>(r);
    if (r.key >= subscribers || row.magic != kSubscriberMagic || row.sub_nbr != SubNumber(r.key)) {
      fail("subscriber " + std::to_string(r.key) + " is not a subscriber row of this population");
    }
  });
  if (problem.empty()) {
    problem = ForEachRecord(db, kSecondarySubscriber, [&](const Record& r) {
      ++secs;
      const SecondaryRow row = RecordValue<SecondaryRow>(r);
      if (row.magic != kSecondaryMagic || row.s_id >= subscribers || SubNumber(row.s_id) != r.key) {
        fail("secondary row of number " + std::to_string(r.key) + " does not map the number to its subscriber");
      }
    });
  }
  if (problem.empty()) {
    problem = ForEachRecord(db, kSpecialFacility, [&](const Record& r) {
      ++sfs;
      const uint64_t s = r.key >> 8, t = r.key & 0xff;
      if (s >= subscribers || t < 1 || t > 4) {
        fail("special facility key " + std::to_string(r.key) + " names no subscriber and type");
      } else {
        facilities[s] |= static_cast<uint8_t>(1u << (t - 1));
      }
    });
  }
  if (problem.empty()) {
    problem = ForEachRecord(db, kAccessInfo, [&](const Record& r) {
      ++ais;
      if ((r.key >> 8) >= subscribers || (r.key & 0xff) < 1 || (r.key & 0xff) > 4) {
        fail("access info key " + std::to_string(r.key) + " names no subscriber and type");
      }
    });
  }
  if (problem.empty()) {
    problem = ForEachRecord(db, kCallForwarding, [&](const Record& r) {
      ++cfs;
      const uint64_t s = r.key >> 16, t = (r.key >> 8) & 0xff, st = r.key & 0xff;
      const CallForwardingRow row = RecordValue<CallForwardingRow>(r);
      if (s >= subscribers || t < 1 || t > 4 || (facilities[s] & (1u << (t - 1))) == 0) {
        fail("call forwarding key " + std::to_string(r.key) + " belongs to no special facility");
      } else if ((st != 0 && st != 8 && st != 16) || row.end_time <= st || row.end_time > st + 8) {
        fail("call forwarding key " + std::to_string(r.key) + " has start time " + std::to_string(st) +
             " and end time " + std::to_string(row.end_time));
      }
    });
  }
  if (!problem.empty()) return problem;
  if (!wrong.empty()) return wrong;
  auto count = [](const char* table, uint64_t found, int64_t expected) {
    if (static_cast<int64_t>(found) == expected) return std::string();
    return std::string(table) + ": " + std::to_string(found) + " rows; " + std::to_string(expected) +
           " were expected";
  };
  for (const std::string& c :
       {count("subscriber", subs, static_cast<int64_t>(loaded.subscribers)),
        count("secondary_subscriber", secs, static_cast<int64_t>(loaded.secondary)),
        count("special_facility", sfs, static_cast<int64_t>(loaded.facilities)),
        count("access_info", ais, static_cast<int64_t>(loaded.access_info)),
        count("call_forwarding (the population's plus the committed inserts less the committed deletes)", cfs,
              static_cast<int64_t>(loaded.forwarding) + forwarding_delta)}) {
    if (!c.empty()) return c;
  }
  return "";
}

}  // namespace smart::dtx::tatp
