// The arithmetic of Method::kGroup (cudanms/nms.h, rule 4): OpenCV's cv::groupRectangles on
// integer rectangles, compiled by the host compiler and nvcc alike so that every backend
// computes the same rectangles. OpenCV's own code (modules/objdetect/src/cascadedetect.cpp,
// SimilarRects and groupRectangles) is the model: double precision where it uses eps, single
// precision for the class means, cvRound (to nearest, ties to even) for every rounding.
#pragma once

#include <math.h>  // ::rint, ::rintf, for host and device alike

#include <cstdint>

#include "common/overlap.h"

namespace cudanms::detail {

struct GroupRect {
  int32_t x, y, w, h;
};

// Coordinates beyond any frame are clamped, so that sizes and class sums stay exact integers.
constexpr float kGroupCoordinateLimit = 16777216.0f;  // 2^24

CUDANMS_HD int32_t group_coordinate(float v) {
  const float clamped = v < -kGroupCoordinateLimit  ? -kGroupCoordinateLimit
                        : v > kGroupCoordinateLimit ? kGroupCoordinateLimit
                                                    : v;
  return static_cast<int32_t>(rintf(clamped));
}

CUDANMS_HD GroupRect group_rect(const Box &b) {
  const int32_t x = group_coordinate(b.x1), y = group_coordinate(b.y1);
  return {x, y, group_coordinate(b.x2) - x, group_coordinate(b.y2) - y};
}

CUDANMS_HD Box group_box(const GroupRect &r) {
  return {static_cast<float>(r.x), static_cast<float>(r.y), static_cast<float>(r.x + r.w),
          static_cast<float>(r.y + r.h)};
}

CUDANMS_HD int32_t abs_i(int32_t v) { return v < 0 ? -v : v; }
CUDANMS_HD int32_t min_i(int32_t a, int32_t b) { return a < b ? a : b; }

// The largest d any rectangle similar to `a` can have: a pair is similar only if its x differ
// by at most this, which is what lets a sweep over x find every similar pair.
CUDANMS_HD double group_reach(const GroupRect &a, double eps) {
  return eps * static_cast<double>(a.w + a.h) * 0.5;
}

// OpenCV's SimilarRects.
CUDANMS_HD bool group_similar(const GroupRect &a, const GroupRect &b, double eps) {
  const double d = eps * static_cast<double>(min_i(a.w, b.w) + min_i(a.h, b.h)) * 0.5;
  return abs_i(a.x - b.x) <= d && abs_i(a.y - b.y) <= d && abs_i(a.x + a.w - b.x - b.w) <= d &&
         abs_i(a.y + a.h - b.y - b.h) <= d;
}

// A class's rectangle from its members' sums, as groupRectangles averages them.
CUDANMS_HD GroupRect group_mean(int64_t sx, int64_t sy, int64_t sw, int64_t sh, uint32_t n) {
  const float s = 1.0f / static_cast<float>(n);
  return {static_cast<int32_t>(rintf(static_cast<float>(sx) * s)),
          static_cast<int32_t>(rintf(static_cast<float>(sy) * s)),
          static_cast<int32_t>(rintf(static_cast<float>(sw) * s)),
          static_cast<int32_t>(rintf(static_cast<float>(sh) * s))};
}

// Whether class r1 (n1 members) is dropped for lying inside class r2 (n2 members, both above
// the threshold): groupRectangles' "small face rectangles inside large rectangles".
CUDANMS_HD bool group_holds(const GroupRect &r2, uint32_t n2, const GroupRect &r1, uint32_t n1,
                            double eps) {
  const int32_t dx = static_cast<int32_t>(rint(r2.w * eps));
  const int32_t dy = static_cast<int32_t>(rint(r2.h * eps));
  return r1.x >= r2.x - dx && r1.y >= r2.y - dy && r1.x + r1.w <= r2.x + r2.w + dx &&
         r1.y + r1.h <= r2.y + r2.h + dy && (n2 > (n1 > 3 ? n1 : 3) || n1 < 3);
}

}  // namespace cudanms::detail
