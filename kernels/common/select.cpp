#include "select.h"

#include <algorithm>

#include "overlap.h"

namespace cudanms::detail {
namespace {

// Whether candidate `a` ranks before candidate `b`: higher score, then lower index.
bool ranks_before(const float *scores, uint32_t a, uint32_t b) {
  return scores[a] > scores[b] || (scores[a] == scores[b] && a < b);
}

}  // namespace

void select_candidates(const CandidatesView &candidates, const Params &params,
                       std::vector<uint32_t> *selected, Counts *counts) {
  *counts = Counts();
  counts->in = candidates.count;
  selected->clear();
  for (size_t i = 0; i < candidates.count; ++i) {
    const float score = candidates.scores[i];
    const float *b = candidates.boxes + 4 * i;
    if (!is_valid(Box{b[0], b[1], b[2], b[3]}, score)) {
      ++counts->invalid;
    } else if (score < params.score_threshold) {
      ++counts->below_score;
    } else {
      selected->push_back(static_cast<uint32_t>(i));
    }
  }
  if (selected->size() <= params.max_candidates) return;

  // Top-K in O(n): partition out the Dmax best-ranked, then restore index order.
  const auto keep = static_cast<std::ptrdiff_t>(params.max_candidates);
  const float *scores = candidates.scores;
  std::nth_element(selected->begin(), selected->begin() + keep - 1, selected->end(),
                   [scores](uint32_t a, uint32_t b) { return ranks_before(scores, a, b); });
  counts->over_capacity = selected->size() - params.max_candidates;
  selected->resize(params.max_candidates);
  std::sort(selected->begin(), selected->end());
}

}  // namespace cudanms::detail
