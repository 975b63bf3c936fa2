// SMART-HT as a smart::KvStore, for the YCSB driver.
#pragma once

#include "hash_table.h"
#include "smart/bench/kv_store.h"

namespace smart::hashtable {

class HashTableStore : public KvStore {
 public:
  explicit HashTableStore(HashTable& table) : table_(table) {}
  std::string name() const override { return table_.name(); }
  Status search(std::string_view key, std::string* value) override { return table_.search(key, value); }
  Status insert(std::string_view key, std::string_view value) override { return table_.insert(key, value); }
  Status load(std::string_view key, std::string_view value) override { return table_.load(key, value); }
  Status load_batch(const std::string_view* keys, const std::string_view* values, size_t count) override {
    return table_.load_batch(keys, values, count);
  }
  size_t preferred_load_batch() const override { return HashTable::kLoadBatchKeys; }
  Status update(std::string_view key, std::string_view value) override { return table_.update(key, value); }
  Status read_modify_write(std::string_view key, const std::function<void(std::string*)>& modify) override {
    return table_.read_modify_write(key, modify);
  }
  Status remove(std::string_view key) override { return table_.remove(key); }
  uint64_t retries() const override { return table_.stats().retries; }

 private:
  HashTable& table_;
};

}  // namespace smart::hashtable
