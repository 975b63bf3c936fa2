// SMART-DTX catalog: which tables a database has, where each table's
// replicas live, and where a record slot is on each replica.
//
// Placement. With R memory blades and backup degree d (0 <= d < R), table t
// has its primary on blade t mod R and its backups on the next d blades,
// (t+1) mod R ... (t+d) mod R. Every replica of a table has the same layout,
// so a slot is named by a Locator (table, node index, slot index) that means
// the same on every replica, and undo-log records are identical on every
// blade.
//
// Each blade holds, under the database's named root ("dtx/smallbank"), a
// catalog block that lists every table with its region offset on that blade
// (0 where the blade holds no replica) and the blade's log directory.
//
// Catalog block (little-endian):
//   0   magic u64 (kCatalogMagic)
//   8   table_count u32, backup_degree u32
//   16  blade_count u32, reserved u32
//   24  log_directory u64 (offset on this blade)
//   32  tables: table_count x 48 bytes
//         id u16, reserved u16, value_bytes u32, buckets u64,
//         overflow_nodes u64, region u64 (offset on this blade, 0: none),
//         rows u64 (loaded), overflow_used u64 (overflow nodes taken: by
//         the builder, then by inserts with FAA on the primary's catalog)
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "record.h"
#include "smart/common.h"

namespace smart::dtx {

constexpr uint64_t kCatalogMagic = 0x3130544143585444ull;  // "DTXCAT01"
constexpr int kMaxTables = 16;
constexpr size_t kCatalogHeaderBytes = 32;
constexpr size_t kCatalogTableBytes = 48;
constexpr size_t kCatalogBytes = kCatalogHeaderBytes + kMaxTables * kCatalogTableBytes;
/// Where a table's overflow_used word is inside a catalog block.
constexpr size_t CatalogOverflowOffset(size_t table_index) {
  return kCatalogHeaderBytes + table_index * kCatalogTableBytes + 40;
}

/// What an application declares for a table.
struct TableSpec {
  uint16_t id = 0;          ///< 1..65535, unique in the database
  std::string name;         ///< for messages
  size_t value_bytes = 8;   ///< fixed width, 8..kMaxValueBytes, a multiple of 8
  uint64_t buckets = 0;     ///< bucket nodes (each kSlotsPerNode slots)
  uint64_t overflow_nodes = 0;  ///< spare nodes chained to full buckets
};

/// A table as a client uses it: its spec and its region on each blade.
struct TableInfo {
  TableSpec spec;
  uint64_t rows = 0;                 ///< rows loaded by the builder
  std::vector<node_t> replicas;      ///< primary first, then backups
  std::vector<uint64_t> region;      ///< per blade: region offset (0: none)
  uint64_t overflow_used = 0;        ///< overflow nodes the builder linked
  GlobalAddress overflow_counter;    ///< the primary catalog's overflow_used word

  size_t slot_bytes() const { return SlotBytes(spec.value_bytes); }
  size_t node_bytes() const { return NodeBytes(spec.value_bytes); }
  uint64_t total_nodes() const { return spec.buckets + spec.overflow_nodes; }
  uint64_t region_bytes() const { return total_nodes() * node_bytes(); }
};

/// A slot, named the same way on every replica.
struct Locator {
  uint16_t table = 0;
  uint16_t slot = 0;   ///< 0..kSlotsPerNode-1
  uint64_t node = 0;   ///< 0..buckets-1 a bucket, then the overflow nodes
};

/// Blades holding table `table_index`'s replicas: primary first.
std::vector<node_t> PlaceTable(int table_index, int blades, int backup_degree);

/// Checks a set of table specs; returns "" or what is wrong with which table.
std::string CheckTableSpecs(const std::vector<TableSpec>& specs);

/// The catalog of a database as one blade describes it.
struct CatalogBlock {
  int backup_degree = 0;
  int blade_count = 0;
  uint64_t log_directory = 0;
  struct Entry {
    TableSpec spec;
    uint64_t region = 0;
    uint64_t rows = 0;
    uint64_t overflow_used = 0;
  };
  std::vector<Entry> tables;
};

/// kCatalogBytes bytes.
void EncodeCatalog(const CatalogBlock& c, char* out);
/// Decodes bytes a blade holds; "" or what does not make sense in them.
std::string DecodeCatalog(const char* in, CatalogBlock* out);

/// Where a slot (or its node) is on replica `replica` (an index into
/// TableInfo::replicas).
GlobalAddress SlotAddress(const TableInfo& t, size_t replica, const Locator& at);
GlobalAddress NodeAddress(const TableInfo& t, size_t replica, uint64_t node);

}  // namespace smart::dtx
