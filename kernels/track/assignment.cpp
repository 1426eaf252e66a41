#include "cudanms/assignment.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

namespace cudanms {
namespace {

constexpr double kUnreached = std::numeric_limits<double>::infinity();
constexpr int32_t kFree = -1;

}  // namespace

// Reduced cost of row r -> column c: cost + row_potential[r] - col_potential[c], >= 0 on every
// arc, 0 on the matched ones (which the search walks back from column to row at no cost).
void SparseAssignment::scan_row(uint32_t row, double unassigned_cost) {
  const double base = row_distance_[row] + row_potential_[row];
  auto relax = [&](uint32_t col, double cost) {
    if (col_settled_[col]) return;
    const double d = base + cost - col_potential_[col];
    if (!(d < col_distance_[col])) return;
    if (col_distance_[col] == kUnreached) reached_cols_.push_back(col);
    col_distance_[col] = d;
    col_parent_[col] = row;
    heap_.push_back({d, col});
    std::push_heap(heap_.begin(), heap_.end(), std::greater<Queued>());
  };
  for (uint32_t a = first_arc_[row]; a < first_arc_[row + 1]; ++a)
    relax(arcs_[a].col, arcs_[a].cost);
  relax(cols_ + row, unassigned_cost);
}

void SparseAssignment::enter_row(uint32_t start, double unassigned_cost) {
  row_distance_[start] = 0;
  settled_rows_.push_back(start);
  scan_row(start, unassigned_cost);
  uint32_t target = 0;
  double shortest = 0;
  // The row's own "unassigned" column is free, so the search always ends.
  while (!heap_.empty()) {
    std::pop_heap(heap_.begin(), heap_.end(), std::greater<Queued>());
    const Queued q = heap_.back();
    heap_.pop_back();
    if (col_settled_[q.col] || q.distance > col_distance_[q.col]) continue;  // a stale entry
    col_settled_[q.col] = 1;
    settled_cols_.push_back(q.col);
    const int32_t owner = col_row_[q.col];
    if (owner == kFree) {
      target = q.col;
      shortest = q.distance;
      break;
    }
    row_distance_[owner] = q.distance;
    settled_rows_.push_back(static_cast<uint32_t>(owner));
    scan_row(static_cast<uint32_t>(owner), unassigned_cost);
  }
  // Potentials move on the settled nodes only; the others would all move by `shortest`, which
  // changes no reduced cost. The path to `target` becomes tight.
  for (uint32_t r : settled_rows_) {
    row_potential_[r] += row_distance_[r] - shortest;
    row_distance_[r] = kUnreached;
  }
  for (uint32_t c : settled_cols_) {
    col_potential_[c] += col_distance_[c] - shortest;
    col_settled_[c] = 0;
  }
  for (uint32_t c : reached_cols_) col_distance_[c] = kUnreached;
  settled_rows_.clear();
  settled_cols_.clear();
  reached_cols_.clear();
  heap_.clear();
  // Augment: every column on the path passes to the row it was reached from.
  for (uint32_t col = target;;) {
    const uint32_t row = col_parent_[col];
    const int32_t previous = row_col_[row];
    row_col_[row] = static_cast<int32_t>(col);
    col_row_[col] = static_cast<int32_t>(row);
    if (row == start) break;
    col = static_cast<uint32_t>(previous);
  }
}

void SparseAssignment::solve(uint32_t rows, uint32_t cols, const std::vector<AssignmentEdge> &edges,
                             double unassigned_cost, std::vector<int32_t> *column_of_row) {
  rows_ = rows;
  cols_ = cols;
  // CSR of the edges worth taking (cheaper than leaving the row alone), by row.
  first_arc_.assign(static_cast<size_t>(rows) + 1, 0);
  auto useful = [&](const AssignmentEdge &e) {
    return e.row < rows && e.col < cols && e.cost >= 0 && e.cost < unassigned_cost;
  };
  for (const AssignmentEdge &e : edges)
    if (useful(e)) first_arc_[e.row + 1]++;
  for (uint32_t r = 0; r < rows; ++r) first_arc_[r + 1] += first_arc_[r];
  arcs_.resize(first_arc_[rows]);
  next_arc_.assign(first_arc_.begin(), first_arc_.end() - 1);
  for (const AssignmentEdge &e : edges)
    if (useful(e)) arcs_[next_arc_[e.row]++] = {e.col, e.cost};

  const size_t all_cols = static_cast<size_t>(cols) + rows;
  row_potential_.assign(rows, 0.0);
  col_potential_.assign(all_cols, 0.0);
  row_distance_.assign(rows, kUnreached);
  col_distance_.assign(all_cols, kUnreached);
  row_col_.assign(rows, kFree);
  col_row_.assign(all_cols, kFree);
  col_parent_.assign(all_cols, 0);
  col_settled_.assign(all_cols, 0);
  for (uint32_t r = 0; r < rows; ++r) enter_row(r, unassigned_cost);

  column_of_row->assign(rows, kFree);
  for (uint32_t r = 0; r < rows; ++r)
    if (row_col_[r] >= 0 && static_cast<uint32_t>(row_col_[r]) < cols)
      (*column_of_row)[r] = row_col_[r];
}

}  // namespace cudanms
