// SMART-DTX histories: the line format and the serializability checker
// (history.h).
//
// The checker flattens every access into one array, sorts it by record and
// version, and walks each record's versions in ascending order once to emit
// the ww, wr and rw edges. The graph goes into compressed adjacency arrays;
// an iterative Tarjan finds its strongly connected components, and a
// breadth-first search inside the smallest cyclic component finds a short
// cycle to report. Nothing recurses, so a chain of millions of transactions
// is as safe as a short one.
#include "history.h"

#include <algorithm>
#include <charconv>
#include <limits>
#include <stdexcept>
#include <tuple>
#include <utility>

namespace smart::dtx {

// ---------------------------------------------------------------------------
// The line format

namespace {

// A field quoted for an error message: at most 40 bytes, anything that is
// not printable ASCII as \xNN, so that garbage from a torn file cannot make
// the message itself unreadable.
std::string Quote(std::string_view s) {
  constexpr size_t kMax = 40;
  std::string out = "'";
  for (size_t i = 0; i < s.size() && i < kMax; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f && c != '\'' && c != '\\') {
      out += static_cast<char>(c);
    } else {
      static const char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  if (s.size() > kMax) out += "...";
  out += "'";
  return out;
}

// Parses a canonical decimal number no greater than `max`: digits only, no
// sign, no leading zero, no overflow. Returns "" or what is wrong with it.
std::string ParseNumber(std::string_view s, uint64_t max, uint64_t* out) {
  if (s.empty()) return "is empty";
  for (char c : s) {
    if (c < '0' || c > '9') return "is not a decimal number";
  }
  if (s.size() > 1 && s[0] == '0') return "has a leading zero";
  uint64_t v = 0;
  for (char c : s) {
    const uint64_t digit = static_cast<uint64_t>(c - '0');
    // v * 10 + digit <= max, checked without overflowing.
    if (v > (max - digit) / 10) return "is out of range (max " + std::to_string(max) + ")";
    v = v * 10 + digit;
  }
  *out = v;
  return "";
}

bool Fail(std::string* error, std::string message) {
  if (error != nullptr) *error = std::move(message);
  return false;
}

// One number of an access: sets *out or explains what is wrong with it.
bool AccessNumber(std::string_view field, size_t index, const char* name, std::string_view text, uint64_t max,
                  uint64_t* out, std::string* error) {
  const std::string problem = ParseNumber(text, max, out);
  if (problem.empty()) return true;
  return Fail(error, "access " + std::to_string(index) + " " + Quote(field) + ": " + name + " " + Quote(text) + " " +
                         problem);
}

// Parses one access field (the index counts accesses from 1, for messages).
bool ParseAccess(std::string_view field, size_t index, HistoryAccess* a, std::string* error) {
  // Built only on failure: the parser runs over millions of accesses.
  auto where = [&] { return "access " + std::to_string(index) + " " + Quote(field); };
  if (field.size() < 2 || field[1] != ':') {
    return Fail(error, where() + ": not an access (expected r:TABLE:KEY@VERSION or w:TABLE:KEY@VERSION[+i|+d])");
  }
  if (field[0] != 'r' && field[0] != 'w') {
    return Fail(error, where() + ": unknown access kind " + Quote(field.substr(0, 1)) + " (expected r or w)");
  }
  *a = HistoryAccess{};
  a->write = field[0] == 'w';
  std::string_view rest = field.substr(2);
  const size_t colon = rest.find(':');
  if (colon == std::string_view::npos) return Fail(error, where() + ": no ':' between table and key");
  const size_t at = rest.find('@', colon + 1);
  if (at == std::string_view::npos) return Fail(error, where() + ": no '@' before the version");
  std::string_view version = rest.substr(at + 1);
  const size_t plus = version.find('+');
  if (plus != std::string_view::npos) {
    const std::string_view suffix = version.substr(plus);
    version = version.substr(0, plus);
    if (!a->write) {
      return Fail(error, where() + ": a read has a suffix " + Quote(suffix) + " (only writes take +i or +d)");
    }
    if (suffix == "+i") {
      a->inserted = true;
    } else if (suffix == "+d") {
      a->deleted = true;
    } else {
      return Fail(error, where() + ": unknown suffix " + Quote(suffix) + " (expected +i or +d)");
    }
  }
  uint64_t table = 0;
  if (!AccessNumber(field, index, "table", rest.substr(0, colon), std::numeric_limits<uint16_t>::max(), &table,
                    error) ||
      !AccessNumber(field, index, "key", rest.substr(colon + 1, at - colon - 1), std::numeric_limits<uint64_t>::max(),
                    &a->key, error) ||
      !AccessNumber(field, index, "version", version, std::numeric_limits<uint64_t>::max(), &a->version, error)) {
    return false;
  }
  a->table = static_cast<uint16_t>(table);
  return true;
}

void AppendNumber(std::string* out, uint64_t v) {
  char buffer[24];
  const std::to_chars_result r = std::to_chars(buffer, buffer + sizeof(buffer), v);
  out->append(buffer, r.ptr);
}

}  // namespace

std::string FormatHistoryLine(uint64_t tx_id, const std::vector<HistoryAccess>& accesses) {
  std::string line;
  line.reserve(24 + accesses.size() * 24);
  line += "T ";
  AppendNumber(&line, tx_id);
  for (const HistoryAccess& a : accesses) {
    line += a.write ? " w:" : " r:";
    AppendNumber(&line, a.table);
    line += ':';
    AppendNumber(&line, a.key);
    line += '@';
    AppendNumber(&line, a.version);
    if (a.write && a.deleted) {
      line += "+d";
    } else if (a.write && a.inserted) {
      line += "+i";
    }
  }
  return line;
}

bool ParseHistoryLine(std::string_view line, HistoryTx* out, std::string* error) {
  if (line.empty()) return Fail(error, "empty line");
  out->id = 0;
  out->accesses.clear();
  // Fields are separated by exactly one space; `field` counts them from 1.
  size_t pos = 0;
  for (size_t field = 1;; ++field) {
    const size_t space = line.find(' ', pos);
    const size_t length = space == std::string_view::npos ? std::string_view::npos : space - pos;
    const std::string_view text = line.substr(pos, length);
    if (text.empty()) {
      return Fail(error, "empty field " + std::to_string(field) + " at column " + std::to_string(pos + 1) +
                             " (two spaces in a row, or a space at an end of the line)");
    }
    if (field == 1) {
      if (text != "T") return Fail(error, "the line does not start with 'T ' but with " + Quote(text));
    } else if (field == 2) {
      const std::string problem = ParseNumber(text, std::numeric_limits<uint64_t>::max(), &out->id);
      if (!problem.empty()) return Fail(error, "transaction id " + Quote(text) + " " + problem);
    } else {
      HistoryAccess a;
      if (!ParseAccess(text, field - 2, &a, error)) return false;
      out->accesses.push_back(a);
    }
    if (space == std::string_view::npos) {
      if (field == 1) return Fail(error, "missing transaction id after 'T'");
      return true;
    }
    pos = space + 1;
  }
}

const char* EdgeKindName(EdgeKind kind) {
  switch (kind) {
    case EdgeKind::kWriteWrite:
      return "ww";
    case EdgeKind::kWriteRead:
      return "wr";
    case EdgeKind::kReadWrite:
      return "rw";
  }
  return "??";
}

// ---------------------------------------------------------------------------
// The checker

namespace {

constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();

// One access, flattened: 24 bytes, sorted by record, version, then writes
// before reads and by transaction, so that a version's writers come first.
struct Flat {
  uint64_t key;
  uint64_t version;
  uint32_t tx;  // index into the history
  uint16_t table;
  uint8_t read;  // 0: a write, 1: a read
};

bool operator<(const Flat& a, const Flat& b) {
  return std::tie(a.table, a.key, a.version, a.read, a.tx) < std::tie(b.table, b.key, b.version, b.read, b.tx);
}

// An edge between transaction indices; `from_access` and `to_access` index
// the sorted accesses that justify it (for the report).
struct Edge {
  uint32_t from;
  uint32_t to;
  uint32_t from_access;
  uint32_t to_access;
  EdgeKind kind;
};

struct Graph {
  size_t nodes = 0;
  std::vector<Edge> edges;
  std::vector<uint32_t> offsets;  // nodes + 1: node v's out-edges are order[offsets[v] .. offsets[v + 1])
  std::vector<uint32_t> order;    // edge indices grouped by `from`

  void Add(uint32_t from, uint32_t to, uint32_t from_access, uint32_t to_access, EdgeKind kind) {
    if (from == to) return;  // a transaction that reads v and writes the next version: no self edge
    edges.push_back(Edge{from, to, from_access, to_access, kind});
  }

  // Groups the edges by their source (a counting sort).
  void Index() {
    offsets.assign(nodes + 1, 0);
    for (const Edge& e : edges) ++offsets[e.from + 1];
    for (size_t v = 0; v < nodes; ++v) offsets[v + 1] += offsets[v];
    order.resize(edges.size());
    std::vector<uint32_t> next(offsets.begin(), offsets.end() - 1);
    for (size_t i = 0; i < edges.size(); ++i) order[next[edges[i].from]++] = static_cast<uint32_t>(i);
  }
};

// Walks one record's accesses [begin, end) (sorted by version) and adds its
// edges; counts its unlogged reads and reports its duplicate writes.
void RecordEdges(const std::vector<Flat>& flat, size_t begin, size_t end, const std::vector<HistoryTx>& history,
                 Graph* graph, HistoryReport* report, std::vector<uint32_t>* pending) {
  uint32_t last_writer = kNone;  // the access of the greatest written version so far
  pending->clear();              // reads since the last written version: they wait for the next writer's rw edge
  size_t i = begin;
  while (i < end) {
    size_t j = i;
    while (j < end && flat[j].version == flat[i].version) ++j;
    // [i, j) is one version: its writes (by transaction) and then its reads.
    size_t reads = i;
    while (reads < j && flat[reads].read == 0) ++reads;
    if (reads > i) {
      const uint32_t writer = static_cast<uint32_t>(i);
      // Two transactions writing the same version: a lost update. The first
      // stands for all of them in the graph. (Two lines of one id writing it
      // are reported as a repeated id, not here.)
      if (flat[reads - 1].tx != flat[i].tx) {
        std::vector<uint64_t> ids;
        for (size_t k = i; k < reads; ++k) ids.push_back(history[flat[k].tx].id);
        std::sort(ids.begin(), ids.end());
        ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
        if (ids.size() > 1) {
          report->duplicate_writes.push_back(
              DuplicateWrite{flat[i].table, flat[i].key, flat[i].version, std::move(ids)});
        }
      }
      for (uint32_t r : *pending) graph->Add(flat[r].tx, flat[writer].tx, r, writer, EdgeKind::kReadWrite);
      pending->clear();
      if (last_writer != kNone) {
        graph->Add(flat[last_writer].tx, flat[writer].tx, last_writer, writer, EdgeKind::kWriteWrite);
      }
      last_writer = writer;
      for (size_t k = reads; k < j; ++k) {
        graph->Add(flat[writer].tx, flat[k].tx, writer, static_cast<uint32_t>(k), EdgeKind::kWriteRead);
      }
    } else {
      // Nobody logged this version. It was installed after the last logged
      // one (versions only grow), by a roll-back that restored that writer's
      // value or by a commit whose line is lost: either way its readers saw
      // the record after the last logged writer, so they follow it.
      report->unlogged_reads += j - reads;
      if (last_writer != kNone) {
        for (size_t k = reads; k < j; ++k) {
          graph->Add(flat[last_writer].tx, flat[k].tx, last_writer, static_cast<uint32_t>(k), EdgeKind::kWriteRead);
        }
      }
    }
    for (size_t k = reads; k < j; ++k) pending->push_back(static_cast<uint32_t>(k));
    i = j;
  }
  // Reads left waiting are of the last written version or of versions past
  // it that nobody logged (a roll-back after the last logged write).
  if (last_writer != kNone) {
    for (uint32_t r : *pending) {
      if (flat[r].version != flat[last_writer].version) ++report->reads_past_last_write;
    }
  }
}

// Tarjan's strongly connected components without recursion: returns each
// node's component and sets *sizes to the components' sizes.
std::vector<uint32_t> Components(const Graph& g, std::vector<uint32_t>* sizes) {
  const size_t n = g.nodes;
  std::vector<uint32_t> index(n, kNone), low(n, 0), component(n, kNone);
  std::vector<uint32_t> stack;                         // Tarjan's stack of nodes
  std::vector<std::pair<uint32_t, uint32_t>> calls;    // (node, position of its next out-edge in g.order)
  uint32_t next_index = 0;
  sizes->clear();
  for (size_t root = 0; root < n; ++root) {
    if (index[root] != kNone) continue;
    calls.emplace_back(static_cast<uint32_t>(root), g.offsets[root]);
    index[root] = low[root] = next_index++;
    stack.push_back(static_cast<uint32_t>(root));
    while (!calls.empty()) {
      const uint32_t v = calls.back().first;
      uint32_t& pos = calls.back().second;
      if (pos < g.offsets[v + 1]) {
        const uint32_t w = g.edges[g.order[pos++]].to;
        if (index[w] == kNone) {
          index[w] = low[w] = next_index++;
          stack.push_back(w);
          calls.emplace_back(w, g.offsets[w]);  // `pos` is not used after this
        } else if (component[w] == kNone) {
          low[v] = std::min(low[v], index[w]);  // w is on the stack
        }
        continue;
      }
      // All of v's edges are done.
      calls.pop_back();
      if (!calls.empty()) {
        const uint32_t parent = calls.back().first;
        low[parent] = std::min(low[parent], low[v]);
      }
      if (low[v] == index[v]) {
        const uint32_t id = static_cast<uint32_t>(sizes->size());
        uint32_t size = 0;
        uint32_t w;
        do {
          w = stack.back();
          stack.pop_back();
          component[w] = id;
          ++size;
        } while (w != v);
        sizes->push_back(size);
      }
    }
  }
  return component;
}

// A short cycle inside component `c`: breadth-first searches from its nodes
// (within a budget of edge visits), each finding the shortest cycle through
// its start; returns the edges of the shortest found.
std::vector<uint32_t> ShortCycle(const Graph& g, const std::vector<uint32_t>& component, uint32_t c) {
  constexpr size_t kBudget = 20'000'000;  // edge visits over all searches
  std::vector<uint32_t> members;
  for (size_t v = 0; v < g.nodes; ++v) {
    if (component[v] == c) members.push_back(static_cast<uint32_t>(v));
  }
  std::vector<uint32_t> seen(g.nodes, 0), parent(g.nodes, kNone), queue, best;
  size_t work = 0;
  uint32_t run = 0;
  for (uint32_t start : members) {
    if (!best.empty() && (best.size() == 2 || work > kBudget)) break;
    ++run;
    queue.clear();
    queue.push_back(start);
    seen[start] = run;
    uint32_t closing = kNone;  // the edge back to `start`
    for (size_t head = 0; head < queue.size() && closing == kNone; ++head) {
      const uint32_t v = queue[head];
      for (uint32_t pos = g.offsets[v]; pos < g.offsets[v + 1]; ++pos) {
        ++work;
        const uint32_t e = g.order[pos];
        const uint32_t w = g.edges[e].to;
        if (component[w] != c) continue;
        if (w == start) {
          closing = e;
          break;
        }
        if (seen[w] == run) continue;
        seen[w] = run;
        parent[w] = e;
        queue.push_back(w);
      }
    }
    if (closing == kNone) continue;  // cannot happen inside a component of more than one node
    std::vector<uint32_t> cycle{closing};
    for (uint32_t v = g.edges[closing].from; v != start; v = g.edges[parent[v]].from) cycle.push_back(parent[v]);
    std::reverse(cycle.begin(), cycle.end());
    if (best.empty() || cycle.size() < best.size()) best = std::move(cycle);
  }
  return best;
}

}  // namespace

HistoryReport CheckHistory(const std::vector<HistoryTx>& history) {
  HistoryReport report;
  report.transactions = history.size();
  for (const HistoryTx& tx : history) report.accesses += tx.accesses.size();
  // Indices are 32 bits to keep the arrays small; edges are at most twice
  // the accesses.
  if (history.size() >= kNone || report.accesses >= kNone / 2) {
    throw std::length_error("CheckHistory: more than 2^31 accesses");
  }

  // Transaction ids must be unique.
  {
    std::vector<uint64_t> ids;
    ids.reserve(history.size());
    for (const HistoryTx& tx : history) ids.push_back(tx.id);
    std::sort(ids.begin(), ids.end());
    for (size_t i = 1; i < ids.size(); ++i) {
      if (ids[i] == ids[i - 1] && (report.duplicate_tx_ids.empty() || report.duplicate_tx_ids.back() != ids[i])) {
        report.duplicate_tx_ids.push_back(ids[i]);
      }
    }
  }

  std::vector<Flat> flat;
  flat.reserve(report.accesses);
  for (size_t t = 0; t < history.size(); ++t) {
    for (const HistoryAccess& a : history[t].accesses) {
      flat.push_back(Flat{a.key, a.version, static_cast<uint32_t>(t), a.table, static_cast<uint8_t>(a.write ? 0 : 1)});
    }
  }
  std::sort(flat.begin(), flat.end());

  Graph graph;
  graph.nodes = history.size();
  graph.edges.reserve(flat.size() + flat.size() / 2);
  std::vector<uint32_t> pending;
  for (size_t begin = 0; begin < flat.size();) {
    size_t end = begin + 1;
    while (end < flat.size() && flat[end].table == flat[begin].table && flat[end].key == flat[begin].key) ++end;
    ++report.records;
    RecordEdges(flat, begin, end, history, &graph, &report, &pending);
    begin = end;
  }
  report.edges = graph.edges.size();
  graph.Index();

  std::vector<uint32_t> sizes;
  const std::vector<uint32_t> component = Components(graph, &sizes);
  uint32_t smallest = kNone;
  for (uint32_t c = 0; c < sizes.size(); ++c) {
    if (sizes[c] < 2) continue;
    report.cyclic_transactions += sizes[c];
    if (smallest == kNone || sizes[c] < sizes[smallest]) smallest = c;
  }
  if (smallest != kNone) {
    for (uint32_t e : ShortCycle(graph, component, smallest)) {
      const Edge& edge = graph.edges[e];
      const Flat& from = flat[edge.from_access];
      const Flat& to = flat[edge.to_access];
      report.cycle.push_back(HistoryEdge{history[edge.from].id, history[edge.to].id, edge.kind, from.table, from.key,
                                         from.version, to.version});
    }
  }
  report.ok = report.cycle.empty() && report.duplicate_writes.empty() && report.duplicate_tx_ids.empty();
  return report;
}

std::string DescribeCycle(const std::vector<HistoryEdge>& cycle) {
  if (cycle.empty()) return "";
  std::string out = std::string("T") + std::to_string(cycle[0].from);
  for (const HistoryEdge& e : cycle) {
    const char* from_does = e.kind == EdgeKind::kReadWrite ? "r" : "w";
    const char* to_does = e.kind == EdgeKind::kWriteRead ? "r" : "w";
    out += " -";
    out += EdgeKindName(e.kind);
    out += std::string("(") + std::to_string(e.table) + ":" + std::to_string(e.key) + " " + from_does + "@" +
           std::to_string(e.from_version) + " " + to_does + "@" + std::to_string(e.to_version) + ")-> T" +
           std::to_string(e.to);
  }
  return out;
}

std::string DescribeProblems(const HistoryReport& report, size_t max_items) {
  std::string out;
  auto separate = [&out] {
    if (!out.empty()) out += "; ";
  };
  if (!report.cycle.empty()) {
    out += "cycle of " + std::to_string(report.cycle.size()) + " transactions (" +
           std::to_string(report.cyclic_transactions) + " transactions lie on cycles): " + DescribeCycle(report.cycle);
  }
  if (!report.duplicate_writes.empty()) {
    separate();
    out += std::to_string(report.duplicate_writes.size()) + " duplicate write" +
           (report.duplicate_writes.size() == 1 ? " (a lost update):" : "s (lost updates):");
    for (size_t i = 0; i < report.duplicate_writes.size() && i < max_items; ++i) {
      const DuplicateWrite& d = report.duplicate_writes[i];
      out += std::string(" ") + std::to_string(d.table) + ":" + std::to_string(d.key) + "@" + std::to_string(d.version) + " by";
      for (size_t k = 0; k < d.tx_ids.size(); ++k) out += (k == 0 ? " T" : ",T") + std::to_string(d.tx_ids[k]);
      if (i + 1 < report.duplicate_writes.size() && i + 1 < max_items) out += ",";
    }
    if (report.duplicate_writes.size() > max_items) {
      out += " and " + std::to_string(report.duplicate_writes.size() - max_items) + " more";
    }
  }
  if (!report.duplicate_tx_ids.empty()) {
    separate();
    out += std::to_string(report.duplicate_tx_ids.size()) + " transaction id" +
           (report.duplicate_tx_ids.size() == 1 ? "" : "s") + " on more than one line:";
    for (size_t i = 0; i < report.duplicate_tx_ids.size() && i < max_items; ++i) {
      out += std::string(" ") + std::to_string(report.duplicate_tx_ids[i]);
    }
    if (report.duplicate_tx_ids.size() > max_items) {
      out += " and " + std::to_string(report.duplicate_tx_ids.size() - max_items) + " more";
    }
  }
  return out;
}

}  // namespace smart::dtx
