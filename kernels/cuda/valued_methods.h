// The methods that change the kept candidates' values (cudanms/nms.h, rule 4): Soft-NMS and
// weighted NMS, run after the rank stage (rank.h) on its rank arrays (valued_methods.cu).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "frame_args.h"

namespace cudanms::detail {

// Soft-NMS of one frame in one block: the selections are sequential, each a block-wide argmax.
cudaError_t launch_soft(const FrameArgs *frame, cudaStream_t stream);

// Weighted NMS of one frame after greedy's settle stage wrote its kept ranks (`most` ranked at
// most): which kept rank claims each rank, then each kept box's score-weighted mean.
cudaError_t launch_weighted_merge(const FrameArgs *frame, uint32_t most, cudaStream_t stream);

}  // namespace cudanms::detail
