#include "smart/bench/ycsb.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>

#include "smart/status.h"

namespace smart::ycsb {

Workload GetWorkload(const std::string& name) {
  Workload w;
  w.name = name;
  if (name == "ycsb-a") {
    w.read = 0.5, w.update = 0.5;
  } else if (name == "ycsb-b") {
    w.read = 0.95, w.update = 0.05;
  } else if (name == "ycsb-c" || name == "read-only") {
    w.read = 1;
  } else if (name == "ycsb-d") {
    w.read = 0.95, w.insert = 0.05, w.distribution = Distribution::kLatest;
  } else if (name == "ycsb-e") {
    w.scan = 0.95, w.insert = 0.05;
  } else if (name == "ycsb-f") {
    w.read = 0.5, w.read_modify_write = 0.5;
  } else if (name == "update-only") {
    w.update = 1;
  } else {
    throw Error("unknown workload \"" + name +
                "\"; expected ycsb-a, ycsb-b, ycsb-c, ycsb-d, ycsb-e, ycsb-f, update-only or read-only");
  }
  return w;
}

namespace {

// sum_{i=1..n} i^-theta: exact for the first terms, then the integral with
// the first Euler-Maclaurin corrections (relative error far below 1e-9).
double Zeta(uint64_t n, double theta) {
  constexpr uint64_t kExact = 1000000;
  double sum = 0;
  const uint64_t exact = n < kExact ? n : kExact;
  for (uint64_t i = 1; i <= exact; ++i) sum += std::pow(static_cast<double>(i), -theta);
  if (n <= kExact) return sum;
  const double a = static_cast<double>(exact), b = static_cast<double>(n);
  const auto f = [theta](double x) { return std::pow(x, -theta); };
  const auto f1 = [theta](double x) { return -theta * std::pow(x, -theta - 1); };
  double integral;
  if (std::fabs(1 - theta) < 1e-12) {
    integral = std::log(b / a);
  } else {
    integral = (std::pow(b, 1 - theta) - std::pow(a, 1 - theta)) / (1 - theta);
  }
  // sum_{i=a+1..b} f(i) = integral + (f(b) - f(a)) / 2 + (f'(b) - f'(a)) / 12
  return sum + integral + (f(b) - f(a)) / 2 + (f1(b) - f1(a)) / 12;
}

}  // namespace

ZipfianParams::ZipfianParams(uint64_t n_, double theta_) : n(n_), theta(theta_) {
  if (n == 0) throw Error("zipfian distribution over an empty key range");
  if (theta < 0 || theta >= 1) throw Error("zipfian_const must be in [0, 1), got " + std::to_string(theta));
  if (theta == 0) return;  // uniform
  zeta_n = Zeta(n, theta);
  const double zeta2 = 1 + std::pow(0.5, theta);
  alpha = 1.0 / (1.0 - theta);
  eta = (1 - std::pow(2.0 / static_cast<double>(n), 1 - theta)) / (1 - zeta2 / zeta_n);
  half_pow_theta = std::pow(0.5, theta);
  const double whole = std::round(alpha);
  if (whole >= 1 && whole <= 1024 && std::fabs(alpha - whole) < 1e-9) whole_alpha = static_cast<int>(whole);
}

namespace {
// x^k by squaring: at most 2 log2(k) multiplications, each rounding once,
// so within a few units in the last place of std::pow's result.
double PowWhole(double x, int k) {
  double result = 1;
  while (k > 0) {
    if (k & 1) result *= x;
    x *= x;
    k >>= 1;
  }
  return result;
}
}  // namespace

uint64_t ZipfianRankOf(const ZipfianParams& p, double u) {
  const double uz = u * p.zeta_n;
  if (uz < 1.0) return 0;
  if (uz < 1.0 + p.half_pow_theta) return p.n > 1 ? 1 : 0;
  const double base = p.eta * u - p.eta + 1;
  const double power = p.whole_alpha > 0 ? PowWhole(base, p.whole_alpha) : std::pow(base, p.alpha);
  const uint64_t rank = static_cast<uint64_t>(static_cast<double>(p.n) * power);
  return rank < p.n ? rank : p.n - 1;
}

uint64_t ZipfianRank(const ZipfianParams& p, Random& random) {
  if (p.theta == 0) return random.next() % p.n;
  return ZipfianRankOf(p, random.uniform());
}

uint64_t PermuteKey(uint64_t id, uint64_t n) {
  if (n <= 1) return 0;
  // x -> (x * a + c) mod n is a bijection when gcd(a, n) = 1; pick the first
  // such a at or above a large odd constant.
  // The multiplier and offset depend only on n: remember them for the last
  // n seen.
  thread_local uint64_t cached_n = 0, cached_a = 0, cached_c = 0;
  if (__builtin_expect(cached_n != n, 0)) {
    uint64_t m = 0x9e3779b97f4a7c15ull % n;
    if (m < 2) m = 2;
    while (std::gcd(m, n) != 1) ++m;
    cached_n = n;
    cached_a = m;
    cached_c = 0x632be59bd9b4e019ull % n;
  }
  const uint64_t a = cached_a, c = cached_c;
  const uint64_t x = id < n ? id : id % n;
  // With n <= 2^32, x * a + c <= (n - 1)^2 + n - 1 < 2^64: 64-bit
  // arithmetic gives the same result without a 128-bit division.
  if (n <= (uint64_t{1} << 32)) return (x * a + c) % n;
  return static_cast<uint64_t>((static_cast<unsigned __int128>(x) * a + c) % n);
}

OperationGenerator::OperationGenerator(const Workload& workload, const ZipfianParams& params,
                                       std::atomic<uint64_t>* insert_counter, uint64_t seed)
    : workload_(workload), params_(params), insert_counter_(insert_counter), random_(seed) {
  cumulative_[0] = workload.read;
  cumulative_[1] = cumulative_[0] + workload.update;
  cumulative_[2] = cumulative_[1] + workload.insert;
  cumulative_[3] = cumulative_[2] + workload.scan;
  cumulative_[4] = 2;  // read-modify-write takes the rest
}

uint64_t OperationGenerator::choose_key() {
  const uint64_t rank = ZipfianRank(params_, random_);
  if (workload_.distribution == Distribution::kLatest) {
    const uint64_t latest = insert_counter_->load(std::memory_order_relaxed) - 1;
    return latest - rank % (latest + 1);
  }
  if (workload_.distribution == Distribution::kUniform) return random_.next() % params_.n;
  return PermuteKey(rank, params_.n);
}

Operation OperationGenerator::next() {
  const double u = random_.uniform();
  int kind = 0;
  while (u >= cumulative_[kind]) ++kind;
  Operation op;
  op.type = static_cast<OpType>(kind);
  if (op.type == OpType::kInsert) {
    op.key = insert_counter_->fetch_add(1, std::memory_order_relaxed);
  } else {
    op.key = choose_key();
  }
  return op;
}

void FormatKey(uint64_t id, int width, char* out) {
  // Two digits per division; the digits are those of id mod 10^width.
  static constexpr char kPairs[] =
      "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
      "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
      "8081828384858687888990919293949596979899";
  int i = width;
  for (; i >= 2 && id > UINT32_MAX; i -= 2) {
    const uint64_t q = id / 100;
    memcpy(out + i - 2, kPairs + 2 * (id - q * 100), 2);
    id = q;
  }
  // The rest in 32-bit arithmetic (a cheaper division by 100).
  auto rest = static_cast<uint32_t>(id);
  for (; i >= 2; i -= 2) {
    const uint32_t q = rest / 100;
    memcpy(out + i - 2, kPairs + 2 * (rest - q * 100), 2);
    rest = q;
  }
  if (i == 1) out[0] = static_cast<char>('0' + (id > UINT32_MAX ? id % 10 : rest % 10));
}

void FormatValue(Random& random, int width, char* out) {
  const char c = static_cast<char>(33 + random.next() % 94);
  for (int i = 0; i < width; ++i) out[i] = c;
}

}  // namespace smart::ycsb
