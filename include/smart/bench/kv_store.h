/// @file
/// The key-value interface the YCSB driver (ycsb_driver.h) runs workloads
/// against: every store of the framework (the hash table, the B+tree, a
/// transactional table) offers it, through a thin adapter. Calls come from
/// tasks on any thread, concurrently.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "smart/status.h"

namespace smart {

/// A key-value store the YCSB driver can run workloads on.
class KvStore {
 public:
  virtual ~KvStore() = default;
  /// "HashTable", "HashTableMultiShard", ... (the first field of the result line).
  virtual std::string name() const = 0;

  /// kNotFound for an absent key; any other failure is an error.
  virtual Status search(std::string_view key, std::string* value) = 0;
  /// Adds the key or replaces its value.
  virtual Status insert(std::string_view key, std::string_view value) = 0;
  /// Loading: insert() of a key that no other task or client inserts at the
  /// same time (the driver's load phase gives each key to one task). A store
  /// may skip what an insert does against a racing insert of the same key;
  /// the default is insert().
  virtual Status load(std::string_view key, std::string_view value) { return insert(key, value); }
  /// load() of `count` keys. A store that can share work between them (one
  /// write for their blocks, one doorbell for their reads) overrides it; the
  /// default loads them one by one. On an error some keys may be loaded and
  /// others not; loading them again is harmless.
  virtual Status load_batch(const std::string_view* keys, const std::string_view* values, size_t count) {
    for (size_t i = 0; i < count; ++i) {
      Status s = load(keys[i], values[i]);
      if (!s.ok()) return s;
    }
    return Status::OK();
  }
  /// Keys per load_batch call that the store handles best (1: it has no
  /// batch of its own).
  virtual size_t preferred_load_batch() const { return 1; }
  /// Replaces the value of an existing key; kNotFound otherwise.
  virtual Status update(std::string_view key, std::string_view value) = 0;
  /// Reads the value of an existing key, applies `modify`, writes the result; kNotFound for an absent key.
  virtual Status read_modify_write(std::string_view key, const std::function<void(std::string*)>& modify) = 0;
  /// Removes the key; kNotFound when absent.
  virtual Status remove(std::string_view key) = 0;

  /// Ordered stores: up to `count` pairs from the first key >= start.
  virtual bool supports_scan() const { return false; }
  /// Fills `out` with the pairs; the default says the store has none.
  virtual Status scan(std::string_view start, size_t count, std::vector<std::pair<std::string, std::string>>* out) {
    (void)start;
    (void)count;
    (void)out;
    return Status::InvalidArgument(name() + " has no scan");
  }
  /// Conflict-avoidance retries so far (the result line's retries per op).
  virtual uint64_t retries() const { return 0; }
};

}  // namespace smart
