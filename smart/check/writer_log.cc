#include "smart/check/writer_log.h"

#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "smart/bench/bench.h"
#include "smart/status.h"

namespace smart::check {

namespace {

std::string Describe(const LoggedWrite& w) {
  return "writer " + std::to_string(w.writer) + "'s " + (w.deleted ? std::string("delete") : "write " + std::to_string(w.seq));
}

// The first operation of another writer than `final_op`'s that started after
// `final_op` returned (only writes when `writes_only`), or nullptr.
const LoggedWrite* StartedAfter(const LoggedWrite& final_op, const std::vector<LoggedWrite>& ops, bool writes_only) {
  for (const LoggedWrite& w : ops) {
    if (w.writer != final_op.writer && w.start_ns > final_op.end_ns && !(writes_only && w.deleted)) return &w;
  }
  return nullptr;
}

}  // namespace

void WriteRecorder::acknowledged(WriterLog* worker_log, uint64_t id, uint64_t seq, uint64_t start_ns) {
  if (!path_.empty()) (*worker_log)[id] = LoggedWrite{writer_, seq, start_ns, NowNs(), false};
}

void WriteRecorder::deleted(WriterLog* worker_log, uint64_t id, uint64_t start_ns) {
  if (!path_.empty()) (*worker_log)[id] = LoggedWrite{writer_, 0, start_ns, NowNs(), true};
}

void WriteRecorder::merge(const WriterLog& worker_log) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [id, w] : worker_log) all_[id] = w;
}

void WriteRecorder::save() {
  if (!path_.empty()) SaveWriterLog(path_, all_);
}

void SaveWriterLog(const std::string& path, const WriterLog& log) {
  std::ofstream out(path, std::ios::app);
  if (!out) throw Error("cannot write the writer log " + path);
  for (const auto& [id, w] : log) {
    out << id << ' ' << w.writer << ' ' << w.seq << ' ' << w.start_ns << ' ' << w.end_ns << ' '
        << (w.deleted ? 'd' : 'w') << '\n';
  }
  if (!out) throw Error("writing the writer log " + path + " failed");
}

std::map<uint64_t, std::vector<LoggedWrite>> LoadWriterLogs(const std::vector<std::string>& paths) {
  std::map<uint64_t, std::vector<LoggedWrite>> writes;
  for (const std::string& path : paths) {
    std::ifstream in(path);
    if (!in) throw Error("cannot read the writer log " + path);
    std::string line;
    int number = 0;
    while (std::getline(in, line)) {
      ++number;
      std::istringstream fields(line);
      uint64_t id;
      LoggedWrite w;
      std::string kind, extra;
      if (!(fields >> id >> w.writer >> w.seq >> w.start_ns >> w.end_ns >> kind) || (fields >> extra) ||
          w.end_ns < w.start_ns || (kind != "w" && kind != "d")) {
        throw Error(path + ":" + std::to_string(number) + ": expected \"id writer seq start end w|d\", got \"" + line +
                    "\"");
      }
      w.deleted = kind == "d";
      writes[id].push_back(w);
    }
  }
  return writes;
}

std::string CheckAgainstLog(uint64_t id, int writer, uint64_t seq, const std::vector<LoggedWrite>& writes) {
  const LoggedWrite* final_write = nullptr;
  for (const LoggedWrite& w : writes) {
    if (w.writer == writer) final_write = &w;
  }
  const std::string key = "key " + std::to_string(id);
  const std::string holds = key + " holds writer " + std::to_string(writer) + "'s write " + std::to_string(seq);
  if (final_write == nullptr) {
    return key + " holds writer " + std::to_string(writer) + "'s value, but that writer logged no write of it";
  }
  if (final_write->deleted || final_write->seq != seq) {
    return holds + ", but its last acknowledged operation was its " +
           (final_write->deleted ? std::string("delete") : "write " + std::to_string(final_write->seq));
  }
  if (const LoggedWrite* later = StartedAfter(*final_write, writes, false)) {
    return holds + ", but " + Describe(*later) + " started " + std::to_string(later->start_ns - final_write->end_ns) +
           " ns after it returned and was acknowledged: lost";
  }
  return "";
}

std::string CheckAbsentAgainstLog(uint64_t id, const std::vector<LoggedWrite>& writes) {
  if (writes.empty()) return "";
  const LoggedWrite* lost = nullptr;
  for (const LoggedWrite& d : writes) {
    if (!d.deleted) continue;
    // A later delete is no conflict: the key stays absent.
    const LoggedWrite* later = StartedAfter(d, writes, true);
    if (later == nullptr) return "";  // this delete may be the last operation
    lost = later;
  }
  const std::string key = "key " + std::to_string(id);
  if (lost == nullptr) {
    return key + " is absent, but " + Describe(writes.front()) + " of it was acknowledged and no delete was";
  }
  return key + " is absent, but " + Describe(*lost) + " started after every acknowledged delete of it returned: lost";
}

}  // namespace smart::check
