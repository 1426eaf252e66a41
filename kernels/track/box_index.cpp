#include "box_index.h"

#include "common/grid_layout.h"

namespace cudanms::track {
namespace {

constexpr int kMaxCellsPerSide = 256;

}  // namespace

void BoxIndex::span(const detail::Box &b, int *x0, int *y0, int *x1, int *y1) const {
  const detail::GridLayout &g = layout_;
  *x0 = detail::grid_cell_of(b.x1, g.x0, g.cells_per_x, g.cols);
  *y0 = detail::grid_cell_of(b.y1, g.y0, g.cells_per_y, g.rows);
  *x1 = detail::grid_cell_of(b.x2, g.x0, g.cells_per_x, g.cols);
  *y1 = detail::grid_cell_of(b.y2, g.y0, g.cells_per_y, g.rows);
}

void BoxIndex::build(const std::vector<detail::Box> &boxes) {
  empty_ = boxes.empty();
  if (empty_) return;
  layout_ = detail::grid_layout(boxes, kMaxCellsPerSide);
  // Count each cell's boxes, then place them: a box goes into every cell it covers.
  const size_t cells = static_cast<size_t>(layout_.cols) * layout_.rows;
  cell_start_.assign(cells + 1, 0);
  auto each_cell = [&](const detail::Box &b, auto add) {
    int bx0, by0, bx1, by1;
    span(b, &bx0, &by0, &bx1, &by1);
    for (int y = by0; y <= by1; ++y)
      for (int x = bx0; x <= bx1; ++x) add(static_cast<size_t>(y) * layout_.cols + x);
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
