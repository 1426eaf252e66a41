// Rules 1-3 of cudanms/nms.h on the device (rank.cu): which candidates are eligible, and the
// best Dmax of them in rank order, with the rank arrays that the pair and settle stages read.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "frame_args.h"

namespace cudanms::detail {

// Up to this many candidates a frame is ranked by counting, in one launch; a larger host frame
// by CUB's radix sort.
constexpr uint32_t kCountingRankMax = 16 * 1024;

// CUB's sort of one frame of at most `capacity` candidates: its keys (the frame's `keys`), the
// sorted keys, the candidate indices 0, 1, ... (iota_into filled them), the order they are
// sorted into (the frame's `order`) and CUB's temporary storage (sizes from sort_temp_bytes).
struct RankSortBuffers {
  const float *keys;
  float *sorted_keys;
  const uint32_t *iota;
  uint32_t *order;
  void *temp;
  size_t temp_bytes;
};
cudaError_t sort_temp_bytes(uint32_t capacity, size_t *bytes, cudaStream_t stream);
cudaError_t iota_into(uint32_t *values, uint32_t n, cudaStream_t stream);

// Lets the counting kernel use the shared memory it needs; once per device, before any launch.
cudaError_t prepare_rank();

// Classifies and ranks `count` frames (descriptors in device memory) staged with `capacity`
// candidates at most, ranking at most `most` each: by counting, or with `sort` (one frame only,
// host candidates only, as the sort needs the count on the host). Every frame's header must hold
// zero in its counters and extent.
cudaError_t launch_rank(const FrameArgs *frames, uint32_t count, uint32_t capacity, uint32_t most,
                        const RankSortBuffers *sort, cudaStream_t stream);

}  // namespace cudanms::detail
