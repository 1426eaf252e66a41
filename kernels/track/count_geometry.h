// Plane geometry of lines and zones, in double precision.
#pragma once

#include <string>
#include <vector>

#include "cudanms/count.h"

namespace cudanms::count_geometry {

// (b - a) x (p - a): > 0 when p is left of a -> b (in image coordinates, y down: clockwise).
double side(const CountPoint &a, const CountPoint &b, const CountPoint &p);
// The signed distance of p from the line through a and b (same sign as side()); a != b.
double signed_distance(const CountPoint &a, const CountPoint &b, const CountPoint &p);
// Where p projects onto the line through a and b, as the fraction along a -> b (0 at a, 1 at b).
double along(const CountPoint &a, const CountPoint &b, const CountPoint &p);
// Where the step p -> q meets the line through a and b, as the fraction t along a -> b
// (0 at a, 1 at b); side(p) and side(q) must differ.
double crossing_along(const CountPoint &a, const CountPoint &b, const CountPoint &p,
                      const CountPoint &q);
// Whether the closed segments p1p2 and q1q2 share a point.
bool segments_touch(const CountPoint &p1, const CountPoint &p2, const CountPoint &q1,
                    const CountPoint &q2);
// No two consecutive points equal, no two edges that cross or touch besides neighbours at their
// shared corner, no neighbours folding back on each other, some area; else false and why.
bool is_simple_polygon(const std::vector<CountPoint> &polygon, std::string *why);
// Even-odd rule.
bool inside(const std::vector<CountPoint> &polygon, const CountPoint &p);
// Distance from p to the polygon's outline.
double distance_to_outline(const std::vector<CountPoint> &polygon, const CountPoint &p);

}  // namespace cudanms::count_geometry
