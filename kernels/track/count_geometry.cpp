#include "count_geometry.h"

#include <algorithm>
#include <cmath>

namespace cudanms::count_geometry {
namespace {

double dot(const CountPoint &u, const CountPoint &v) { return u.x * v.x + u.y * v.y; }
CountPoint minus(const CountPoint &u, const CountPoint &v) { return {u.x - v.x, u.y - v.y}; }

int sign(double v) { return v > 0 ? 1 : v < 0 ? -1 : 0; }

// p lies within the bounding box of a and b (it is on their line already).
bool within_box(const CountPoint &a, const CountPoint &b, const CountPoint &p) {
  return std::min(a.x, b.x) <= p.x && p.x <= std::max(a.x, b.x) && std::min(a.y, b.y) <= p.y &&
         p.y <= std::max(a.y, b.y);
}

double distance_to_segment(const CountPoint &a, const CountPoint &b, const CountPoint &p) {
  const CountPoint ab = minus(b, a), ap = minus(p, a);
  const double length2 = dot(ab, ab);
  const double t = length2 > 0 ? std::clamp(dot(ap, ab) / length2, 0.0, 1.0) : 0.0;
  const CountPoint closest{a.x + t * ab.x, a.y + t * ab.y};
  return std::hypot(p.x - closest.x, p.y - closest.y);
}

}  // namespace

double side(const CountPoint &a, const CountPoint &b, const CountPoint &p) {
  return (b.x - a.x) * (p.y - a.y) - (b.y - a.y) * (p.x - a.x);
}

double signed_distance(const CountPoint &a, const CountPoint &b, const CountPoint &p) {
  return side(a, b, p) / std::hypot(b.x - a.x, b.y - a.y);
}

double along(const CountPoint &a, const CountPoint &b, const CountPoint &p) {
  const CountPoint ab = minus(b, a);
  return dot(minus(p, a), ab) / dot(ab, ab);
}

double crossing_along(const CountPoint &a, const CountPoint &b, const CountPoint &p,
                      const CountPoint &q) {
  const double sp = side(a, b, p), sq = side(a, b, q);
  const double u = sp / (sp - sq);
  return along(a, b, {p.x + u * (q.x - p.x), p.y + u * (q.y - p.y)});
}

bool segments_touch(const CountPoint &p1, const CountPoint &p2, const CountPoint &q1,
                    const CountPoint &q2) {
  const int d1 = sign(side(q1, q2, p1)), d2 = sign(side(q1, q2, p2));
  const int d3 = sign(side(p1, p2, q1)), d4 = sign(side(p1, p2, q2));
  if (d1 * d2 < 0 && d3 * d4 < 0) return true;
  return (d1 == 0 && within_box(q1, q2, p1)) || (d2 == 0 && within_box(q1, q2, p2)) ||
         (d3 == 0 && within_box(p1, p2, q1)) || (d4 == 0 && within_box(p1, p2, q2));
}

bool is_simple_polygon(const std::vector<CountPoint> &polygon, std::string *why) {
  const size_t n = polygon.size();
  auto corner = [&](size_t i) { return std::to_string(i % n + 1); };
  for (size_t i = 0; i < n; ++i) {
    const CountPoint &a = polygon[i], &b = polygon[(i + 1) % n];
    if (a.x == b.x && a.y == b.y) {
      *why = "points " + corner(i) + " and " + corner(i + 1) + " are the same";
      return false;
    }
  }
  for (size_t i = 0; i < n; ++i) {
    const CountPoint &a = polygon[i], &b = polygon[(i + 1) % n];
    for (size_t j = i + 1; j < n; ++j) {
      const CountPoint &c = polygon[j], &d = polygon[(j + 1) % n];
      const bool neighbours = j == i + 1 || (i == 0 && j == n - 1);
      if (neighbours) {
        // They share a corner; they must not run back along each other.
        const CountPoint &shared = j == i + 1 ? b : a;
        const CountPoint &u = j == i + 1 ? a : b;
        const CountPoint &w = j == i + 1 ? d : c;
        if (side(u, shared, w) == 0 && dot(minus(u, shared), minus(w, shared)) > 0) {
          *why = "the edges at point " + corner(j == i + 1 ? j : i) + " fold back on each other";
          return false;
        }
        continue;
      }
      if (segments_touch(a, b, c, d)) {
        *why = "the polygon crosses itself: edge " + corner(i) + "-" + corner(i + 1) +
               " meets edge " + corner(j) + "-" + corner(j + 1);
        return false;
      }
    }
  }
  double twice_area = 0;
  for (size_t i = 0; i < n; ++i) {
    const CountPoint &a = polygon[i], &b = polygon[(i + 1) % n];
    twice_area += a.x * b.y - b.x * a.y;
  }
  if (twice_area == 0) {
    *why = "the polygon has no area: its points lie on one line";
    return false;
  }
  return true;
}

bool inside(const std::vector<CountPoint> &polygon, const CountPoint &p) {
  bool in = false;
  for (size_t i = 0, j = polygon.size() - 1; i < polygon.size(); j = i++) {
    const CountPoint &a = polygon[i], &b = polygon[j];
    if ((a.y > p.y) != (b.y > p.y) && p.x < (b.x - a.x) * (p.y - a.y) / (b.y - a.y) + a.x) in = !in;
  }
  return in;
}

double distance_to_outline(const std::vector<CountPoint> &polygon, const CountPoint &p) {
  double best = INFINITY;
  for (size_t i = 0; i < polygon.size(); ++i)
    best = std::min(best, distance_to_segment(polygon[i], polygon[(i + 1) % polygon.size()], p));
  return best;
}

}  // namespace cudanms::count_geometry
