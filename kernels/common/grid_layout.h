// A uniform grid over a set of boxes, cells about the size of its average box: where the CPU
// NMS's BoxGrid and the tracker's BoxIndex put each box. Any layout is correct for them (they
// visit every box whose cells meet a query's); this one keeps the cells few and the boxes in few.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/overlap.h"

namespace cudanms::detail {

struct GridLayout {
  float x0 = 0, y0 = 0;                    // the boxes' top-left corner
  float cells_per_x = 0, cells_per_y = 0;  // cells per pixel (0 with a single cell)
  int cols = 1, rows = 1;
};

// Truncation is floor here, as c >= 0; a libm floor call cost a fifth of the whole NMS.
inline int grid_cell_of(float v, float origin, float cells_per_unit, int count) {
  const float c = (v - origin) * cells_per_unit;
  if (!(c >= 0.0f)) return 0;
  return c >= static_cast<float>(count) ? count - 1 : static_cast<int>(c);
}

// At most `max_cells_per_side` cells along each side.
inline GridLayout grid_layout(const std::vector<Box> &boxes, int max_cells_per_side) {
  float x0 = INFINITY, y0 = INFINITY, x1 = -INFINITY, y1 = -INFINITY;
  double width_sum = 0, height_sum = 0;
  for (const Box &b : boxes) {
    x0 = std::min(x0, b.x1);
    y0 = std::min(y0, b.y1);
    x1 = std::max(x1, b.x2);
    y1 = std::max(y1, b.y2);
    width_sum += b.x2 - b.x1;
    height_sum += b.y2 - b.y1;
  }
  const auto n = static_cast<double>(std::max<size_t>(boxes.size(), 1));
  auto cells_along = [&](float extent, float mean_size) {
    const float cells = extent / mean_size;
    if (!(cells >= 1.0f)) return 1;  // also NaN, from infinite or zero extents
    return cells >= static_cast<float>(max_cells_per_side) ? max_cells_per_side
                                                           : static_cast<int>(cells);
  };
  GridLayout g;
  g.cols = cells_along(x1 - x0, static_cast<float>(width_sum / n) + 1.0f);
  g.rows = cells_along(y1 - y0, static_cast<float>(height_sum / n) + 1.0f);
  g.x0 = x0;
  g.y0 = y0;
  // Rounding keeps v -> floor((v - origin) * scale) monotone, so intersecting boxes share a cell.
  g.cells_per_x = g.cols > 1 ? g.cols / (x1 - x0) : 0.0f;
  g.cells_per_y = g.rows > 1 ? g.rows / (y1 - y0) : 0.0f;
  return g;
}

}  // namespace cudanms::detail
