#include "points.h"

#include "overlap.h"

namespace cudanms::detail {

void own_points(const CandidatesView &c, const std::vector<uint32_t> &kept,
                std::vector<float> *out) {
  const size_t stride = 2 * size_t{c.points_per_candidate};
  out->clear();
  for (const uint32_t p : kept) {
    out->insert(out->end(), c.points + p * stride, c.points + (p + 1) * stride);
  }
}

void merged_points(const CandidatesView &c, const std::vector<uint32_t> &kept,
                   const uint32_t *rank_order, const uint32_t *claims, size_t ranked,
                   std::vector<float> *out) {
  const size_t stride = 2 * size_t{c.points_per_candidate};
  out->assign(kept.size() * stride, 0.0f);
  std::vector<float> totals(kept.size(), 0.0f);
  auto add = [&](size_t slot, uint32_t p) {
    const float w = max0(c.scores[p]);
    totals[slot] = totals[slot] + w;
    float *sum = out->data() + slot * stride;
    const float *v = c.points + p * stride;
    for (size_t j = 0; j < stride; ++j) sum[j] = sum[j] + v[j] * w;
  };
  for (size_t s = 0; s < kept.size(); ++s) add(s, kept[s]);
  for (size_t r = 0; r < ranked; ++r) {
    if (claims[r] != UINT32_MAX) add(claims[r], rank_order[r]);
  }
  for (size_t s = 0; s < kept.size(); ++s) {
    float *mean = out->data() + s * stride;
    const float *own = c.points + kept[s] * stride;
    for (size_t j = 0; j < stride; ++j) mean[j] = totals[s] > 0.0f ? mean[j] / totals[s] : own[j];
  }
}

}  // namespace cudanms::detail
