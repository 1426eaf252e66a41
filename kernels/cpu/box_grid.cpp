#include "box_grid.h"

#include "common/grid_layout.h"

namespace cudanms::detail {
namespace {

constexpr int kMaxCellsPerSide = 128;
constexpr int kMaxCellsPerBox = 64;

}  // namespace

void BoxGrid::reset(const std::vector<Box> &boxes) {
  const GridLayout g = grid_layout(boxes, kMaxCellsPerSide);
  cols_ = g.cols;
  rows_ = g.rows;
  x0_ = g.x0;
  y0_ = g.y0;
  cells_per_x_ = g.cells_per_x;
  cells_per_y_ = g.cells_per_y;
  cells_.resize(static_cast<size_t>(cols_) * rows_);
  for (auto &cell : cells_) cell.clear();
  large_.clear();
  seen_.assign(boxes.size(), 0);
  epoch_ = 0;
}

BoxGrid::Span BoxGrid::span(const Box &b) const {
  return {grid_cell_of(b.x1 - 1.0f, x0_, cells_per_x_, cols_),
          grid_cell_of(b.y1 - 1.0f, y0_, cells_per_y_, rows_),
          grid_cell_of(b.x2 + 1.0f, x0_, cells_per_x_, cols_),
          grid_cell_of(b.y2 + 1.0f, y0_, cells_per_y_, rows_)};
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
