/// @file
/// YCSB workloads for the data-structure benches: the operation mix of each
/// named dataset, a zipfian key chooser (Gray et al., SIGMOD'94, scrambled as
/// in YCSB), and the key and value formats.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

namespace smart::ycsb {

/// An operation of a workload.
enum class OpType : uint8_t { kRead, kUpdate, kInsert, kScan, kReadModifyWrite };  ///< read, update, insert, scan, read-modify-write
/// How keys are chosen.
enum class Distribution : uint8_t { kZipfian, kLatest, kUniform };  ///< zipfian, latest (recent inserts first), uniform

/// A named dataset: its operation mix and key distribution.
struct Workload {
  std::string name;  ///< e.g. "ycsb-a"
  /// Fractions of the operation mix; they add up to 1.
  double read = 0, update = 0, insert = 0, scan = 0, read_modify_write = 0;
  /** @var update
      Share of updates. */
  /** @var insert
      Share of inserts. */
  /** @var scan
      Share of scans. */
  /** @var read_modify_write
      Share of read-modify-writes. */
  Distribution distribution = Distribution::kZipfian;  ///< key chooser
};

/// ycsb-a, b, c, d, e, f, update-only, read-only. Throws smart::Error for
/// any other name.
Workload GetWorkload(const std::string& name);

/// The constants of a zipfian distribution over [0, n) with skew theta in
/// [0, 1). Computing zeta(n) is the expensive part (exact for the first
/// million terms, an Euler-Maclaurin tail beyond), so build one and share it.
struct ZipfianParams {
  /// Computes the constants for `n` keys and skew `theta`.
  ZipfianParams(uint64_t n, double theta);
  uint64_t n;  ///< number of keys
  double theta;  ///< skew
  /// zeta(n), the normalising constant.
  double zeta_n = 0, alpha = 0, eta = 0, half_pow_theta = 0;
  /// alpha when it is a whole number up to 1024 (theta 0.5, 0.8, 0.9, 0.95,
  /// 0.99, ...), else 0: the rank's power is then a few multiplications
  /// instead of std::pow, which costs more than the rest of choosing a key.
  int whole_alpha = 0;
  /** @var alpha
      1 / (1 - theta). */
  /** @var eta
      Gray et al.'s eta. */
  /** @var half_pow_theta
      0.5^theta. */
};

/// A fast per-thread generator of uniform doubles and 64-bit values.
class Random {
 public:
  /// A generator started from `seed`.
  explicit Random(uint64_t seed) : state_(seed) {}
  /// 64 random bits (splitmix64).
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  /// A double in [0, 1).
  double uniform() { return static_cast<double>(next() >> 11) * (1.0 / 9007199254740992.0); }

 private:
  uint64_t state_;
};

/// Rank in [0, n): rank 0 is the most popular.
uint64_t ZipfianRank(const ZipfianParams& params, Random& random);
/// The rank for the uniform draw `u` in [0, 1) (Gray et al.'s inversion).
uint64_t ZipfianRankOf(const ZipfianParams& params, double u);

/// A bijection on [0, n), used to scramble ranks and (rehash_key) key ids.
uint64_t PermuteKey(uint64_t id, uint64_t n);

/// One operation to run.
struct Operation {
  OpType type;  ///< what to do
  uint64_t key;  ///< key id
};

/// Draws the operations of one worker. Inserts take fresh ids from a counter
/// shared by all workers (starting at the preloaded key count).
class OperationGenerator {
 public:
  /// `insert_counter` is shared by every worker; `params` must outlive the generator.
  OperationGenerator(const Workload& workload, const ZipfianParams& params, std::atomic<uint64_t>* insert_counter,
                     uint64_t seed);
  /// The next operation.
  Operation next();

 private:
  uint64_t choose_key();

  Workload workload_;
  const ZipfianParams& params_;
  std::atomic<uint64_t>* insert_counter_;
  Random random_;
  double cumulative_[5];
};

/// Key id as a decimal string, zero-padded to `width` characters (the
/// config validation guarantees it fits).
void FormatKey(uint64_t id, int width, char* out);
/// `width` copies of one printable character drawn from `random`.
void FormatValue(Random& random, int width, char* out);

}  // namespace smart::ycsb
