#include "smart/named_root.h"

#include <cstring>

#include "smart/task.h"

namespace smart {

namespace {

constexpr size_t kNameOffset = 32;
constexpr size_t kRegistryBytes = kMaxNamedRoots * kNamedRootEntrySize;

GlobalAddress EntryAddress(node_t node, int index, size_t field) {
  return GlobalAddress(node, kNamedRootRegistryOffset + kNamedRootEntrySize * static_cast<uint64_t>(index) + field);
}

Status CheckName(std::string_view name) {
  if (name.empty() || name.size() > kMaxRootNameLength) {
    return Status::InvalidArgument("named root \"" + std::string(name) + "\": a name has 1.." +
                                   std::to_string(kMaxRootNameLength) + " bytes");
  }
  for (char c : name) {
    if (c <= ' ' || c > '~') {
      return Status::InvalidArgument("named root \"" + std::string(name) +
                                     "\": use printable characters without spaces");
    }
  }
  return Status::OK();
}

std::string_view StoredName(const char* entry) {
  const char* name = entry + kNameOffset;
  return {name, strnlen(name, kMaxRootNameLength)};
}

}  // namespace

// ---------------------------------------------------------------------------
// RootClaim

RootClaim::RootClaim() = default;
RootClaim::~RootClaim() = default;
RootClaim::RootClaim(RootClaim&&) noexcept = default;
RootClaim& RootClaim::operator=(RootClaim&&) noexcept = default;

Status RootClaim::renew_if_due() {
  if (!lock_) return Status::InvalidArgument("named root: renew without a build claim");
  return lock_->renew_if_due();
}

Status RootClaim::publish(uint64_t value) {
  if (!lock_) return Status::InvalidArgument("named root: publish without a build claim");
  if (value & kRootPublishedBit) return Status::InvalidArgument("named root: a published value must be below 2^63");
  // Fence first: a claim that was taken over must not publish.
  Status s = lock_->renew();
  if (!s.ok()) return s;
  uint64_t* scratch = lock_->scratch();
  s = lock_->initiator().compare_and_swap(scratch, lock_->address(), lock_->word(), kRootPublishedBit | value,
                                          Option::kSync);
  if (!s.ok()) return s;
  if (scratch[0] != lock_->word()) {
    return Status::LockLost("named root at " + lock_->address().to_string() +
                            ": the build was taken over before it was published (now " +
                            DescribeLockWord(scratch[0]) + ")");
  }
  lock_.reset();
  value_ = value;
  return Status::OK();
}

// ---------------------------------------------------------------------------
// NamedRoots

NamedRoots::NamedRoots(Initiator& initiator, const LeaseOptions& options) : initiator_(initiator), options_(options) {
  registry_ = static_cast<char*>(initiator_.alloc_cache(kRegistryBytes + 64));
  if (registry_ == nullptr) throw Error("named roots: the initiator cache is exhausted; raise initiator_cache_size");
  scratch_ = reinterpret_cast<uint64_t*>(registry_ + kRegistryBytes);
}

uint64_t NamedRoots::HashName(std::string_view name) {
  // FNV-1a; never 0, which marks a free entry.
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c : name) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ull;
  }
  return h == 0 ? 1 : h;
}

Status NamedRoots::read_registry(node_t node) {
  return initiator_.read(registry_, GlobalAddress(node, kNamedRootRegistryOffset), kRegistryBytes, Option::kSync);
}

Status NamedRoots::find_entry(node_t node, std::string_view name, bool create, int* index) {
  *index = -1;
  const uint64_t hash = HashName(name);
  Status s = read_registry(node);
  if (!s.ok()) return s;
  for (int probe = 0; probe < kMaxNamedRoots; ++probe) {
    const int i = static_cast<int>((hash + static_cast<uint64_t>(probe)) % kMaxNamedRoots);
    const char* entry = registry_ + kNamedRootEntrySize * static_cast<size_t>(i);
    uint64_t word0;
    memcpy(&word0, entry, 8);
    if (word0 == 0) {
      if (!create) return Status::OK();
      s = initiator_.compare_and_swap(scratch_, EntryAddress(node, i, 0), 0, hash, Option::kSync);
      if (!s.ok()) return s;
      if (scratch_[0] != 0 && scratch_[0] != hash) continue;  // taken meanwhile by another name
      // Both racers of one name write the same bytes.
      char* name_buffer = reinterpret_cast<char*>(scratch_);
      memset(name_buffer, 0, kMaxRootNameLength);
      memcpy(name_buffer, name.data(), name.size());
      s = initiator_.write(name_buffer, EntryAddress(node, i, kNameOffset), kMaxRootNameLength, Option::kSync);
      if (!s.ok()) return s;
      *index = i;
      return Status::OK();
    }
    if (word0 != hash) continue;
    const std::string_view stored = StoredName(entry);
    if (!stored.empty() && stored != name) continue;  // another name with the same hash
    *index = i;
    return Status::OK();
  }
  if (!create) return Status::OK();
  return Status::OutOfMemory("memory node " + std::to_string(node) + ": the registry of named roots is full (" +
                             std::to_string(kMaxNamedRoots) + " names); use fewer names per memory blade");
}

Status NamedRoots::open(node_t node, std::string_view name, RootClaim* claim) {
  Status s = CheckName(name);
  if (!s.ok()) return s;
  int index;
  s = find_entry(node, name, true, &index);
  if (!s.ok()) return s;
  auto* lock_scratch = static_cast<uint64_t*>(initiator_.alloc_cache(16));
  if (lock_scratch == nullptr) return Status::OutOfMemory("named roots: the initiator cache is exhausted");
  auto lock = std::make_unique<RemoteLock>(initiator_, EntryAddress(node, index, 8), lock_scratch, options_);
  LockAcquireInfo info;
  s = lock->acquire(&info);
  if (!s.ok()) {
    if (s.code() == Status::Code::kTimedOut) {
      return Status::TimedOut("named root \"" + std::string(name) + "\" on memory node " + std::to_string(node) +
                              ": " + s.message());
    }
    return s;
  }
  *claim = RootClaim();
  if (!lock->held()) {
    claim->value_ = lock->last_seen() & ~kRootPublishedBit;
    return Status::OK();
  }
  claim->took_over_ = info.took_over;
  claim->lock_ = std::move(lock);
  return Status::OK();
}

Status NamedRoots::lookup(node_t node, std::string_view name, uint64_t* value) {
  Status s = CheckName(name);
  if (!s.ok()) return s;
  int index;
  s = find_entry(node, name, false, &index);
  if (!s.ok()) return s;
  if (index < 0) return Status::NotFound("memory node " + std::to_string(node) + " has no root named \"" +
                                         std::string(name) + "\"");
  uint64_t state;
  memcpy(&state, registry_ + kNamedRootEntrySize * static_cast<size_t>(index) + 8, 8);
  if (!(state & kRootPublishedBit)) {
    return Status::NotFound("root \"" + std::string(name) + "\" on memory node " + std::to_string(node) +
                            " is not published yet (" + DescribeLockWord(state) + ")");
  }
  *value = state & ~kRootPublishedBit;
  return Status::OK();
}

Status NamedRoots::list(node_t node, std::vector<NamedRootInfo>* out) {
  out->clear();
  Status s = read_registry(node);
  if (!s.ok()) return s;
  for (int i = 0; i < kMaxNamedRoots; ++i) {
    const char* entry = registry_ + kNamedRootEntrySize * static_cast<size_t>(i);
    uint64_t word0, state;
    memcpy(&word0, entry, 8);
    memcpy(&state, entry + 8, 8);
    if (word0 == 0) continue;
    NamedRootInfo info;
    info.name = std::string(StoredName(entry));
    info.state = state;
    info.published = (state & kRootPublishedBit) != 0;
    info.value = info.published ? state & ~kRootPublishedBit : 0;
    out->push_back(std::move(info));
  }
  return Status::OK();
}

}  // namespace smart
