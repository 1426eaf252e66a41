#include "box_grid.h"

#include <algorithm>
#include <cmath>

namespace cudanms::detail {
namespace {

constexpr int kMaxCellsPerSide = 128;
constexpr int kMaxCellsPerBox = 64;

int cells_along(float extent, float mean_size) {
  const float cells = extent / mean_size;
  if (!(cells >= 1.0f)) return 1;  // also NaN, from infinite or zero extents
  return cells >= kMaxCellsPerSide ? kMaxCellsPerSide : static_cast<int>(cells);
}

// Truncation is floor here, as c >= 0; a libm floor call cost a fifth of the whole NMS.
int cell_of(float v, float origin, float cells_per_unit, int count) {
  const float c = (v - origin) * cells_per_unit;
  if (!(c >= 0.0f)) return 0;
  return c >= static_cast<float>(count) ? count - 1 : static_cast<int>(c);
}

}  // namespace

void BoxGrid::reset(const std::vector<Box> &boxes) {
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
  cols_ = cells_along(x1 - x0, static_cast<float>(width_sum / n) + 1.0f);
  rows_ = cells_along(y1 - y0, static_cast<float>(height_sum / n) + 1.0f);
  x0_ = x0;
  y0_ = y0;
  // Rounding keeps v -> floor((v - origin) * scale) monotone, so intersecting boxes share a cell.
  cells_per_x_ = cols_ > 1 ? cols_ / (x1 - x0) : 0.0f;
  cells_per_y_ = rows_ > 1 ? rows_ / (y1 - y0) : 0.0f;
  cells_.resize(static_cast<size_t>(cols_) * rows_);
  for (auto &cell : cells_) cell.clear();
  large_.clear();
  seen_.assign(boxes.size(), 0);
  epoch_ = 0;
}

BoxGrid::Span BoxGrid::span(const Box &b) const {
  return {cell_of(b.x1 - 1.0f, x0_, cells_per_x_, cols_),
          cell_of(b.y1 - 1.0f, y0_, cells_per_y_, rows_),
          cell_of(b.x2 + 1.0f, x0_, cells_per_x_, cols_),
          cell_of(b.y2 + 1.0f, y0_, cells_per_y_, rows_)};
}

void BoxGrid::add(uint32_t position, const Box &box) {
  const Span s = span(box);
  if ((s.x1 - s.x0 + 1) * (s.y1 - s.y0 + 1) > kMaxCellsPerBox) {
    large_.push_back(position);
    return;
  }
  for (int y = s.y0; y <= s.y1; ++y) {
    for (int x = s.x0; x <= s.x1; ++x)
      cells_[static_cast<size_t>(y) * cols_ + x].push_back(position);
  }
}

}  // namespace cudanms::detail
