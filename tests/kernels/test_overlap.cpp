// The overlap decisions of kernels/common/overlap.h: deciding most pairs without the division
// must give exactly what the division and the comparison give, on both sides of the threshold.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "common/overlap.h"
#include "support/seed.h"

namespace cudanms::testing {
namespace {

using detail::Ratio;
using detail::ratio_exceeds;

::testing::AssertionResult decides_as_division(float num, float den, float t) {
  const bool positive = num != 0.0f && den > 0.0f;
  const float overlap = positive ? num / den : 0.0f;
  for (const bool or_equal : {false, true}) {
    const bool expected = or_equal ? overlap >= t : overlap > t;
    if (ratio_exceeds(Ratio{num, den}, t, or_equal) != expected) {
      return ::testing::AssertionFailure()
             << std::hexfloat << num << " / " << den << (or_equal ? " >= " : " > ") << t << " is "
             << expected;
    }
  }
  return ::testing::AssertionSuccess();
}

// Quotients a few units in the last place from the threshold, where the margin test must hand
// over to the division, and far from it, where it decides alone.
TEST(Overlap, DecidesAsTheDivisionNearAndFarFromTheThreshold) {
  std::mt19937_64 rng(run_seed() + 1);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  std::uniform_real_distribution<float> exponent(-30.0f, 30.0f);
  std::uniform_int_distribution<int> ulps(-40, 40);
  for (int k = 0; k < 2000000; ++k) {
    const float t = k % 7 == 0 ? 0.5f : k % 11 == 0 ? 0.3f : unit(rng);
    const float den = std::exp2(exponent(rng)) * (1.0f + unit(rng));
    float num = t * den;
    for (int step = ulps(rng); step != 0; step += step > 0 ? -1 : 1) {
      num = std::nextafter(num, step > 0 ? INFINITY : 0.0f);
    }
    if (k % 3 == 0) num *= 0.5f + unit(rng);  // far from it too
    ASSERT_TRUE(decides_as_division(num, den, t)) << "case " << k;
  }
}

TEST(Overlap, EdgesAreTheDivisions) {
  const float tiny = 0x1p-140f, huge = 0x1p120f;
  for (const float t : {0.0f, 0x1p-60f, 0.5f, 1.0f}) {
    for (const float num : {0.0f, tiny, 1e-30f, 0.25f, 1.0f, 3e20f, huge, INFINITY}) {
      for (const float den : {-1.0f, 0.0f, tiny, 1e-30f, 0.5f, 1.0f, 3e20f, huge, INFINITY}) {
        EXPECT_TRUE(decides_as_division(num, den, t));
      }
    }
  }
}

}  // namespace
}  // namespace cudanms::testing
