// Rules 1-3 of cudanms/nms.h, shared by every backend so that they drop and count alike.
#pragma once

#include <vector>

#include "cudanms/nms.h"

namespace cudanms::detail {

// Fills *selected with the indices of the candidates NMS will process, in ascending index
// order, and sets every count but `kept`. Reuses the vectors' capacity between frames.
void select_candidates(const CandidatesView &candidates, const Params &params,
                       std::vector<uint32_t> *selected, Counts *counts);

}  // namespace cudanms::detail
