// The arithmetic of rules 1 and 4 of cudanms/nms.h (which candidates are valid, how much two
// boxes overlap), compiled by both the host compiler and nvcc, so that every backend computes the
// same bits. The build turns off floating-point contraction for both (no FMA), and
// the operation order below is part of the contract documented in cudanms/nms.h.
#pragma once

#include <math.h>  // ::isfinite, for host and device alike

#include <cstdint>

#include "cudanms/nms.h"

#ifdef __CUDACC__
#define CUDANMS_HD __host__ __device__ __forceinline__
#else
#define CUDANMS_HD inline
#endif

namespace cudanms::detail {

struct Box {
  float x1, y1, x2, y2;
};

CUDANMS_HD float max0(float v) { return v > 0.0f ? v : 0.0f; }
CUDANMS_HD float min_f(float a, float b) { return a < b ? a : b; }
CUDANMS_HD float max_f(float a, float b) { return a > b ? a : b; }

// Rule 1: finite score and coordinates, and no negative size.
CUDANMS_HD bool is_valid(const Box &b, float score) {
  return isfinite(score) && isfinite(b.x1) && isfinite(b.y1) && isfinite(b.x2) && isfinite(b.y2) &&
         b.x2 >= b.x1 && b.y2 >= b.y1;
}

CUDANMS_HD float area(const Box &b) { return (b.x2 - b.x1) * (b.y2 - b.y1); }

// How much `a` (the higher-ranked candidate) overlaps `b`, as a fraction not yet divided: the
// overlap is num / den, and 0 where num is 0 or den is not positive.
struct Ratio {
  float num, den;
};

CUDANMS_HD Ratio overlap_ratio(Overlap kind, const Box &a, const Box &b) {
  if (kind == Overlap::kIoS) {
    const float iw = max0(min_f(a.x2, b.x2) - max_f(a.x1, b.x1) + 1.0f);
    const float ih = max0(min_f(a.y2, b.y2) - max_f(a.y1, b.y1) + 1.0f);
    return {iw * ih, (a.x2 - a.x1 + 1.0f) * (a.y2 - a.y1 + 1.0f)};
  }
  const float iw = max0(min_f(a.x2, b.x2) - max_f(a.x1, b.x1));
  const float ih = max0(min_f(a.y2, b.y2) - max_f(a.y1, b.y1));
  const float inter = iw * ih;
  // Most pairs are apart: skip the areas.
  if (inter == 0.0f) return {0.0f, 1.0f};
  if (kind == Overlap::kIoMin) return {inter, min_f(area(a), area(b))};
  return {inter, area(a) + area(b) - inter};
}

// Whether the overlap r.num / r.den (rounded to float, as the division gives it) is above t, or
// at least t with or_equal. Where num is clearly above or below t * den, by 2^-18 relative, the
// answer is known without the division: that margin is far wider than the roundings of
// t * (1 +- 2^-18) * den and of the quotient (2^-24 relative each), so the rounded quotient is on
// the same side of t. Only in range (no overflow or underflow, t not near 0); elsewhere, and in
// the margin, the division decides. The division is most of the cost of a pair that overlaps.
CUDANMS_HD bool ratio_exceeds(Ratio r, float t, bool or_equal) {
  if (r.num == 0.0f || !(r.den > 0.0f)) return or_equal ? 0.0f >= t : 0.0f > t;
  constexpr float kLow = 0x1p-60f;
  constexpr float kHigh = 0x1p60f;
  if (r.num > kLow && r.num < kHigh && r.den > kLow && r.den < kHigh && t > 0x1p-40f) {
    if (r.num > (t * (1.0f + 0x1p-18f)) * r.den) return true;
    if (r.num < (t * (1.0f - 0x1p-18f)) * r.den) return false;
  }
  const float overlap = r.num / r.den;
  return or_equal ? overlap >= t : overlap > t;
}

// Whether `a`, ranked before `b`, suppresses `b` under the method's rule (cudanms/nms.h, rule 4).
// The class test is the caller's.
CUDANMS_HD bool greedy_suppresses(Overlap kind, float threshold, const Box &a, const Box &b) {
  return ratio_exceeds(overlap_ratio(kind, a, b), threshold, false);
}

CUDANMS_HD bool matrix_suppresses(Overlap kind, float threshold, const Box &a, float score_a,
                                  const Box &b, float score_b) {
  return score_a > score_b && a.x2 > a.x1 && a.y2 > a.y1 &&
         ratio_exceeds(overlap_ratio(kind, a, b), threshold, true);
}

}  // namespace cudanms::detail
