#include "writer_log.h"

#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "smart/status.h"

namespace smart::hashtable {

void SaveWriterLog(const std::string& path, const WriterLog& log) {
  std::ofstream out(path, std::ios::app);
  if (!out) throw Error("cannot write the writer log " + path);
  for (const auto& [id, w] : log) {
    out << id << ' ' << w.writer << ' ' << w.seq << ' ' << w.start_ns << ' ' << w.end_ns << '\n';
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
      std::string extra;
      if (!(fields >> id >> w.writer >> w.seq >> w.start_ns >> w.end_ns) || (fields >> extra) || w.end_ns < w.start_ns) {
        throw Error(path + ":" + std::to_string(number) + ": expected \"id writer seq start end\", got \"" + line + "\"");
      }
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
  if (final_write == nullptr) {
    return key + " holds writer " + std::to_string(writer) + "'s value, but that writer logged no write of it";
  }
  if (final_write->seq != seq) {
    return key + " holds writer " + std::to_string(writer) + "'s write " + std::to_string(seq) +
           ", but its last acknowledged write was " + std::to_string(final_write->seq);
  }
  for (const LoggedWrite& w : writes) {
    if (w.writer != writer && w.start_ns > final_write->end_ns) {
      return key + " holds writer " + std::to_string(writer) + "'s write " + std::to_string(seq) + ", but writer " +
             std::to_string(w.writer) + "'s write " + std::to_string(w.seq) + " started " +
             std::to_string(w.start_ns - final_write->end_ns) + " ns after it returned and was acknowledged: lost";
    }
  }
  return "";
}

}  // namespace smart::hashtable
