// Opening (and on first use building) a SMART-DTX database on the memory
// blades, and this client's undo-log areas.
#include "database.h"

#include <algorithm>
#include <cstring>

#include "db_internal.h"
#include "smart/bench/bench.h"
#include "smart/logging.h"
#include "smart/named_root.h"
#include "smart/task.h"
#include "undo_log.h"

namespace smart::dtx {

namespace {

constexpr size_t kBufferBytes = 64 * 1024;

[[noreturn]] void Fail(const std::string& db, const std::string& what, int blade, const Status& s) {
  throw Error("dtx/" + db + ": " + what + " on memory node " + std::to_string(blade) + ": " + s.ToString());
}

// Writes `bytes` bytes of `image` (or zeros when null) to `to` through the
// registered `buffer`, renewing `claim` (when given) between pieces and
// counting the bytes on `progress` (when given) from `*written`.
void WriteOut(Initiator& in, char* buffer, const char* image, uint64_t bytes, GlobalAddress to, RootClaim* claim,
              const std::string& db, const std::string& what, Progress* progress = nullptr,
              uint64_t* written = nullptr) {
  if (image == nullptr) memset(buffer, 0, kBufferBytes);
  for (uint64_t done = 0; done < bytes; done += kBufferBytes) {
    const uint64_t n = std::min<uint64_t>(kBufferBytes, bytes - done);
    if (image != nullptr) memcpy(buffer, image + done, n);
    Status s = in.write(buffer, to + done, n, Option::kSync);
    if (!s.ok()) Fail(db, "writing " + what, to.node, s);
    if (progress != nullptr) progress->update((*written += n) >> 20);
    if (claim != nullptr) {
      s = claim->renew_if_due();
      if (!s.ok()) Fail(db, "keeping the build claim while writing " + what, to.node, s);
    }
  }
}

}  // namespace

void DtxStats::add(const DtxStats& o) {
  committed += o.committed;
  aborted_conflict += o.aborted_conflict;
  aborted_logical += o.aborted_logical;
  failed += o.failed;
  unknown += o.unknown;
  rdma_ops += o.rdma_ops;
  round_trips += o.round_trips;
  torn_reads += o.torn_reads;
  invisible_waits += o.invisible_waits;
  cache_misses += o.cache_misses;
  recoveries += o.recoveries;
}

Database::Database(Initiator& initiator, int blades, DatabaseOptions options)
    : initiator_(initiator), blades_(blades), options_(std::move(options)), cache_(std::make_unique<AddressCache>()) {
  this_task::require_outside("dtx: opening the database");
  const std::string& name = options_.name;
  if (name.empty() || name.size() + 4 > kMaxRootNameLength) {
    throw Error("dtx: a database name of 1.." + std::to_string(kMaxRootNameLength - 4) + " bytes, not \"" + name +
                "\"");
  }
  const std::string bad = CheckTableSpecs(options_.tables);
  if (!bad.empty()) throw Error("dtx/" + name + ": " + bad);
  if (blades < 1 || blades > kMaxNodes) throw Error("dtx/" + name + ": " + std::to_string(blades) + " memory blades");
  if (options_.backup_degree < 0 || options_.backup_degree >= blades) {
    throw Error("dtx/" + name + ": backup degree " + std::to_string(options_.backup_degree) + " needs more than " +
                std::to_string(options_.backup_degree) + " memory blades; " + std::to_string(blades) +
                " are configured");
  }
  if (options_.threads < 1 || options_.threads > kMaxThreads || options_.tasks < 1 ||
      options_.tasks >= kMaxTasksPerThread) {
    throw Error("dtx/" + name + ": " + std::to_string(options_.threads) + " threads of " +
                std::to_string(options_.tasks) + " tasks is out of range");
  }
  for (size_t i = 0; i < options_.tables.size(); ++i) {
    TableInfo t;
    t.spec = options_.tables[i];
    t.replicas = PlaceTable(static_cast<int>(i), blades, options_.backup_degree);
    t.region.assign(static_cast<size_t>(blades), 0);
    if (table_index_.size() <= t.spec.id) table_index_.resize(size_t{t.spec.id} + 1, -1);
    table_index_[t.spec.id] = static_cast<int>(i);
    tables_.push_back(std::move(t));
  }
  log_directory_.assign(static_cast<size_t>(blades), 0);
  log_area_.assign(static_cast<size_t>(blades), 0);
  std::vector<CatalogBlock> blocks;
  for (int b = 0; b < blades; ++b) open_blade(static_cast<node_t>(b), &blocks);
  images_.clear();
  for (TableInfo& t : tables_) {
    for (node_t r : t.replicas) {
      if (t.region[r] == 0) {
        throw Error("dtx/" + name + ": memory node " + std::to_string(r) + " should hold a replica of table " +
                    std::to_string(t.spec.id) + " and its catalog lists none");
      }
    }
  }
  attach_logs();
}

Database::~Database() = default;

const TableInfo* Database::table(uint16_t id) const {
  if (id >= table_index_.size() || table_index_[id] < 0) return nullptr;
  return &tables_[static_cast<size_t>(table_index_[id])];
}

GlobalAddress Database::log_directory(node_t blade) const { return GlobalAddress(blade, log_directory_[blade]); }

GlobalAddress Database::log_slot(node_t blade, int thread, int task) const {
  return GlobalAddress(blade, log_area_[blade] + LogSlotOffset(options_.tasks + 1, thread, task));
}

Database::ThreadState& Database::thread_state() { return thread_states_.get(); }

DtxStats Database::stats() const {
  DtxStats sum;
  thread_states_.for_each([&](const ThreadState& t) { sum.add(t.stats); });
  return sum;
}

void Database::open_blade(node_t blade, std::vector<CatalogBlock>* blocks) {
  const std::string& name = options_.name;
  NamedRoots roots(initiator_, options_.lease);
  uint64_t catalog = 0;
  for (;;) {
    RootClaim claim;
    Status s = roots.open(blade, "dtx/" + name, &claim);
    if (!s.ok()) Fail(name, "opening the named root \"dtx/" + name + "\"", blade, s);
    if (!claim.must_build()) {
      catalog = claim.value();
      break;
    }
    if (claim.took_over()) {
      LogPrintf(LogLevel::kWarn, "dtx/%s: the client building memory node %d died; building it again", name.c_str(),
                static_cast<int>(blade));
    }
    const uint64_t offset = build_blade(blade, claim);
    s = claim.publish(offset);
    if (s.code() == Status::Code::kLockLost) continue;  // taken over: attach to the other build
    if (!s.ok()) Fail(name, "publishing the database", blade, s);
    catalog = offset;
    break;
  }
  char* buffer = static_cast<char*>(initiator_.alloc_cache(kCatalogBytes));
  if (buffer == nullptr) throw Error("dtx/" + name + ": the initiator cache is exhausted; raise initiator_cache_size");
  Status s = initiator_.read(buffer, GlobalAddress(blade, catalog), kCatalogBytes, Option::kSync);
  if (!s.ok()) Fail(name, "reading the catalog", blade, s);
  CatalogBlock block;
  const std::string bad = DecodeCatalog(buffer, &block);
  const std::string where = "dtx/" + name + ": the catalog on memory node " + std::to_string(blade);
  if (!bad.empty()) throw Error(where + " makes no sense: " + bad);
  if (block.blade_count != blades_ || block.backup_degree != options_.backup_degree) {
    throw Error(where + " was built for " + std::to_string(block.blade_count) + " blades with backup degree " +
                std::to_string(block.backup_degree) + "; this client has " + std::to_string(blades_) +
                " and degree " + std::to_string(options_.backup_degree));
  }
  if (block.tables.size() != tables_.size()) {
    throw Error(where + " has " + std::to_string(block.tables.size()) + " tables, this client " +
                std::to_string(tables_.size()));
  }
  for (size_t i = 0; i < tables_.size(); ++i) {
    const TableSpec& want = tables_[i].spec;
    const CatalogBlock::Entry& got = block.tables[i];
    if (got.spec.id != want.id || got.spec.value_bytes != want.value_bytes || got.spec.buckets != want.buckets ||
        got.spec.overflow_nodes != want.overflow_nodes) {
      throw Error(where + ": table " + std::to_string(i) + " is id " + std::to_string(got.spec.id) + " with " +
                  std::to_string(got.spec.value_bytes) + "-byte values in " + std::to_string(got.spec.buckets) +
                  "+" + std::to_string(got.spec.overflow_nodes) + " nodes; this client expects id " +
                  std::to_string(want.id) + ", " + std::to_string(want.value_bytes) + " bytes, " +
                  std::to_string(want.buckets) + "+" + std::to_string(want.overflow_nodes) +
                  " (another configuration built it)");
    }
    const bool here = std::find(tables_[i].replicas.begin(), tables_[i].replicas.end(), blade) !=
                      tables_[i].replicas.end();
    if (here != (got.region != 0)) throw Error(where + ": table " + std::to_string(want.id) + " is misplaced");
    tables_[i].region[blade] = got.region;
    if (here) tables_[i].rows = got.rows;
    if (blade == tables_[i].replicas[0]) {
      tables_[i].overflow_counter = GlobalAddress(blade, catalog + CatalogOverflowOffset(i));
    }
  }
  log_directory_[blade] = block.log_directory;
  blocks->push_back(block);
}

uint64_t Database::build_blade(node_t blade, RootClaim& claim) {
  const std::string& name = options_.name;
  if (images_.empty()) BuildImages(*this);
  char* buffer = static_cast<char*>(initiator_.alloc_cache(kBufferBytes));
  if (buffer == nullptr) throw Error("dtx/" + name + ": the initiator cache is exhausted; raise initiator_cache_size");
  CatalogBlock block;
  block.backup_degree = options_.backup_degree;
  block.blade_count = blades_;
  uint64_t to_write = 0, written = 0;
  for (const TableInfo& t : tables_) {
    if (std::find(t.replicas.begin(), t.replicas.end(), blade) != t.replicas.end()) to_write += t.region_bytes();
  }
  std::unique_ptr<Progress> progress;
  if (options_.progress) {
    progress = std::make_unique<Progress>("dtx/" + name + ": writing the tables to memory node " +
                                              std::to_string(blade) + " (MiB)", to_write >> 20);
  }
  for (TableInfo& t : tables_) {
    CatalogBlock::Entry e;
    e.spec = t.spec;
    e.rows = t.rows;
    e.overflow_used = t.overflow_used;
    if (std::find(t.replicas.begin(), t.replicas.end(), blade) != t.replicas.end()) {
      GlobalAddress region;
      Status s = initiator_.alloc_memory(blade, t.region_bytes(), &region);
      if (!s.ok()) Fail(name, "allocating " + std::to_string(t.region_bytes() >> 20) + " MiB for table " +
                                  std::to_string(t.spec.id), blade, s);
      const std::vector<char>& image = images_.at(t.spec.id);
      WriteOut(initiator_, buffer, image.data(), image.size(), region, &claim, name,
               "table " + std::to_string(t.spec.id), progress.get(), &written);
      e.region = region.offset;
    }
    block.tables.push_back(e);
  }
  if (progress) progress->finish();
  GlobalAddress directory;
  Status s = initiator_.alloc_memory(blade, kLogDirectoryBytes, &directory);
  if (!s.ok()) Fail(name, "allocating the log directory", blade, s);
  WriteOut(initiator_, buffer, nullptr, kLogDirectoryBytes, directory, &claim, name, "the log directory");
  block.log_directory = directory.offset;
  GlobalAddress catalog;
  s = initiator_.alloc_memory(blade, kCatalogBytes, &catalog);
  if (!s.ok()) Fail(name, "allocating the catalog", blade, s);
  EncodeCatalog(block, buffer);
  s = initiator_.write(buffer, catalog, kCatalogBytes, Option::kSync);
  if (!s.ok()) Fail(name, "writing the catalog", blade, s);
  return catalog.offset;
}

void Database::attach_logs() {
  const std::string& name = options_.name;
  // Rows for thread ids 0 .. threads+1: a bench's workers, and the main
  // thread and one more that the framework may have numbered first.
  const int rows = options_.threads + 2;
  const uint64_t bytes = LogSlotOffset(options_.tasks + 1, rows, 0);
  char* buffer = static_cast<char*>(initiator_.alloc_cache(kBufferBytes));
  if (buffer == nullptr) throw Error("dtx/" + name + ": the initiator cache is exhausted; raise initiator_cache_size");
  if (blades_ > kMaxLogAreaBlades) {
    throw Error("dtx/" + name + ": " + std::to_string(blades_) + " memory blades; a database spans at most " +
                std::to_string(kMaxLogAreaBlades));
  }
  for (int b = 0; b < blades_; ++b) {
    const node_t blade = static_cast<node_t>(b);
    GlobalAddress area;
    Status s = initiator_.alloc_memory(blade, bytes, &area);
    if (!s.ok()) Fail(name, "allocating " + std::to_string(bytes >> 10) + " KiB of undo log", blade, s);
    WriteOut(initiator_, buffer, nullptr, bytes, area, nullptr, name, "the undo log");
    // Every area names the claim of the area on blade 0 (allocated first):
    // one claim for this client's recoverers, whichever blade they start on.
    const GlobalAddress claim = GlobalAddress(0, b == 0 ? area.offset : log_area_[0]) + kLogAreaClaimOffset;
    uint64_t header[kLogAreaHeaderBytes / 8] = {kLogAreaMagic, static_cast<uint64_t>(rows),
                                                static_cast<uint64_t>(options_.tasks + 1), 0, claim.raw};
    // This client's session on every blade, for recoverers to fence it by.
    for (int other = 0; other < blades_; ++other) {
      header[kLogAreaSessionsOffset / 8 + other] = SessionMapWord(initiator_.session(static_cast<node_t>(other)));
    }
    memcpy(buffer, header, sizeof(header));
    s = initiator_.write(buffer, area, sizeof(header), Option::kSync);
    if (!s.ok()) Fail(name, "writing the undo log's header", blade, s);
    log_area_[blade] = area.offset;
    const SessionId session = initiator_.session(blade);
    const uint64_t word = LogDirectoryWord(session.incarnation, area.offset);
    memcpy(buffer, &word, sizeof(word));
    s = initiator_.write(buffer, log_directory(blade) + 8 * uint64_t{session.slot}, sizeof(word), Option::kSync);
    if (!s.ok()) Fail(name, "registering the undo log", blade, s);
  }
}

}  // namespace smart::dtx
