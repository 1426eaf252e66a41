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

// How much `a` (the higher-ranked candidate) overlaps `b`.
CUDANMS_HD float overlap(Overlap kind, const Box &a, const Box &b) {
  if (kind == Overlap::kIoS) {
    const float iw = max0(min_f(a.x2, b.x2) - max_f(a.x1, b.x1) + 1.0f);
    const float ih = max0(min_f(a.y2, b.y2) - max_f(a.y1, b.y1) + 1.0f);
    return (iw * ih) / ((a.x2 - a.x1 + 1.0f) * (a.y2 - a.y1 + 1.0f));
  }
  if (kind == Overlap::kDIoU) {  // no shortcut for apart boxes: they get the distance penalty
    const float iw = max0(min_f(a.x2, b.x2) - max_f(a.x1, b.x1));
    const float ih = max0(min_f(a.y2, b.y2) - max_f(a.y1, b.y1));
    const float inter = iw * ih;
    const float uni = area(a) + area(b) - inter;
    const float iou = uni > 0.0f ? inter / uni : 0.0f;
    const float cw = max_f(a.x2, b.x2) - min_f(a.x1, b.x1);
    const float ch = max_f(a.y2, b.y2) - min_f(a.y1, b.y1);
    const float c2 = cw * cw + ch * ch;
    const float dx = (b.x1 + b.x2) - (a.x1 + a.x2);
    const float dy = (b.y1 + b.y2) - (a.y1 + a.y2);
    const float rho2 = (dx * dx + dy * dy) * 0.25f;
    return c2 > 0.0f ? iou - rho2 / c2 : iou;
  }
  const float iw = max0(min_f(a.x2, b.x2) - max_f(a.x1, b.x1));
  const float ih = max0(min_f(a.y2, b.y2) - max_f(a.y1, b.y1));
  const float inter = iw * ih;
  // Most pairs are apart: skip the division. 0 / d is 0 for every d this could divide by.
  if (inter == 0.0f) return 0.0f;
  if (kind == Overlap::kIoMin) {
    const float smaller = min_f(area(a), area(b));
    return smaller > 0.0f ? inter / smaller : 0.0f;
  }
  const float uni = area(a) + area(b) - inter;
  return uni > 0.0f ? inter / uni : 0.0f;
}

// Whether `a`, ranked before `b`, suppresses `b` under the method's rule (cudanms/nms.h, rule 4).
// The class test is the caller's.
CUDANMS_HD bool greedy_suppresses(Overlap kind, float threshold, const Box &a, const Box &b) {
  return overlap(kind, a, b) > threshold;
}

CUDANMS_HD bool matrix_suppresses(Overlap kind, float threshold, const Box &a, float score_a,
                                  const Box &b, float score_b) {
  return score_a > score_b && a.x2 > a.x1 && a.y2 > a.y1 && overlap(kind, a, b) >= threshold;
}

}  // namespace cudanms::detail
