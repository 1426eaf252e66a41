// The pair stage (pairs.cu): for each ranked candidate, the earlier ranks that suppress it.
// Greedy appends them to its predecessor list (kMaxPredecessors slots; a list that overflows is
// counted on, and the settle stage tests that rank's overlaps again), matrix counts them.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "frame_args.h"
#include "spatial_pairs.h"

namespace cudanms::detail {

// A single frame ranking more than this many candidates finds its pairs in spatial order, where
// the bins, the tiles and their list cost less than testing every pair, which grows as N².
// Measured on an H100 (cudanms-tool bench, p50, both thresholds in turn twice): 4 000 candidates
// 76 us in rank order against 80 us in spatial order, 5 000 96 against 89 us, 6 000 113 against
// 96 us. (With CUB's sort in place of the bins the crossover was about 6 144.)
constexpr uint32_t kSpatialPairsMin = 4096;

// Whether `frames` frames of one method in a launch sequence, ranking at most `most` candidates
// each, find their pairs in spatial order: a batch's only greedy frame, or its only matrix frame,
// runs on its own, so a workspace ranking more than kSpatialPairsMin needs the spatial buffers
// whatever the batch.
inline bool in_spatial_order(size_t frames, size_t most) {
  return frames == 1 && most > kSpatialPairsMin;
}

// The pairs of `count` frames of `method` (descriptors in device memory) whose rank stage has
// run, ranking at most `most` candidates each, on a device of `sms` multiprocessors: in spatial
// order (`spatial`, needed only then) or in rank order, a block per frame and tile of pairs.
cudaError_t launch_pairs(const FrameArgs *frames, uint32_t count, Method method, uint32_t most,
                         int sms, const SpatialPairsBuffers &spatial, cudaStream_t stream);

}  // namespace cudanms::detail
