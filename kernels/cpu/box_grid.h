// A uniform grid over a frame's candidates holding the boxes added so far, so that a box is only
// tested against boxes that can intersect it. Culling is conservative: every added box that
// intersects the query, grown by 1 pixel for the +1 convention of Overlap::kIoS, is visited.
#pragma once

#include <cstdint>
#include <vector>

#include "common/overlap.h"

namespace cudanms::detail {

class BoxGrid {
 public:
  // Lays the grid over `boxes` with cells about the size of an average box, and empties it.
  void reset(const std::vector<Box> &boxes);
  void add(uint32_t position, const Box &box);

  // Calls visit(position) for added boxes near `box` until one returns true; returns whether one
  // did. A box stored in several cells is visited once.
  template <typename Visit>
  bool any_near(const Box &box, Visit visit) {
    ++epoch_;
    for (uint32_t p : large_) {
      if (visit(p)) return true;
    }
    const Span s = span(box);
    for (int y = s.y0; y <= s.y1; ++y) {
      for (int x = s.x0; x <= s.x1; ++x) {
        for (uint32_t p : cells_[static_cast<size_t>(y) * cols_ + x]) {
          if (seen_[p] == epoch_) continue;
          seen_[p] = epoch_;
          if (visit(p)) return true;
        }
      }
    }
    return false;
  }

 private:
  struct Span {
    int x0, y0, x1, y1;
  };
  Span span(const Box &box) const;

  float x0_ = 0, y0_ = 0, cells_per_x_ = 0, cells_per_y_ = 0;
  int cols_ = 1, rows_ = 1;
  std::vector<std::vector<uint32_t>> cells_;
  std::vector<uint32_t> large_;  // boxes over too many cells: visited for every query
  std::vector<uint32_t> seen_;   // the epoch in which each position was last visited
  uint32_t epoch_ = 0;
};

}  // namespace cudanms::detail
