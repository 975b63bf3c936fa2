// The key-value bench's main (kv_bench.h): the command line, the configs,
// the blades, the load, the run and its report, for every store alike.
#include "smart/bench/kv_bench.h"

#include <cinttypes>
#include <cstdio>
#include <string>

#include "smart/bench/blades.h"
#include "smart/bench/bench.h"
#include "smart/bench/run_flags.h"
#include "smart/bench/start_barrier.h"
#include "smart/bench/ycsb.h"
#include "smart/command_line.h"
#include "smart/logging.h"
#include "smart/task.h"

namespace smart {

namespace {

// What the command line gave, before the configs are read.
struct KvBenchFlags {
  int threads = 0, coros = 0;
  std::string config_path, dataset, dump;
  double duration = 0, zipf = 0;
  uint64_t max_key = 0;
  int key_length = 0, value_length = 0;
  bool no_load = false, sole_loader = false, verify = false, quiet = false;
  int load_batch = 0;
  bool no_hocl = false, no_combine = false;
  size_t index_cache_pages = 131072;
  RunFlags run;
};

void AddFlags(CLI::App& app, KvBenchFlags* f) {
  app.add_option("NR_THREAD", f->threads, "client threads")->required();
  app.add_option("NR_CORO", f->coros, "coroutines per thread")->required();
  app.add_option("--config", f->config_path,
                 "datastructure.json to use (default: " + ConfigFileSearch("datastructure.json", "APP_CONFIG_PATH") +
                     ")");
  app.add_option("--dataset", f->dataset,
                 "ycsb-a, ycsb-b, ycsb-c, ycsb-d, ycsb-e (stores that scan), ycsb-f, update-only or read-only");
  app.add_option("--duration", f->duration, "seconds to measure (above 0)");
  app.add_option("--max-key", f->max_key, "keys to load (and key range), at least 1");
  app.add_option("--key-length", f->key_length, "key length in bytes (decimal digits; enough for max_key)");
  app.add_option("--value-length", f->value_length, "value length in bytes (1..3072)");
  app.add_option("--zipf", f->zipf, "zipfian constant in [0, 1)");
  app.add_option("--dump-file", f->dump, "CSV file to append to (\"\" for none)");
  app.add_flag("--no-load", f->no_load, "skip loading (the keys are already in the store)");
  app.add_flag("--sole-loader", f->sole_loader,
               "no other client loads keys at the same time, so a store may skip what an insert does against a "
               "racing insert of the same key (on with an embedded memory blade)");
  app.add_option("--load-batch", f->load_batch,
                 "keys a sole loader's coroutine hands the store at a time (1.." + std::to_string(kMaxLoadBatch) +
                     "; 1: one by one; default: the store's choice)")
      ->check(CLI::Range(1, kMaxLoadBatch));
  app.add_option("--index-cache-pages", f->index_cache_pages,
                 "index pages each thread caches at most, all threads together at most 1 GiB (0: no index cache; stores with an index)")
      ->check(CLI::Range(size_t{0}, size_t{1} << 24));
  app.add_flag("--no-hocl", f->no_hocl, "no local lock in front of the remote locks (stores that lock)");
  app.add_flag("--no-combine", f->no_combine,
               "no command combination: a lock's release waits for its write, one more round trip (stores that "
               "lock)");
  f->run.add_to(app, "after this one's load (give the others --no-load)", "operation");
  app.add_flag("--verify", f->verify, "values carry their key; every value read is checked, and a wrong one is a failure");
  app.add_flag("--quiet", f->quiet, "print only the result line");
}

// A store of the app's shape (scan or not), for CheckYcsbOptions before any
// store is open.
class StoreShape : public KvStore {
 public:
  StoreShape(std::string noun, bool scans) : noun_(std::move(noun)), scans_(scans) {}
  std::string name() const override { return noun_; }
  Status search(std::string_view, std::string*) override { return Status::OK(); }
  Status insert(std::string_view, std::string_view) override { return Status::OK(); }
  Status update(std::string_view, std::string_view) override { return Status::OK(); }
  Status read_modify_write(std::string_view, const std::function<void(std::string*)>&) override {
    return Status::OK();
  }
  Status remove(std::string_view) override { return Status::OK(); }
  bool supports_scan() const override { return scans_; }

 private:
  std::string noun_;
  bool scans_;
};

// Applies the flags to the configs. Throws smart::Error for a bad value.
KvBenchSettings Settle(const CLI::App& cli, const KvBenchFlags& f, const KvBenchApp& app) {
  for (const char* flag : {"--no-hocl", "--no-combine", "--index-cache-pages"}) {
    if (cli.count(flag) == 0) continue;
    const std::string why = app.refuses(flag);
    if (!why.empty()) throw Error(std::string(flag) + ": " + why);
  }
  KvBenchSettings s;
  s.smart = SmartConfig::Load();
  ExportProviderEnvironment(s.smart);
  s.config = DataStructureConfig::Load(f.config_path);
  YcsbOptions& o = s.ycsb;
  o.dataset = cli.count("--dataset") ? f.dataset : s.config.dataset;
  o.max_key = cli.count("--max-key") ? f.max_key : s.config.max_key;
  o.key_length = cli.count("--key-length") ? f.key_length : s.config.key_length;
  o.value_length = cli.count("--value-length") ? f.value_length : s.config.value_length;
  o.zipf = cli.count("--zipf") ? f.zipf : s.config.zipfian_const;
  o.duration = cli.count("--duration") ? f.duration : s.config.duration;
  o.rehash_key = s.config.rehash_key;
  o.idle_ns = f.run.idle_us(s.config.idle_us) * 1000;
  o.load = s.config.insert_before_execution && !f.no_load;
  o.verify = f.verify;
  o.sole_loader = f.sole_loader;
  o.load_batch = f.load_batch;
  o.threads = f.threads;
  o.coros = f.coros;
  o.progress = !f.quiet;
  if (cli.count("--dump-file")) s.config.dump_file_path = f.dump;
  s.verbose = !f.quiet;
  s.hocl = !f.no_hocl;
  s.combine_commands = !f.no_combine;
  s.index_cache_pages = f.index_cache_pages;
  s.store.speculative_lookup = s.smart.use_speculative_lookup;
  f.run.apply_lease(&s.store.lease);
  CheckYcsbOptions(o, StoreShape(app.noun(), app.scans()));
  app.check(s);
  return s;
}

// The run itself; returns the exit status. Throws smart::Error when it fails.
int Run(KvBenchApp& app, KvBenchSettings s, const StartGroup& group, const RunFlags& run_flags) {
  const std::string program = app.program();
  const char* name = program.c_str();
  const YcsbOptions& o = s.ycsb;
  BenchBlades blades(s.config.memory_servers, &s.smart, 1, app.embedded_mib(s), program, s.verbose);
  Initiator initiator(s.smart);
  blades.connect(initiator, o.threads + 1);
  std::unique_ptr<KvBenchRun> run = app.open(initiator, blades.count(), s);
  KvStore& store = run->store();
  if (s.verbose) {
    const std::string setup = run->setup();
    SMART_INFO("%s: %s%s%s", name, s.smart.Summary(TransportKindName(initiator.transport())).c_str(),
               setup.empty() ? "" : ", ", setup.c_str());
  }

  if (o.load) {
    YcsbOptions load_options = o;
    // Embedded memory blades have no other client.
    load_options.sole_loader = o.sole_loader || blades.embedded();
    const double seconds = YcsbLoad(store, load_options);
    if (s.verbose) {
      const std::string after = run->after_load();
      SMART_INFO("%s: loaded %" PRIu64 " keys in %.2f s (%s M inserts/s)%s%s", name, o.max_key, seconds,
                 FormatSignificant(static_cast<double>(o.max_key) / seconds / 1e6).c_str(), after.empty() ? "" : ", ",
                 after.c_str());
    }
  }
  run_flags.wait_to_start(initiator, group, program, s.verbose);
  run->run_starts();
  const YcsbResult r = YcsbRun(store, o);
  const std::vector<KvBenchField> fields = run->result_fields();
  const double p50 = static_cast<double>(r.latency.percentile(0.50)) / 1000.0;
  const double p99 = static_cast<double>(r.latency.percentile(0.99)) / 1000.0;
  const uint64_t attempted = r.succeeded + r.not_found + r.failed;
  const double retries = attempted ? static_cast<double>(r.retries) / static_cast<double>(attempted) : 0;
  std::string extra_line, extra_csv, extra_columns;
  for (const KvBenchField& field : fields) {
    extra_line += ", " + field.label + " = " + field.value;
    extra_csv += ", " + field.value;
    extra_columns += ", " + field.column;
  }
  printf("%s: workload = %s, #thread = %d, #coro_per_thread = %d, key length = %d, value length = %d, max key = %" PRIu64
         ", throughput = %s M, P50 latency = %.3f us, P99 latency = %.3f us, retries per op = %.4f%s"
         ", succeeded = %" PRIu64 ", not found = %" PRIu64 ", failed = %" PRIu64 "\n",
         store.name().c_str(), o.dataset.c_str(), o.threads, o.coros, o.key_length, o.value_length, o.max_key,
         FormatSignificant(r.mops()).c_str(), p50, p99, retries, extra_line.c_str(), r.succeeded, r.not_found,
         r.failed);
  if (ycsb::GetWorkload(o.dataset).scan > 0 && r.seconds > 0) {
    // The throughput above counts a scan as one operation, as it does an insert.
    printf("%s: scans = %" PRIu64 ", scans per second = %s M, keys scanned = %" PRIu64
           ", keys scanned per second = %s M\n",
           store.name().c_str(), r.scans, FormatSignificant(static_cast<double>(r.scans) / r.seconds / 1e6).c_str(),
           r.scanned_keys, FormatSignificant(static_cast<double>(r.scanned_keys) / r.seconds / 1e6).c_str());
  }
  fflush(stdout);
  if (s.verbose) {
    std::string counters;
    for (const KvBenchCounter& c : run->run_counters()) {
      counters += (counters.empty() ? "" : ", ") + std::string(c.label) + " " + std::to_string(c.value);
    }
    if (!counters.empty()) SMART_INFO("%s: during the run: %s", name, counters.c_str());
    if (blades.embedded()) SMART_INFO("%s: memory blade holds %.1f MiB (resident)", name, blades.resident_mib());
  }
  char line[512];
  snprintf(line, sizeof(line), "%s, %s, %d, %d, %d, %d, %" PRIu64 ", %s, %.3f, %.3f, %.4f, %" PRIu64 ", %" PRIu64
           ", %" PRIu64 "%s", store.name().c_str(), o.dataset.c_str(), o.threads, o.coros, o.key_length,
           o.value_length, o.max_key, FormatSignificant(r.mops()).c_str(), p50, p99, retries, r.succeeded,
           r.not_found, r.failed, extra_csv.c_str());
  AppendCsvLine(s.config.dump_file_path, line,
                "name, workload, threads, coroutines, key_length, value_length, max_key, mops, p50_us, p99_us, "
                "retries_per_op, succeeded, not_found, failed" + extra_columns);
  run.reset();  // before the initiator it was opened on
  // After a full load, a workload without inserts must find every key.
  if (o.load && ycsb::GetWorkload(o.dataset).insert == 0 && r.not_found * 1000 > attempted) {
    fprintf(stderr, "%s: %" PRIu64 " of %" PRIu64 " operations did not find their key after all %" PRIu64
            " keys were loaded: %s lost keys\n", name, r.not_found, attempted, o.max_key, app.noun().c_str());
    return 1;
  }
  if (r.failed > 0) {
    fprintf(stderr, "%s: %" PRIu64 " operation(s) failed%s; the first: %s\n", name, r.failed,
            r.wrong_values ? (" (" + std::to_string(r.wrong_values) + " read a wrong value)").c_str() : "",
            r.first_failure.c_str());
    return 1;
  }
  return 0;
}

}  // namespace

int RunKvBench(int argc, char** argv, KvBenchApp& app) {
  EnableStackOverflowReports();
  const std::string program = app.program();
  CLI::App cli{program + ": " + app.about()};
  KvBenchFlags flags;
  AddFlags(cli, &flags);
  SMART_PARSE_COMMAND_LINE(cli, argc, argv);
  KvBenchSettings settings;
  StartGroup group;
  try {
    settings = Settle(cli, flags, app);
    group = flags.run.group();
  } catch (const std::exception& e) {
    fprintf(stderr, "%s: %s\n", program.c_str(), e.what());
    return kUsageError;
  }
  try {
    if (flags.quiet) SetVerbose(false);
    return Run(app, settings, group, flags.run);
  } catch (const std::exception& e) {
    fprintf(stderr, "%s: %s\n", program.c_str(), e.what());
    return 1;
  }
}

}  // namespace smart
