#include "box_index.h"

#include <algorithm>
#include <cmath>

namespace cudanms::track {
namespace {

constexpr int kMaxCellsPerSide = 256;

int cells_along(double extent, double mean_size) {
  const double cells = extent / mean_size;
  if (!(cells >= 1.0)) return 1;  // also NaN
  return cells >= kMaxCellsPerSide ? kMaxCellsPerSide : static_cast<int>(cells);
}

int cell_of(float v, float origin, float per_cell, int count) {
  const float c = (v - origin) * per_cell;
  if (!(c >= 0.0f)) return 0;
  return c >= static_cast<float>(count) ? count - 1 : static_cast<int>(c);
}

}  // namespace

void BoxIndex::span(const detail::Box &b, int *x0, int *y0, int *x1, int *y1) const {
  *x0 = cell_of(b.x1, origin_x_, per_cell_x_, cells_x_);
  *y0 = cell_of(b.y1, origin_y_, per_cell_y_, cells_y_);
  *x1 = cell_of(b.x2, origin_x_, per_cell_x_, cells_x_);
  *y1 = cell_of(b.y2, origin_y_, per_cell_y_, cells_y_);
}

void BoxIndex::build(const std::vector<detail::Box> &boxes) {
  cells_x_ = cells_y_ = 0;
  if (boxes.empty()) return;
  float x0 = INFINITY, y0 = INFINITY, x1 = -INFINITY, y1 = -INFINITY;
  double width_sum = 0, height_sum = 0;
  for (const detail::Box &b : boxes) {
    x0 = std::min(x0, b.x1);
    y0 = std::min(y0, b.y1);
    x1 = std::max(x1, b.x2);
    y1 = std::max(y1, b.y2);
    width_sum += b.x2 - b.x1;
    height_sum += b.y2 - b.y1;
  }
  const double n = static_cast<double>(boxes.size());
  cells_x_ = cells_along(static_cast<double>(x1) - x0, width_sum / n + 1.0);
  cells_y_ = cells_along(static_cast<double>(y1) - y0, height_sum / n + 1.0);
  origin_x_ = x0;
  origin_y_ = y0;
  per_cell_x_ = cells_x_ > 1 ? cells_x_ / (x1 - x0) : 0.0f;
  per_cell_y_ = cells_y_ > 1 ? cells_y_ / (y1 - y0) : 0.0f;
  // Count each cell's boxes, then place them: a box goes into every cell it covers.
  const size_t cells = static_cast<size_t>(cells_x_) * cells_y_;
  cell_start_.assign(cells + 1, 0);
  auto each_cell = [&](const detail::Box &b, auto add) {
    int bx0, by0, bx1, by1;
    span(b, &bx0, &by0, &bx1, &by1);
    for (int y = by0; y <= by1; ++y)
      for (int x = bx0; x <= bx1; ++x) add(static_cast<size_t>(y) * cells_x_ + x);
  };
  for (const detail::Box &b : boxes) each_cell(b, [&](size_t c) { cell_start_[c + 1]++; });
  for (size_t c = 0; c < cells; ++c) cell_start_[c + 1] += cell_start_[c];
  entries_.resize(cell_start_[cells]);
  fill_.assign(cell_start_.begin(), cell_start_.end() - 1);
  for (uint32_t p = 0; p < boxes.size(); ++p)
    each_cell(boxes[p], [&](size_t c) { entries_[fill_[c]++] = p; });
  seen_.assign(boxes.size(), 0);
  epoch_ = 0;
}

}  // namespace cudanms::track
