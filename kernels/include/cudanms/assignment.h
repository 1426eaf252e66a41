// Optimal sparse assignment: which row takes which column, at the least total cost, where a row
// may also take no column. The tracker (cudanms/track.h) matches tracks to boxes with it, and the
// MOT scorer (tools/) ground truth to hypotheses. Pure C++17, no GStreamer, no GLib.
//
//   cudanms::SparseAssignment solver;  // keeps its buffers: no allocation once warm
//   std::vector<int32_t> column_of_row;
//   solver.solve(rows, cols, edges, unassigned_cost, &column_of_row);
//
// The problem: each row takes at most one column among its edges, each column at most one row.
// A row left without a column costs `unassigned_cost`; the total of the taken edges' costs plus
// those of the rows left alone is a minimum. It is the problem lap.lapjv(cost, extend_cost=True,
// cost_limit=L) solves for ByteTrack (a row or a column left alone costs L / 2 there), with
// L = unassigned_cost: both minimise the sum over taken edges of (cost - L).
// Only the edges given are possible pairs: a tracker's gating keeps them few, and the solver never
// builds a dense matrix.
//
// The algorithm is the shortest augmenting path method of the Hungarian algorithm (Kuhn,
// Munkres; Jonker and Volgenant's form): rows enter one at a time, each through a Dijkstra search
// on reduced costs that stops at the first free column it reaches, with the dual potentials
// updated on the nodes it settled only. Each row has a column of its own, "unassigned", so that a
// search always ends. Searches stay local where the edge graph is, so a frame of 10 000 boxes
// costs about as much per box as a frame of 100.
#pragma once

#include <cstdint>
#include <vector>

namespace cudanms {

struct AssignmentEdge {
  uint32_t row;
  uint32_t col;
  double cost;  // >= 0; an edge of cost >= the unassigned cost, or NaN, is never taken
};

class SparseAssignment {
 public:
  // Fills (*column_of_row)[r] with the column row r takes, or -1. Edges out of range are ignored.
  // Among optimal assignments of equal cost, which one is returned is unspecified.
  void solve(uint32_t rows, uint32_t cols, const std::vector<AssignmentEdge> &edges,
             double unassigned_cost, std::vector<int32_t> *column_of_row);

 private:
  struct Arc {
    uint32_t col;
    double cost;
  };
  struct Queued {
    double distance;
    uint32_t col;
    bool operator>(const Queued &o) const { return distance > o.distance; }
  };
  void enter_row(uint32_t row, double unassigned_cost);
  void scan_row(uint32_t row, double unassigned_cost);

  uint32_t rows_ = 0, cols_ = 0;     // cols_ counts the real columns; row r's own is cols_ + r
  std::vector<uint32_t> first_arc_;  // CSR: row r's arcs are arcs_[first_arc_[r], first_arc_[r+1])
  std::vector<Arc> arcs_;
  std::vector<uint32_t> next_arc_;  // where filling the CSR puts each row's next arc
  std::vector<double> row_potential_, col_potential_;
  std::vector<double> row_distance_, col_distance_;
  std::vector<int32_t> col_row_, row_col_;  // the matching, both ways; -1: free
  std::vector<uint32_t> col_parent_;        // the row each column was reached from
  std::vector<uint8_t> col_settled_;
  std::vector<uint32_t> settled_rows_, settled_cols_, reached_cols_;
  std::vector<Queued> heap_;
};

}  // namespace cudanms
