// SMART-HT loading: several keys with shared round trips.
//
// A load (HashTable::load) of one key costs four requests in two round
// trips: the block write and the two bucket-pair reads, then the slot CAS.
// A batch of keys shares them: one write for all their blocks (allocated
// one after another, so they lie side by side on the blade), every key's
// bucket reads behind one doorbell, then every key's CAS behind another.
// Per key that is three requests and 2/N round trips; on a NIC (or rxe)
// that spends its time per request, the load goes faster by about the
// block writes it saves.
//
// Only the plain case is settled in the batch: the key's view is current
// and whole, no slot may already name the key (that needs its block read),
// an empty slot exists and no other key of the batch chose it, and the CAS
// won. Any other key goes through Ops::write(kLoad) after the batch, which
// handles splits, stale directories, existing copies and lost races as a
// load of one key does. A key given twice in one batch goes there too, so
// its later value lands after its earlier one.
#include "smart/fault_injection.h"
#include "table_internal.h"

namespace smart::hashtable {

namespace {

// One key's way through a batch.
struct Pending {
  bool alone = false;   // loaded by write() after the batch
  bool block = false;   // holds an unpublished block allocated by the batch
  bool casing = false;  // its slot CAS is (or was) posted
  size_t units = 0;
  uint64_t offset = 0;
  uint8_t tag = 0;
  size_t at = 0;  // its block's place in the load area
  uint64_t new_slot = 0;
  View view;
  uint64_t slot_offset = 0, expected = 0, desired = 0;
};

}  // namespace

Status Ops::load_batch(int si, const Shard& sh, const LoadItem* items, int count) {
  if (count < 0 || count > kLoadBatchKeys) {
    return Status::InvalidArgument("hash table: a load batch holds 0.." + std::to_string(kLoadBatchKeys) +
                                   " keys, not " + std::to_string(count));
  }
  TaskBuffers* tb = nullptr;
  Status s = task_buffers(&tb);
  if (!s.ok()) return s;
  if (tb->load_area == nullptr) {
    tb->load_area = static_cast<char*>(in_.alloc_cache(kLoadAreaSize));
    if (tb->load_area == nullptr) return Status::OutOfMemory("hash table: the initiator cache is exhausted");
  }
  char* const blocks = tb->load_area;
  char* const buckets = blocks + kLoadBlockBytes;
  uint64_t* const words = reinterpret_cast<uint64_t*>(buckets + kLoadBatchKeys * 2 * kBucketPairSize);
  Pending p[kLoadBatchKeys];

  // Blocks that no slot names are free again at once; after a failed CAS
  // round nobody knows which CAS took effect, so those blocks stay taken.
  auto release_unpublished = [&](bool keep_casing) {
    for (int i = 0; i < count; ++i) {
      if (!p[i].block || (keep_casing && p[i].casing)) continue;
      release_block(sh, p[i].offset, p[i].units, p[i].tag);
      p[i].block = false;
    }
  };

  // Blocks, encoded side by side in the load area.
  size_t used = 0;
  for (int i = 0; i < count; ++i) {
    const LoadItem& it = items[i];
    Pending& q = p[i];
    for (int k = 0; k < i && !q.alone; ++k) q.alone = items[k].h.primary == it.h.primary && items[k].key == it.key;
    q.units = BlockUnits(it.key.size(), it.value.size());
    if (q.alone || !BlockFits(it.key.size(), q.units) || used + q.units * kBlockUnit > kLoadBlockBytes) {
      q.alone = true;  // write() says what is wrong with a key too big
      continue;
    }
    s = alloc_block(sh, q.units, &q.offset, &q.tag);
    if (!s.ok()) {
      release_unpublished(false);
      return s;
    }
    q.block = true;
    q.at = used;
    // Each key's copy is the key's only one (load()'s promise).
    EncodeBlock(it.key, it.value, q.tag, q.units, blocks + used, kBlockLoaded);
    used += q.units * kBlockUnit;
    q.new_slot = NewSlot(it.h, q.units, q.tag, q.offset);
  }

  // One write per run of blocks adjacent on the blade, then every key's
  // bucket reads, all in one doorbell.
  int last = -1;
  for (int i = 0; i < count; ++i) {
    if (p[i].block) last = i;
  }
  for (int i = 0; i <= last && s.ok();) {
    if (!p[i].block) {
      ++i;
      continue;
    }
    size_t length = p[i].units * kBlockUnit;
    int j = i + 1;
    for (; j <= last && p[j].block && p[j].offset == p[i].offset + length && p[j].at == p[i].at + length; ++j) {
      length += p[j].units * kBlockUnit;
    }
    s = in_.write(blocks + p[i].at, GlobalAddress(sh.node, p[i].offset), length, Option::kNone);
    i = j;
  }
  for (int i = 0; i <= last && s.ok(); ++i) {
    if (!p[i].block) continue;
    s = queue_candidates(si, sh, items[i].h, buckets + 2 * kBucketPairSize * static_cast<size_t>(i), &p[i].view,
                         i == last ? Option::kSync : Option::kNone);
  }
  if (!s.ok()) {
    release_unpublished(false);
    return s;
  }

  // The keys the batch can settle, and the slot each claims.
  int last_cas = -1;
  for (int i = 0; i <= last; ++i) {
    Pending& q = p[i];
    if (!q.block) continue;
    View& v = q.view;
    const KeyHash& h = items[i].h;
    bool plain = !IndexCandidates(h, &v) && !v.torn();
    for (int b = 0; b < v.count && plain; ++b) {
      for (int j = 0; j < kSlotsPerBucket && plain; ++j) plain = !SlotMayName(v.slot(b, j), h);
    }
    SlotChoice c;
    if (plain) {
      c = ChooseEmptySlot(v);
      plain = !c.frozen && c.bucket >= 0;
    }
    if (plain) {
      q.slot_offset = v.slot_offset(c.bucket, c.slot);
      for (int k = 0; k < i && plain; ++k) plain = !(p[k].casing && p[k].slot_offset == q.slot_offset);
    }
    if (!plain) {
      q.alone = true;
      continue;
    }
    q.casing = true;
    q.expected = v.slot(c.bucket, c.slot);
    q.desired = SlotWithParity(q.new_slot, HeaderDepth(v.header(c.bucket)));
    last_cas = i;
  }

  if (last_cas >= 0) {
    FaultPoint("ht.load.claiming");

    for (int i = 0; i <= last_cas && s.ok(); ++i) {
      if (!p[i].casing) continue;
      s = in_.compare_and_swap(&words[i], GlobalAddress(sh.node, p[i].slot_offset), p[i].expected, p[i].desired,
                               i == last_cas ? Option::kSync : Option::kNone);
    }
    if (!s.ok()) {
      release_unpublished(true);
      // A remote access error says only that the failing CAS and those
      // after it were not carried out: the ones before it were.
      if (s.code() == Status::Code::kInvalidArgument) return s;
      return Status::OutcomeUnknown("hash table: a load batch may or may not have taken effect for each of its "
                                    "keys: its slot CASes were posted and did not all complete (" + s.ToString() + ")");
    }
    for (int i = 0; i <= last_cas; ++i) {
      Pending& q = p[i];
      if (!q.casing) continue;
      if (words[i] == q.expected) {
        q.block = false;  // published
        ++tc_.stats.loads_batched;
        // load()'s promise: no racing insert can put a copy below it.
        if (options_.speculative_lookup) {
          cache_put(items[i].h.primary, GlobalAddress(sh.node, q.slot_offset), q.desired, true);
        }
      } else {
        ++tc_.stats.cas_failures;
        q.alone = true;
      }
    }
  }

  // The rest, one by one and in order, each with a block of its own.
  release_unpublished(false);
  for (int i = 0; i < count; ++i) {
    if (!p[i].alone) continue;
    s = write(si, sh, items[i].key, items[i].h, items[i].value, WriteKind::kLoad);
    if (!s.ok()) return s;
  }
  return Status::OK();
}

}  // namespace smart::hashtable
