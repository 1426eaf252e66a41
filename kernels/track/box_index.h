// Which boxes of a set may overlap a query box: a uniform grid over the set, cells about the size
// of its average box, stored flat (each cell's boxes one run of one array), so that rebuilding
// it for every matching of every frame allocates nothing once warm. The tracker's gate: it never
// compares every track with every box.
#pragma once

#include <cstdint>
#include <vector>

#include "common/grid_layout.h"
#include "common/overlap.h"

namespace cudanms::track {

class BoxIndex {
 public:
  // Indexes `boxes` (positions 0..n-1 in visits); they must stay alive while the index is used.
  void build(const std::vector<detail::Box> &boxes);

  // Calls visit(position) once for every indexed box whose cells meet `query`'s: those that
  // overlap it, and a few that do not.
  template <typename Visit>
  void near(const detail::Box &query, Visit visit) {
    if (empty_) return;
    ++epoch_;
    int x0, y0, x1, y1;
    span(query, &x0, &y0, &x1, &y1);
    for (int y = y0; y <= y1; ++y) {
      for (int x = x0; x <= x1; ++x) {
        const size_t cell = static_cast<size_t>(y) * layout_.cols + x;
        for (uint32_t i = cell_start_[cell]; i < cell_start_[cell + 1]; ++i) {
          const uint32_t p = entries_[i];
          if (seen_[p] == epoch_) continue;
          seen_[p] = epoch_;
          visit(p);
        }
      }
    }
  }

 private:
  void span(const detail::Box &b, int *x0, int *y0, int *x1, int *y1) const;

  detail::GridLayout layout_;
  bool empty_ = true;
  std::vector<uint32_t> cell_start_;  // cell c's boxes: entries_[cell_start_[c], cell_start_[c+1])
  std::vector<uint32_t> entries_;
  std::vector<uint32_t> fill_;  // where each cell's next box goes while building
  std::vector<uint32_t> seen_;  // the epoch of each box's last visit
  uint32_t epoch_ = 0;
};

}  // namespace cudanms::track
