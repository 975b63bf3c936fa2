// SMART-BT build and open. Every memory blade holds, under the named root
// "btree", a meta block (BTree::Meta) naming its lock table; blade 0's meta
// also holds the root pointer word. The first client to open a blade builds
// its lock table (and, on blade 0, the empty root leaf) and publishes the
// meta; the others wait and attach. A builder that dies is replaced by the
// next client (its half-built memory stays allocated and unused).
#include <algorithm>

#include "smart/logging.h"
#include "smart/named_root.h"
#include "tree_internal.h"

namespace smart::btree {

namespace {

[[noreturn]] void Fail(const std::string& what, node_t node, const Status& s) {
  throw Error("B+tree: " + what + " on memory node " + std::to_string(node) + ": " + s.ToString());
}

// Builds blade `node`'s lock table (and on node 0 the root leaf) and returns
// the meta block's offset.
uint64_t BuildBlade(Initiator& in, node_t node, char* buffer, size_t buffer_size, RootClaim& claim) {
  GlobalAddress table;
  Status s = in.alloc_memory(node, kLockCount * sizeof(uint64_t), &table);
  if (!s.ok()) Fail("allocating the lock table", node, s);
  memset(buffer, 0, buffer_size);
  for (uint64_t done = 0; done < kLockCount * sizeof(uint64_t); done += buffer_size) {
    s = in.write(buffer, table + done, std::min<uint64_t>(buffer_size, kLockCount * sizeof(uint64_t) - done),
                 Option::kSync);
    if (!s.ok()) Fail("clearing the lock table", node, s);
    s = claim.renew_if_due();
    if (!s.ok()) Fail("keeping the build claim", node, s);
  }
  GlobalAddress root;
  if (node == 0) {
    s = in.alloc_memory(node, kPageSize, &root);
    if (!s.ok()) Fail("allocating the root leaf", node, s);
    PageHeader h;
    h.min = 0;
    h.unbounded = true;
    h.level = 0;
    h.version = 1;
    BuildLeaf(buffer, h, nullptr, 0);
    s = in.write(buffer, root, kPageSize, Option::kSync);
    if (!s.ok()) Fail("writing the root leaf", node, s);
  }
  GlobalAddress meta;
  s = in.alloc_memory(node, sizeof(BTree::Meta), &meta);
  if (!s.ok()) Fail("allocating the meta block", node, s);
  BTree::Meta m{};
  m.magic = kMetaMagic;
  m.lock_table = table.offset;
  m.lock_count = kLockCount;
  m.root = root.raw;
  m.page_size = kPageSize;
  memcpy(buffer, &m, sizeof(m));
  s = in.write(buffer, meta, sizeof(m), Option::kSync);
  if (!s.ok()) Fail("writing the meta block", node, s);
  return meta.offset;
}

}  // namespace

// Opens every blade; fills lock_tables_ and root_word_.
void OpenTree(Initiator& in, int nodes, const LeaseOptions& lease, std::vector<GlobalAddress>* lock_tables,
              GlobalAddress* root_word) {
  constexpr size_t kBufferSize = 16384;
  char* buffer = static_cast<char*>(in.alloc_cache(kBufferSize));
  if (buffer == nullptr) throw Error("B+tree: the initiator cache is exhausted; raise initiator_cache_size");
  NamedRoots roots(in, lease);
  lock_tables->assign(static_cast<size_t>(nodes), GlobalAddress());
  for (int i = 0; i < nodes; ++i) {
    const node_t node = static_cast<node_t>(i);
    uint64_t meta_offset = 0;
    for (;;) {
      RootClaim claim;
      Status s = roots.open(node, kRootName, &claim);
      if (!s.ok()) Fail("opening the named root \"btree\"", node, s);
      if (!claim.must_build()) {
        meta_offset = claim.value();
        break;
      }
      if (claim.took_over()) {
        LogPrintf(LogLevel::kWarn, "B+tree: the client building memory node %d died; building it again", i);
      }
      const uint64_t offset = BuildBlade(in, node, buffer, kBufferSize, claim);
      s = claim.publish(offset);
      if (s.code() == Status::Code::kLockLost) continue;  // taken over: attach to the other build
      if (!s.ok()) Fail("publishing the tree", node, s);
      meta_offset = offset;
      break;
    }
    Status s = in.read(buffer, GlobalAddress(node, meta_offset), sizeof(BTree::Meta), Option::kSync);
    if (!s.ok()) Fail("reading the meta block", node, s);
    BTree::Meta m;
    memcpy(&m, buffer, sizeof(m));
    if (m.magic != kMetaMagic || m.lock_count != kLockCount || m.page_size != kPageSize) {
      throw Error("B+tree: the named root \"btree\" on memory node " + std::to_string(i) +
                  " does not lead to a B+tree of this version");
    }
    (*lock_tables)[static_cast<size_t>(i)] = GlobalAddress(node, m.lock_table);
    if (i == 0) *root_word = GlobalAddress(node, meta_offset + kRootWordOffset);
  }
}

}  // namespace smart::btree
