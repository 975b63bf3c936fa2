// The catalog: placement of tables on blades, the catalog block's bytes, and
// slot addresses (layout in catalog.h).
#include "catalog.h"

#include <cstring>
#include <set>

namespace smart::dtx {

namespace {

template <typename T>
T Load(const char* p) {
  T v;
  memcpy(&v, p, sizeof(v));
  return v;
}

template <typename T>
void Store(char* p, T v) {
  memcpy(p, &v, sizeof(v));
}

}  // namespace

std::vector<node_t> PlaceTable(int table_index, int blades, int backup_degree) {
  std::vector<node_t> out;
  if (blades <= 0 || backup_degree < 0 || backup_degree >= blades) return out;
  for (int i = 0; i <= backup_degree; ++i) out.push_back(static_cast<node_t>((table_index + i) % blades));
  return out;
}

std::string CheckTableSpecs(const std::vector<TableSpec>& specs) {
  if (specs.empty()) return "a database needs at least one table";
  if (specs.size() > static_cast<size_t>(kMaxTables)) {
    return std::to_string(specs.size()) + " tables; at most " + std::to_string(kMaxTables);
  }
  std::set<uint16_t> ids;
  for (const TableSpec& t : specs) {
    const std::string name = "table " + std::to_string(t.id) + (t.name.empty() ? "" : " (" + t.name + ")");
    if (t.id == 0) return name + ": id 0 is reserved";
    if (!ids.insert(t.id).second) return name + ": the id is used twice";
    if (t.value_bytes < 8 || t.value_bytes > kMaxValueBytes || t.value_bytes % 8 != 0) {
      return name + ": value_bytes " + std::to_string(t.value_bytes) + " is not a multiple of 8 in 8.." +
             std::to_string(kMaxValueBytes);
    }
    if (t.buckets == 0) return name + ": no buckets";
    if (t.buckets > (uint64_t{1} << 36) || t.overflow_nodes > (uint64_t{1} << 36)) {
      return name + ": too many nodes";
    }
  }
  return "";
}

void EncodeCatalog(const CatalogBlock& c, char* out) {
  memset(out, 0, kCatalogBytes);
  Store<uint64_t>(out, kCatalogMagic);
  Store<uint32_t>(out + 8, static_cast<uint32_t>(c.tables.size()));
  Store<uint32_t>(out + 12, static_cast<uint32_t>(c.backup_degree));
  Store<uint32_t>(out + 16, static_cast<uint32_t>(c.blade_count));
  Store<uint64_t>(out + 24, c.log_directory);
  for (size_t i = 0; i < c.tables.size() && i < static_cast<size_t>(kMaxTables); ++i) {
    char* e = out + kCatalogHeaderBytes + i * kCatalogTableBytes;
    const CatalogBlock::Entry& t = c.tables[i];
    Store<uint16_t>(e, t.spec.id);
    Store<uint32_t>(e + 4, static_cast<uint32_t>(t.spec.value_bytes));
    Store<uint64_t>(e + 8, t.spec.buckets);
    Store<uint64_t>(e + 16, t.spec.overflow_nodes);
    Store<uint64_t>(e + 24, t.region);
    Store<uint64_t>(e + 32, t.rows);
    Store<uint64_t>(e + 40, t.overflow_used);
  }
}

std::string DecodeCatalog(const char* in, CatalogBlock* out) {
  if (Load<uint64_t>(in) != kCatalogMagic) return "no catalog magic";
  const uint32_t count = Load<uint32_t>(in + 8);
  if (count == 0 || count > static_cast<uint32_t>(kMaxTables)) {
    return "a table count of " + std::to_string(count);
  }
  out->backup_degree = static_cast<int>(Load<uint32_t>(in + 12));
  out->blade_count = static_cast<int>(Load<uint32_t>(in + 16));
  if (out->blade_count <= 0 || out->blade_count > kMaxNodes || out->backup_degree < 0 ||
      out->backup_degree >= out->blade_count) {
    return "backup degree " + std::to_string(out->backup_degree) + " with " + std::to_string(out->blade_count) +
           " blades";
  }
  out->log_directory = Load<uint64_t>(in + 24);
  out->tables.clear();
  std::vector<TableSpec> specs;
  for (uint32_t i = 0; i < count; ++i) {
    const char* e = in + kCatalogHeaderBytes + i * kCatalogTableBytes;
    CatalogBlock::Entry t;
    t.spec.id = Load<uint16_t>(e);
    t.spec.value_bytes = Load<uint32_t>(e + 4);
    t.spec.buckets = Load<uint64_t>(e + 8);
    t.spec.overflow_nodes = Load<uint64_t>(e + 16);
    t.region = Load<uint64_t>(e + 24);
    t.rows = Load<uint64_t>(e + 32);
    t.overflow_used = Load<uint64_t>(e + 40);
    specs.push_back(t.spec);
    out->tables.push_back(t);
  }
  return CheckTableSpecs(specs);
}

GlobalAddress NodeAddress(const TableInfo& t, size_t replica, uint64_t node) {
  const node_t blade = t.replicas[replica];
  return GlobalAddress(blade, t.region[blade] + node * t.node_bytes());
}

GlobalAddress SlotAddress(const TableInfo& t, size_t replica, const Locator& at) {
  return NodeAddress(t, replica, at.node) + uint64_t{at.slot} * t.slot_bytes();
}

}  // namespace smart::dtx
