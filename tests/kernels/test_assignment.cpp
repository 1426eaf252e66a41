// The sparse assignment against an exhaustive search of every matching, on random problems, and
// its degenerate inputs by name.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <random>

#include "cudanms/assignment.h"
#include "support/seed.h"

namespace cudanms {
namespace {

using Edges = std::vector<AssignmentEdge>;

// The least total cost over every matching, by exhaustive search.
double brute_force(uint32_t rows, uint32_t cols, const Edges &edges, double unassigned) {
  std::map<std::pair<uint32_t, uint32_t>, double> cost;
  for (const AssignmentEdge &e : edges) {
    if (!(e.cost >= 0) || e.row >= rows || e.col >= cols) continue;
    auto key = std::make_pair(e.row, e.col);
    cost[key] = cost.count(key) ? std::min(cost[key], e.cost) : e.cost;
  }
  std::vector<uint8_t> used(cols, 0);
  std::function<double(uint32_t)> best = [&](uint32_t r) -> double {
    if (r == rows) return 0.0;
    double out = unassigned + best(r + 1);
    for (uint32_t c = 0; c < cols; ++c) {
      const auto found = cost.find({r, c});
      if (used[c] || found == cost.end()) continue;
      used[c] = 1;
      out = std::min(out, found->second + best(r + 1));
      used[c] = 0;
    }
    return out;
  };
  return best(0);
}

// The total cost of a solution, after checking that it takes given edges and no column twice.
double cost_of(uint32_t cols, const Edges &edges, double unassigned,
               const std::vector<int32_t> &column_of_row) {
  std::vector<uint8_t> used(cols, 0);
  double total = 0;
  for (uint32_t r = 0; r < column_of_row.size(); ++r) {
    const int32_t c = column_of_row[r];
    if (c < 0) {
      total += unassigned;
      continue;
    }
    EXPECT_LT(static_cast<uint32_t>(c), cols);
    EXPECT_FALSE(used[c]) << "column " << c << " taken twice";
    used[c] = 1;
    double cheapest = std::numeric_limits<double>::infinity();
    for (const AssignmentEdge &e : edges)
      if (e.row == r && e.col == static_cast<uint32_t>(c) && e.cost >= 0)
        cheapest = std::min(cheapest, e.cost);
    EXPECT_TRUE(std::isfinite(cheapest))
        << "row " << r << " took column " << c << " without an edge";
    total += cheapest;
  }
  return total;
}

TEST(SparseAssignment, EqualsExhaustiveSearchOnRandomProblems) {
  const uint64_t seed = testing::run_seed();
  std::mt19937_64 random(seed);
  SparseAssignment solver;
  std::vector<int32_t> solution;
  for (int trial = 0; trial < 3000; ++trial) {
    const uint32_t rows = 1 + random() % 7, cols = 1 + random() % 7;
    const double density = std::uniform_real_distribution<double>(0.1, 1.0)(random);
    const double unassigned = std::uniform_real_distribution<double>(0.05, 1.5)(random);
    Edges edges;
    for (uint32_t r = 0; r < rows; ++r)
      for (uint32_t c = 0; c < cols; ++c)
        if (std::uniform_real_distribution<double>(0, 1)(random) < density) {
          // Ties on purpose: costs on a coarse grid, some at the unassigned cost itself.
          const double cost = (random() % 8 == 0) ? unassigned : (random() % 21) / 20.0;
          edges.push_back({r, c, cost});
        }
    solver.solve(rows, cols, edges, unassigned, &solution);
    ASSERT_EQ(solution.size(), rows);
    ASSERT_NEAR(cost_of(cols, edges, unassigned, solution),
                brute_force(rows, cols, edges, unassigned), 1e-9)
        << "trial " << trial << ", seed " << seed;
  }
}

TEST(SparseAssignment, Empty) {
  SparseAssignment solver;
  std::vector<int32_t> solution = {7};
  solver.solve(0, 0, {}, 1.0, &solution);
  EXPECT_TRUE(solution.empty());
  solver.solve(3, 0, {}, 1.0, &solution);
  EXPECT_EQ(solution, std::vector<int32_t>(3, -1));
}

TEST(SparseAssignment, EdgesNoCheaperThanLeavingAloneAreNotTaken) {
  SparseAssignment solver;
  std::vector<int32_t> solution;
  solver.solve(2, 2, {{0, 0, 0.5}, {1, 1, 0.7}}, 0.5, &solution);
  EXPECT_EQ(solution, (std::vector<int32_t>{-1, -1}));
}

TEST(SparseAssignment, NanNegativeAndOutOfRangeEdgesAreIgnored) {
  SparseAssignment solver;
  std::vector<int32_t> solution;
  solver.solve(2, 2, {{0, 0, std::nan("")}, {0, 1, -0.1}, {5, 0, 0.1}, {1, 9, 0.1}, {1, 0, 0.2}},
               1.0, &solution);
  EXPECT_EQ(solution, (std::vector<int32_t>{-1, 0}));
}

// The optimum, not the greedy choice: row 0's cheapest column is the only one row 1 can take.
TEST(SparseAssignment, NotGreedy) {
  SparseAssignment solver;
  std::vector<int32_t> solution;
  solver.solve(2, 2, {{0, 0, 0.1}, {0, 1, 0.2}, {1, 0, 0.15}}, 1.0, &solution);
  EXPECT_EQ(solution, (std::vector<int32_t>{1, 0}));
}

// A chain of 20 000 rows, row r on column r (0.1) or r + 1 (0.05), the last row on its own
// column only. Greedily each row takes r + 1, which leaves the last row alone; with leaving a
// row alone dear, the last row's search must walk the whole chain back to put every row on its
// own column: one augmenting path 20 000 columns long.
TEST(SparseAssignment, LongChain) {
  const uint32_t n = 20000;
  Edges edges;
  for (uint32_t r = 0; r < n; ++r) {
    edges.push_back({r, r, 0.1});
    if (r + 1 < n) edges.push_back({r, r + 1, 0.05});
  }
  SparseAssignment solver;
  std::vector<int32_t> solution;
  solver.solve(n, n, edges, 1e6, &solution);
  for (uint32_t r = 0; r < n; ++r) ASSERT_EQ(solution[r], static_cast<int32_t>(r));
  // Cheap to leave alone: the shifted chain, the last row alone, is the optimum.
  solver.solve(n, n, edges, 1.0, &solution);
  for (uint32_t r = 0; r + 1 < n; ++r) ASSERT_EQ(solution[r], static_cast<int32_t>(r + 1));
  EXPECT_EQ(solution[n - 1], -1);
}

}  // namespace
}  // namespace cudanms
