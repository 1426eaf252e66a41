// The arithmetic of Soft-NMS's decay and of weighted NMS's merge (cudanms/nms.h, rule 4),
// compiled by both the host compiler and nvcc with floating-point contraction off, so that every
// backend computes the same bits: no libm call whose last bit could differ between them.
#pragma once

#include <math.h>  // floorf, ldexpf: exact on host and device alike

#include "overlap.h"

namespace cudanms::detail {

// exp(x) for x <= 0, within 2 ulp: Cody and Waite's reduction x = k ln 2 + r (ln 2 split in
// two so that k * ln2_high is exact) and Cephes' degree-6 polynomial for exp(r) on
// [-ln 2 / 2, ln 2 / 2]. Exactly 1 at 0; 0 below -87, where exp leaves the normal floats.
CUDANMS_HD float exp_nonpositive(float x) {
  if (!(x > -87.0f)) return 0.0f;
  const float k = floorf(x * 1.44269504088896341f + 0.5f);
  const float r = (x - k * 0.693359375f) - k * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float e = (p * (r * r) + r) + 1.0f;
  return ldexpf(e, static_cast<int>(k));
}

// What a Soft-NMS decay multiplies a score by, for an overlap o by the selected candidate. An
// overlap that is NaN (boxes near the float range's end) decays nothing, as it suppresses nothing
// under the other methods.
CUDANMS_HD float soft_decay(SoftDecay kind, float o, float threshold, float sigma) {
  if (kind == SoftDecay::kLinear) return o > threshold ? 1.0f - o : 1.0f;
  if (o != o) return 1.0f;
  return exp_nonpositive(-(o * o) / sigma);
}

// Whether a decay can change a score at all for boxes that do not intersect: only the gaussian
// decay of DIoU, whose overlap is negative for boxes apart. Otherwise only near boxes decay.
CUDANMS_HD bool decays_boxes_apart(SoftDecay kind, Overlap overlap) {
  return kind == SoftDecay::kGaussian && overlap == Overlap::kDIoU;
}

// Weighted NMS's running sums over one kept candidate's cluster, added to in rank order.
struct WeightedBox {
  float total = 0.0f, x1 = 0.0f, y1 = 0.0f, x2 = 0.0f, y2 = 0.0f;

  CUDANMS_HD void add(const Box &b, float score) {
    const float w = max0(score);
    total = total + w;
    x1 = x1 + b.x1 * w;
    y1 = y1 + b.y1 * w;
    x2 = x2 + b.x2 * w;
    y2 = y2 + b.y2 * w;
  }
  CUDANMS_HD Box mean(const Box &kept) const {
    if (!(total > 0.0f)) return kept;
    return {x1 / total, y1 / total, x2 / total, y2 / total};
  }
};

}  // namespace cudanms::detail
