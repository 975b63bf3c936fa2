// Building a table's image locally before a builder writes it to the blades:
// the same rows in the same order give the same bytes, so every replica of a
// table comes out identical whichever client builds it.
#include <cstring>
#include <memory>

#include "db_internal.h"
#include "smart/bench/bench.h"
#include "smart/common.h"

namespace smart::dtx {

void BuildImages(Database& db) {
  const std::string& name = db.options_.name;
  struct Building {
    TableInfo* table;
    std::vector<char>* image;
    uint64_t next_overflow = 0;
    uint64_t rows = 0;
  };
  std::unordered_map<uint16_t, Building> building;
  for (TableInfo& t : db.tables_) {
    std::vector<char>& image = db.images_[t.spec.id];
    image.assign(t.region_bytes(), 0);
    const size_t slot = t.slot_bytes();
    for (uint64_t n = 0; n < t.total_nodes(); ++n) {
      char* node = image.data() + n * t.node_bytes();
      for (int i = 0; i < kSlotsPerNode; ++i) {
        EncodeSlot(node + i * slot, t.spec.value_bytes, 0, 0, 0, t.spec.id, false, nullptr);
      }
    }
    building[t.spec.id] = Building{&t, &image};
  }
  if (!db.options_.populate) throw Error("dtx/" + name + ": no populate function to build the tables with");
  std::unique_ptr<Progress> progress;
  if (db.options_.progress) progress = std::make_unique<Progress>("dtx/" + name + ": placing rows", 0);
  uint64_t placed = 0;
  db.options_.populate([&](uint16_t table, uint64_t key, const void* value) {
    if (progress && (++placed & 0xffff) == 0) progress->update(placed);
    auto it = building.find(table);
    if (it == building.end()) throw Error("dtx/" + name + ": a row of table " + std::to_string(table) + ", which is not declared");
    Building& b = it->second;
    const TableInfo& t = *b.table;
    const size_t slot_bytes = t.slot_bytes();
    uint64_t node = BucketOf(key, table, t.spec.buckets);
    char* free_slot = nullptr;
    for (;;) {
      char* n = b.image->data() + node * t.node_bytes();
      for (int i = 0; i < kSlotsPerNode; ++i) {
        char* s = n + i * slot_bytes;
        Record r;
        DecodeSlot(s, t.spec.value_bytes, &r);
        if (r.valid && r.key == key) {
          throw Error("dtx/" + name + ": key " + std::to_string(key) + " of table " + std::to_string(table) +
                      " is populated twice");
        }
        if (!r.valid && free_slot == nullptr) free_slot = s;
      }
      const uint64_t link = NodeLink(n, t.spec.value_bytes);
      if (link != 0) {
        node = t.spec.buckets + (link - 1);
        continue;
      }
      if (free_slot != nullptr) break;
      if (b.next_overflow >= t.spec.overflow_nodes) {
        throw Error("dtx/" + name + ": table " + std::to_string(table) + " needs more than its " +
                    std::to_string(t.spec.overflow_nodes) + " overflow nodes (" + std::to_string(b.rows) +
                    " rows placed in " + std::to_string(t.spec.buckets) + " buckets); give it more buckets");
      }
      SetNodeLink(n, t.spec.value_bytes, 1 + b.next_overflow);
      node = t.spec.buckets + b.next_overflow++;
    }
    EncodeSlot(free_slot, t.spec.value_bytes, 0, 1, key, table, true, static_cast<const char*>(value));
    ++b.rows;
  });
  for (auto& [id, b] : building) {
    b.table->rows = b.rows;
    b.table->overflow_used = b.next_overflow;
  }
  if (progress) progress->finish();
}

}  // namespace smart::dtx
