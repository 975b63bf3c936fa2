// The YCSB driver's zipfian key chooser: the whole-number power path agrees
// with std::pow, and the ranks follow the distribution.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "smart/bench/ycsb.h"

namespace smart::ycsb {
namespace {

TEST(Zipfian, WholeAlphaIsTakenOnlyWhenAlphaIsAWholeNumber) {
  EXPECT_EQ(ZipfianParams(1000, 0.99).whole_alpha, 100);
  EXPECT_EQ(ZipfianParams(1000, 0.9).whole_alpha, 10);
  EXPECT_EQ(ZipfianParams(1000, 0.5).whole_alpha, 2);
  EXPECT_EQ(ZipfianParams(1000, 0.7).whole_alpha, 0);   // 3.33...
  EXPECT_EQ(ZipfianParams(1000, 0.999).whole_alpha, 1000);
  EXPECT_EQ(ZipfianParams(1000, 0.9999).whole_alpha, 0);  // 10,000: past the limit
}

TEST(Zipfian, TheWholePowerPathGivesTheRanksOfStdPow) {
  for (double theta : {0.5, 0.8, 0.9, 0.95, 0.99}) {
    const ZipfianParams fast(1000000, theta);
    ASSERT_GT(fast.whole_alpha, 0) << theta;
    ZipfianParams reference = fast;
    reference.whole_alpha = 0;  // std::pow(base, alpha)
    Random random(42);
    int differ = 0;
    for (int i = 0; i < 200000; ++i) {
      const double u = random.uniform();
      const uint64_t a = ZipfianRankOf(fast, u), b = ZipfianRankOf(reference, u);
      ASSERT_LE(a > b ? a - b : b - a, 1u) << "theta " << theta << ", u " << u;
      differ += a != b;
    }
    EXPECT_LE(differ, 2) << "theta " << theta;
  }
}

TEST(Zipfian, RanksFollowTheDistribution) {
  // n = 1000, theta = 0.99: P(rank k) = (k + 1)^-theta / zeta(n).
  const ZipfianParams p(1000, 0.99);
  Random random(7);
  std::vector<uint64_t> counts(1000, 0);
  const int samples = 2000000;
  for (int i = 0; i < samples; ++i) {
    const uint64_t r = ZipfianRank(p, random);
    ASSERT_LT(r, 1000u);
    ++counts[r];
  }
  double zeta = 0;
  for (int k = 1; k <= 1000; ++k) zeta += std::pow(k, -0.99);
  // Gray et al.'s inversion is exact for ranks 0 and 1 and approximates the
  // others (rank 2 comes out about 16% too often at this n and theta).
  for (int k : {0, 1}) {
    const double expected = samples * std::pow(k + 1, -0.99) / zeta;
    EXPECT_NEAR(static_cast<double>(counts[static_cast<size_t>(k)]), expected, 0.03 * expected) << "rank " << k;
  }
  for (int k : {2, 9, 99}) {
    const double expected = samples * std::pow(k + 1, -0.99) / zeta;
    EXPECT_NEAR(static_cast<double>(counts[static_cast<size_t>(k)]), expected, 0.25 * expected) << "rank " << k;
  }
  // The tail, ranks 500..999 together.
  double tail_expected = 0;
  uint64_t tail = 0;
  for (int k = 500; k < 1000; ++k) {
    tail_expected += samples * std::pow(k + 1, -0.99) / zeta;
    tail += counts[static_cast<size_t>(k)];
  }
  EXPECT_NEAR(static_cast<double>(tail), tail_expected, 0.1 * tail_expected);
}

}  // namespace
}  // namespace smart::ycsb
