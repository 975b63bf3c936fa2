/// @file
/// The benches' configuration files, in upstream's keys: test_rdma.json (the
/// one-sided micro benchmark), datastructure.json (the key-value benches) and
/// transaction.json (the transaction benches). Part of the bench library
/// (smart::bench); the engine's own files are in config.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "smart/config.h"

namespace smart {

/// test_rdma.json: the one-sided micro benchmark.
struct TestRdmaConfig {
  std::string source;  ///< file the values came from
  /// Memory blades; only the first is used. Empty: embedded memory blade.
  std::vector<ServerAddress> servers;
  int port = 12345;  ///< the memory blade's TCP port (servers without their own)
  uint64_t block_size = 8;  ///< bytes per operation
  int qp_num = -1;  ///< queue pairs per memory blade (-k: one per k threads)
  std::string type = "read";  ///< read, write, cas or faa
  std::string dump_file_path = "test_rdma.csv";  ///< CSV file results are appended to
  std::string dump_prefix;  ///< empty: "rdma-" + type
  double duration = 15;     ///< seconds
  uint64_t memory_size = 1024;  ///< MiB of the pool (server) and the address range (client)

  /// APP config path: TEST_RDMA_CONF, then default search; env TYPE, BLKSIZE,
  /// QP_NUM, DUMP_FILE_PATH, DUMP_PREFIX override.
  static TestRdmaConfig Load(const std::string& explicit_path = "");
  /// Parses JSON text; `source` names it in messages. Throws smart::Error.
  static TestRdmaConfig Parse(const std::string& text, const std::string& source);
};

/// datastructure.json: the hash table and B+tree benches (upstream keys).
struct DataStructureConfig {
  std::string source;  ///< file the values came from
  std::string dataset = "ycsb-a";  ///< YCSB workload (ycsb-a .. ycsb-f, update-only, read-only)
  std::string dump_file_path = "datastructure.csv";  ///< CSV file results are appended to
  bool insert_before_execution = true;  ///< load max_key keys before the run
  uint64_t max_key = 1000000;  ///< keys 0 .. max_key-1
  int key_length = 8;          ///< bytes of the formatted key
  int value_length = 8;        ///< bytes of a value
  bool rehash_key = false;     ///< permute key ids before formatting
  double duration = 15;        ///< seconds measured
  uint64_t idle_us = 0;        ///< IDLE_USEC: a task idles this long after each operation
  double zipfian_const = 0.99;  ///< skew of the key popularity
  std::vector<ServerAddress> memory_servers;  ///< empty: embedded memory blade

  /// APP_CONFIG_PATH, then the default search; env DATASET_PATH,
  /// DUMP_FILE_PATH, ZIPFIAN_CONST (percent), MEMORY_NODES (use the first k
  /// servers) override. Throws smart::Error.
  static DataStructureConfig Load(const std::string& explicit_path = "");
  /// Parses JSON text; `source` names it in messages. Throws smart::Error.
  static DataStructureConfig Parse(const std::string& text, const std::string& source);
  /// Applies DATASET_PATH, DUMP_FILE_PATH, ZIPFIAN_CONST and MEMORY_NODES.
  void ApplyEnvironment();
};

/// transaction.json: the SmallBank and TATP benches (upstream keys, plus
/// duration and backup_degree).
struct TransactionConfig {
  std::string source;  ///< file the values came from
  std::vector<ServerAddress> memory_servers;  ///< empty: embedded memory blades
  uint64_t smallbank_accounts = 100000;       ///< smallbank.num_accounts
  uint64_t smallbank_hot_accounts = 4000;     ///< smallbank.num_hot_accounts
  uint64_t tatp_subscribers = 100000;         ///< tatp.num_subscriber
  uint64_t nr_transactions = 60000000;        ///< attempts, split over threads x coroutines (duration 0)
  double duration = 0;                        ///< seconds to run; 0: run nr_transactions instead
  uint64_t idle_us = 0;                       ///< IDLE_USEC: a task idles this long after each commit
  int backup_degree = 1;                      ///< backups of every table (below the blade count)
  std::string dump_file_path = "dtx.csv";     ///< CSV file results are appended to

  /// APP_CONFIG_PATH, then the default search for transaction.json; env
  /// DUMP_FILE_PATH and MEMORY_NODES override. Throws smart::Error.
  static TransactionConfig Load(const std::string& explicit_path = "");
  /// Parses JSON text; `source` names it in messages. Throws smart::Error.
  static TransactionConfig Parse(const std::string& text, const std::string& source);
};

}  // namespace smart
