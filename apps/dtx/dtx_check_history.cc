// dtx_check_history: checks that the committed transactions logged by a run
// (history lines, history.h; one file per client process) are
// conflict-serializable.
//
//   dtx_check_history FILE...
//
// Prints one summary line and exits 0 when the history is serializable and
// no version was written twice, 1 when it is not (or a file cannot be read
// or holds a malformed line, named by file and line number), 2 on a usage
// error.
#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "history.h"

namespace {

constexpr const char* kProgram = "dtx_check_history";
constexpr int kUsageError = 2;

// Where a transaction's line is, for messages about duplicate ids.
struct Location {
  uint32_t file;
  uint64_t line;
};

bool ReadFile(const std::string& path, std::string* out) {
  FILE* f = fopen(path.c_str(), "rb");
  if (f == nullptr) {
    fprintf(stderr, "%s: cannot open %s: %s\n", kProgram, path.c_str(), strerror(errno));
    return false;
  }
  out->clear();
  char buffer[1 << 16];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), f)) > 0) out->append(buffer, n);
  const bool failed = ferror(f) != 0;
  fclose(f);
  if (failed) fprintf(stderr, "%s: cannot read %s\n", kProgram, path.c_str());
  return !failed;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{std::string(kProgram) +
               ": checks that a transaction history is conflict-serializable.\n\n"
               "Each FILE holds committed transactions (one file per client process), one line each:\n"
               "  T <tx_id> r:<table>:<key>@<version> w:<table>:<key>@<version>[+i|+d] ...\n"
               "The check orders each record's versions and builds the direct serialization graph (ww, wr and rw\n"
               "edges). It fails on a cycle (printed with its transactions, edges and records), on two transactions\n"
               "writing the same version of a record (a lost update) and on a transaction id on two lines.\n\n"
               "Exit status: 0 serializable; 1 not serializable, or a file unreadable or malformed (named by file and\n"
               "line); 2 usage error."};
  std::vector<std::string> files;
  bool ignore_torn_tail = false;
  app.add_option("FILE", files, "history files (one per client process)")->required()->check(CLI::ExistingFile);
  app.add_flag("--ignore-torn-tail", ignore_torn_tail,
               "skip a file's last line when it has no newline (a client killed while writing it) instead of "
               "failing");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : kUsageError;
  }

  std::vector<smart::dtx::HistoryTx> history;
  std::vector<Location> locations;  // one per transaction, parallel to `history`
  std::string text, error;
  for (size_t f = 0; f < files.size(); ++f) {
    if (!ReadFile(files[f], &text)) return 1;
    size_t pos = 0;
    for (uint64_t line = 1; pos < text.size(); ++line) {
      const size_t newline = text.find('\n', pos);
      if (newline == std::string::npos) {
        // The file does not end with a newline: its last line may be cut
        // short (and still parse, as "r:1:2@34" cut to "r:1:2@3" does).
        if (ignore_torn_tail) {
          fprintf(stderr, "%s: %s:%llu: skipping the last line, which has no newline\n", kProgram,
                  files[f].c_str(), static_cast<unsigned long long>(line));
          break;
        }
        fprintf(stderr, "%s: %s:%llu: the last line has no newline (torn by a crash? --ignore-torn-tail skips it)\n",
                kProgram, files[f].c_str(), static_cast<unsigned long long>(line));
        return 1;
      }
      history.emplace_back();
      if (!smart::dtx::ParseHistoryLine(std::string_view(text).substr(pos, newline - pos), &history.back(), &error)) {
        fprintf(stderr, "%s: %s:%llu: %s\n", kProgram, files[f].c_str(), static_cast<unsigned long long>(line),
                error.c_str());
        return 1;
      }
      locations.push_back(Location{static_cast<uint32_t>(f), line});
      pos = newline + 1;
    }
  }

  smart::dtx::HistoryReport report;
  try {
    report = smart::dtx::CheckHistory(history);
  } catch (const std::exception& e) {
    fprintf(stderr, "%s: %s\n", kProgram, e.what());
    return 1;
  }
  std::string summary = std::to_string(report.transactions) + " transactions, " + std::to_string(report.accesses) +
                        " accesses, " + std::to_string(report.records) + " records: ";
  if (report.ok) {
    summary += "serializable";
    if (report.reads_past_last_write > 0) {
      summary += " (" + std::to_string(report.reads_past_last_write) +
                 " reads of versions past a record's last logged write, left by roll-backs or unlogged writes)";
    }
  } else {
    summary += "NOT serializable: " + smart::dtx::DescribeProblems(report);
  }
  printf("%s: %s\n", kProgram, summary.c_str());

  // Where the duplicate ids are, so that the files can be looked at.
  constexpr size_t kMaxListed = 10;
  if (!report.duplicate_tx_ids.empty()) {
    std::unordered_map<uint64_t, std::string> where;
    for (size_t i = 0; i < report.duplicate_tx_ids.size() && i < kMaxListed; ++i) where[report.duplicate_tx_ids[i]];
    for (size_t t = 0; t < history.size(); ++t) {
      auto it = where.find(history[t].id);
      if (it == where.end()) continue;
      it->second += " " + files[locations[t].file] + ":" + std::to_string(locations[t].line);
    }
    for (size_t i = 0; i < report.duplicate_tx_ids.size() && i < kMaxListed; ++i) {
      fprintf(stderr, "%s: transaction id %llu is on lines%s\n", kProgram,
              static_cast<unsigned long long>(report.duplicate_tx_ids[i]), where[report.duplicate_tx_ids[i]].c_str());
    }
  }
  return report.ok ? 0 : 1;
}
