// SMART-BT as a smart::KvStore, for the YCSB driver. The driver's keys are
// decimal strings of one width (zero-padded), so their numeric order is
// their string order; the adapter parses them into the tree's uint64_t keys
// and formats scanned keys back at the width of the scan's start key.
#pragma once

#include <cstdio>

#include "btree.h"
#include "smart/bench/kv_store.h"

namespace smart::btree {

// Parses a decimal key of 1..20 digits that fits in 64 bits.
inline bool ParseKey(std::string_view text, uint64_t* key) {
  if (text.empty() || text.size() > 20) return false;
  uint64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    const uint64_t digit = static_cast<uint64_t>(c - '0');
    if (v > (UINT64_MAX - digit) / 10) return false;
    v = v * 10 + digit;
  }
  *key = v;
  return true;
}

class BTreeStore : public KvStore {
 public:
  explicit BTreeStore(BTree& tree) : tree_(tree) {}
  std::string name() const override { return "BPlusTree"; }
  Status search(std::string_view key, std::string* value) override {
    uint64_t k;
    if (!ParseKey(key, &k)) return BadKey(key);
    return tree_.search(k, value);
  }
  Status insert(std::string_view key, std::string_view value) override {
    uint64_t k;
    if (!ParseKey(key, &k)) return BadKey(key);
    return tree_.insert(k, value);
  }
  Status update(std::string_view key, std::string_view value) override {
    uint64_t k;
    if (!ParseKey(key, &k)) return BadKey(key);
    return tree_.update(k, value);
  }
  Status read_modify_write(std::string_view key, const std::function<void(std::string*)>& modify) override {
    uint64_t k;
    if (!ParseKey(key, &k)) return BadKey(key);
    return tree_.read_modify_write(k, modify);
  }
  Status remove(std::string_view key) override {
    uint64_t k;
    if (!ParseKey(key, &k)) return BadKey(key);
    return tree_.remove(k);
  }
  bool supports_scan() const override { return true; }
  Status scan(std::string_view start, size_t count, std::vector<std::pair<std::string, std::string>>* out) override {
    uint64_t k;
    if (!ParseKey(start, &k)) return BadKey(start);
    // Tasks of one thread scan at once (each parks in its reads), so the
    // buffer is the call's own.
    std::vector<std::pair<uint64_t, std::string>> scanned;
    Status s = tree_.scan(k, count, &scanned);
    out->clear();
    if (!s.ok()) return s;
    char buf[32];
    for (auto& [key, value] : scanned) {
      snprintf(buf, sizeof(buf), "%0*llu", static_cast<int>(start.size()), static_cast<unsigned long long>(key));
      out->emplace_back(buf, std::move(value));
    }
    return Status::OK();
  }
  uint64_t retries() const override { return tree_.stats().retries; }

 private:
  static Status BadKey(std::string_view key) {
    return Status::InvalidArgument("B+tree: key \"" + std::string(key) + "\" is not a decimal number of at most 20 digits below 2^64");
  }
  BTree& tree_;
};

}  // namespace smart::btree
