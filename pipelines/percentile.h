// Latency figures of the pipelines' tools (cudanms-run, cudanms-streams).
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

// The p-th fraction of @values by nearest rank (p 0.5: the median); 0 when there are none.
inline double percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0.0;
  size_t rank = static_cast<size_t>(std::ceil(p * values.size()));
  rank = std::min(std::max<size_t>(rank, 1), values.size()) - 1;
  std::nth_element(values.begin(), values.begin() + rank, values.end());
  return values[rank];
}
