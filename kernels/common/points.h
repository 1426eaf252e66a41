// The points that travel with candidates (CandidatesView::points): the kept candidates' own, or
// kWeighted's merge of them (cudanms/nms.h, rule 4). Host code, shared by every backend, so
// that the merged points are the same bits whichever backend chose the kept set.
#pragma once

#include <cstdint>
#include <vector>

#include "cudanms/nms.h"

namespace cudanms::detail {

// The points of candidates `kept`, in that order.
void own_points(const CandidatesView &c, const std::vector<uint32_t> &kept,
                std::vector<float> *out);

// kWeighted: for kept slot s, the points of candidate kept[s] and of every ranked candidate it
// claims, each weighted by max(score, 0) and summed in rank order, the kept candidate first;
// its own points where the weights sum to 0. rank_order[r] is the candidate at rank r and
// claims[r] the kept slot that claims it, UINT32_MAX for kept and unclaimed ones.
void merged_points(const CandidatesView &c, const std::vector<uint32_t> &kept,
                   const uint32_t *rank_order, const uint32_t *claims, size_t ranked,
                   std::vector<float> *out);

}  // namespace cudanms::detail
